//! Acquisition functions with exact gradients, maximization convention.
//!
//! An acquisition here is a function of the latent posterior mean `μ(x)` and standard deviation
//! `σ(x)` at a point and, for cost-aware acquisitions, of the point's log-cost mean `m(x)` and
//! variance `v(x)` ([`PointwiseAcquisition`]). [`OnModel`] composes it with a model's posterior and a
//! [`CostModel`] by the chain rule
//! `∇a = (∂a/∂μ)∇μ + (∂a/∂σ)∇σ + (∂a/∂m)∇m + (∂a/∂v)∇v`, giving a differentiable objective on
//! the input space that the multi-start optimizer can maximize.
//!
//! A BO step maximizes such an objective, or runs a recipe of its own (Thompson sampling,
//! random search, MES, KG, one-shot KG, the B-MS-EI and MSEI trees): each acquisition's step is
//! an [`Acquirer`] ([`acquirer`]), named by the registry ([`registry`]), and each non-pointwise
//! acquirer lives in its own file (`ts`, `random`, `mes`, `kg`, `one_shot_kg`, `multi_step`).

pub mod acquirer;
pub mod analytic;
pub mod bmsei;
pub mod budgeted;
pub mod cost;
mod fantasy_path;
pub mod kg;
pub mod mes;
pub mod multi_step;
pub mod one_shot_kg;
pub mod pbgi;
pub mod pbgi_d;
pub mod pbgi_plain;
pub mod random;
pub mod registry;
pub mod ts;

pub use crate::gp::Posterior;
pub use acquirer::{Acquired, Acquirer, AcquisitionParams, Needs, StepInputs};
pub use analytic::{
    CostConvention, ExpectedImprovement, ExpectedImprovementPerCost, LogExpectedImprovement,
    LogExpectedImprovementPerCost, LogProbabilityOfImprovement, LogVanillaExpectedImprovement,
    LowerConfidenceBound, ProbabilityOfImprovement, UpperConfidenceBound, cost_cooling_alpha,
    gp_ucb_beta,
};
pub use bmsei::{FantasyTree, TreeBudget};
pub use cost::{
    CostModel, CostSetting, KnownCost, LinearMeanCost, LogCostBatch, UniformCost, UnknownCost,
    fit_log_cost_model,
};
pub use pbgi::{Pbgi, PbgiIndex, pbgi_index, pbgi_index_min};
pub use pbgi_d::PbgiDecay;
pub use pbgi_plain::{PbgiPlain, pbgi_plain_index};
pub use registry::{AcquisitionName, build_pointwise};
pub use ts::ThompsonSample;

use crate::error::Result;
use crate::optim::multistart::Objective;

/// Log-cost summary at one point: known costs have `mean = log c(x)`, `var = 0`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LogCost {
    /// Mean of the log cost.
    pub mean: f64,
    /// Variance of the log cost.
    pub var: f64,
}

/// An acquisition value and its partial derivatives.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Partials {
    /// The acquisition value `a`.
    pub value: f64,
    /// `∂a/∂μ`.
    pub d_mu: f64,
    /// `∂a/∂σ`.
    pub d_sigma: f64,
    /// `∂a/∂m` (log-cost mean).
    pub d_cost_mean: f64,
    /// `∂a/∂v` (log-cost variance).
    pub d_cost_var: f64,
}

impl Partials {
    /// Partials of an acquisition that does not depend on the cost.
    pub fn new(value: f64, d_mu: f64, d_sigma: f64) -> Self {
        Self {
            value,
            d_mu,
            d_sigma,
            d_cost_mean: 0.0,
            d_cost_var: 0.0,
        }
    }
}

/// An acquisition value that depends on the point only through `μ`, `σ` and the log cost.
pub trait PointwiseAcquisition: Sync {
    /// The value and partials at posterior mean `mu`, standard deviation `sigma > 0` and log cost
    /// `cost`.
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials;
}

impl<T: PointwiseAcquisition + ?Sized> PointwiseAcquisition for Box<T> {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        (**self).eval(mu, sigma, cost)
    }
}

impl<T: PointwiseAcquisition + ?Sized> PointwiseAcquisition for &T {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        (**self).eval(mu, sigma, cost)
    }
}

/// A pointwise acquisition evaluated on a model's posterior (and a cost model): a
/// differentiable [`Objective`]. Without a cost model the cost is uniform (`log c = 0`).
pub struct OnModel<'a, P: Posterior, A: PointwiseAcquisition> {
    /// The model of the objective.
    pub model: &'a P,
    /// The acquisition.
    pub acq: A,
    /// The cost model (`None`: uniform cost).
    pub cost: Option<&'a dyn CostModel>,
}

impl<'a, P: Posterior, A: PointwiseAcquisition> OnModel<'a, P, A> {
    /// An acquisition on a model with uniform cost.
    pub fn new(model: &'a P, acq: A) -> Self {
        Self {
            model,
            acq,
            cost: None,
        }
    }

    /// An acquisition on a model with the given cost model.
    pub fn with_cost(model: &'a P, acq: A, cost: &'a dyn CostModel) -> Self {
        Self {
            model,
            acq,
            cost: Some(cost),
        }
    }

    /// Values and (if `grad`) row-major gradients at the rows of `xs`.
    pub fn evaluate(&self, xs: &[f64], grad: bool) -> Result<(Vec<f64>, Vec<f64>)> {
        let d = self.model.dim();
        let post = self.model.posterior(xs, grad)?;
        let m = post.mean.len();
        let cost = match self.cost {
            Some(c) => Some(c.log_cost(xs, d, grad)?),
            None => None,
        };
        let mut values = vec![0.0; m];
        let mut grads = if grad { vec![0.0; m * d] } else { Vec::new() };
        for (j, value) in values.iter_mut().enumerate() {
            let s = post.var[j].sqrt();
            let lc = cost.as_ref().map_or(LogCost::default(), |c| LogCost {
                mean: c.mean[j],
                var: c.var[j],
            });
            let p = self.acq.eval(post.mean[j], s, lc);
            *value = p.value;
            if grad {
                for k in 0..d {
                    let i = j * d + k;
                    let ds = post.var_grad[i] / (2.0 * s);
                    let mut g = p.d_mu * post.mean_grad[i] + p.d_sigma * ds;
                    if let Some(c) = &cost {
                        g += p.d_cost_mean * c.mean_grad[i] + p.d_cost_var * c.var_grad[i];
                    }
                    grads[i] = g;
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

    fn value_grads(&self, xs: &[f64], out: &mut [f64], grads: &mut [f64]) {
        match self.evaluate(xs, true) {
            Ok((v, g)) => {
                out.copy_from_slice(&v);
                grads.copy_from_slice(&g);
            }
            Err(_) => {
                out.fill(f64::NAN);
                grads.fill(0.0);
            }
        }
    }

    fn prefers_blocks(&self) -> bool {
        self.model.prefers_blocks()
    }
}

#[cfg(test)]
mod tests;
