//! Stopping rules for (cost-aware) Bayesian optimization.
//!
//! A [`StoppingRule`] looks at the run so far ([`RunState`]: observations, costs, the posterior
//! fitted on **all** of them, the cost model, and statistics the caller may already have computed)
//! and returns a [`Decision`]: continue, or stop with a reason. Either way the decision carries a
//! [`Report`] with every statistic next to its threshold, so a UI can show "statistic vs
//! threshold".
//!
//! # Semantics (after the posterior update)
//!
//! A rule is checked once per iteration **after** the posterior has been updated with the latest
//! evaluation: with `t` BO evaluations done (`D_t` = initial design + `t` evaluations), the
//! statistic is computed from the posterior on `D_t` and the incumbent `y*_t` of `D_t`. If the rule
//! fires, the run stops with `D_t` and `x_{t+1}` is *not* evaluated. The offline evaluation
//! ([`regret`]) charges exactly the evaluations of `D_t`. This removes the one-evaluation offset
//! of the reference notebooks, which computed statistics from `D_{t−1}` but charged `R(t)`.
//!
//! # Rules
//!
//! - [`pbgi::PbgiStopping`]: the PBGI/LogEIPC rule of Xie et al. (2025), stop when
//!   `max_x LogEIPC(x; y*) ≤ log λ` ⇔ no PBGI index beats the incumbent.
//! - [`ucb_lcb::UcbLcb`], [`median::LogEipcMed`], [`median::SrGapMed`], [`prb::Prb`]: the
//!   statistic-based baselines.
//! - [`heuristics::Convergence`], [`heuristics::Gss`], [`heuristics::FixedBudget`],
//!   [`heuristics::Never`]: rules on the best-value history and the spend.
//! - [`regret::hindsight`]: the offline oracle.
//!
//! Rules are built from a serializable [`StoppingConfig`] ([`config`]); the model-based rules
//! share [`OptimizerConfig`] ([`optimizer`], a leaf that the rules and the config import);
//! [`budget`] chooses λ from a budget (Theorem 1 of the stopping paper); [`step`] connects a rule
//! to a [`crate::policy::propose`] step; [`regret`] evaluates stops offline ([`replay`],
//! [`RuleBank`]). See `docs/stopping.md`.

pub mod budget;
pub mod config;
pub mod heuristics;
pub mod median;
pub mod optimizer;
pub mod pbgi;
pub mod prb;
pub mod regret;
mod search;
pub mod step;
pub mod ucb_lcb;

pub use config::{RuleConfig, StoppingConfig};
pub use optimizer::OptimizerConfig;
pub use regret::{
    RuleBank, StopOutcome, Summary, Trace, cost_adjusted_regret, evaluate_stop, hindsight, replay,
    summarize,
};

use crate::acquisition::{CostModel, UnknownCost};
use crate::error::{Error, Result};
use crate::gp::GpModel;
use crate::optim::MixedSpace;
use serde::{Deserialize, Serialize};

/// How the statistic is compared with its threshold: the rule wants to stop when
/// `value <cmp> threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// `value ≤ threshold`.
    AtMost,
    /// `value < threshold`.
    Below,
    /// `value ≥ threshold`.
    AtLeast,
    /// `value > threshold`.
    Above,
}

impl Comparison {
    /// Whether `value <cmp> threshold` holds (false if either is NaN).
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::AtMost => value <= threshold,
            Comparison::Below => value < threshold,
            Comparison::AtLeast => value >= threshold,
            Comparison::Above => value > threshold,
        }
    }

    /// The operator as text (`≤`, `<`, `≥`, `>`).
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::AtMost => "<=",
            Comparison::Below => "<",
            Comparison::AtLeast => ">=",
            Comparison::Above => ">",
        }
    }
}

/// Serializes a non-finite `f64` as `null` (JSON has no NaN) and reads `null` back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_some(v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// One statistic of a rule at one check, with the threshold it is compared against.
///
/// Non-finite numbers serialize as `null` and read back as NaN (e.g. a threshold that does not
/// exist yet, or `−∞` when every candidate of a discrete space has been evaluated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistic {
    /// What the value is (e.g. `"max_log_eipc"`).
    pub name: String,
    /// Its value (NaN if not yet available, e.g. before a median window is complete).
    #[serde(with = "nan_as_null")]
    pub value: f64,
    /// The threshold.
    #[serde(with = "nan_as_null")]
    pub threshold: f64,
    /// The rule triggers when `value <stop_when> threshold`.
    pub stop_when: Comparison,
}

