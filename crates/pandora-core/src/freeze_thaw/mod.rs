//! Cost-aware freeze-thaw, the policy: at each decision, continue the paused run of largest
//! Gittins index, start the new configuration of largest index, or stop, all on one scale.
//!
//! # Setting
//! Training runs proceed through the steps of a [`Schedule`] (epochs, or growing training-set
//! sizes) at positions `s_1 < … < s_T` on the learning-curve model's time axis; step `t` of
//! configuration `x` costs `c(x)·w_t` (a per-configuration cost `c`, known or modelled in log
//! space as everywhere in Pandora, times a known profile `w`). A run may be paused after any step
//! and resumed later (freeze-thaw); its value can be kept once it is trained to `s_T`. The goal
//! is the cost-aware one of PBGI: maximize the value kept minus `λ` times the cost spent. The
//! exact theory (discrete runs as Markov chains, the index policy optimal, verified against
//! dynamic programming) is [`crate::gittins::freeze_thaw`]; this module drives it with the
//! learning-curve Gaussian process of [`crate::gp::learning_curve`].
//!
//! # A run's index under the Gaussian model
//! With the model's hyperparameters fixed, the latent curve of a run at its remaining steps is
//! Gaussian (conditioned on every run's reports, its own included), so the posterior mean of its
//! final value `f(s_T)` is a Gaussian martingale whose increments have variances known in
//! advance ([`final_value_drops`]: one Cholesky factor of the reports' covariance). That
//! martingale, discretized on `grid_points` values per step with the step costs `λ c(x) w_t`, is
//! a [`CurveRun::gaussian`] chain, and its Gittins index at the current state is computed
//! exactly on the discretized chain ([`CurveRun::current_index`]: Newton's method on its local
//! MDP, a few linear passes over the chain). A run that has not reported yet has the model's prior curve
//! for `x` (its asymptote from the GP over configurations).
//!
//! # The new configuration
//! "Start `x`" is a chain of the same kind for every `x` of the unit cube. Its index is not
//! smooth in `x` (a discretized chain), so the candidate is found in two stages:
//! 1. maximize a smooth proxy by multi-start L-BFGS-B: the Pandora's Box Gittins index of the
//!    final value `f(x, s_T)` with the cost of the whole run, `λ c(x) Σ_t w_t` (the box "train to
//!    the end, then see the value"; PBGI with the model of [`LcPosterior::at_step`]);
//! 2. re-score the `rescore` best distinct restart end points by the exact chain index, which
//!    also credits the option to drop the run early, and keep the largest.
//!
//! # The decision
//! `fallback` is the best value of a complete run (none before one completes). The action is
//! the largest of the indices of every run that can be continued (not busy on a worker, not
//! complete) and of the new configuration: [`ThawAction::Continue`] or [`ThawAction::Start`];
//! if the fallback is at least every index, [`ThawAction::Stop`]. This is the Gittins index
//! policy of the discretized instance, optimal for it (the Markov chain selection theorem), and
//! its stopping decision is the PBGI stopping rule (stop when no index exceeds the best value
//! found) carried to runs that can be paused. With the Gaussian model the policy is a heuristic
//! (the tutorial's caveat): hyperparameters are refitted as reports arrive, and a run's future
//! reports also inform the asymptotes of the others, which each run's own chain ignores.
//!
//! Ties go to the lowest-numbered run, then to starting; stopping wins every tie (as in
//! [`crate::gittins::freeze_thaw`]). Everything is deterministic for a seed (the model fit and
//! the multi-start), so a decision can be replayed from the trials and the seed.
//!
//! # Accuracy and cost
//! A chain has `1 + T·grid_points` states; with the default 101 points an index is within about
//! `10⁻³` of the continuous martingale's standard deviation (tested against PBGI's closed form
//! in the one-step case). Cost per decision: one model fit, one `O(T³)` factorization and one
//! chain per run and per re-scored candidate, and the proxy's multi-start maximization.
//!
//! # Degenerate cases
//! - No trial has reported yet: an error (start with an initial design; the model needs data).
//! - No complete run yet: no fallback, so the largest index is taken even if it is negative (a
//!   study without a result goes on; budgets bound it).
//! - Zero costs (`λ = 0` or `c ≡ 0`) are refused: the index is then unbounded (train everything).
//!
//! # References
//! - Xie, Astudillo, Frazier, Scully, Terenin, "Cost-aware Bayesian optimization via the
//!   Pandora's Box Gittins Index", NeurIPS 2024 (PBGI and its stopping rule).
//! - The Gittins index tutorial slides, "Back to our motivating application" (cost-aware
//!   freeze-thaw as Markov chain selection).
//! - Swersky, Snoek, Adams, "Freeze-Thaw Bayesian Optimization", arXiv:1406.3896 (2014).

