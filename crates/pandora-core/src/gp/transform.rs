//! The transforms around a fitted exact GP: input normalization, outcome standardization and a
//! known output scale. [`Transforms`] says which of them a [`GpModel`] applies; the model itself
//! lives in [`super::gp_model`].
//!
//! [`GpModel`] maps raw inputs `x` to `u = (x − lower) / (upper − lower)` and raw targets `y` to
//! `z = (y − m_y) / s_y` (sample mean and unbiased standard deviation, as BoTorch's `Standardize`),
//! fits and conditions the GP in `(u, z)` space, and reports the posterior back in raw units:
//! `μ_y = m_y + s_y μ_z`, `σ_y = s_y σ_z`, `∂/∂x_k = (∂/∂u_k) / (upper_k − lower_k)`. A fixed noise
//! variance applies in the model's internal (standardized) space, as in the papers.
//!
//! An optional known [`OutputScale`] `s(x) > 0` makes the prior non-stationary with an
//! input-dependent amplitude: the model is `f(x) = m_y + s_y·s(x)·g(x)` with `g` the stationary GP,
//! i.e. the kernel `s_y² s(x) s(x') k(x, x')` (the PBGI paper's variable-amplitude kernel with
//! `s = sqrt(a)`). Targets are divided by `s(x_i)` before the fit, and the posterior is scaled back:
//! `μ = m_y + s_y s μ_g`, `σ² = s_y² s² σ_g²`, with the product rule for the gradients. The fixed
//! noise variance applies to `g`, so the noise on `f` is `s_y² s(x)² σ_n²` (it only matters as
//! jitter for the noiseless problems that use it).

use crate::error::{Error, Result};
#[cfg(doc)]
use crate::gp::GpModel;
use std::sync::Arc;

/// The function behind an [`OutputScale`]: returns `s(x)` and writes `∂s/∂x` into the slice.
pub type OutputScaleFn = dyn Fn(&[f64], &mut [f64]) -> f64 + Send + Sync;

/// A known, positive, differentiable amplitude `s(x)` multiplying the GP (see the module docs).
/// `x` is in the model's raw input units. Two scales compare equal when they share one function.
#[derive(Clone)]
pub struct OutputScale(Arc<OutputScaleFn>);

impl OutputScale {
    /// Wraps `f(x, grad) -> s(x)` (writing `∂s/∂x` into `grad`, length `d`).
    pub fn new(f: impl Fn(&[f64], &mut [f64]) -> f64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// `s(x)` and `∂s/∂x` (into `grad`). Errors if `s(x)` is not finite and positive.
    pub fn eval(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let s = (self.0)(x, grad);
        if !(s.is_finite() && s > 0.0) || grad.iter().any(|g| !g.is_finite()) {
            return Err(Error::invalid(
                "output_scale",
                format!("s(x) must be finite and > 0 with a finite gradient, got {s} at {x:?}"),
            ));
        }
        Ok(s)
    }
}

impl std::fmt::Debug for OutputScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputScale(..)")
    }
}

impl PartialEq for OutputScale {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Which transforms [`GpModel`] applies.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transforms {
    /// Normalize inputs with these `(lower, upper)` bounds; `Some(None)` uses the data's bounding
    /// box; `None` applies no input transform.
    pub normalize_inputs: Option<Option<(Vec<f64>, Vec<f64>)>>,
    /// Standardize the targets.
    pub standardize_outcomes: bool,
    /// A known input-dependent amplitude of the prior (none: the stationary kernel).
    pub output_scale: Option<OutputScale>,
}