impl Statistic {
    /// A statistic.
    pub fn new(name: &str, value: f64, threshold: f64, stop_when: Comparison) -> Self {
        Self {
            name: name.to_string(),
            value,
            threshold,
            stop_when,
        }
    }

    /// Whether the statistic is on the stopping side of its threshold.
    pub fn holds(&self) -> bool {
        self.stop_when.holds(self.value, self.threshold)
    }
}

/// What a rule saw at one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The rule's name (e.g. `"pbgi"`).
    pub rule: String,
    /// BO evaluations so far (`t`; the initial design is not counted).
    pub iteration: usize,
    /// The statistics with their thresholds; the first one is the headline statistic.
    pub statistics: Vec<Statistic>,
    /// Whether the raw condition held at this check (before burn-in and debounce).
    pub triggered: bool,
    /// Consecutive checks (after burn-in) at which the condition held, this one included.
    pub consecutive: usize,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Keep optimizing.
    Continue(Report),
    /// Stop now, with the data seen so far.
    Stop {
        /// Why, in words (e.g. `"max LogEIPC -5.1 <= log(lambda) -4.6"`).
        reason: String,
        /// The statistics.
        report: Report,
    },
}

impl Decision {
    /// Whether the decision is to stop.
    pub fn is_stop(&self) -> bool {
        matches!(self, Decision::Stop { .. })
    }

    /// The report of the check.
    pub fn report(&self) -> &Report {
        match self {
            Decision::Continue(r) => r,
            Decision::Stop { report, .. } => report,
        }
    }
}

/// How evaluation costs are known at a check.
#[derive(Clone, Copy, Default)]
pub enum CostInfo<'a> {
    /// Every evaluation costs the same (`c ≡ 1`).
    #[default]
    Uniform,
    /// A known cost function of the point.
    Known(&'a dyn CostModel),
    /// Unknown: the fitted GP on log cost (on all observed costs so far).
    Unknown(&'a GpModel),
}

impl CostInfo<'_> {
    /// Runs `f` with the cost model (`None` for uniform costs).
    pub fn with_model<R>(&self, f: impl FnOnce(Option<&dyn CostModel>) -> R) -> R {
        match self {
            CostInfo::Uniform => f(None),
            CostInfo::Known(c) => f(Some(*c)),
            CostInfo::Unknown(m) => {
                let u = UnknownCost(*m);
                f(Some(&u))
            }
        }
    }

    /// Whether the cost is unknown (learned).
    pub fn is_unknown(&self) -> bool {
        matches!(self, CostInfo::Unknown(_))
    }
}

/// A finite set of candidate points to maximize statistics over.
#[derive(Debug, Clone, Copy)]
pub struct Candidates<'a> {
    /// The points, row-major `m × d`.
    pub points: &'a [f64],
    /// `true`: the search space *is* this set (a discrete benchmark), so statistics are maximized
    /// over it only and already-evaluated candidates are excluded. `false`: the set is only an
    /// extra for the continuous multi-start maximization (e.g. a grid), nothing is excluded.
    pub exclusive: bool,
}

/// Statistics the caller has already computed on the posterior of **all** data so far (the same
/// posterior a rule would use), so the rule does not recompute them. A study step that maximizes
/// LogEIPC (exp convention) or PBGI for its next proposal can pass that maximum here; a harness
/// replaying a recorded trace passes the recorded values. Any `None` is computed by the rule from
/// [`RunState::model`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SuppliedStatistics {
    /// `max_x [LogEI(x; y*) − log E[c(x)]]`, `E[c] = exp(m + v/2)` (the PBGI-equivalent form).
    pub max_log_eipc_exp: Option<f64>,
    /// `max_x [LogEI(x; y*) + log E[1/c(x)]]` (LogEIPC-inv; equals the above for known costs).
    pub max_log_eipc_inv: Option<f64>,
    /// `max_x g_λ(x)`, the largest PBGI index at the rule's λ.
    pub max_pbgi_index: Option<f64>,
    /// The before-update statistic `max_{x ∉ D_t} LogEIPC(x; y*_t)` on the posterior of
    /// `D_{t−1}` (exp convention; NaN at `t = 0`), see [`pbgi`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_eipc_before_update: Option<f64>,
    /// The UCB-LCB regret bound `max_x UCB − max_{observed} LCB`.
    pub ucb_lcb: Option<f64>,
    /// The SRGap statistic.
    pub srgap: Option<f64>,
    /// The PRB probability `P(regret(x̂) ≤ ε)`.
    pub prb: Option<f64>,
}

