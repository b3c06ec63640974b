//! The PBGI/LogEIPC stopping rule (Xie, Cai, Terenin, Frazier, Scully 2025, §3).
//!
//! With the posterior on all data `D_t` and the incumbent `y* = max y` (maximization), stop when
//!
//! ```text
//! max_x LogEIPC(x; y*) = max_x [log EI(x; y*) − log E[c(x)]] ≤ log λ           (LogEIPC form)
//! ⇔ max_x g_λ(x) ≤ y*   with EI(x; g_λ(x)) = λ E[c(x)]                           (PBGI form)
//! ```
//!
//! i.e. no unevaluated point's expected improvement is worth its (λ-scaled) cost, equivalently
//! no Pandora's-box index beats the incumbent. The forms are equivalent pointwise because `EI` is
//! strictly decreasing in its threshold: `g_λ(x) ≤ y* ⇔ EI(x; y*) ≤ λc(x)`. For unknown costs
//! learned by a GP on log cost, `E[c] = exp(m + v/2)` (the "exp" convention, the one PBGI's root
//! uses); with the "inverse" convention `E[1/c]⁻¹` the two forms would differ.
//!
//! # Decision and near-ties
//!
//! The rule decides by the LogEIPC form, which is a closed-form evaluation. [`stops_by_pbgi`]
//! decides by the PBGI form with the index root; when an index is within its root-finding accuracy
//! of `y*` (`|g − y*| ≤ 1e-13·(|g| + |μ| + σ|u|)`, far above the documented `~1e-15` error of
//! [`pbgi_index`]) the comparison is resolved by the LogEIPC form at that point. The two
//! functions therefore agree exactly on every input, ties included (ties stop: both comparisons
//! are non-strict).
//!
//! # Options
//!
//! - `window` `w` (default 1): compare the log of the moving average of `EIPC = exp(LogEIPC)`
//!   over the last `w` checks (computed in log space) instead of the current value, and do not
//!   stop before `w` values exist (the paper's 8-D experiments use `w = 20`). With `w > 1` the
//!   PBGI form no longer applies.
//! - burn-in and debounce: see [`Guard`].
//! - `timing` ([`Timing`], default after the update): which posterior the indices come from.
//!
//! # Before or after the posterior update
//!
//! The paper's rule (its eq. (6) with `α_t`, "after update", §3 and App. C.2) compares the
//! incumbent `y*_t` of `D_t` with the indices on the posterior of `D_t`, so it asks whether the
//! *next* evaluation is worth its cost. The alternative it argues against ("before update", the
//! form of Gergatsouli and Tzamos's correlated Pandora's Box guarantee) uses the indices `α_{t−1}`
//! of the posterior on `D_{t−1}` — the ones that chose `x_t` — with the same incumbent `y*_t`:
//!
//! ```text
//! max_{x ∉ {x_1, …, x_t}} LogEIPC_{t−1}(x; y*_t) ≤ log λ   ⇔   max_{x ∉ {x_1, …, x_t}} g_{λ,t−1}(x) ≤ y*_t
//! ```
//!
//! It fires when the latest evaluation beat every index of the round that chose it (for the PBGI
//! policy at the rule's λ, `x_t` maximizes `g_{λ,t−1}`, so this is the reference notebook's
//! "this-round" rule `y_t ≥ g_{λ,t−1}(x_t)`). It needs [`RunState::previous_model`]; without one
//! (`t = 0`) the statistic is NaN and the rule does not fire. Costs are the run's cost information
//! (for unknown costs, the cost model of `D_t`). Studies stop after the update only; the
//! before-update form is for offline comparison (`pandora experiment`'s `[stopping]` rules).
//!
//! Candidate sets marked exclusive exclude evaluated points; the continuous maximization cannot
//! exclude them, but at an evaluated point `σ` is at the noise level and its EI is negligible.

