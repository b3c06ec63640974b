//! Evaluation-cost functions on `[0,1]^d` with closed-form gradients.
//!
//! | name | formula | source |
//! |---|---|---|
//! | `uniform` | `c ≡ 1` | all papers |
//! | `linear_mean` | `1 + 20·mean(x)` (range [1, 21]) | PBGI paper |
//! | `linear` | `(1 + 20·mean(x)) / 11` (mean 1 under uniform `x`) | stopping paper |
//! | `periodic` | `exp((α/d) Σ cos(2πβ(x_i − x*_i + γ))) / I0(α/d)^d`, α = 2, β = 2, γ = 0 | stopping paper |
//! | `cosine` | `exp((α/d) Σ cos(β(z_i − z*_i + γ)))` in native units `z`, α, β, γ random | budgeted-MSEI paper |
//! | `bump` | `b(x)(1 + δ − ε) + ε`, `b(x) = exp(−(x − ½)²/(2σ_b²))` (`d = 1`) | PBGI paper counterexamples |

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::f64::consts::PI;

/// An evaluation cost with its gradient.
pub trait CostFn: Send + Sync + std::fmt::Debug {
    /// The cost at `x` (> 0).
    fn cost(&self, x: &[f64]) -> f64;
    /// The cost, with its gradient written into `grad` (length `d`).
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64;
    /// Whether the cost is constant.
    fn is_uniform(&self) -> bool {
        false
    }
}

/// The modified Bessel function of the first kind of order 0, `I0(x) = Σ_k (x²/4)^k / (k!)²`,
/// by its power series (all terms positive, so no cancellation; converges for every `x`, used
/// here for `|x| ≤ 2`, where 30 terms give full precision).
pub fn bessel_i0(x: f64) -> f64 {
    let q = x * x / 4.0;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..500 {
        term *= q / (k as f64 * k as f64);
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    sum
}

/// `c ≡ 1`.
#[derive(Debug, Clone, Copy)]
pub struct Uniform;

impl CostFn for Uniform {
    fn cost(&self, _x: &[f64]) -> f64 {
        1.0
    }
    fn cost_grad(&self, _x: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(0.0);
        1.0
    }
    fn is_uniform(&self) -> bool {
        true
    }
}

/// The PBGI paper's cost `c(x) = 1 + 20·mean(x)` on the unit cube (range [1, 21]).
pub fn linear_mean_cost(x: &[f64]) -> f64 {
    1.0 + 20.0 * x.iter().sum::<f64>() / x.len() as f64
}

/// `c(x) = (1 + 20·mean(x)) / scale`: `scale = 1` is the PBGI paper's `linear_mean`, `scale = 11`
/// the stopping paper's normalized `linear` (mean 1 under uniform `x`).
#[derive(Debug, Clone, Copy)]
pub struct Linear {
    /// Divisor of `1 + 20·mean(x)`.
    pub scale: f64,
}

impl CostFn for Linear {
    fn cost(&self, x: &[f64]) -> f64 {
        linear_mean_cost(x) / self.scale
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(20.0 / x.len() as f64 / self.scale);
        self.cost(x)
    }
}

/// A cosine-family cost `c(x) = exp((α/d) Σ_i cos(β(z_i − z*_i + γ))) / norm` evaluated in native
/// coordinates `z_i = lo_i + (hi_i − lo_i) x_i`.
///
/// - the stopping paper's `periodic` cost is [`Cosine::periodic`]: unit-cube coordinates, `α = 2`,
///   frequency `2πβ` with `β = 2`, `γ = 0`, `norm = I0(α/d)^d` (so `E[c] = 1` under uniform `x`);
/// - the budgeted-MSEI family is [`Cosine::random_family`]: `α ∈ [0.75, 1.5]`, `β = 2πb/P` with
///   `b ∈ [1, 3]`, `γ ∈ [0, 2π]`, all uniform, `norm = 1`.
#[derive(Debug, Clone)]
pub struct Cosine {
    /// Amplitude `α` of the log-cost.
    pub alpha: f64,
    /// Angular frequency (native units).
    pub omega: f64,
    /// Phase shift `γ` (native units, added to `z − z*`).
    pub gamma: f64,
    /// `z*`, the objective's maximizer in native units.
    pub z_star: Vec<f64>,
    /// Native lower bounds.
    pub lo: Vec<f64>,
    /// Native upper bounds.
    pub hi: Vec<f64>,
    /// Normalizer dividing the cost.
    pub norm: f64,
}

impl Cosine {
    /// The stopping paper's periodic cost with `α = 2`, `β = 2`, `γ = 0` on the unit cube around
    /// the maximizer `x_star`.
    pub fn periodic(x_star: &[f64]) -> Self {
        let d = x_star.len();
        let alpha = 2.0;
        Self {
            alpha,
            omega: 2.0 * PI * 2.0,
            gamma: 0.0,
            z_star: x_star.to_vec(),
            lo: vec![0.0; d],
            hi: vec![1.0; d],
            norm: bessel_i0(alpha / d as f64).powi(d as i32),
        }
    }

    /// The budgeted-MSEI random cosine cost: `α = 0.75 + 0.75 U1`, `b = 1 + 2 U2`,
    /// `β = 2πb/period`, `γ = 2π U3` with `(U1, U2, U3)` the first three uniforms of a
    /// Xoshiro256++ generator seeded with `seed` (the reference draws them from torch's RNG, which
    /// cannot be reproduced). `z_star`, `lo`, `hi` are in native units.
    pub fn random_family(
        seed: u64,
        period: f64,
        z_star: Vec<f64>,
        lo: Vec<f64>,
        hi: Vec<f64>,
    ) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let u1: f64 = rng.random();
        let u2: f64 = rng.random();
        let u3: f64 = rng.random();
        Self {
            alpha: 0.75 + 0.75 * u1,
            omega: 2.0 * PI * (1.0 + 2.0 * u2) / period,
            gamma: 2.0 * PI * u3,
            z_star,
            lo,
            hi,
            norm: 1.0,
        }
    }
}