/// The run so far, as a stopping rule sees it. All points are on the unit cube `[0,1]^d` (the
/// policy's space); values are maximized.
#[derive(Clone, Copy)]
pub struct RunState<'a> {
    /// Input dimension.
    pub d: usize,
    /// Observed points, row-major `n × d`, in evaluation order (initial design first).
    pub x: &'a [f64],
    /// Observed values (maximization).
    pub y: &'a [f64],
    /// Observed costs (`n` values > 0), or empty for unit costs.
    pub cost: &'a [f64],
    /// Size of the initial design: the first `n_initial` observations (at least the first
    /// observation is always treated as initial). Their cost is not part of the BO-phase
    /// cumulative cost, and `iteration = n − max(n_initial, 1)`.
    pub n_initial: usize,
    /// The objective posterior fitted on all `n` observations (required by model-based rules
    /// unless their statistic is supplied).
    pub model: Option<&'a GpModel>,
    /// The posterior fitted on the first `n − 1` observations (SRGap-med only).
    pub previous_model: Option<&'a GpModel>,
    /// How costs are known.
    pub cost_info: CostInfo<'a>,
    /// Extra or exclusive candidate points for the maximizations.
    pub candidates: Option<Candidates<'a>>,
    /// The valid points of the cube (a study's categorical and discrete parameters): the
    /// statistics are maximized over exactly the set the study can propose
    /// ([`crate::optim::maximize_mixed`]). `None`: the whole cube.
    pub space: Option<&'a MixedSpace>,
    /// Statistics already computed by the caller.
    pub supplied: SuppliedStatistics,
    /// Seed of the rule's randomness (multi-start selection, posterior samples).
    pub seed: u64,
}

impl<'a> RunState<'a> {
    /// A state with observations only (no model, uniform costs, nothing supplied, seed 0).
    pub fn new(d: usize, x: &'a [f64], y: &'a [f64], cost: &'a [f64], n_initial: usize) -> Self {
        Self {
            d,
            x,
            y,
            cost,
            n_initial,
            model: None,
            previous_model: None,
            cost_info: CostInfo::Uniform,
            candidates: None,
            space: None,
            supplied: SuppliedStatistics::default(),
            seed: 0,
        }
    }

    /// Checks shapes and values.
    pub fn validate(&self) -> Result<()> {
        let n = self.y.len();
        if self.d == 0 {
            return Err(Error::invalid("d", "must be at least 1"));
        }
        if self.x.len() != n * self.d {
            return Err(Error::dim("run x", n * self.d, self.x.len()));
        }
        if !self.cost.is_empty() && self.cost.len() != n {
            return Err(Error::dim("run cost", n, self.cost.len()));
        }
        if n == 0 {
            return Err(Error::invalid("run", "no observations yet"));
        }
        if self.n_initial > n {
            return Err(Error::invalid(
                "n_initial",
                format!("{} exceeds the {n} observations", self.n_initial),
            ));
        }
        if let Some(i) = self.y.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid("run y", format!("value {i} is not finite")));
        }
        if let Some(i) = self.cost.iter().position(|c| !(c.is_finite() && *c >= 0.0)) {
            return Err(Error::invalid(
                "run cost",
                format!("cost {i} is not finite and >= 0"),
            ));
        }
        if let Some(c) = &self.candidates
            && (c.points.is_empty() || !c.points.len().is_multiple_of(self.d))
        {
            return Err(Error::invalid(
                "candidates",
                "must be a non-empty row-major m x d array",
            ));
        }
        if let Some(s) = self.space
            && s.dim() != self.d
        {
            return Err(Error::dim("run space", self.d, s.dim()));
        }
        Ok(())
    }

    /// BO evaluations so far (`t = n − max(n_initial, 1)`).
    pub fn iteration(&self) -> usize {
        self.y.len().saturating_sub(self.n_initial.max(1))
    }

    /// Cumulative cost of the BO phase (initial design excluded; unit costs if `cost` is empty).
    pub fn cumulative_cost(&self) -> f64 {
        if self.cost.is_empty() {
            self.iteration() as f64
        } else {
            self.cost[self.n_initial.max(1).min(self.cost.len())..]
                .iter()
                .sum()
        }
    }

    /// Index and value of the incumbent (largest `y`, first among ties).
    pub fn incumbent(&self) -> (usize, f64) {
        let mut best = (0, f64::NEG_INFINITY);
        for (i, &v) in self.y.iter().enumerate() {
            if v > best.1 {
                best = (i, v);
            }
        }
        best
    }

    /// Best value after each prefix `D_0, …, D_t` (`t + 1` values; `D_0` = the initial design,
    /// or the first observation if there is none).
    pub fn best_history(&self) -> Vec<f64> {
        best_history(self.y, self.n_initial)
    }

    pub(crate) fn require_model(&self, rule: &str) -> Result<&'a GpModel> {
        self.model.ok_or_else(|| {
            Error::invalid(
                "run model",
                format!("the {rule} rule needs the posterior (or a supplied statistic)"),
            )
        })
    }
}

