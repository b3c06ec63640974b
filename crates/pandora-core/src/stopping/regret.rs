//! Cost-adjusted simple regret and the offline evaluation of stopping rules on recorded runs.
//!
//! A [`Trace`] holds, for `t = 0, …, T`, the simple regret of the incumbent and the cumulative
//! cost of the BO phase after `t` BO evaluations (`t = 0`: right after the initial design, whose
//! cost is not counted). The cost-adjusted simple regret is
//!
//! ```text
//! R_λ(t) = regret(t) + λ · cost(t).
//! ```
//!
//! A rule that fires at the check with data `D_t` stops at index `t` and is charged `R_λ(t)`;
//! a rule that never fires is charged the last index (the cap) and counted as not fired. The
//! [`hindsight`] oracle is the index minimizing `R_λ` (index 0 included).
//!
//! [`replay`] runs a rule over a recorded run check by check, feeding it the prefix `D_t` and the
//! statistics recorded for that prefix, so every rule is evaluated on the statistics of *its own*
//! run (the reference notebooks evaluated every acquisition's run with the PBGI run's statistics).

use super::{Decision, RunState, StoppingRule, SuppliedStatistics};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `R = simple_regret + λ · cumulative_cost`.
pub fn cost_adjusted_regret(simple_regret: f64, cumulative_cost: f64, lambda: f64) -> f64 {
    simple_regret + lambda * cumulative_cost
}

/// Simple regret and BO-phase cumulative cost after `t = 0, …, T` BO evaluations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Simple regret of the incumbent after `t` BO evaluations.
    pub simple_regret: Vec<f64>,
    /// Cumulative BO-phase cost after `t` BO evaluations (`cost[0] = 0` normally).
    pub cumulative_cost: Vec<f64>,
}

impl Trace {
    /// A trace; errors on different or zero lengths or non-finite values.
    pub fn new(simple_regret: Vec<f64>, cumulative_cost: Vec<f64>) -> Result<Self> {
        if simple_regret.is_empty() {
            return Err(Error::invalid("trace", "is empty"));
        }
        if simple_regret.len() != cumulative_cost.len() {
            return Err(Error::dim(
                "trace cumulative_cost",
                simple_regret.len(),
                cumulative_cost.len(),
            ));
        }
        if simple_regret
            .iter()
            .chain(&cumulative_cost)
            .any(|v| !v.is_finite())
        {
            return Err(Error::invalid("trace", "values must be finite"));
        }
        Ok(Self {
            simple_regret,
            cumulative_cost,
        })
    }

    /// The trace of a run of observations `y` (maximization) with costs `cost` (empty: unit
    /// costs), `n_initial` initial-design points (at least one) and known optimum `optimum`:
    /// `regret(t) = optimum − max(y[..n_initial + t])`, `cost(t) = Σ cost[n_initial..n_initial + t]`.
    pub fn from_observations(
        y: &[f64],
        cost: &[f64],
        n_initial: usize,
        optimum: f64,
    ) -> Result<Self> {
        if !cost.is_empty() && cost.len() != y.len() {
            return Err(Error::dim("trace costs", y.len(), cost.len()));
        }
        if y.is_empty() || n_initial > y.len() {
            return Err(Error::invalid(
                "trace",
                "needs observations beyond the initial design",
            ));
        }
        let best = super::best_history(y, n_initial);
        let start = n_initial.max(1).min(y.len());
        let mut cum = vec![0.0];
        let mut c = 0.0;
        for i in start..y.len() {
            c += if cost.is_empty() { 1.0 } else { cost[i] };
            cum.push(c);
        }
        Self::new(best.iter().map(|b| optimum - b).collect(), cum)
    }

    /// Number of indices `T + 1`.
    pub fn len(&self) -> usize {
        self.simple_regret.len()
    }

    /// Whether the trace is empty (never, for a validated trace).
    pub fn is_empty(&self) -> bool {
        self.simple_regret.is_empty()
    }

