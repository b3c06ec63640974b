//! Evaluation costs as they enter cost-aware acquisitions.
//!
//! Every cost model reports, per point, the mean and variance of the *log* cost and their input
//! gradients: a known cost `c(x)` has mean `log c(x)` and variance 0; an unknown cost learned by a
//! GP on observed log costs has that GP's posterior. Acquisitions then use the convention they
//! need, e.g. `log E[c] = μ + σ²/2` (PBGI) or `log E[c^{−α}] = −αμ + α²σ²/2` (EIPC).

use crate::error::{Error, Result};
use crate::gp::Posterior;

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