use super::optimizer::OptimizerConfig;
use super::search::maximize_pointwise;
use super::{
    Comparison, Decision, Guard, GuardState, RunState, Statistic, StoppingRule, check_positive,
    decide,
};
use crate::acquisition::{CostConvention, LogCost, LogExpectedImprovementPerCost, pbgi_index};
use crate::error::Result;
use crate::math::{log_h, log1pexp};
use serde::{Deserialize, Serialize};

/// Which posterior the PBGI rule's indices come from (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timing {
    /// The posterior of `D_t`, after the update with the latest evaluation (the paper's rule).
    #[default]
    AfterUpdate,
    /// The posterior of `D_{t−1}`, before that update, with the incumbent of `D_t`.
    BeforeUpdate,
}

impl Timing {
    /// Whether this is the default ([`Timing::AfterUpdate`]); for `skip_serializing_if`.
    pub fn is_after_update(&self) -> bool {
        *self == Timing::AfterUpdate
    }
}

/// Posterior of the objective and of the log cost at one point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointPosterior {
    /// Posterior mean of `f(x)`.
    pub mu: f64,
    /// Posterior standard deviation of `f(x)` (`> 0`).
    pub sigma: f64,
    /// Log-cost mean and variance (`var = 0` for known costs).
    pub cost: LogCost,
}

/// `LogEIPC(x; y*) = log EI − log E[c] = log σ + log h((μ − y*)/σ) − m − v/2` (exp convention).
pub fn log_eipc_exp(p: &PointPosterior, best: f64) -> f64 {
    let u = (p.mu - best) / p.sigma;
    p.sigma.ln() + log_h(u) - p.cost.mean - 0.5 * p.cost.var
}

/// LogEIPC form: stop iff `LogEIPC(x; y*) ≤ log λ` at every point.
pub fn stops_by_log_eipc(points: &[PointPosterior], best: f64, lambda: f64) -> bool {
    let ll = lambda.ln();
    points.iter().all(|p| log_eipc_exp(p, best) <= ll)
}

/// PBGI form: stop iff `g_λ(x) ≤ y*` at every point, near-ties resolved by the LogEIPC form (see
/// the [module documentation](self)).
pub fn stops_by_pbgi(points: &[PointPosterior], best: f64, lambda: f64) -> bool {
    let ll = lambda.ln();
    points.iter().all(|p| {
        let r = pbgi_index(p.mu, p.sigma, ll + p.cost.mean + 0.5 * p.cost.var);
        let scale = r.g.abs() + p.mu.abs() + p.sigma * r.u.abs();
        if (r.g - best).abs() <= 1e-13 * scale {
            log_eipc_exp(p, best) <= ll
        } else {
            r.g <= best
        }
    })
}

/// The PBGI/LogEIPC stopping rule (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct PbgiStopping {
    lambda: f64,
    window: usize,
    timing: Timing,
    guard: Guard,
    optimizer: OptimizerConfig,
    history: Vec<f64>,
    state: GuardState,
}

impl PbgiStopping {
    /// The rule at cost scale `lambda > 0`, moving-average window `window ≥ 1`.
    pub fn new(
        lambda: f64,
        window: usize,
        guard: Guard,
        optimizer: OptimizerConfig,
    ) -> Result<Self> {
        check_positive("stopping lambda", lambda)?;
        Ok(Self {
            lambda,
            window: window.max(1),
            timing: Timing::AfterUpdate,
            guard,
            optimizer,
            history: Vec::new(),
            state: GuardState::default(),
        })
    }

    /// The cost scale λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// The rule with its indices taken before or after the posterior update.
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// Which posterior the indices come from.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The before-update statistic `max_{x ∉ {x_1, …, x_t}} LogEIPC(x; y*_t)` (exp convention) on
    /// [`RunState::previous_model`] (the posterior of `D_{t−1}`) with the incumbent of `D_t`; NaN
    /// without a previous model. Maximized like [`Self::max_log_eipc`].
    pub fn max_log_eipc_before_update(&self, state: &RunState<'_>) -> Result<f64> {
        let Some(old) = state.previous_model else {
            return Ok(f64::NAN);
        };
        let acq = LogExpectedImprovementPerCost {
            best_f: state.incumbent().1,
            alpha: 1.0,
            convention: CostConvention::Expected,
        };
        Ok(maximize_pointwise(state, old, acq, &self.optimizer, state.seed, true)?.0)
    }