impl CostFn for Cosine {
    fn cost(&self, x: &[f64]) -> f64 {
        let d = x.len() as f64;
        let s: f64 = (0..x.len())
            .map(|i| {
                let z = self.lo[i] + (self.hi[i] - self.lo[i]) * x[i];
                (self.omega * (z - self.z_star[i] + self.gamma)).cos()
            })
            .sum();
        (self.alpha / d * s).exp() / self.norm
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let c = self.cost(x);
        let d = x.len() as f64;
        for i in 0..x.len() {
            let w = self.hi[i] - self.lo[i];
            let z = self.lo[i] + w * x[i];
            grad[i] = -c * self.alpha / d
                * self.omega
                * w
                * (self.omega * (z - self.z_star[i] + self.gamma)).sin();
        }
        c
    }
}

/// The 1-D counterexamples' cost `c(x) = b(x)(1 + δ − ε) + ε`, `b(x) = exp(−(x − ½)²/(2σ_b²))`,
/// `σ_b = w / (2 sqrt(−2 ln ε²))`, with `ε = 0.1`, `δ = 9`, `w = 0.002`: 0.1 far from ½, 10 at ½.
#[derive(Debug, Clone, Copy)]
pub struct Bump {
    /// `ε`.
    pub eps: f64,
    /// `δ`.
    pub delta: f64,
    /// `σ_b`.
    pub sigma: f64,
}

impl Default for Bump {
    fn default() -> Self {
        Self::new(0.1, 9.0, 0.002)
    }
}

impl Bump {
    /// `ε`, `δ` and the bump width `w` (`σ_b = w / (2 sqrt(−2 ln ε²))`).
    pub fn new(eps: f64, delta: f64, width: f64) -> Self {
        Self {
            eps,
            delta,
            sigma: bump_sigma(eps, width),
        }
    }

    /// `b(x) = exp(−(x − ½)²/(2σ_b²))`.
    pub fn bump(&self, x: f64) -> f64 {
        (-(x - 0.5).powi(2) / (2.0 * self.sigma * self.sigma)).exp()
    }
}

/// `σ_b = w / (2 sqrt(−2 ln ε²))`.
pub fn bump_sigma(eps: f64, width: f64) -> f64 {
    width / (2.0 * (-2.0 * (eps * eps).ln()).sqrt())
}

impl CostFn for Bump {
    fn cost(&self, x: &[f64]) -> f64 {
        self.bump(x[0]) * (1.0 + self.delta - self.eps) + self.eps
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let b = self.bump(x[0]);
        grad[0] = b * (1.0 + self.delta - self.eps) * (-(x[0] - 0.5) / (self.sigma * self.sigma));
        b * (1.0 + self.delta - self.eps) + self.eps
    }
}

