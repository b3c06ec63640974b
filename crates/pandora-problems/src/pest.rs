//! Pest Control (Oh et al. 2019, COMBO; used by the PBGI paper): 25 stages, at each one of 5
//! choices (0 = no pesticide, 1–4 = pesticide types).
//!
//! **Domain mapping.** `u ∈ [0,1]^25` maps to choices `c_i = min(⌊5 u_i⌋, 4)`, so each choice owns
//! an interval of width 1/5 (`[0, 0.2) → 0`, …, `[0.8, 1] → 4`).
//!
//! **Simulator** (deterministic; `S = 100` parallel simulations, threshold `U = 0.1`): the pest
//! fractions start at `p_0 ~ Beta(1, 30)`. At stage `i` with choice `k`:
//! the score gains `mean_s(p_s > U)` (measured before the update); if `k = 0`,
//! `p ← p + r(1 − p)` with spread rates `r ~ Beta(1, 17/3)`; if `k > 0`,
//! `p ← (1 − κ) p` with control rates `κ ~ Beta(1, β_k)`, the price `P_k (1 − D_k n_k / 25)` is paid
//! (`n_k` = number of stages using `k`), and then `β_k += tol_k / 25` (tolerance develops).
//! `P = (1, 0.8, 0.7, 0.5)`, `D = (0.2, 0.3, 0.3, 0)`, `β⁰ = (2, 3, 3, 5)/7`,
//! `tol = (1, 2.5, 2, 0.5)/7`. Score = total price + Σ_stages `mean(p > U)`; the objective is
//! `−score` (maximized).
//!
//! **Randomness.** The reference re-creates `RandomState(1)` before every draw, so every draw of
//! 100 values reuses the same uniform stream. This port does the same with its own stream: the
//! 100 uniforms `v_s` are the first 100 outputs of Xoshiro256++ seeded with 1, and every
//! `Beta(1, β)` draw is the inverse CDF `1 − (1 − v_s)^{1/β}` of those same uniforms (numpy's beta
//! sampler and stream cannot be reproduced, so the numbers differ from the reference; the
//! structure — shared spread rates, determinism — is the same). The reference's 1e-6 observation
//! noise is not added.
//!
//! **Cost** (`price`): the total price `Σ_i P_{c_i}(1 − D_{c_i} n_{c_i}/25)` (0 for choice 0), floored
//! at [`MIN_PRICE`] because it is 0 when no pesticide is used and a cost must be positive (the
//! reference does not guard this).

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Number of stages (the problem's dimension).
pub const STAGES: usize = 25;
/// Number of parallel simulations.
pub const SIMULATIONS: usize = 100;
/// Floor of the price cost.
pub const MIN_PRICE: f64 = 1e-3;

const PRICE: [f64; 5] = [0.0, 1.0, 0.8, 0.7, 0.5];
const DISCOUNT: [f64; 5] = [0.0, 0.2, 0.3, 0.3, 0.0];
const BETA0: [f64; 5] = [0.0, 2.0 / 7.0, 3.0 / 7.0, 3.0 / 7.0, 5.0 / 7.0];
const TOLERANCE: [f64; 5] = [0.0, 1.0 / 7.0, 2.5 / 7.0, 2.0 / 7.0, 0.5 / 7.0];
const THRESHOLD: f64 = 0.1;

/// Maps `u ∈ [0,1]` to a choice in `0..=4`.
pub fn choice(u: f64) -> usize {
    ((5.0 * u).floor().max(0.0) as usize).min(4)
}

/// The quantile of `Beta(1, b)`: `1 − (1 − v)^{1/b}`.
fn beta1_quantile(v: f64, b: f64) -> f64 {
    1.0 - (1.0 - v).powf(1.0 / b)
}

/// The price of a choice vector: `Σ_i P_{c_i}(1 − D_{c_i} n_{c_i} / n_stages)`.
pub fn price(choices: &[usize]) -> f64 {
    let n = choices.len() as f64;
    let mut count = [0usize; 5];
    for &c in choices {
        count[c] += 1;
    }
    choices
        .iter()
        .map(|&c| PRICE[c] * (1.0 - DISCOUNT[c] / n * count[c] as f64))
        .sum()
}

/// The simulator's score (to minimize) for `choices` (each in `0..=4`, any number of stages), with
/// the uniform stream `v` (one value per simulation) behind every Beta draw.
pub fn score_with(choices: &[usize], v: &[f64]) -> f64 {
    let n = choices.len() as f64;
    let mut beta = BETA0;
    let mut p: Vec<f64> = v.iter().map(|&v| beta1_quantile(v, 30.0)).collect();
    let spread: Vec<f64> = v.iter().map(|&v| beta1_quantile(v, 17.0 / 3.0)).collect();
    let mut above = 0.0;
    for &k in choices {
        above += p.iter().filter(|&&q| q > THRESHOLD).count() as f64 / p.len() as f64;
        if k > 0 {
            for (q, &v) in p.iter_mut().zip(v) {
                *q *= 1.0 - beta1_quantile(v, beta[k]);
            }
            beta[k] += TOLERANCE[k] / n;
        } else {
            for (q, r) in p.iter_mut().zip(&spread) {
                *q += r * (1.0 - *q);
            }
        }
    }
    price(choices) + above
}

/// The Pest Control problem.
#[derive(Debug, Clone)]
pub struct PestControl {
    uniforms: Vec<f64>,
}

impl Default for PestControl {
    fn default() -> Self {
        Self::new()
    }
}

impl PestControl {
    /// The deterministic instance (uniform stream seeded with 1).
    pub fn new() -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        Self {
            uniforms: (0..SIMULATIONS).map(|_| rng.random::<f64>()).collect(),
        }
    }

    /// The shared uniform stream.
    pub fn uniforms(&self) -> &[f64] {
        &self.uniforms
    }

    /// The objective `−score` at `u ∈ [0,1]^25`.
    pub fn eval(&self, u: &[f64]) -> f64 {
        let c: Vec<usize> = u.iter().map(|&v| choice(v)).collect();
        -score_with(&c, &self.uniforms)
    }

    /// The price cost at `u`, floored at [`MIN_PRICE`].
    pub fn price(&self, u: &[f64]) -> f64 {
        let c: Vec<usize> = u.iter().map(|&v| choice(v)).collect();
        price(&c).max(MIN_PRICE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping() {
        assert_eq!(choice(0.0), 0);
        assert_eq!(choice(0.1999), 0);
        assert_eq!(choice(0.2), 1);
        assert_eq!(choice(0.79), 3);
        assert_eq!(choice(0.8), 4);
        assert_eq!(choice(1.0), 4);
    }

    /// A 3-stage, 2-simulation trajectory computed by hand.
    /// v = (0.5, 0.9); choices (0, 4, 4), n = 3 stages.
    /// p0 = 1 − (1 − v)^{1/30}: (0.022842..., 0.073881...); both ≤ 0.1 → stage 1 adds 0.
    /// Spread r = 1 − (1 − v)^{3/17}: (0.114832..., 0.334098...).
    /// Stage 1 (no control): p1 = p0 + r(1 − p0) = 1 − (1 − v)^{1/30 + 3/17}.
    /// Stage 2 (type 4, β = 5/7): κ = 1 − (1 − v)^{7/5}; adds mean(p1 > 0.1); p2 = (1 − κ) p1;
    /// then β = 5/7 + 0.5/7/3.
    /// Stage 3 (type 4): adds mean(p2 > 0.1).
    /// Price: 2 × 0.5 × (1 − 0) = 1.
    #[test]
    fn hand_computed_trajectory() {
        let v = [0.5, 0.9];
        let p1: Vec<f64> = v
            .iter()
            .map(|v: &f64| 1.0 - (1.0 - v).powf(1.0 / 30.0 + 3.0 / 17.0))
            .collect();
        // p1 = (0.13534..., 0.38314...): both above 0.1.
        assert!(p1.iter().all(|&q| q > 0.1));
        let p2: Vec<f64> = v
            .iter()
            .zip(&p1)
            .map(|(v, q)| (1.0 - v).powf(7.0 / 5.0) * q)
            .collect();
        // p2 = (0.05128..., 0.01525...): both below.
        assert!((p2[0] - 0.05128).abs() < 1e-4 && (p2[1] - 0.01525).abs() < 1e-4);
        let expected = 1.0 + 0.0 + 1.0 + 0.0;
        assert!((score_with(&[0, 4, 4], &v) - expected).abs() < 1e-15);
        // Mixed: choices (1, 0) with one simulation v = 0.5: p0 = 0.02284 (≤ U), type 1 then no
        // control: stage 2 sees p1 = (1 − 0.5)^{7/2} · p0 = 0.00202 (≤ U). Price: 1·(1 − 0.2/2) = 0.9.
        assert!((score_with(&[1, 0], &[0.5]) - 0.9).abs() < 1e-15);
        assert!(
            (price(&[1, 1, 2, 0]) - (2.0 * (1.0 - 0.2 / 4.0 * 2.0) + 0.8 * (1.0 - 0.3 / 4.0)))
                .abs()
                < 1e-15
        );
    }

    /// Closed forms for 25 stages with the real uniform stream: no control gives
    /// `1 − p_t = (1 − v)^{1/30 + 3t/17}`; all type 4 gives `p_t = p_0 Π_{s<t} (1 − v)^{1/β_s}`.
    #[test]
    fn full_trajectories_match_closed_forms() {
        let pc = PestControl::new();
        let v = pc.uniforms();
        let mut none = 0.0;
        let mut four = 12.5;
        for t in 0..STAGES {
            none += v
                .iter()
                .filter(|&&v| 1.0 - (1.0 - v).powf(1.0 / 30.0 + 3.0 * t as f64 / 17.0) > 0.1)
                .count() as f64
                / 100.0;
            let e: f64 = (0..t)
                .map(|s| 1.0 / (5.0 / 7.0 + s as f64 * 0.5 / 7.0 / 25.0))
                .sum();
            four += v
                .iter()
                .filter(|&&v| (1.0 - (1.0 - v).powf(1.0 / 30.0)) * (1.0 - v).powf(e) > 0.1)
                .count() as f64
                / 100.0;
        }
        assert!((pc.eval(&[0.1; 25]) + none).abs() < 1e-12);
        assert!((pc.eval(&[0.9; 25]) + four).abs() < 1e-12);
        assert_eq!(pc.price(&[0.0; 25]), MIN_PRICE);
        assert!((pc.price(&[0.9; 25]) - 12.5).abs() < 1e-12);
        // Deterministic.
        assert_eq!(pc.eval(&[0.3; 25]), PestControl::new().eval(&[0.3; 25]));
    }
}