mod drops;
mod start;
#[cfg(test)]
mod tests;

pub use drops::final_value_drops;

use crate::acquisition::CostModel;
use crate::error::{Error, Result};
use crate::gittins::freeze_thaw::{CurveRun, check_grid};
use crate::gp::learning_curve::{LcFitOptions, LcParams, LcPosterior, LearningCurveGp, Run};
use crate::optim::multistart::MultiStartOptions;
use serde::{Deserialize, Serialize};

/// The steps of a run: positions on the model's time axis and the relative cost of each
/// (validated on construction, so no serde derive that could bypass [`Schedule::new`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    positions: Vec<f64>,
    weights: Vec<f64>,
}

impl Schedule {
    /// Epochs `1, 2, …, max_steps`, each of relative cost 1.
    pub fn epochs(max_steps: usize) -> Result<Self> {
        Self::new(
            (1..=max_steps).map(|t| t as f64).collect(),
            vec![1.0; max_steps],
        )
    }

    /// Steps at `positions` (finite, `≥ 0`, strictly increasing; at least one), step `t`
    /// costing `weights[t]` times the configuration's cost (finite, `> 0`).
    pub fn new(positions: Vec<f64>, weights: Vec<f64>) -> Result<Self> {
        if positions.is_empty() {
            return Err(Error::invalid(
                "schedule.positions",
                "needs at least one step",
            ));
        }
        if weights.len() != positions.len() {
            return Err(Error::dim(
                "schedule.weights",
                positions.len(),
                weights.len(),
            ));
        }
        for (t, &p) in positions.iter().enumerate() {
            if !(p.is_finite() && p >= 0.0) || (t > 0 && p <= positions[t - 1]) {
                return Err(Error::invalid(
                    format!("schedule.positions[{t}]"),
                    "must be finite, ≥ 0 and larger than the one before",
                ));
            }
        }
        if let Some(t) = weights.iter().position(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(Error::invalid(
                format!("schedule.weights[{t}]"),
                "must be finite and > 0",
            ));
        }
        Ok(Self { positions, weights })
    }

    /// Number of steps `T`.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Always false: a schedule has at least one step.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The positions `s_1..s_T`.
    pub fn positions(&self) -> &[f64] {
        &self.positions
    }

    /// The relative step costs `w_1..w_T`.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
}

/// A trial as the policy sees it: its configuration, the values it reported at the first
/// `values.len()` steps of the schedule, and whether a worker holds it now.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialState {
    /// The configuration, in the unit cube.
    pub x: Vec<f64>,
    /// Reported values (to maximize) at the schedule's first steps, in order.
    pub values: Vec<f64>,
    /// A worker is running it: it cannot be continued by this decision.
    pub busy: bool,
}

/// Settings of [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub struct ThawOptions {
    /// The cost-scaling factor `λ > 0` (value units per cost unit).
    pub lambda: f64,
    /// Grid values per step of each run's chain (odd, 3 to 1001; `T·grid_points` at most
    /// [`MAX_RUN_NODES`](crate::gittins::freeze_thaw::MAX_RUN_NODES)). Default 101.
    pub grid_points: usize,
    /// Restart end points of the proxy maximization re-scored by the exact chain index (at
    /// least 1). Default 5.
    pub rescore: usize,
    /// The proxy's multi-start maximization.
    pub multistart: MultiStartOptions,
    /// The learning-curve model's fit.
    pub fit: LcFitOptions,
}

impl ThawOptions {
    /// Defaults for a given `λ`.
    pub fn new(lambda: f64) -> Self {
        Self {
            lambda,
            grid_points: 101,
            rescore: 5,
            multistart: MultiStartOptions::default(),
            fit: LcFitOptions::default(),
        }
    }
}

/// What the policy does next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ThawAction {
    /// Start a new run of configuration `x`.
    Start {
        /// The configuration, in the unit cube.
        x: Vec<f64>,
    },
    /// Run step `step` (1-based: the trial has reported `step − 1` values) of trial `trial`.
    Continue {
        /// The trial, an index into the trials passed to [`decide`].
        trial: usize,
        /// The step to run next.
        step: usize,
    },
    /// Stop: no run's index exceeds the best complete run's value.
    Stop,
}

/// The best new configuration found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartCandidate {
    /// The configuration.
    pub x: Vec<f64>,
    /// Its exact chain index.
    pub index: f64,
    /// Its proxy value (PBGI of the final value with the whole run's cost).
    pub proxy: f64,
}