    /// `R_λ(t)` for every `t`.
    pub fn cost_adjusted(&self, lambda: f64) -> Vec<f64> {
        self.simple_regret
            .iter()
            .zip(&self.cumulative_cost)
            .map(|(r, c)| cost_adjusted_regret(*r, *c, lambda))
            .collect()
    }
}

/// The hindsight-optimal stopping index `argmin_t R_λ(t)` (earliest among ties) and its value.
pub fn hindsight(trace: &Trace, lambda: f64) -> (usize, f64) {
    let r = trace.cost_adjusted(lambda);
    let mut best = (0, r[0]);
    for (t, &v) in r.iter().enumerate() {
        if v < best.1 {
            best = (t, v);
        }
    }
    best
}

/// The evaluation of one stop on one trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopOutcome {
    /// The stopping index (the last index if the rule never fired).
    pub index: usize,
    /// Whether the rule fired (false: it was capped at the end of the trace).
    pub fired: bool,
    /// Simple regret at the stop.
    pub simple_regret: f64,
    /// BO-phase cumulative cost at the stop.
    pub cumulative_cost: f64,
    /// `R_λ` at the stop.
    pub cost_adjusted_regret: f64,
    /// The hindsight-optimal index.
    pub hindsight_index: usize,
    /// `R_λ` at the hindsight-optimal index.
    pub hindsight_regret: f64,
    /// `R_λ(stop) − R_λ(hindsight) ≥ 0`.
    pub gap_to_hindsight: f64,
}

/// Evaluates stopping at `stop` (`None`: never fired, charged at the last index). Errors if
/// `stop` is beyond the trace or `lambda` is negative or not finite.
pub fn evaluate_stop(trace: &Trace, lambda: f64, stop: Option<usize>) -> Result<StopOutcome> {
    if !(lambda.is_finite() && lambda >= 0.0) {
        return Err(Error::invalid(
            "lambda",
            format!("must be finite and >= 0, got {lambda}"),
        ));
    }
    let last = trace.len() - 1;
    let index = stop.unwrap_or(last);
    if index > last {
        return Err(Error::invalid(
            "stop index",
            format!("{index} is beyond the trace's last index {last}"),
        ));
    }
    let (h, hr) = hindsight(trace, lambda);
    let r = cost_adjusted_regret(
        trace.simple_regret[index],
        trace.cumulative_cost[index],
        lambda,
    );
    Ok(StopOutcome {
        index,
        fired: stop.is_some(),
        simple_regret: trace.simple_regret[index],
        cumulative_cost: trace.cumulative_cost[index],
        cost_adjusted_regret: r,
        hindsight_index: h,
        hindsight_regret: hr,
        gap_to_hindsight: r - hr,
    })
}

/// Means (and the standard error of `R_λ`) over many runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of runs.
    pub runs: usize,
    /// Runs in which the rule never fired.
    pub never_fired: usize,
    /// Mean stopping index.
    pub mean_index: f64,
    /// Mean `R_λ` at the stop.
    pub mean_cost_adjusted_regret: f64,
    /// Standard error of that mean (`0` for one run).
    pub se_cost_adjusted_regret: f64,
    /// Mean gap to hindsight.
    pub mean_gap_to_hindsight: f64,
}

/// Summarizes outcomes of one rule over many runs (errors on an empty slice).
pub fn summarize(outcomes: &[StopOutcome]) -> Result<Summary> {
    let n = outcomes.len();
    if n == 0 {
        return Err(Error::invalid("outcomes", "is empty"));
    }
    let nf = n as f64;
    let mean = |f: fn(&StopOutcome) -> f64| outcomes.iter().map(f).sum::<f64>() / nf;
    let m = mean(|o| o.cost_adjusted_regret);
    let se = if n > 1 {
        (outcomes
            .iter()
            .map(|o| (o.cost_adjusted_regret - m).powi(2))
            .sum::<f64>()
            / (nf - 1.0)
            / nf)
            .sqrt()
    } else {
        0.0
    };
    Ok(Summary {
        runs: n,
        never_fired: outcomes.iter().filter(|o| !o.fired).count(),
        mean_index: mean(|o| o.index as f64),
        mean_cost_adjusted_regret: m,
        se_cost_adjusted_regret: se,
        mean_gap_to_hindsight: mean(|o| o.gap_to_hindsight),
    })
}

