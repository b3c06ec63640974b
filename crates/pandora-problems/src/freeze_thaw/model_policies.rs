//! Policies on the learning-curve model: the cost-aware freeze-thaw Gittins index policy, and
//! PBGI and LogEIPC without pausing.
//!
//! # The model and the costs
//! All three fit `pandora_core::gp::learning_curve` (the freeze-thaw GP of Swersky et al.) to
//! the runs' reports, by MAP, warm-started from the previous fit, refitting every
//! `refit_every` decisions and only conditioning in between. Step `t` of configuration `k` is
//! priced `c_k w_t` (`w` the table's prior profile, e.g. proportional to the training-set
//! size); `c_k` is estimated from what was paid ([`ObservedCost`]): the geometric mean of
//! `cost/w_t` over the steps of `k` run so far, or, for a configuration not yet run, the
//! geometric mean over the configurations run so far (log-variance their spread). No policy
//! sees an unpaid cost.
//!
//! # Gittins (freeze-thaw)
//! Every configuration is a trial of `pandora_core::freeze_thaw` (one not yet run has no
//! reports: its index is that of starting it); the index of continuing each is
//! [`continue_indices`] (the Gittins index of its discretized posterior-mean martingale, step
//! costs `λ c_k w_t`); the policy continues or starts the largest, and stops when the best
//! complete run's final value is at least every index (stopping wins ties). Before the model
//! has data, `initial` random configurations are run one step each. A configuration is run
//! once (its run is paused and resumed, never restarted).
//!
//! # PBGI and LogEIPC without pausing
//! `initial` random configurations are trained to the end; then, each time a run completes,
//! the next configuration is the one not yet run maximizing, on the model's prediction of
//! its final value `N(μ, σ²)` (latent curve at `s_T`, plus noise), PBGI: `g` solving
//! `E(f − g)⁺ = λ c_k Σ_t w_t` (`pandora_core::acquisition::pbgi::pbgi_index`), or LogEIPC:
//! `log EI(best) − log(c_k Σ_t w_t)` with `best` the largest final value so far. It is trained
//! to the end. Neither stops before the budget (or the table) is spent.
//!
//! # Degenerate cases
//! A model fit that fails (e.g. identical values everywhere) is an error naming the policy.
//! Ties go to the lowest configuration.

use super::{Action, Policy, View, permutation, rng};
use crate::error::ProblemError;
use pandora_core::acquisition::CostModel;
use pandora_core::acquisition::cost::LogCostBatch;
use pandora_core::acquisition::pbgi::pbgi_index;
use pandora_core::freeze_thaw::{
    Schedule, ThawOptions, TrialState, continue_indices, observed_runs,
};
use pandora_core::gp::learning_curve::{LcFitOptions, LcParams, LearningCurveGp};
use pandora_core::math::log_h;

/// Settings shared by the model-based policies.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    /// `λ`: value units per cost unit.
    pub lambda: f64,
    /// Random configurations before the model (≥ 1).
    pub initial: usize,
    /// Refit the hyperparameters every this many decisions (≥ 1); condition in between.
    pub refit_every: usize,
    /// Grid values per step of the Gittins chains (odd).
    pub grid_points: usize,
    /// Random restarts of each fit.
    pub fit_restarts: usize,
}

/// The per-configuration cost `c_k` estimated from what was paid (module doc).
#[derive(Debug, Clone)]
pub struct ObservedCost {
    x: Vec<Vec<f64>>,
    /// `Some(mean log(cost/w))` per configuration that has run.
    log_c: Vec<Option<f64>>,
    prior: (f64, f64),
}

impl ObservedCost {
    /// From the runs in `view`.
    pub fn new(view: &View<'_>) -> Self {
        let w = view.weights();
        let mut sums = vec![(0.0, 0usize); view.configs()];
        for run in view.runs {
            for (t, c) in run.costs.iter().enumerate() {
                sums[run.config].0 += (c / w[t]).ln();
                sums[run.config].1 += 1;
            }
        }
        let log_c: Vec<Option<f64>> = sums
            .iter()
            .map(|&(s, n)| (n > 0).then(|| s / n as f64))
            .collect();
        let seen: Vec<f64> = log_c.iter().flatten().copied().collect();
        let prior = if seen.is_empty() {
            (0.0, 0.0)
        } else {
            let m = seen.iter().sum::<f64>() / seen.len() as f64;
            let v = seen.iter().map(|l| (l - m).powi(2)).sum::<f64>() / seen.len() as f64;
            (m, v)
        };
        Self {
            x: view.x().to_vec(),
            log_c,
            prior,
        }
    }

