//! Acquisition functions with exact gradients, maximization convention.
//!
//! An acquisition here is a function of the latent posterior mean `μ(x)` and standard deviation
//! `σ(x)` at one point ([`PointwiseAcquisition`]); [`OnModel`] composes it with a model's
//! posterior and the chain rule `∇a = (∂a/∂μ) ∇μ + (∂a/∂σ) ∇σ` to give a differentiable objective
//! on the input space that the multi-start optimizer can maximize.

use crate::error::Result;
pub use crate::gp::Posterior;
use crate::math::{dlog_h, h, log_h, log_norm_pdf, norm_cdf, norm_pdf};
use crate::optim::multistart::Objective;

pub mod pbgi;
pub use pbgi::{Pbgi, PbgiIndex, pbgi_index, pbgi_index_min};

/// An acquisition value that depends on the point only through `μ` and `σ`.
pub trait PointwiseAcquisition: Sync {
    /// Returns `(a, ∂a/∂μ, ∂a/∂σ)` at posterior mean `mu` and standard deviation `sigma > 0`.
    fn eval(&self, mu: f64, sigma: f64) -> (f64, f64, f64);
}

/// Expected improvement over `best_f`: `EI = σ h(u)`, `u = (μ − best_f)/σ`, `h(u) = φ(u) + uΦ(u)`;
/// `∂EI/∂μ = Φ(u)`, `∂EI/∂σ = φ(u)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for ExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64) -> (f64, f64, f64) {
        let u = (mu - self.best_f) / sigma;
        (sigma * h(u), norm_cdf(u), norm_pdf(u))
    }
}

/// Log expected improvement, `log EI = log σ + log h(u)`, finite and accurate for every finite
/// `u` (down to `u = −1e6` and beyond, where EI itself underflows).
///
/// `∂/∂μ = (log h)'(u)/σ` and `∂/∂σ = φ(u) / (σ h(u))`, both evaluated in log space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for LogExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64) -> (f64, f64, f64) {
        let u = (mu - self.best_f) / sigma;
        let lh = log_h(u);
        let value = sigma.ln() + lh;
        let dmu = dlog_h(u) / sigma;
        let dsigma = (log_norm_pdf(u) - lh).exp() / sigma;
        (value, dmu, dsigma)
    }
}

/// A pointwise acquisition evaluated on a model's posterior: a differentiable [`Objective`].
pub struct OnModel<'a, P: Posterior, A: PointwiseAcquisition> {
    /// The model.
    pub model: &'a P,
    /// The acquisition.
    pub acq: A,
}

impl<P: Posterior, A: PointwiseAcquisition> OnModel<'_, P, A> {
    /// Values and (if `grad`) row-major gradients at the rows of `xs`.
    pub fn evaluate(&self, xs: &[f64], grad: bool) -> Result<(Vec<f64>, Vec<f64>)> {
        let d = self.model.dim();
        let post = self.model.posterior(xs, grad)?;
        let m = post.mean.len();
        let mut values = vec![0.0; m];
        let mut grads = if grad { vec![0.0; m * d] } else { Vec::new() };
        for j in 0..m {
            let s = post.var[j].sqrt();
            let (a, da_dmu, da_ds) = self.acq.eval(post.mean[j], s);
            values[j] = a;
            if grad {
                for k in 0..d {
                    let dmu = post.mean_grad[j * d + k];
                    let ds = post.var_grad[j * d + k] / (2.0 * s);
                    grads[j * d + k] = da_dmu * dmu + da_ds * ds;
                }
            }
        }
        Ok((values, grads))
    }
}

impl<P: Posterior, A: PointwiseAcquisition> Objective for OnModel<'_, P, A> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        match self.evaluate(x, true) {
            Ok((v, g)) => {
                grad.copy_from_slice(&g);
                v[0]
            }
            Err(_) => {
                grad.fill(0.0);
                f64::NAN
            }
        }
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        match self.evaluate(xs, false) {
            Ok((v, _)) => out.copy_from_slice(&v),
            Err(_) => out.fill(f64::NAN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ei_reference_values() {
        // EI(μ=0, σ=1, best=0) = φ(0).
        let (v, dmu, ds) = ExpectedImprovement { best_f: 0.0 }.eval(0.0, 1.0);
        assert!((v - 0.398_942_280_401_432_7).abs() < 1e-16);
        assert!((dmu - 0.5).abs() < 1e-16);
        assert!((ds - 0.398_942_280_401_432_7).abs() < 1e-16);
        // LogEI(0, 1, best=5) and best=40 (the latter needs the log-space branch).
        let l5 = LogExpectedImprovement { best_f: 5.0 }.eval(0.0, 1.0).0;
        assert!((l5 - (-16.744_301_162_660_99)).abs() < 1e-12 * 16.74);
        let l40 = LogExpectedImprovement { best_f: 40.0 }.eval(0.0, 1.0).0;
        assert!((l40 - (-808.298_568_356_62)).abs() < 1e-12 * 808.3);
    }

    #[test]
    fn log_ei_gradients_match_finite_differences() {
        for best in [-3.0, 0.0, 2.0, 8.0, 35.0, 1e3] {
            let a = LogExpectedImprovement { best_f: best };
            let (mu, s) = (0.3, 0.7);
            let (_, dmu, ds) = a.eval(mu, s);
            let hh = 1e-6;
            let fd_mu = (a.eval(mu + hh, s).0 - a.eval(mu - hh, s).0) / (2.0 * hh);
            let fd_s = (a.eval(mu, s + hh).0 - a.eval(mu, s - hh).0) / (2.0 * hh);
            assert!(
                (fd_mu - dmu).abs() < 1e-5 * (1.0 + fd_mu.abs()),
                "best {best}"
            );
            assert!((fd_s - ds).abs() < 1e-5 * (1.0 + fd_s.abs()), "best {best}");
            let e = ExpectedImprovement { best_f: best };
            let (v, dmu_e, ds_e) = e.eval(mu, s);
            if v > 1e-300 {
                // d log EI = d EI / EI.
                assert!((dmu_e / v - dmu).abs() < 1e-8 * (1.0 + dmu.abs()));
                assert!((ds_e / v - ds).abs() < 1e-8 * (1.0 + ds.abs()));
            }
        }
    }

    #[test]
    fn log_ei_is_finite_far_in_the_tail() {
        let a = LogExpectedImprovement { best_f: 1e6 };
        let (v, dmu, ds) = a.eval(0.0, 1.0);
        assert!(v.is_finite() && dmu.is_finite() && ds.is_finite());
        assert!(v < -4.9e11);
    }
}