/// A decision and everything it compared.
#[derive(Debug, Clone, PartialEq)]
pub struct ThawDecision {
    /// The action.
    pub action: ThawAction,
    /// The index of continuing each trial (`None`: busy or complete).
    pub indices: Vec<Option<f64>>,
    /// The best new configuration.
    pub start: StartCandidate,
    /// The best complete run's value, if any.
    pub fallback: Option<f64>,
    /// The model's hyperparameters (the warm start of the next decision).
    pub params: LcParams,
}

/// Fits the learning-curve model to the trials' reports (warm-started from `warm`, e.g. the
/// previous decision's parameters) and decides (see the module doc). `cost` is the
/// per-configuration cost `c(x)` (`None`: 1 per unit of step weight).
pub fn decide(
    trials: &[TrialState],
    schedule: &Schedule,
    cost: Option<&dyn CostModel>,
    opts: &ThawOptions,
    warm: Option<&LcParams>,
    seed: u64,
) -> Result<ThawDecision> {
    let (data, _) = observed_runs(trials, schedule)?;
    let mut fit = opts.fit.clone();
    fit.seed = seed;
    let model = LearningCurveGp::fit(data, &fit, warm)?;
    decide_on(model.posterior(), trials, schedule, cost, opts, seed)
}

/// [`decide`] with a model already conditioned on exactly the trials' reports, in the order of
/// [`observed_runs`] (no refit).
pub fn decide_on(
    model: &LcPosterior,
    trials: &[TrialState],
    schedule: &Schedule,
    cost: Option<&dyn CostModel>,
    opts: &ThawOptions,
    seed: u64,
) -> Result<ThawDecision> {
    check_options(opts, schedule)?;
    let (data, run_of) = observed_runs(trials, schedule)?;
    if model.runs().len() != data.len() {
        return Err(Error::dim("model runs", data.len(), model.runs().len()));
    }
    let indices = indices_of(model, trials, &run_of, schedule, cost, opts)?;
    let pricing = Pricing::new(schedule, cost, opts.lambda, model.params().asymptote.dim());
    let start = start::best_new(model, &pricing, opts, seed)?;
    let fallback = trials
        .iter()
        .filter(|t| t.values.len() == schedule.len())
        .map(|t| t.values[schedule.len() - 1])
        .max_by(f64::total_cmp);
    let action = choose(&indices, &start, fallback, trials);
    Ok(ThawDecision {
        action,
        indices,
        start,
        fallback,
        params: model.params().clone(),
    })
}

/// The index of continuing each trial under `model` (conditioned on exactly the trials'
/// reports, in the order of [`observed_runs`]), without searching for a new configuration:
/// `None` for a busy or complete trial. A trial without reports is a run of its configuration
/// that has not started: its index is that of starting it. A caller choosing among a finite
/// set of configurations (a benchmark table) passes every configuration as a trial and takes
/// the largest index (the decision of [`decide_on`] restricted to that set).
pub fn continue_indices(
    model: &LcPosterior,
    trials: &[TrialState],
    schedule: &Schedule,
    cost: Option<&dyn CostModel>,
    opts: &ThawOptions,
) -> Result<Vec<Option<f64>>> {
    check_options(opts, schedule)?;
    let (data, run_of) = observed_runs(trials, schedule)?;
    if model.runs().len() != data.len() {
        return Err(Error::dim("model runs", data.len(), model.runs().len()));
    }
    indices_of(model, trials, &run_of, schedule, cost, opts)
}

fn indices_of(
    model: &LcPosterior,
    trials: &[TrialState],
    run_of: &[Option<usize>],
    schedule: &Schedule,
    cost: Option<&dyn CostModel>,
    opts: &ThawOptions,
) -> Result<Vec<Option<f64>>> {
    let pricing = Pricing::new(schedule, cost, opts.lambda, model.params().asymptote.dim());
    let mut indices = Vec::with_capacity(trials.len());
    for (k, trial) in trials.iter().enumerate() {
        let done = trial.values.len();
        indices.push(if trial.busy || done == schedule.len() {
            None
        } else {
            let prediction = match run_of[k] {
                Some(n) => model.predict_run(n, &schedule.positions[done..])?,
                None => model.predict(&trial.x, None, &schedule.positions[done..])?,
            };
            let chain = pricing.chain(&trial.x, done, &prediction, model, opts, done > 0)?;
            Some(chain.current_index())
        });
    }
    Ok(indices)
}

