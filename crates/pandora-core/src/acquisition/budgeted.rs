//! The one-step budgeted expected improvement of B-MS-EI (Astudillo et al., 2021), under a
//! log-normal cost.
//!
//! **Proposition 1.** If `f` and `ln c` are independent GPs, `f(x) ~ N(μ, σ²)` and
//! `ln c(x) ~ N(m, v)`, and `b > 0` is the remaining budget, then
//!
//! `Q₁(x) = E[(f(x) − f*)⁺ · 1{c(x) ≤ b}] = EI(μ, σ; f*) · Φ(ζ)`, `ζ = (ln b − m)/√v`,
//!
//! and `Q₁ = 0` when the budget is exhausted (`b ≤ 0`). This is the stage value of every node of the
//! B-MS-EI scenario tree and, alone, the "budget-constrained EI" (BEI).
//!
//! **Proposition 2** (the companion closed form, `E[(f − f*)⁺ / c^ν] = EI · exp(−ν m + ν² v / 2)`)
//! is [`super::ExpectedImprovementPerCost`] with `alpha = ν` (EI-PUC for ν = 1, EI-PUC-CC for
//! ν = remaining/total budget); it is re-exported here as [`ei_per_cost_power`] for symmetry.
//!
//! Numerical conventions follow the reference code (notes A4): the budget is clamped at `1e-6`
//! (below it the value is exactly 0) and the log-cost standard deviation at `1e-6`, so a known
//! cost (`v = 0`) gives the hard indicator `1{c ≤ b}` smoothed over a relative width of `1e-6`.

use super::{LogCost, Partials, PointwiseAcquisition};
use crate::math::{dlog_h, h, log_h, log_norm_cdf, log_norm_pdf, norm_cdf, norm_pdf};

/// Smallest budget for which the feasibility probability is not 0, and smallest log-cost standard
/// deviation (both as in the reference code).
pub const BUDGET_CLAMP: f64 = 1e-6;

/// `ζ = (ln b − m)/s` with `s = max(√v, 1e-6)` and its partials `(∂ζ/∂m, ∂ζ/∂v)`; `None` if the
/// budget is ≤ 1e-6 or not a number.
fn zeta(budget: f64, cost: LogCost) -> Option<(f64, f64, f64)> {
    if budget.is_nan() || budget <= BUDGET_CLAMP {
        return None;
    }
    let v = cost.var.max(0.0);
    let s = v.sqrt();
    let (s, clamped) = if s < BUDGET_CLAMP {
        (BUDGET_CLAMP, true)
    } else {
        (s, false)
    };
    let z = (budget.ln() - cost.mean) / s;
    // ∂ζ/∂v = −(ln b − m)/(2 v^{3/2}) = −ζ/(2v) where not clamped.
    let dz_dv = if clamped { 0.0 } else { -z / (2.0 * v) };
    Some((z, -1.0 / s, dz_dv))
}

/// Value and partials of the budget-constrained EI `EI(μ, σ; best_f) · Φ(ζ)` (Proposition 1),
/// with `ζ = (ln budget − m)/√v`. Returns all-zero partials if `budget ≤ 1e-6`.
pub fn budgeted_ei(mu: f64, sigma: f64, cost: LogCost, best_f: f64, budget: f64) -> Partials {
    let Some((z, dz_dm, dz_dv)) = zeta(budget, cost) else {
        return Partials::default();
    };
    let u = (mu - best_f) / sigma;
    let ei = sigma * h(u);
    let p = norm_cdf(z);
    let q = norm_pdf(z);
    Partials {
        value: ei * p,
        d_mu: norm_cdf(u) * p,
        d_sigma: norm_pdf(u) * p,
        d_cost_mean: ei * q * dz_dm,
        d_cost_var: ei * q * dz_dv,
    }
}

/// Value and partials of `log BEI = log EI + log Φ(ζ)`, finite wherever the budget is > 1e-6
/// (the log of [`budgeted_ei`], accurate when EI or the feasibility probability underflows).
/// Returns `value = −∞` with zero partials if `budget ≤ 1e-6`.
pub fn log_budgeted_ei(mu: f64, sigma: f64, cost: LogCost, best_f: f64, budget: f64) -> Partials {
    let Some((z, dz_dm, dz_dv)) = zeta(budget, cost) else {
        return Partials {
            value: f64::NEG_INFINITY,
            ..Partials::default()
        };
    };
    let u = (mu - best_f) / sigma;
    let lh = log_h(u);
    let lc = log_norm_cdf(z);
    // d log Φ(ζ)/dζ = φ(ζ)/Φ(ζ), in log space.
    let r = (log_norm_pdf(z) - lc).exp();
    Partials {
        value: sigma.ln() + lh + lc,
        d_mu: dlog_h(u) / sigma,
        d_sigma: (log_norm_pdf(u) - lh).exp() / sigma,
        d_cost_mean: r * dz_dm,
        d_cost_var: r * dz_dv,
    }
}

/// Proposition 2: `E[(f − f*)⁺ / c^ν] = EI · exp(−ν m + ν² v / 2)` and its partials (the same
/// function as [`super::ExpectedImprovementPerCost`] with `alpha = nu`).
pub fn ei_per_cost_power(mu: f64, sigma: f64, cost: LogCost, best_f: f64, nu: f64) -> Partials {
    super::ExpectedImprovementPerCost { best_f, alpha: nu }.eval(mu, sigma, cost)
}

/// The budget-constrained expected improvement `EI · P(c ≤ b)` (Proposition 1) as a pointwise
/// acquisition (needs a cost model; without one, `m = 0`, `v = 0`, i.e. unit cost).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetedExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
    /// The remaining budget `b` (≤ 1e-6: the acquisition is 0 everywhere).
    pub budget: f64,
}

impl PointwiseAcquisition for BudgetedExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        budgeted_ei(mu, sigma, cost, self.best_f, self.budget)
    }
}

/// `log(EI · P(c ≤ b))` as a pointwise acquisition (see [`log_budgeted_ei`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogBudgetedExpectedImprovement {
    /// The incumbent value to improve on.
    pub best_f: f64,
    /// The remaining budget `b` (≤ 1e-6: the acquisition is −∞ everywhere).
    pub budget: f64,
}

impl PointwiseAcquisition for LogBudgetedExpectedImprovement {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        log_budgeted_ei(mu, sigma, cost, self.best_f, self.budget)
    }
}
