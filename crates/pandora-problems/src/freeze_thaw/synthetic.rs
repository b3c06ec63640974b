//! A synthetic family of freeze-thaw instances with known ground truth, seeded.
//!
//! # Generator
//! For seed `s`: `K` configurations `x_k` uniform in `[0, 1]^d`; two independent Gaussian
//! process prior paths `g_1, g_2` over `x` (Matérn 5/2, lengthscale 0.3, unit variance; random
//! features of [`crate::gp_sample`]); for each configuration independent standard normals
//! `z_{k,1..3}`, and at each step `ζ_{k,t}, ε_{k,t}`. Then, at steps `t = 1..T` (positions `t`,
//! prior weights 1):
//!
//! ```text
//! asymptote   a_k = 0.8 + 0.08 g_1(x_k)
//! amplitude   b_k = 0.3 exp(0.3 z_{k,1})
//! rate        r_k = 0.25 exp(0.6 z_{k,2})                       (per step)
//! value       y_{k,t} = a_k − b_k exp(−r_k t) + σ ε_{k,t}          (validation, noisy)
//! cost        c_{k,t} = exp(g_2(x_k) + 0.1 ζ_{k,t})
//! final       z_k = a_k − b_k exp(−r_k T)                         (noise-free)
//! ```
//!
//! Curves of different rates cross (a slow starter can end on top), asymptotes are correlated
//! over `x` as the learning-curve model assumes, and costs vary by a factor of about `e^{±2}`
//! across configurations, smoothly in `x`. The model family matches the freeze-thaw GP's
//! assumptions (exponential decays toward GP asymptotes) but not exactly (one rate per run
//! instead of a Gamma mixture, costs not known to the policies).

use super::{Table, TableParts, rng};
use crate::error::ProblemError;
use crate::gp_sample::GpSampleSpec;
use pandora_core::math::norm_ppf;
use rand::RngExt;

/// Sizes of a synthetic instance.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    /// Configurations `K` (≥ 2).
    pub configs: usize,
    /// Dimension `d` of `x` (≥ 1).
    pub dim: usize,
    /// Steps `T` (≥ 2).
    pub steps: usize,
    /// Noise standard deviation `σ` of the values (≥ 0).
    pub noise: f64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        Self {
            configs: 40,
            dim: 2,
            steps: 20,
            noise: 0.005,
        }
    }
}

/// The instance of `spec` for `seed` (module doc).
pub fn instance(spec: &SyntheticSpec, seed: u64) -> Result<Table, ProblemError> {
    if spec.configs < 2 || spec.dim == 0 || spec.steps < 2 {
        return Err(ProblemError(
            "synthetic: configs ≥ 2, dim ≥ 1 and steps ≥ 2 are required".into(),
        ));
    }
    if !(spec.noise.is_finite() && spec.noise >= 0.0) {
        return Err(ProblemError(format!(
            "synthetic.noise: {} must be ≥ 0",
            spec.noise
        )));
    }
    let (k, d, t) = (spec.configs, spec.dim, spec.steps);
    let mut g = rng(seed);
    let mut normal = move || norm_ppf(g.random_range(1e-12..1.0 - 1e-12));
    let mut gp = GpSampleSpec::new(d);
    gp.lengthscale = 0.3;
    gp.num_features = 512;
    let paths = [gp.path(seed ^ 0x51)?, gp.path(seed ^ 0x52)?];
    let mut u = rng(seed ^ 0x53);
    let xs: Vec<f64> = (0..k * d).map(|_| u.random_range(0.0..1.0)).collect();
    let mut g_at = [vec![0.0; k], vec![0.0; k]];
    for (p, out) in paths.iter().zip(g_at.iter_mut()) {
        p.values(&xs, out)
            .map_err(|e| ProblemError(format!("synthetic: {e}")))?;
    }
    let mut parts = TableParts {
        name: format!("synthetic-{seed}"),
        labels: (0..k).map(|i| format!("config{i}")).collect(),
        x: xs.chunks(d).map(<[f64]>::to_vec).collect(),
        positions: (1..=t).map(|s| s as f64).collect(),
        weights: vec![1.0; t],
        values: Vec::with_capacity(k),
        costs: Vec::with_capacity(k),
        finals: Vec::with_capacity(k),
    };
    for (g1, g2) in g_at[0].iter().zip(&g_at[1]) {
        let a = 0.8 + 0.08 * g1;
        let b = 0.3 * (0.3 * normal()).exp();
        let r = 0.25 * (0.6 * normal()).exp();
        let curve = |s: f64| a - b * (-r * s).exp();
        parts.values.push(
            (1..=t)
                .map(|s| curve(s as f64) + spec.noise * normal())
                .collect(),
        );
        parts
            .costs
            .push((0..t).map(|_| (g2 + 0.1 * normal()).exp()).collect());
        parts.finals.push(curve(t as f64));
    }
    Table::new(parts)
}