    /// `(mean, variance)` of `log c_k`.
    pub fn log_cost_of(&self, k: usize) -> (f64, f64) {
        self.log_c[k].map_or(self.prior, |m| (m, 0.0))
    }
}

impl CostModel for ObservedCost {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> pandora_core::Result<LogCostBatch> {
        let rows: Vec<&[f64]> = xs.chunks(d.max(1)).collect();
        let mut out = LogCostBatch {
            mean: Vec::with_capacity(rows.len()),
            var: Vec::with_capacity(rows.len()),
            mean_grad: if grad {
                vec![0.0; xs.len()]
            } else {
                Vec::new()
            },
            var_grad: if grad {
                vec![0.0; xs.len()]
            } else {
                Vec::new()
            },
        };
        for row in rows {
            let (m, v) = self
                .x
                .iter()
                .position(|x| x.as_slice() == row)
                .map_or(self.prior, |k| self.log_cost_of(k));
            out.mean.push(m);
            out.var.push(v);
        }
        Ok(out)
    }
}

/// The model fit with its warm start and refit cadence.
#[derive(Debug, Clone)]
struct Fitter {
    settings: ModelSettings,
    seed: u64,
    decisions: usize,
    last: Option<LearningCurveGp>,
}

impl Fitter {
    fn model(
        &mut self,
        trials: &[TrialState],
        schedule: &Schedule,
    ) -> Result<&LearningCurveGp, ProblemError> {
        let err = |e: pandora_core::Error| ProblemError(format!("learning-curve model: {e}"));
        let (data, _) = observed_runs(trials, schedule).map_err(err)?;
        let refit = self
            .decisions
            .is_multiple_of(self.settings.refit_every.max(1));
        self.decisions += 1;
        let model = match &self.last {
            Some(m) if !refit => m.condition(data).map_err(err)?,
            last => {
                let warm: Option<LcParams> = last.as_ref().map(|m| m.params().clone());
                let fit = LcFitOptions {
                    restarts: self.settings.fit_restarts,
                    seed: self.seed ^ self.decisions as u64,
                    ..LcFitOptions::default()
                };
                LearningCurveGp::fit(data, &fit, warm.as_ref()).map_err(err)?
            }
        };
        Ok(self.last.insert(model))
    }
}

fn schedule_of(view: &View<'_>) -> Result<Schedule, ProblemError> {
    Schedule::new(view.positions().to_vec(), view.weights().to_vec())
        .map_err(|e| ProblemError(format!("schedule: {e}")))
}

/// The configurations as trials: each configuration's (only) run, or no reports.
fn trials_of(view: &View<'_>) -> Vec<TrialState> {
    let mut trials: Vec<TrialState> = view
        .x()
        .iter()
        .map(|x| TrialState {
            x: x.clone(),
            values: Vec::new(),
            busy: false,
        })
        .collect();
    for run in view.runs {
        trials[run.config].values = run.values.clone();
    }
    trials
}

/// The cost-aware freeze-thaw Gittins index policy on a table (module doc).
#[derive(Debug, Clone)]
pub struct GittinsPolicy {
    fitter: Fitter,
    order: Vec<usize>,
    run_of: Vec<Option<usize>>,
}

impl GittinsPolicy {
    /// For settings and a seed.
    pub fn new(settings: ModelSettings, seed: u64) -> Self {
        Self {
            fitter: Fitter {
                settings,
                seed,
                decisions: 0,
                last: None,
            },
            order: Vec::new(),
            run_of: Vec::new(),
        }
    }

    fn act(&mut self, view: &View<'_>, k: usize) -> Action {
        match self.run_of[k] {
            Some(r) => Action::Continue(r),
            None => {
                self.run_of[k] = Some(view.runs.len());
                Action::Start(k)
            }
        }
    }
}