/// The result of [`replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The first index `t` at which the rule stopped (`None`: never).
    pub stop: Option<usize>,
    /// The decisions at `t = 0, …, stop` (or to the end).
    pub decisions: Vec<Decision>,
}

/// Replays `rule` (after [`StoppingRule::reset`]) over a recorded run: observations `x`
/// (`n × d`), `y`, `cost` (empty: unit costs), `n_initial` initial points, and `supplied[t]` =
/// the statistics recorded on the posterior of `D_t` for `t = 0, …, T` (`T = n − n_initial`; an
/// empty slice supplies nothing, which only suits rules that need no model). Checks
/// `t = 0, 1, …` in order and stops at the first stop decision.
pub fn replay(
    rule: &mut dyn StoppingRule,
    d: usize,
    x: &[f64],
    y: &[f64],
    cost: &[f64],
    n_initial: usize,
    supplied: &[SuppliedStatistics],
) -> Result<Replay> {
    let n = y.len();
    let start = n_initial.max(1);
    if n < start {
        return Err(Error::invalid(
            "replay",
            "fewer observations than the initial design",
        ));
    }
    let steps = n - start + 1;
    if !supplied.is_empty() && supplied.len() != steps {
        return Err(Error::dim(
            "replay supplied statistics",
            steps,
            supplied.len(),
        ));
    }
    if x.len() != n * d {
        return Err(Error::dim("replay x", n * d, x.len()));
    }
    if !cost.is_empty() && cost.len() != n {
        return Err(Error::dim("replay cost", n, cost.len()));
    }
    rule.reset();
    let mut decisions = Vec::new();
    for t in 0..steps {
        let m = start + t;
        let mut state = RunState::new(
            d,
            &x[..m * d],
            &y[..m],
            if cost.is_empty() { cost } else { &cost[..m] },
            n_initial,
        );
        if let Some(s) = supplied.get(t) {
            state.supplied = *s;
        }
        let dec = rule.check(&state)?;
        let stop = dec.is_stop();
        decisions.push(dec);
        if stop {
            return Ok(Replay {
                stop: Some(t),
                decisions,
            });
        }
    }
    Ok(Replay {
        stop: None,
        decisions,
    })
}

/// Several rules watching one run: check them all at every iteration (they do not influence the
/// run) and keep each rule's first stopping index, so one uncapped run evaluates every rule on
/// its own statistics. A rule that has stopped is not checked again.
pub struct RuleBank {
    rules: Vec<Box<dyn StoppingRule>>,
    stops: Vec<Option<usize>>,
}

impl RuleBank {
    /// A bank of fresh rules (each is [`StoppingRule::reset`]).
    pub fn new(mut rules: Vec<Box<dyn StoppingRule>>) -> Self {
        for r in &mut rules {
            r.reset();
        }
        let stops = vec![None; rules.len()];
        Self { rules, stops }
    }

    /// Checks every rule that has not stopped yet on `state`; returns their decisions (`None`
    /// for rules that had already stopped).
    pub fn check(&mut self, state: &RunState<'_>) -> Result<Vec<Option<Decision>>> {
        let t = state.iteration();
        let mut out = Vec::with_capacity(self.rules.len());
        for (rule, stop) in self.rules.iter_mut().zip(&mut self.stops) {
            if stop.is_some() {
                out.push(None);
                continue;
            }
            let d = rule.check(state)?;
            if d.is_stop() {
                *stop = Some(t);
            }
            out.push(Some(d));
        }
        Ok(out)
    }

    /// The rules' names.
    pub fn names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name()).collect()
    }

    /// Each rule's first stopping index (BO evaluations), `None` if it has not fired.
    pub fn stops(&self) -> &[Option<usize>] {
        &self.stops
    }

    /// Whether every rule has stopped.
    pub fn all_stopped(&self) -> bool {
        self.stops.iter().all(Option::is_some)
    }
}