/// Best value after each prefix `D_0, …, D_t` of `y` with `n_initial` initial points.
pub(crate) fn best_history(y: &[f64], n_initial: usize) -> Vec<f64> {
    let start = n_initial.max(1).min(y.len());
    let mut best = y[..start].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut out = vec![best];
    for &v in &y[start..] {
        best = best.max(v);
        out.push(best);
    }
    out
}

/// A stopping rule. Rules may keep state across checks (debounce counters, the first values of a
/// median window, a sample-size schedule), so call [`StoppingRule::check`] exactly once per
/// iteration, in order, and [`StoppingRule::reset`] before reusing a rule on another run.
pub trait StoppingRule: Send {
    /// Short name (`"pbgi"`, `"ucb-lcb"`, …).
    fn name(&self) -> &'static str;
    /// Checks the rule on the run so far (posterior on all data).
    fn check(&mut self, state: &RunState<'_>) -> Result<Decision>;
    /// Forgets all state from previous checks.
    fn reset(&mut self);
}

/// Burn-in and debounce, shared by all rules.
///
/// - **Burn-in** `b`: no stop while fewer than `b` BO evaluations have been made (the
///   stabilization period of §3.2 of the stopping paper; statistics are still computed and
///   reported).
/// - **Debounce** `k ≥ 1`: stop only when the condition held at `k` consecutive checks after the
///   burn-in (`k = 1`: stop at the first trigger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// Burn-in, in BO evaluations (default 0).
    #[serde(default)]
    pub burn_in: usize,
    /// Consecutive triggers needed (default 1).
    #[serde(default = "one")]
    pub debounce: usize,
}

fn one() -> usize {
    1
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            burn_in: 0,
            debounce: 1,
        }
    }
}

/// The state of a [`Guard`] across checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GuardState {
    consecutive: usize,
}

impl GuardState {
    /// Updates the counter with this check's trigger; returns `(stop, consecutive)`.
    pub(crate) fn update(
        &mut self,
        guard: &Guard,
        iteration: usize,
        triggered: bool,
    ) -> (bool, usize) {
        if iteration < guard.burn_in || !triggered {
            self.consecutive = 0;
        } else {
            self.consecutive += 1;
        }
        (self.consecutive >= guard.debounce.max(1), self.consecutive)
    }
}

/// Builds the decision from the statistics: the rule triggers when the headline statistic holds.
pub(crate) fn decide(
    rule: &'static str,
    guard: &Guard,
    state: &mut GuardState,
    iteration: usize,
    statistics: Vec<Statistic>,
    triggered: bool,
) -> Decision {
    let (stop, consecutive) = state.update(guard, iteration, triggered);
    let report = Report {
        rule: rule.to_string(),
        iteration,
        statistics,
        triggered,
        consecutive,
    };
    if stop {
        let reason = match report.statistics.first() {
            Some(s) => format!(
                "{rule}: {} = {:.6e} {} threshold {:.6e}{}",
                s.name,
                s.value,
                s.stop_when.symbol(),
                s.threshold,
                if consecutive > 1 {
                    format!(" ({consecutive} consecutive checks)")
                } else {
                    String::new()
                }
            ),
            None => format!("{rule}: condition met"),
        };
        Decision::Stop { reason, report }
    } else {
        Decision::Continue(report)
    }
}

pub(crate) fn check_positive(what: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            format!("must be finite and > 0, got {v}"),
        ))
    }
}
