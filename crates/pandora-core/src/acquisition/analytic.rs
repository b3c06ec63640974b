//! Analytic acquisition functions of the Gaussian posterior `N(μ, σ²)` at a point, maximization
//! convention, with exact partial derivatives. `u = (μ − best_f)/σ`, `h(u) = φ(u) + uΦ(u)`.
//!
//! Cost-aware members receive the log-cost summary `(m, v)` of the point (see [`super::cost`]):
//! known costs have `m = log c(x)`, `v = 0`.

use super::{LogCost, Partials, PointwiseAcquisition};
use crate::math::{dlog_h, h, log_h, log_norm_cdf, log_norm_pdf, norm_cdf, norm_pdf};

/// Expected improvement `EI = σ h(u)`; `∂EI/∂μ = Φ(u)`, `∂EI/∂σ = φ(u)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for ExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let u = (mu - self.best_f) / sigma;
        Partials::new(sigma * h(u), norm_cdf(u), norm_pdf(u))
    }
}

/// `log EI = log σ + log h(u)` with its partials, finite for every finite `u`.
#[inline]
fn log_ei(mu: f64, sigma: f64, best_f: f64) -> Partials {
    let u = (mu - best_f) / sigma;
    let lh = log_h(u);
    Partials::new(
        sigma.ln() + lh,
        dlog_h(u) / sigma,
        // ∂ log EI/∂σ = φ(u) / (σ h(u)), in log space.
        (log_norm_pdf(u) - lh).exp() / sigma,
    )
}

/// Log expected improvement, `log EI = log σ + log h(u)`, accurate for every finite `u` (down to
/// `u = −1e6` and beyond, where EI itself underflows). `∂/∂μ = (log h)'(u)/σ`,
/// `∂/∂σ = φ(u)/(σ h(u))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for LogExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        log_ei(mu, sigma, self.best_f)
    }
}

/// The floor of [`LogVanillaExpectedImprovement`], the reference code's `1e-6`.
pub const LOG_VANILLA_EI_FLOOR: f64 = 1e-6;

/// `log(EI + 1e-6)`: the logarithm taken *naively*, the PBGI paper's "Log(Unst. EI)" of its
/// log-scaling ablation (App. D.1, Figure 10; the reference code's
/// `LogVanillaExpectedImprovement`). Kept to reproduce that ablation, not for use: where EI
/// falls far below the floor the value is flat at `log 1e-6` and the gradient
/// `∇EI/(EI + 1e-6)` vanishes, which is what [`LogExpectedImprovement`] (computed in log space)
/// avoids. `∂/∂μ = Φ(u)/(EI + 1e-6)`, `∂/∂σ = φ(u)/(EI + 1e-6)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogVanillaExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for LogVanillaExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let u = (mu - self.best_f) / sigma;
        let shifted = sigma * h(u) + LOG_VANILLA_EI_FLOOR;
        Partials::new(shifted.ln(), norm_cdf(u) / shifted, norm_pdf(u) / shifted)
    }
}

/// Probability of improvement `PI = Φ(u)`; `∂/∂μ = φ(u)/σ`, `∂/∂σ = −u φ(u)/σ`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbabilityOfImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for ProbabilityOfImprovement {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let u = (mu - self.best_f) / sigma;
        let p = norm_pdf(u);
        Partials::new(norm_cdf(u), p / sigma, -u * p / sigma)
    }
}

/// `log PI = log Φ(u)`, accurate far in the lower tail; with `r = φ(u)/Φ(u)`,
/// `∂/∂μ = r/σ`, `∂/∂σ = −u r/σ`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogProbabilityOfImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
}

impl PointwiseAcquisition for LogProbabilityOfImprovement {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let u = (mu - self.best_f) / sigma;
        let lc = log_norm_cdf(u);
        let r = (log_norm_pdf(u) - lc).exp();
        Partials::new(lc, r / sigma, -u * r / sigma)
    }
}