/// Checks `cost_grad` against central differences at `x` (test helper).
#[cfg(test)]
pub(crate) fn check_grad(c: &dyn CostFn, x: &[f64], h: f64, rtol: f64) {
    let mut g = vec![0.0; x.len()];
    let v = c.cost_grad(x, &mut g);
    assert!((v - c.cost(x)).abs() <= 1e-14 * v.abs().max(1.0));
    for i in 0..x.len() {
        let mut a = x.to_vec();
        let mut b = x.to_vec();
        a[i] += h;
        b[i] -= h;
        let fd = (c.cost(&a) - c.cost(&b)) / (2.0 * h);
        let scale = g.iter().map(|v| v.abs()).fold(v.abs(), f64::max);
        assert!(
            (fd - g[i]).abs() <= rtol * scale.max(1e-12),
            "{c:?} at {x:?}: grad[{i}] = {} vs fd {fd}",
            g[i]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(d: usize, n: usize, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| (0..d).map(|_| 0.02 + 0.96 * rng.random::<f64>()).collect())
            .collect()
    }

    #[test]
    fn bessel_and_bump_constants_match_the_reference_values() {
        // Reference §7.1 (mpmath, 40 digits).
        assert!((bessel_i0(2.0) - 2.2795853023360673).abs() < 1e-15);
        assert!((bessel_i0(0.25).powi(8) - 1.1325991027653735).abs() < 1e-14);
        assert!((bump_sigma(0.1, 0.002) - 3.295_051_144_911_304e-4).abs() < 1e-18);
        let b = Bump::default();
        assert!((b.cost(&[0.5]) - 10.0).abs() < 1e-12);
        assert!((b.cost(&[0.0]) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn periodic_cost_has_mean_one_and_peaks_at_the_optimum() {
        for d in [1usize, 2, 8] {
            let xs: Vec<f64> = (0..d).map(|i| 0.1 + 0.1 * i as f64).collect();
            let c = Cosine::periodic(&xs);
            // Peak e^α / I0(α/d)^d at x*.
            let peak = 2f64.exp() / bessel_i0(2.0 / d as f64).powi(d as i32);
            assert!((c.cost(&xs) - peak).abs() < 1e-12);
            if d == 1 {
                assert!((c.cost(&xs) - 2f64.exp() / 2.2795853023360673).abs() < 1e-12);
                // E[c] = 1 by quadrature (the integrand is smooth and periodic, so the midpoint
                // rule is spectrally accurate).
                let n = 2000;
                let m: f64 = (0..n)
                    .map(|k| c.cost(&[(k as f64 + 0.5) / n as f64]))
                    .sum::<f64>()
                    / n as f64;
                assert!((m - 1.0).abs() < 1e-12, "{m}");
            }
        }
        // d = 2 mean by a tensor midpoint rule.
        let c = Cosine::periodic(&[0.3, 0.7]);
        let n = 200;
        let mut m = 0.0;
        for a in 0..n {
            for b in 0..n {
                m += c.cost(&[(a as f64 + 0.5) / n as f64, (b as f64 + 0.5) / n as f64]);
            }
        }
        assert!((m / (n * n) as f64 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn linear_costs() {
        assert_eq!(Linear { scale: 1.0 }.cost(&[0.0, 1.0]), 11.0);
        assert!((Linear { scale: 11.0 }.cost(&[0.5, 0.5]) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn random_family_parameters_lie_in_the_papers_intervals() {
        let mut distinct = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let c = Cosine::random_family(seed, 5.12, vec![0.0; 2], vec![-5.12; 2], vec![5.12; 2]);
            assert!((0.75..=1.5).contains(&c.alpha));
            let b = c.omega * 5.12 / (2.0 * PI);
            assert!((1.0..=3.0).contains(&b));
            assert!((0.0..=2.0 * PI).contains(&c.gamma));
            distinct.insert(c.alpha.to_bits());
            for x in pts(2, 20, seed) {
                let v = c.cost(&x);
                assert!(v >= (-c.alpha).exp() - 1e-12 && v <= c.alpha.exp() + 1e-12);
            }
        }
        assert_eq!(distinct.len(), 200);
        // γ = 0 makes the optimum the most expensive point.
        let mut c = Cosine::random_family(3, 1.0, vec![0.0; 3], vec![-1.0; 3], vec![1.0; 3]);
        c.gamma = 0.0;
        assert!((c.cost(&[0.5; 3]) - c.alpha.exp()).abs() < 1e-12);
    }

    #[test]
    fn gradients_match_finite_differences() {
        let costs: Vec<Box<dyn CostFn>> = vec![
            Box::new(Uniform),
            Box::new(Linear { scale: 1.0 }),
            Box::new(Linear { scale: 11.0 }),
            Box::new(Cosine::periodic(&[0.3, 0.6, 0.9])),
            Box::new(Cosine::random_family(
                5,
                4.0,
                vec![4.0; 3],
                vec![0.0; 3],
                vec![10.0; 3],
            )),
        ];
        for c in &costs {
            for x in pts(3, 30, 1) {
                check_grad(c.as_ref(), &x, 1e-6, 1e-6);
            }
        }
        // The bump is narrow (σ_b ≈ 3.3e-4): test near its centre with a small step.
        let b = Bump::default();
        for k in 0..40 {
            let x = 0.5 + (k as f64 - 20.0) * 5e-5;
            check_grad(&b, &[x], 1e-8, 1e-5);
        }
    }
}