/// The model's data: one run per trial that has reported (`Run` steps at the schedule's first
/// positions), and for each trial its run's index in that list.
pub fn observed_runs(
    trials: &[TrialState],
    schedule: &Schedule,
) -> Result<(Vec<Run>, Vec<Option<usize>>)> {
    let d = trials.first().map(|t| t.x.len()).unwrap_or(0);
    let mut data = Vec::new();
    let mut run_of = Vec::with_capacity(trials.len());
    for (k, t) in trials.iter().enumerate() {
        check_trial(t, d, schedule.len()).map_err(|e| e.within(format_args!("trials[{k}]")))?;
        if t.values.is_empty() {
            run_of.push(None);
            continue;
        }
        run_of.push(Some(data.len()));
        data.push(Run {
            x: t.x.clone(),
            steps: schedule.positions[..t.values.len()].to_vec(),
            values: t.values.clone(),
        });
    }
    if data.is_empty() {
        return Err(Error::invalid(
            "trials",
            "no trial has reported a value yet: start with an initial design",
        ));
    }
    Ok((data, run_of))
}

fn check_trial(t: &TrialState, d: usize, steps: usize) -> Result<()> {
    if t.x.len() != d || d == 0 {
        return Err(Error::dim("x", d.max(1), t.x.len()));
    }
    if let Some(i) = t.x.iter().position(|v| !(0.0..=1.0).contains(v)) {
        return Err(Error::invalid(format!("x[{i}]"), "must be in [0, 1]"));
    }
    if t.values.len() > steps {
        return Err(Error::invalid(
            "values",
            format!("{} values for a schedule of {steps} steps", t.values.len()),
        ));
    }
    if let Some(i) = t.values.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("values[{i}]"), "must be finite"));
    }
    Ok(())
}

fn check_options(opts: &ThawOptions, schedule: &Schedule) -> Result<()> {
    if !(opts.lambda.is_finite() && opts.lambda > 0.0) {
        return Err(Error::invalid("lambda", "must be finite and > 0"));
    }
    if opts.rescore == 0 {
        return Err(Error::invalid("rescore", "must be at least 1"));
    }
    check_grid("grid_points", schedule.len(), opts.grid_points)
}

/// The largest index, or stop (see the module doc for the ties).
fn choose(
    indices: &[Option<f64>],
    start: &StartCandidate,
    fallback: Option<f64>,
    trials: &[TrialState],
) -> ThawAction {
    let mut best = (start.index, None);
    for (k, g) in indices.iter().enumerate() {
        if let Some(g) = *g
            && (g >= best.0 && best.1.is_none() || g > best.0)
        {
            best = (g, Some(k));
        }
    }
    if fallback.is_some_and(|y| y >= best.0) {
        return ThawAction::Stop;
    }
    match best.1 {
        Some(trial) => ThawAction::Continue {
            trial,
            step: trials[trial].values.len() + 1,
        },
        None => ThawAction::Start { x: start.x.clone() },
    }
}

/// Step costs in value units: `λ E[c(x)] w_t`.
pub(crate) struct Pricing<'a> {
    schedule: &'a Schedule,
    cost: Option<&'a dyn CostModel>,
    lambda: f64,
    d: usize,
}

impl<'a> Pricing<'a> {
    fn new(schedule: &'a Schedule, cost: Option<&'a dyn CostModel>, lambda: f64, d: usize) -> Self {
        Self {
            schedule,
            cost,
            lambda,
            d,
        }
    }

    /// `E[c(x)] = exp(m + v/2)` of the log-cost model (1 without one).
    fn config_cost(&self, x: &[f64]) -> Result<f64> {
        let Some(cost) = self.cost else {
            return Ok(1.0);
        };
        let lc = cost.log_cost(x, self.d, false)?;
        let c = (lc.mean[0] + 0.5 * lc.var[0]).exp();
        if !(c.is_finite() && c > 0.0) {
            return Err(Error::invalid(
                "cost",
                format!("the cost model gives {c} at x = {x:?}: costs must be finite and > 0"),
            ));
        }
        Ok(c)
    }

    /// The chain of a run of `x` that has done `done` steps, from its remaining curve.
    fn chain(
        &self,
        x: &[f64],
        done: usize,
        curve: &crate::gp::learning_curve::CurvePrediction,
        model: &LcPosterior,
        opts: &ThawOptions,
        started: bool,
    ) -> Result<CurveRun> {
        let k = curve.mean.len();
        let drops = final_value_drops(&curve.cov, k, model.params().noise)?;
        let c = self.lambda * self.config_cost(x)?;
        let costs: Vec<f64> = self.schedule.weights[done..]
            .iter()
            .map(|w| c * w)
            .collect();
        CurveRun::gaussian(curve.mean[k - 1], &drops, &costs, opts.grid_points, started)
    }
}
