//! Evaluation costs as they enter cost-aware acquisitions.
//!
//! Every cost model reports, per point, the mean and variance of the *log* cost and their input
//! gradients: a known cost `c(x)` has mean `log c(x)` and variance 0; an unknown cost learned by a
//! GP on observed log costs has that GP's posterior. Acquisitions then use the convention they
//! need, e.g. `log E[c] = μ + σ²/2` (PBGI) or `log E[c^{−α}] = −αμ + α²σ²/2` (EIPC).

use crate::error::{Error, Result};
use crate::gp::fit::FitOptions;
use crate::gp::{GpModel, Posterior, Transforms};

/// Log-cost summaries at a batch of `m` points (gradients row-major `m × d`, empty if not asked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogCostBatch {
    /// Mean of the log cost.
    pub mean: Vec<f64>,
    /// Variance of the log cost (0 for known costs).
    pub var: Vec<f64>,
    /// Gradient of the mean.
    pub mean_grad: Vec<f64>,
    /// Gradient of the variance.
    pub var_grad: Vec<f64>,
}

/// How evaluation costs are known to a BO step.
#[derive(Clone, Copy)]
pub enum CostSetting<'a> {
    /// Every evaluation costs the same.
    Uniform,
    /// A known cost function of the (unit-cube) point.
    Known(&'a dyn CostModel),
    /// Unknown: learned from the observed costs by a GP on log cost.
    Unknown,
}

/// A model of the cost of evaluating the objective at a point.
pub trait CostModel: Sync {
    /// Log-cost mean and variance (with gradients if `grad`) at the rows of `xs` (`m × d`).
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> Result<LogCostBatch>;
}

fn known(
    xs: &[f64],
    d: usize,
    grad: bool,
    mut f: impl FnMut(&[f64], &mut [f64]) -> f64,
) -> Result<LogCostBatch> {
    if d == 0 || !xs.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "points",
            "length is not a multiple of the dimension",
        ));
    }
    let m = xs.len() / d;
    let mut out = LogCostBatch {
        mean: vec![0.0; m],
        var: vec![0.0; m],
        mean_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
        var_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
    };
    let mut g = vec![0.0; d];
    for j in 0..m {
        let c = f(&xs[j * d..(j + 1) * d], &mut g);
        if !(c.is_finite() && c > 0.0) {
            return Err(Error::invalid(
                "cost",
                format!("the cost must be finite and > 0, got {c} at point {j}"),
            ));
        }
        out.mean[j] = c.ln();
        if grad {
            for (o, gk) in out.mean_grad[j * d..(j + 1) * d].iter_mut().zip(&g) {
                *o = gk / c;
            }
        }
    }
    Ok(out)
}

/// Every evaluation costs the same: `log c = 0`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UniformCost;

impl CostModel for UniformCost {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> Result<LogCostBatch> {
        known(xs, d, grad, |_, g| {
            g.fill(0.0);
            1.0
        })
    }
}

/// `c(x) = offset + slope · mean(x)`; the papers' cost is `offset = 1, slope = 20`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearMeanCost {
    /// Cost at the origin.
    pub offset: f64,
    /// Cost increase per unit of the coordinate mean.
    pub slope: f64,
}

impl CostModel for LinearMeanCost {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> Result<LogCostBatch> {
        let (a, b) = (self.offset, self.slope);
        known(xs, d, grad, |x, g| {
            g.fill(b / d as f64);
            a + b * x.iter().sum::<f64>() / d as f64
        })
    }
}

/// A known cost given by a function returning `c(x) > 0` and writing `∇c(x)` into its second
/// argument.
pub struct KnownCost<F: Fn(&[f64], &mut [f64]) -> f64 + Sync>(pub F);

impl<F: Fn(&[f64], &mut [f64]) -> f64 + Sync> CostModel for KnownCost<F> {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> Result<LogCostBatch> {
        known(xs, d, grad, |x, g| (self.0)(x, g))
    }
}

/// An unknown cost learned by a GP on observed log costs: the log cost at `x` is `N(μ, σ²)` under
/// that GP's latent posterior.
pub struct UnknownCost<'a, P: Posterior>(pub &'a P);

impl<P: Posterior> CostModel for UnknownCost<'_, P> {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> Result<LogCostBatch> {
        if self.0.dim() != d {
            return Err(Error::dim("cost model dimension", d, self.0.dim()));
        }
        let p = self.0.posterior(xs, grad)?;
        Ok(LogCostBatch {
            mean: p.mean,
            var: p.var,
            mean_grad: p.mean_grad,
            var_grad: p.var_grad,
        })
    }
}

/// Fits the GP on log cost used by [`UnknownCost`]: observed costs `costs` (> 0) at the rows of `x`
/// (`n × d`), modelled as `log c ~ GP` with standardized outcomes and the given fit options.
pub fn fit_log_cost_model(
    x: &[f64],
    costs: &[f64],
    d: usize,
    opts: &FitOptions,
) -> Result<GpModel> {
    if let Some(i) = costs.iter().position(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(Error::invalid(
            "costs",
            format!(
                "every observed cost must be finite and > 0, got {} at {i}",
                costs[i]
            ),
        ));
    }
    let logc: Vec<f64> = costs.iter().map(|c| c.ln()).collect();
    let t = Transforms {
        normalize_inputs: None,
        standardize_outcomes: true,
        output_scale: None,
    };
    GpModel::fit(x, &logc, d, &t, opts, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_cost_model_learns_a_known_cost() {
        // Costs 1 + 20·mean(x) observed on a grid in [0,1]².
        let mut x = Vec::new();
        let mut c = Vec::new();
        for i in 0..6 {
            for j in 0..6 {
                let p = [i as f64 / 5.0, j as f64 / 5.0];
                c.push(1.0 + 10.0 * (p[0] + p[1]));
                x.extend_from_slice(&p);
            }
        }
        let model = fit_log_cost_model(&x, &c, 2, &FitOptions::default()).unwrap();
        let unknown = UnknownCost(&model);
        let q = [0.33, 0.71];
        let lc = unknown.log_cost(&q, 2, false).unwrap();
        let expected_cost = (lc.mean[0] + 0.5 * lc.var[0]).exp();
        let truth = 1.0 + 10.0 * (0.33 + 0.71);
        assert!(
            (expected_cost / truth - 1.0).abs() < 0.02,
            "{expected_cost} vs {truth}"
        );
        assert!(fit_log_cost_model(&x, &vec![0.0; 36], 2, &FitOptions::default()).is_err());
    }
}
