//! The variance of a run's final value that each future step removes.
//!
//! Let the latent curve at the run's remaining steps `s_1 < … < s_k` (the last one the end of
//! training) be Gaussian with covariance `C`, and let each step report `y_j = f(s_j) + ε_j`,
//! `ε_j ~ N(0, σ²)` independent. The value kept when the run completes is the posterior mean of
//! `f(s_k)` given `y_1..y_k`, a Gaussian martingale whose increments have the variances
//!
//! `d_j = Var(f(s_k) | y_<j) − Var(f(s_k) | y_≤j) = Cov(f(s_k), y_j | y_<j)² / Var(y_j | y_<j)`.
//!
//! With `L Lᵀ = C + σ² I` (the covariance of the reports) and `ℓ = L⁻¹ c`, `c_j = C[j, k]`, the
//! Gram–Schmidt reading of the Cholesky factor gives `d_j = ℓ_j²` exactly: `ℓ_j` is the
//! covariance of `f(s_k)` with the `j`-th standardized innovation. One factorization of a
//! `k × k` matrix, `O(k³)`. The drops are clamped so that they never add up to more than
//! `C[k, k]` (only rounding could make them), and a `σ² = 0` curve with a singular `C` is
//! factored with the jitter of [`Cholesky::factor`].

use crate::error::{Error, Result};
use crate::linalg::{Cholesky, JitterPolicy};
use faer::Mat;

/// The variance drops `d_1..d_k` of the final value (the last of the `k` steps) of a curve with
/// latent covariance `cov` (row-major `k × k`) observed with noise variance `noise` at each step.
pub fn final_value_drops(cov: &[f64], k: usize, noise: f64) -> Result<Vec<f64>> {
    if cov.len() != k * k {
        return Err(Error::dim("covariance", k * k, cov.len()));
    }
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(Error::invalid("noise", "must be finite and ≥ 0"));
    }
    if k == 0 {
        return Ok(Vec::new());
    }
    let reports = Mat::from_fn(k, k, |i, j| {
        cov[i * k + j] + if i == j { noise } else { 0.0 }
    });
    let chol = Cholesky::factor(reports.as_ref(), JitterPolicy::default())?;
    let mut ell = Mat::from_fn(k, 1, |i, _| cov[i * k + (k - 1)]);
    chol.solve_lower_in_place(ell.as_mut());
    let total = cov[k * k - 1].max(0.0);
    let mut left = total;
    Ok((0..k)
        .map(|j| {
            let d = (ell[(j, 0)] * ell[(j, 0)]).min(left);
            left -= d;
            d
        })
        .collect())
}