/// The GP-UCB exploration schedule the papers use: `β_t = 0.4 · log(d t² π² / 0.6)` (the
/// `δ = 0.1` formula of Srinivas et al. scaled by 1/5), with `t` = cumulative cost + 1 (the
/// number of BO iterations + 1 for uniform costs).
pub fn gp_ucb_beta(d: usize, t: f64) -> f64 {
    0.4 * (d as f64 * t * t * std::f64::consts::PI.powi(2) / 0.6).ln()
}

/// Upper confidence bound `μ + √β σ`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpperConfidenceBound {
    /// Exploration weight β ≥ 0 (see [`gp_ucb_beta`]).
    pub beta: f64,
}

impl PointwiseAcquisition for UpperConfidenceBound {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let s = self.beta.max(0.0).sqrt();
        Partials::new(mu + s * sigma, 1.0, s)
    }
}

/// Lower confidence bound `μ − √β σ` (a pessimistic value, e.g. for stopping rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LowerConfidenceBound {
    /// Width parameter β ≥ 0.
    pub beta: f64,
}

impl PointwiseAcquisition for LowerConfidenceBound {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        let s = self.beta.max(0.0).sqrt();
        Partials::new(mu - s * sigma, 1.0, -s)
    }
}

/// Cost exponent of the cost-cooling variants (EICC): `α = max(0, remaining / total)` budget.
pub fn cost_cooling_alpha(remaining_budget: f64, total_budget: f64) -> f64 {
    if total_budget > 0.0 && remaining_budget.is_finite() {
        (remaining_budget / total_budget).max(0.0)
    } else {
        0.0
    }
}

/// Expected improvement per unit cost, `EI · E[c^{−α}]` with `E[c^{−α}] = exp(−αm + α²v/2)`
/// for a log-normal cost (`= EI / c^α` for a known cost). α = 1 gives EIPC; α from
/// [`cost_cooling_alpha`] gives EICC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedImprovementPerCost {
    /// The incumbent value to improve on.
    pub best_f: f64,
    /// Cost exponent α ≥ 0.
    pub alpha: f64,
}

impl PointwiseAcquisition for ExpectedImprovementPerCost {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        let a = self.alpha;
        let u = (mu - self.best_f) / sigma;
        let f = (-a * cost.mean + 0.5 * a * a * cost.var).exp();
        let v = sigma * h(u) * f;
        Partials {
            value: v,
            d_mu: norm_cdf(u) * f,
            d_sigma: norm_pdf(u) * f,
            d_cost_mean: -a * v,
            d_cost_var: 0.5 * a * a * v,
        }
    }
}

/// Which expectation of the cost [`LogExpectedImprovementPerCost`] divides by when the cost is
/// unknown (the two conventions of the papers; they coincide for known costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostConvention {
    /// `LogEI + log E[c^{−α}] = LogEI − αm + α²v/2` ("LogEIPC-inv", the default).
    Inverse,
    /// `LogEI − log E[c^α] = LogEI − αm − α²v/2` ("LogEIPC-exp").
    Expected,
}

/// Log expected improvement per unit cost, `LogEI − α m ± α² v / 2` (see [`CostConvention`]);
/// α = 1 gives LogEIPC, α from [`cost_cooling_alpha`] gives LogEICC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogExpectedImprovementPerCost {
    /// The incumbent value to improve on.
    pub best_f: f64,
    /// Cost exponent α ≥ 0.
    pub alpha: f64,
    /// Convention for unknown costs.
    pub convention: CostConvention,
}

impl PointwiseAcquisition for LogExpectedImprovementPerCost {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        let a = self.alpha;
        let mut p = log_ei(mu, sigma, self.best_f);
        let sign = match self.convention {
            CostConvention::Inverse => 1.0,
            CostConvention::Expected => -1.0,
        };
        p.value += -a * cost.mean + sign * 0.5 * a * a * cost.var;
        p.d_cost_mean = -a;
        p.d_cost_var = sign * 0.5 * a * a;
        p
    }
}