    /// `max_x LogEIPC(x; y*)` (exp convention) on the posterior of `state`, maximized by the
    /// multi-start optimizer (and over the candidates), with the maximizing point.
    pub fn max_log_eipc(&self, state: &RunState<'_>) -> Result<(f64, Vec<f64>)> {
        let model = state.require_model(self.name())?;
        let acq = LogExpectedImprovementPerCost {
            best_f: state.incumbent().1,
            alpha: 1.0,
            convention: CostConvention::Expected,
        };
        maximize_pointwise(state, model, acq, &self.optimizer, state.seed, true)
    }
}

/// `log(mean(exp(v)))` of a non-empty slice, in log space.
pub(crate) fn log_mean_exp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    let mut acc = f64::NEG_INFINITY;
    for &x in v {
        // acc = log(exp(acc) + exp(x − m))
        let t = x - m;
        acc = if acc == f64::NEG_INFINITY {
            t
        } else if acc >= t {
            acc + log1pexp(t - acc)
        } else {
            t + log1pexp(acc - t)
        };
    }
    m + acc - (v.len() as f64).ln()
}

impl StoppingRule for PbgiStopping {
    fn name(&self) -> &'static str {
        "pbgi"
    }

    fn check(&mut self, state: &RunState<'_>) -> Result<Decision> {
        state.validate()?;
        let best = state.incumbent().1;
        let ll = self.lambda.ln();
        let t = state.iteration();
        let (name, value) = match self.timing {
            Timing::AfterUpdate => {
                // Known costs: both conventions coincide, so either supplied value will do.
                let supplied =
                    state
                        .supplied
                        .max_log_eipc_exp
                        .or(if state.cost_info.is_unknown() {
                            None
                        } else {
                            state.supplied.max_log_eipc_inv
                        });
                if self.window == 1
                    && supplied.is_none()
                    && let Some(g) = state.supplied.max_pbgi_index
                {
                    // PBGI form with a supplied maximal index (at this λ).
                    let stats = vec![Statistic::new(
                        "max_pbgi_index",
                        g,
                        best,
                        Comparison::AtMost,
                    )];
                    return Ok(decide(
                        self.name(),
                        &self.guard,
                        &mut self.state,
                        t,
                        stats,
                        g <= best,
                    ));
                }
                let value = match supplied {
                    Some(v) => v,
                    None => self.max_log_eipc(state)?.0,
                };
                ("max_log_eipc", value)
            }
            Timing::BeforeUpdate => {
                let value = match state.supplied.max_log_eipc_before_update {
                    Some(v) => v,
                    None => self.max_log_eipc_before_update(state)?,
                };
                ("max_log_eipc_before_update", value)
            }
        };
        // NaN (before the update at t = 0) is reported, never averaged, and never fires.
        if !value.is_nan() {
            self.history.push(value);
        }
        let mut stats = vec![Statistic::new(name, value, ll, Comparison::AtMost)];
        let triggered = if self.window > 1 {
            let full = self.history.len() >= self.window;
            let tail = &self.history[self.history.len().saturating_sub(self.window)..];
            let avg = if full { log_mean_exp(tail) } else { f64::NAN };
            stats.insert(
                0,
                Statistic::new("log_mean_eipc_window", avg, ll, Comparison::AtMost),
            );
            full && avg <= ll
        } else {
            value <= ll
        };
        Ok(decide(
            self.name(),
            &self.guard,
            &mut self.state,
            t,
            stats,
            triggered,
        ))
    }

    fn reset(&mut self) {
        self.history.clear();
        self.state = GuardState::default();
    }
}