impl Policy for GittinsPolicy {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        let s = self.fitter.settings.clone();
        if self.order.is_empty() {
            self.order = permutation(view.configs(), &mut rng(self.fitter.seed));
            self.run_of = vec![None; view.configs()];
        }
        if view.runs.len() < s.initial.min(view.configs()) {
            let k = self.order[view.runs.len()];
            return Ok(self.act(view, k));
        }
        let schedule = schedule_of(view)?;
        let trials = trials_of(view);
        let cost = ObservedCost::new(view);
        let mut opts = ThawOptions::new(s.lambda);
        opts.grid_points = s.grid_points;
        let model = self.fitter.model(&trials, &schedule)?;
        let indices = continue_indices(model.posterior(), &trials, &schedule, Some(&cost), &opts)
            .map_err(|e| ProblemError(format!("gittins: {e}")))?;
        let best = indices
            .iter()
            .enumerate()
            .filter_map(|(k, g)| g.map(|g| (k, g)))
            .fold(None::<(usize, f64)>, |b, (k, g)| match b {
                Some((_, bg)) if bg >= g => b,
                _ => Some((k, g)),
            });
        let fallback = trials
            .iter()
            .filter(|t| t.values.len() == view.steps())
            .map(|t| t.values[view.steps() - 1])
            .max_by(f64::total_cmp);
        match best {
            Some((k, g)) if fallback.is_none_or(|y| y < g) => Ok(self.act(view, k)),
            _ => Ok(Action::Stop),
        }
    }
}

/// Which acquisition a [`NoPausePolicy`] maximizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPauseRule {
    /// Pandora's Box Gittins index with the whole run's cost.
    Pbgi,
    /// Log expected improvement per unit of the whole run's cost.
    LogEipc,
}

/// PBGI or LogEIPC over the table's configurations, every started run trained to the end.
#[derive(Debug, Clone)]
pub struct NoPausePolicy {
    rule: NoPauseRule,
    fitter: Fitter,
    order: Vec<usize>,
}

impl NoPausePolicy {
    /// For a rule, settings and a seed.
    pub fn new(rule: NoPauseRule, settings: ModelSettings, seed: u64) -> Self {
        Self {
            rule,
            fitter: Fitter {
                settings,
                seed,
                decisions: 0,
                last: None,
            },
            order: Vec::new(),
        }
    }

    /// The acquisition of a configuration with predicted final value `N(mu, var)` and log
    /// cost of the whole run `log_c`.
    fn score(rule: NoPauseRule, lambda: f64, mu: f64, var: f64, log_c: f64, best: f64) -> f64 {
        let sigma = var.max(0.0).sqrt();
        match rule {
            NoPauseRule::Pbgi => pbgi_index(mu, sigma, lambda.ln() + log_c).g,
            NoPauseRule::LogEipc if sigma > 0.0 => sigma.ln() + log_h((mu - best) / sigma) - log_c,
            NoPauseRule::LogEipc => (mu - best).max(0.0).ln() - log_c,
        }
    }
}

impl Policy for NoPausePolicy {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        if self.order.is_empty() {
            self.order = permutation(view.configs(), &mut rng(self.fitter.seed));
        }
        if let Some(r) = view.runs.len().checked_sub(1)
            && !view.complete(r)
        {
            return Ok(Action::Continue(r));
        }
        let started: Vec<bool> = (0..view.configs())
            .map(|k| view.runs.iter().any(|r| r.config == k))
            .collect();
        let n_init = self.fitter.settings.initial.max(1);
        if view.runs.len() < n_init.min(view.configs()) {
            return Ok(Action::Start(self.order[view.runs.len()]));
        }
        if started.iter().all(|s| *s) {
            return Ok(Action::Stop);
        }
        let schedule = schedule_of(view)?;
        let trials = trials_of(view);
        let cost = ObservedCost::new(view);
        let last = [view.positions()[view.steps() - 1]];
        let best = trials
            .iter()
            .filter(|t| t.values.len() == view.steps())
            .map(|t| t.values[view.steps() - 1])
            .fold(f64::NEG_INFINITY, f64::max);
        let log_w: f64 = view.weights().iter().sum::<f64>().ln();
        let (rule, lambda) = (self.rule, self.fitter.settings.lambda);
        let model = self.fitter.model(&trials, &schedule)?;
        let noise = model.params().noise;
        let mut choice: Option<(usize, f64)> = None;
        for k in (0..view.configs()).filter(|&k| !started[k]) {
            let p = model
                .predict(&view.x()[k], None, &last)
                .map_err(|e| ProblemError(format!("{rule:?}: {e}")))?;
            let (lc, lv) = cost.log_cost_of(k);
            let s = Self::score(
                rule,
                lambda,
                p.mean[0],
                p.cov[0] + noise,
                lc + 0.5 * lv + log_w,
                best,
            );
            if choice.is_none_or(|(_, b)| s > b) {
                choice = Some((k, s));
            }
        }
        Ok(choice.map_or(Action::Stop, |(k, _)| Action::Start(k)))
    }
}
