//! The ask/tell loop over any storage.
//!
//! `ask` runs under the storage's lock: it reads every trial, conditions the model on the pending
//! (running) ones, asks `pandora_core::policy` for the next point, snaps it to the search space and
//! stores it as a running trial with its typed [`DecisionRecord`]; or it says why the study is
//! finished ([`Finished`], a value, never an error). `tell` records the outcome durably. PBGI-D's
//! λ is not stored as mutable state: it is replayed from the completed trials' records
//! ([`pandora_core::run::replay_pbgi_d`]: λ0 divided once for every model-phase trial whose index
//! fell below the best value observed including that trial), so a study resumes exactly where it
//! stopped. What an ask carries to the next (the warm start, B-MS-EI's carry, the automatic λ,
//! the stop) is the typed [`StudyState`].

use crate::config::{CostKind, StudyConfig};
use crate::error::{Error, Result};
use crate::space::SearchSpace;
use crate::storage::Storage;
use crate::trial::{Decided, NewTrial, Outcome, Told, Trial, TrialState};
use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, LinearMeanCost};
use pandora_core::gp::GpParams;
use pandora_core::gp::fit::{FitOptions, NoiseSpec};
use pandora_core::policy::{
    CostSetting, History, Phase, Proposal, StepConfig, StepContext, design_point, propose,
};
use pandora_core::run::record::{
    AutoLambda, BmseiSummary, DecisionRecord, HyperRecord, RecordKind, StepRecord, StopRecord,
    StoppingCheck, StudyState,
};
use pandora_core::run::{DecayStep, replay_pbgi_d};
use pandora_core::stopping::budget::{
    UEstimatorOptions, UReference, estimate_u, lambda_from_budget,
};
use pandora_core::stopping::step::{models_from_proposal, supplied_from_proposal};
use pandora_core::stopping::{CostInfo, Decision, RunState, StoppingRule};
use serde::Deserialize;
use serde_json::json;

pub use crate::trial::Ask;
pub use pandora_core::run::Finished;

/// A trial just told ([`Study::tell`]), and whether its outcome came late.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The trial as stored now (complete or failed).
    pub trial: Trial,
    /// Set when the trial had been abandoned before its outcome arrived.
    pub late: Option<LateOutcome>,
}

/// A late outcome: the trial had been abandoned (no heartbeat before the timeout), so its share
/// of the budget may have gone to other trials meanwhile. The outcome and its cost are recorded
/// all the same (the evaluation was paid for): the budget accounting stays honest, and spending
/// may now exceed the budget, which [`LateOutcome`]'s message says.
#[derive(Debug, Clone, PartialEq)]
pub struct LateOutcome {
    /// The trial.
    pub number: u64,
    /// Its cost, as told.
    pub cost: Option<f64>,
    /// The cost counted toward the budget now, this trial's included.
    pub spent: f64,
    /// The budget, if the study has one.
    pub total: Option<f64>,
}

impl LateOutcome {
    /// Whether spending now exceeds the budget.
    pub fn over_budget(&self) -> bool {
        self.total.is_some_and(|t| self.spent > t * (1.0 + 1e-12))
    }
}

impl std::fmt::Display for LateOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "trial {} had been abandoned (no heartbeat) when its outcome arrived; the outcome is \
             recorded",
            self.number
        )?;
        if let Some(c) = self.cost {
            write!(f, " and its cost {c} counts")?;
        }
        match self.total {
            Some(t) if self.over_budget() => write!(
                f,
                ": {} spent of the budget {t}, over it by {}",
                self.spent,
                self.spent - t
            ),
            Some(t) => write!(f, ": {} spent of the budget {t}", self.spent),
            None => Ok(()),
        }
    }
}

/// A summary of a study.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Number of trials by state: running, complete, failed, abandoned.
    pub counts: [usize; 4],
    /// Cost of all evaluated trials.
    pub total_cost: f64,
    /// Cost counted toward the budget.
    pub budget_spent: f64,
    /// The best complete trial.
    pub best: Option<Trial>,
    /// PBGI-D's current λ (or the fixed λ).
    pub lambda: Option<f64>,
    /// The stopping rule's last check (at the stop if it fired), if a rule is configured and has
    /// been checked.
    pub stopping: Option<StoppingStatus>,
    /// Why the study is finished, in words (`None` while it goes on): the [`Finished`] text,
    /// e.g. `"budget exhausted: spent 149.2 of 150.0"` or `"stopping rule fired: pbgi: ..."`.
    pub stop_reason: Option<String>,
    /// Why the study is finished: the stopping rule's stop, or the budget or `max_trials` that
    /// ended the last ask (while the configuration still imposes it).
    pub finished: Option<Finished>,
}

impl Summary {
    /// The summary as JSON, as `pandora status` prints it and the Python package reads it:
    /// `running`, `complete`, `failed`, `abandoned`, `total_cost`, `budget_spent`, `lambda`,
    /// `best` (`{number, objective, params}` or null), `stopping` (`{rule, lambda, statistic,
    /// value, threshold, iteration, fired}` or null; a value not available yet is null),
    /// `stop_reason` (why the study is finished, in words, or null) and `finished` (the same as
    /// data: `{"budget": {spent, total}}`, `{"max_trials": N}`, `{"stopped": {rule, reason}}`,
    /// or null).
    pub fn to_json(&self) -> serde_json::Value {
        let finite = |v: f64| v.is_finite().then_some(v);
        json!({
            "running": self.counts[0],
            "complete": self.counts[1],
            "failed": self.counts[2],
            "abandoned": self.counts[3],
            "total_cost": self.total_cost,
            "budget_spent": self.budget_spent,
            "lambda": self.lambda,
            "best": self.best.as_ref().map(|b| json!({
                "number": b.number, "objective": b.objective, "params": b.params,
            })),
            "stopping": self.stopping.as_ref().map(|st| json!({
                "rule": st.rule,
                "lambda": st.lambda,
                "statistic": st.statistic,
                "value": finite(st.value),
                "threshold": finite(st.threshold),
                "iteration": st.iteration,
                "fired": st.fired,
            })),
            "stop_reason": self.stop_reason,
            "finished": self.finished,
        })
    }
}

/// The last check of a study's stopping rule, for status displays.
#[derive(Debug, Clone, PartialEq)]
pub struct StoppingStatus {
    /// The rule (`"pbgi"`).
    pub rule: String,
    /// The rule's λ.
    pub lambda: f64,
    /// The headline statistic's name (`"max_log_eipc"`, or `"log_mean_eipc_window"` with a
    /// moving-average window).
    pub statistic: String,
    /// Its value (NaN until available, e.g. before a window is full).
    pub value: f64,
    /// Its threshold (`log λ`).
    pub threshold: f64,
    /// BO evaluations at the check.
    pub iteration: usize,
    /// Whether the rule fired at this check.
    pub fired: bool,
}

impl From<&StoppingCheck> for StoppingStatus {
    fn from(c: &StoppingCheck) -> Self {
        Self {
            rule: c.rule.clone(),
            lambda: c.lambda,
            statistic: c.statistic.clone().unwrap_or_default(),
            value: c.value.unwrap_or(f64::NAN),
            threshold: c.threshold.unwrap_or(f64::NAN),
            iteration: c.iteration,
            fired: c.fired,
        }
    }
}

/// A study bound to a storage.
pub struct Study {
    storage: Box<dyn Storage>,
    config: StudyConfig,
    space: SearchSpace,
}

impl Study {
    /// Opens (creating if needed) the study of `config` in `storage`. If the study exists, its
    /// stored configuration must describe the same search space and direction.
    pub fn open(config: StudyConfig, mut storage: Box<dyn Storage>) -> Result<Self> {
        config.validate()?;
        // The stored copy is readable by everyone with access to the database: no passwords.
        let mut stored_config = config.clone();
        stored_config.study.storage = crate::config::redact_url(&config.study.storage);
        let json = serde_json::to_string(&stored_config)?;
        let stored = storage.open_study(&config.study.name, &json)?;
        let stored: StudyConfig = serde_json::from_str(&stored)?;
        if stored.search_space() != config.search_space()
            || stored.study.direction != config.study.direction
        {
            return Err(Error::invalid(
                "study",
                format!(
                    "study '{}' already exists with a different search space or direction; \
                     use another name",
                    config.study.name
                ),
            ));
        }
        // Stored trials refer to control sets by index and to the random parameters' laws: a
        // study cannot change them (its policy may change).
        let sets = |c: &StudyConfig| {
            c.cvs
                .as_ref()
                .map(|s| (s.control_sets.clone(), s.random.clone()))
        };
        if sets(&stored) != sets(&config) {
            return Err(Error::invalid(
                "cvs",
                format!(
                    "study '{}' already exists with other control sets or random parameters \
                     (or without a [cvs] section); use another name",
                    config.study.name
                ),
            ));
        }
        let space = config.search_space();
        Ok(Self {
            storage,
            config,
            space,
        })
    }

    /// Opens the existing study `name` in `storage` with its stored configuration (for commands
    /// given `--storage URL --study NAME` instead of a config file). The stored storage URL has
    /// its password redacted ([`crate::config::redact_url`]); connect with the URL you have.
    pub fn load(name: &str, mut storage: Box<dyn Storage>) -> Result<Self> {
        let stored = storage.study_config(name)?.ok_or_else(|| {
            Error::invalid("study", format!("no study named '{name}' in this storage"))
        })?;
        let config: StudyConfig = serde_json::from_str(&stored)?;
        let space = config.search_space();
        Ok(Self {
            storage,
            config,
            space,
        })
    }

    /// [`Study::load`] from the storage at `url`, keeping `url` (with its password) as the
    /// configuration's storage URL instead of the stored, redacted one, so that the configuration
    /// can be written out and used again.
    pub fn load_at(name: &str, storage: Box<dyn Storage>, url: &str) -> Result<Self> {
        let mut study = Self::load(name, storage)?;
        study.config.study.storage = url.to_string();
        Ok(study)
    }

    /// The configuration.
    pub fn config(&self) -> &StudyConfig {
        &self.config
    }

    /// The search space.
    pub fn space(&self) -> &SearchSpace {
        &self.space
    }

    /// All trials.
    pub fn trials(&mut self) -> Result<Vec<Trial>> {
        self.storage.trials(&self.config.study.name)
    }

    fn step_config(&self) -> Result<StepConfig> {
        let p = &self.config.policy;
        let acquisition = AcquisitionName::parse(&p.acquisition)?;
        // Measured and reported costs are noisy (the same configuration takes a different time
        // on every run): the log-cost GP learns its noise variance (never below the papers'
        // fixed 1e-4). With the noise fixed at 1e-4, repeated nearby points with different costs
        // collapse the fit to white noise (lengthscales at their lower bound, a huge outputscale)
        // whose E[c] = exp(m + v/2) away from the data is astronomically large or tiny, which
        // stopped studies with most of their budget left ("budget exhausted": predicted cost
        // larger than the remaining budget).
        let cost_fit = match self.config.cost.kind {
            CostKind::Runtime | CostKind::Reported => FitOptions {
                noise: NoiseSpec::Learned { floor: 1e-4 },
                ..FitOptions::default()
            },
            CostKind::Uniform | CostKind::Known => FitOptions::default(),
        };
        Ok(StepConfig {
            cost_fit,
            acquisition,
            params: AcquisitionParams {
                lambda: p.lambda,
                beta: p.beta,
                tree: p.tree,
                refill: p.refill,
                warm_start: p.warm_start,
                ..AcquisitionParams::default()
            },
            initial_design: p.initial_design,
            design_seed: p.seed,
            // Mixed spaces (issue 20.1/21.4): acquisitions maximized over valid points only.
            space: Some(self.space.mixed_space()),
            ..StepConfig::default()
        })
    }

    /// The known cost of a unit-cube point, if costs are known.
    pub fn known_cost(&self, x: &[f64]) -> Option<f64> {
        known_cost(&self.config, x)
    }

    /// The cost of a trial when it is known before the evaluation: its control set's cost in a
    /// `[cvs]` study, the known cost of its point otherwise.
    pub fn trial_cost(&self, trial: &Trial) -> Option<f64> {
        match &self.config.cvs {
            Some(_) => crate::cvs::CvsTrialInfo::of(trial).map(|i| i.cost),
            None => known_cost(&self.config, &trial.x),
        }
    }

    /// Hands out the next trial to `worker`, or says why the study is finished.
    ///
    /// The decision runs under the storage's lock ([`Storage::ask_with`]): a `[cvs]` study's in
    /// [`crate::cvs::decide`], every other study's in [`decide`].
    pub fn ask(&mut self, worker: &str) -> Result<Ask> {
        let name = self.config.study.name.clone();
        let step = self.step_config()?;
        let (config, space) = (&self.config, &self.space);
        let mut decide = |trials: &[Trial], state: &serde_json::Value| {
            let state = StudyState::from_json(state)?;
            match &config.cvs {
                Some(section) => crate::cvs::decide(config, section, space, trials, state),
                None => decide(config, space, &step, trials, state),
            }
        };
        self.storage.ask_with(&name, worker, &mut decide)
    }

    /// Records the outcome of trial `number` (durably). A late outcome (the trial had been
    /// abandoned) is recorded too, its cost counting toward the budget, and reported in
    /// [`Recorded::late`] with the spending it leads to.
    ///
    /// In a `[cvs]` study, a complete outcome of a trial that leaves parameters random must come
    /// with their realized values ([`Study::tell_realized`]); this is an error otherwise.
    pub fn tell(&mut self, number: u64, outcome: &Outcome) -> Result<Recorded> {
        if self.config.cvs.is_some() && matches!(outcome, Outcome::Complete { .. }) {
            let trials = self.trials()?;
            if let Some(info) = trials
                .iter()
                .find(|t| t.number == number)
                .and_then(crate::cvs::CvsTrialInfo::of)
                && !info.random.is_empty()
            {
                return Err(Error::invalid(
                    format!("trial {number}"),
                    format!(
                        "leaves {} random: tell their realized values too \
                         (pandora tell ... --random NAME=VALUE)",
                        info.random.join(", ")
                    ),
                ));
            }
        }
        let told = self
            .storage
            .tell_outcome(&self.config.study.name, number, outcome)?;
        self.recorded(told)
    }

    /// The study's view of a trial just told: for a late outcome, the budget after it.
    fn recorded(&mut self, told: Told) -> Result<Recorded> {
        let late = match told.late {
            false => None,
            true => Some(LateOutcome {
                number: told.trial.number,
                cost: told.trial.cost,
                spent: self.summary()?.budget_spent,
                total: self.config.budget.total,
            }),
        };
        Ok(Recorded {
            trial: told.trial,
            late,
        })
    }

    /// Records a complete trial of a `[cvs]` study with the realized values of its random
    /// parameters (by name, in user units; every random parameter of the trial exactly once,
    /// inside its bounds). `cost` defaults to the control set's cost. The trial's parameters and
    /// point become the realized ones.
    pub fn tell_realized(
        &mut self,
        number: u64,
        objective: f64,
        cost: Option<f64>,
        random: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Recorded> {
        if self.config.cvs.is_none() {
            return Err(Error::invalid(
                "random",
                "only a [cvs] study has random parameters",
            ));
        }
        let trials = self.trials()?;
        let trial = trials
            .iter()
            .find(|t| t.number == number)
            .ok_or_else(|| Error::NotFound(format!("trial {number}")))?;
        let (params, x) = crate::cvs::realize(&self.space, trial, random)?;
        let cost = match cost.or_else(|| self.trial_cost(trial)) {
            Some(c) => c,
            None => return Err(Error::invalid("cost", "required")),
        };
        let told = self.storage.tell_outcome(
            &self.config.study.name,
            number,
            &Outcome::CompleteAt {
                objective,
                cost,
                params,
                x,
            },
        )?;
        self.recorded(told)
    }

    /// Simulates nature for a `[cvs]` study on a builtin problem: draws the random parameters of
    /// `trial` from their distributions (seeded by the study's seed and the trial number).
    pub fn draw_random(&self, trial: &Trial) -> Result<serde_json::Map<String, serde_json::Value>> {
        let section = self
            .config
            .cvs
            .as_ref()
            .ok_or_else(|| Error::invalid("cvs", "not a [cvs] study"))?;
        crate::cvs::draw_random(section, &self.space, trial, self.config.policy.seed)
    }

    /// Marks a running trial alive.
    pub fn heartbeat(&mut self, number: u64) -> Result<()> {
        self.storage.heartbeat(&self.config.study.name, number)
    }

    /// Marks running trials silent for longer than `timeout_s` as abandoned.
    pub fn abandon_stale(&mut self, timeout_s: f64) -> Result<Vec<u64>> {
        self.storage
            .abandon_stale(&self.config.study.name, timeout_s)
    }

    /// The best complete trial (in the study's direction).
    pub fn best(&mut self) -> Result<Option<Trial>> {
        Ok(self.summary()?.best)
    }

    /// Counts, costs, the best trial and the current λ.
    pub fn summary(&mut self) -> Result<Summary> {
        let trials = self.trials()?;
        let dir = self.config.study.direction;
        let mut counts = [0usize; 4];
        let mut total_cost = 0.0;
        let mut budget_spent = 0.0;
        let mut best: Option<Trial> = None;
        for t in &trials {
            counts[match t.state {
                TrialState::Running => 0,
                TrialState::Complete => 1,
                TrialState::Failed => 2,
                TrialState::Abandoned => 3,
            }] += 1;
            let c = t.cost.unwrap_or(0.0);
            total_cost += c;
            if counts_toward_budget(&self.config, t) {
                budget_spent += c;
            }
            if let (TrialState::Complete, Some(v)) = (t.state, t.objective) {
                let better = best.as_ref().is_none_or(|b| {
                    dir.to_internal(v) > dir.to_internal(b.objective.unwrap_or(f64::NAN))
                });
                if better {
                    best = Some(t.clone());
                }
            }
        }
        let state = self
            .storage
            .update_state(&self.config.study.name, &mut |_| Ok(None))?;
        let state = StudyState::from_json(&state)?;
        let stopped = stored_stop(&self.config, &state);
        let last = match (&stopped, &state.stopped) {
            (Some(_), Some(rec)) => Some(&rec.check),
            _ => trials.iter().rev().find_map(|t| t.decision.stopping()),
        };
        let stopping = if self.config.policy.stopping.is_some() {
            last.map(StoppingStatus::from)
        } else {
            None
        };
        let finished = stopped.or_else(|| still_finished(&self.config, &state));
        Ok(Summary {
            counts,
            total_cost,
            budget_spent,
            best,
            lambda: match &self.config.cvs {
                // The Gittins policies record their λ with every decision.
                Some(_) => trials.iter().rev().find_map(|t| t.decision.lambda),
                None => replay_lambda(&self.config, &trials, pbgi_d_start(&self.config, &state))?,
            },
            stopping,
            stop_reason: finished.as_ref().map(Finished::to_string),
            finished,
        })
    }
}

/// GP hyperparameters as JSON, the form decisions and experiment traces record them in
/// ([`HyperRecord`]).
pub fn params_to_json(p: &GpParams) -> serde_json::Value {
    serde_json::to_value(HyperRecord::from(p)).unwrap_or(serde_json::Value::Null)
}

/// Reads [`params_to_json`] back (None if anything is missing or invalid).
pub fn params_from_json(v: &serde_json::Value) -> Option<GpParams> {
    HyperRecord::deserialize(v).ok()?.params()
}

/// Whether a trial's cost is charged to the budget (the initial design's only if `count_initial`).
pub(crate) fn counts_toward_budget(config: &StudyConfig, t: &Trial) -> bool {
    config.budget.count_initial || t.decision.phase != Phase::InitialDesign
}

fn known_cost(config: &StudyConfig, x: &[f64]) -> Option<f64> {
    match config.cost.kind {
        CostKind::Uniform => Some(1.0),
        CostKind::Known => Some(
            config.cost.offset + config.cost.slope * x.iter().sum::<f64>() / x.len().max(1) as f64,
        ),
        _ => None,
    }
}

/// PBGI-D's λ for the next step, replayed from the complete trials
/// ([`pandora_core::run::replay_pbgi_d`]) from `start` (the automatic λ) or `lambda0`; the
/// fixed λ for `pbgi`.
fn replay_lambda(
    config: &StudyConfig,
    trials: &[Trial],
    start: Option<f64>,
) -> Result<Option<f64>> {
    match config.policy.acquisition.as_str() {
        "pbgi" => Ok(config.policy.lambda),
        "pbgi_d" => {
            let dir = config.study.direction;
            let steps = trials.iter().filter_map(|t| match (t.state, t.objective) {
                (TrialState::Complete, Some(v)) => Some(DecayStep {
                    phase: t.decision.phase,
                    acquisition_value: t.decision.acquisition_value,
                    y: dir.to_internal(v),
                }),
                _ => None,
            });
            let start = start.unwrap_or(config.policy.lambda0);
            let mut decay = replay_pbgi_d(start, config.policy.decay, steps)?;
            Ok(Some(decay.begin_iteration()))
        }
        _ => Ok(None),
    }
}

/// The stop recorded in the study state, if the configured stopping rule is still the one that
/// fired (changing or removing `[policy] stopping` lets the study continue).
fn stored_stop(config: &StudyConfig, state: &StudyState) -> Option<Finished> {
    let rec = state.stopped.as_ref()?;
    let sc = config.policy.stopping.as_ref()?;
    if rec.config != serde_json::Value::from(sc.clone()) {
        return None;
    }
    Some(Finished::Stopped {
        rule: rec.rule.clone(),
        reason: rec.reason.clone(),
    })
}

/// The budget or `max_trials` finish recorded by the last ask, if the configuration still
/// imposes it (raising the budget or `max_trials` lets the study continue).
fn still_finished(config: &StudyConfig, state: &StudyState) -> Option<Finished> {
    match state.finished.as_ref()? {
        f @ Finished::Budget { total, .. } if config.budget.total == Some(*total) => {
            Some(f.clone())
        }
        f @ Finished::MaxTrials(m) if config.budget.max_trials == Some(*m) => Some(f.clone()),
        _ => None,
    }
}

/// Feeds a fresh rule the statistics recorded on earlier trials at the same λ, so its moving
/// window and debounce counter continue across asks (the rule is rebuilt on every ask).
fn replay_rule(rule: &mut dyn StoppingRule, trials: &[Trial], lambda: f64) -> Result<()> {
    for check in trials.iter().filter_map(|t| t.decision.stopping()) {
        if check.lambda != lambda {
            continue;
        }
        let Some(v) = check.max_log_eipc else {
            continue;
        };
        // A stand-in run with the recorded iteration count; only the supplied value is used.
        let zeros = vec![0.0; check.iteration + 1];
        let mut run = RunState::new(1, &zeros, &zeros, &[], 1);
        run.supplied.max_log_eipc_exp = Some(v);
        rule.check(&run)?;
    }
    Ok(())
}

/// PBGI-D's starting λ when it starts from the automatic stopping λ (`start_pbgi_d = true`) and
/// that λ has been chosen.
fn pbgi_d_start(config: &StudyConfig, state: &StudyState) -> Option<f64> {
    let sc = config.policy.stopping.as_ref()?;
    if !sc.start_pbgi_d {
        return None;
    }
    state.stopping.as_ref().map(|a| a.lambda)
}

/// `λ = U/(B − C)` from the fitted model (prior paths, `u_samples` of them, the study's seed), with
/// the record kept in the study state.
fn auto_lambda(
    model: &pandora_core::gp::GpModel,
    sc: &crate::config::StudyStopping,
    config: &StudyConfig,
    spent: f64,
    at_trial: usize,
) -> Result<AutoLambda> {
    let total = config
        .budget
        .total
        .ok_or_else(|| Error::invalid("policy.stopping.lambda", "\"auto\" needs a budget"))?;
    let est = estimate_u(
        model,
        UReference::Prior,
        None,
        &UEstimatorOptions {
            samples: sc.u_samples,
            seed: config.policy.seed,
            ..UEstimatorOptions::default()
        },
    )?;
    let lambda = lambda_from_budget(est.u, total, spent)?;
    Ok(AutoLambda {
        lambda,
        u: est.u,
        u_std_error: est.std_error.is_finite().then_some(est.std_error),
        u_samples: est.samples,
        budget: total,
        spent,
        at_trial,
    })
}

/// The trials so far, as a decision sees them.
struct Tally {
    /// Complete trials' points (row-major), objective values (maximized) and costs.
    x: Vec<f64>,
    y: Vec<f64>,
    c: Vec<f64>,
    /// Running trials' points.
    pending: Vec<f64>,
    /// Cost counted toward the budget so far.
    spent: f64,
    /// `spent` plus the known costs of the running trials that will count: parallel workers
    /// cannot overspend together.
    committed: f64,
}

impl Tally {
    fn of(config: &StudyConfig, trials: &[Trial]) -> Self {
        let mut t = Tally {
            x: Vec::new(),
            y: Vec::new(),
            c: Vec::new(),
            pending: Vec::new(),
            spent: 0.0,
            committed: 0.0,
        };
        for trial in trials {
            let counts = counts_toward_budget(config, trial);
            if counts {
                t.spent += trial.cost.unwrap_or(0.0);
            }
            match trial.state {
                TrialState::Complete => {
                    let (Some(obj), Some(cost)) = (trial.objective, trial.cost) else {
                        continue;
                    };
                    t.x.extend_from_slice(&trial.x);
                    t.y.push(config.study.direction.to_internal(obj));
                    t.c.push(cost);
                }
                TrialState::Running => t.pending.extend_from_slice(&trial.x),
                _ => {}
            }
        }
        let running: f64 = trials
            .iter()
            .filter(|t| t.state == TrialState::Running && counts_toward_budget(config, t))
            .filter_map(|t| known_cost(config, &t.x))
            .sum();
        t.committed = t.spent + running;
        t
    }

    fn history(&self) -> History<'_> {
        History {
            x: &self.x,
            y: &self.y,
            cost: &self.c,
            pending: &self.pending,
        }
    }
}

/// One decision of a (non-`[cvs]`) study, under the storage lock: the proposal of
/// [`propose_next`], the budget gates of [`budget_gate`], the stopping rule's check of
/// [`check_stopping`], and the trial with its [`DecisionRecord`] and the new state.
fn decide(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    trials: &[Trial],
    mut state: StudyState,
) -> Result<Decided> {
    if let Some(stopped) = stored_stop(config, &state) {
        return Ok(Decided::Finished(stopped, None));
    }
    if let Some(m) = config.budget.max_trials
        && trials.len() as u64 >= m
    {
        return Ok(finish(Finished::MaxTrials(m), state));
    }
    let tally = Tally::of(config, trials);
    let (mut prop, mut auto) = propose_next(config, space.dim(), step, trials, &tally, &state)?;
    prop.x = space.snap(&prop.x);
    if let Some(f) = budget_gate(config, &tally, &prop) {
        return Ok(finish(f, state));
    }
    if auto.is_none() {
        auto = state.stopping.clone();
    }
    let check = check_stopping(config, space.dim(), step, trials, &tally, &prop, &mut auto)?;
    if let Some((check, Some(reason))) = &check {
        let sc = config.policy.stopping.clone().expect("checked with a rule");
        state.stopped = Some(StopRecord {
            rule: check.rule.clone(),
            reason: reason.clone(),
            config: serde_json::Value::from(sc),
            check: check.clone(),
            at_trial: trials.len(),
        });
        if auto.is_some() {
            state.stopping = auto;
        }
        let f = Finished::Stopped {
            rule: check.rule.clone(),
            reason: reason.clone(),
        };
        return Ok(Decided::Finished(f, Some(state.to_json())));
    }
    let d = space.dim();
    let decision = DecisionRecord {
        phase: prop.phase,
        acquisition: config.policy.acquisition.clone(),
        acquisition_value: prop
            .acquisition_value
            .is_finite()
            .then_some(prop.acquisition_value),
        lambda: prop.lambda,
        params: prop.params.as_ref().map(HyperRecord::from),
        predicted_cost: prop.predicted_cost.or(known_cost(config, &prop.x)),
        pending: tally.pending.len() / d.max(1),
        kind: RecordKind::Step(StepRecord {
            cost_params: prop.cost_params.as_ref().map(HyperRecord::from),
            stopping: check.map(|(c, _)| c),
            bmsei: prop.bmsei.as_ref().map(|b| BmseiSummary {
                suggested_budget: Some(b.suggested_budget),
                lower_bound: Some(b.lower_bound),
            }),
        }),
    };
    if let Some(p) = &prop.params {
        state.params = Some(HyperRecord::from(p));
    }
    if prop.bmsei.is_some() {
        state.bmsei = prop.bmsei.clone();
    }
    // A stop of an earlier stopping config no longer applies once the study continues.
    state.stopped = None;
    state.finished = None;
    if auto.is_some() {
        state.stopping = auto;
    }
    let trial = NewTrial {
        params: space.decode(&prop.x),
        x: prop.x,
        decision,
    };
    Ok(Decided::Trial(trial, state.to_json()))
}

/// No trial: `finished`, recorded in the study state so that reports say why.
pub(crate) fn finish(finished: Finished, mut state: StudyState) -> Decided {
    state.finished = Some(finished.clone());
    Decided::Finished(finished, Some(state.to_json()))
}

/// The next proposal (initial design or a model step), and the automatic λ when PBGI-D starts
/// from it and it is chosen now.
fn propose_next(
    config: &StudyConfig,
    d: usize,
    step: &StepConfig,
    trials: &[Trial],
    tally: &Tally,
    state: &StudyState,
) -> Result<(Proposal, Option<AutoLambda>)> {
    let n_init = step.initial_design.unwrap_or(2 * (d + 1));
    // The initial design continues over pending (and failed) trials too: the k-th trial gets
    // design point k until enough evaluations are complete to fit a model.
    if trials.len() < n_init || tally.y.len() < n_init {
        let x = design_point(d, trials.len() as u64, step.design_seed)?;
        let prop = Proposal::without_model(x, Phase::InitialDesign);
        return Ok((prop, None));
    }
    let linear = LinearMeanCost {
        offset: config.cost.offset,
        slope: config.cost.slope,
    };
    let cost = match config.cost.kind {
        CostKind::Uniform => CostSetting::Uniform,
        CostKind::Known => CostSetting::Known(&linear),
        CostKind::Reported | CostKind::Runtime if tally.y.is_empty() => CostSetting::Uniform,
        CostKind::Reported | CostKind::Runtime => CostSetting::Unknown,
    };
    let mut ctx = StepContext {
        cumulative_cost: tally.spent,
        remaining_budget: config.budget.total.map(|b| b - tally.spent),
        total_budget: config.budget.total,
        lambda: replay_lambda(config, trials, pbgi_d_start(config, state))?,
        // B-MS-EI's refill state and warm-start trees from the previous ask.
        bmsei: state.bmsei.clone(),
    };
    let warm = state.params.as_ref().and_then(HyperRecord::params);
    let history = tally.history();
    let seed = step_seed(config, trials.len());
    let prop = propose(d, history, step, &ctx, cost, seed, warm.as_ref())?;
    // PBGI-D started from the automatic λ: at the first model step, fit, choose λ, and propose
    // again from it.
    if let Some(sc) = &config.policy.stopping
        && sc.start_pbgi_d
        && prop.phase == Phase::Model
        && pbgi_d_start(config, state).is_none()
        && let Some(models) = models_from_proposal(d, &history, step, &prop)?
    {
        let auto = auto_lambda(&models.model, sc, config, tally.spent, trials.len())?;
        ctx.lambda = Some(auto.lambda);
        let prop = propose(d, history, step, &ctx, cost, seed, warm.as_ref())?;
        return Ok((prop, Some(auto)));
    }
    Ok((prop, None))
}

/// A different seed per trial, derived from the study's seed.
fn step_seed(config: &StudyConfig, trials: usize) -> u64 {
    config.policy.seed ^ (trials as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Whether the budget refuses `prop`: its known cost does not fit beside what is committed, its
/// predicted cost (unknown costs, `predicted_cost_must_fit`) does not, or nothing is left.
fn budget_gate(config: &StudyConfig, tally: &Tally, prop: &Proposal) -> Option<Finished> {
    let total = config.budget.total?;
    let done = Some(Finished::Budget {
        spent: tally.spent,
        total,
    });
    if let Some(next) = known_cost(config, &prop.x) {
        let counts = config.budget.count_initial || prop.phase != Phase::InitialDesign;
        if counts && tally.committed + next > total * (1.0 + 1e-12) {
            return done;
        }
    }
    if let (Some(pc), CostKind::Reported | CostKind::Runtime) =
        (prop.predicted_cost, config.cost.kind)
        && config.budget.predicted_cost_must_fit
        && tally.committed + pc > total
    {
        return done;
    }
    if tally.committed >= total {
        return done;
    }
    None
}

/// The stopping rule's check on the posterior of all complete data (after-posterior-update
/// semantics), at model steps of a study with a rule: the check, and the reason if it fired.
/// Chooses the automatic λ (into `auto`) at the first check that needs it.
fn check_stopping(
    config: &StudyConfig,
    d: usize,
    step: &StepConfig,
    trials: &[Trial],
    tally: &Tally,
    prop: &Proposal,
    auto: &mut Option<AutoLambda>,
) -> Result<Option<(StoppingCheck, Option<String>)>> {
    let Some(sc) = &config.policy.stopping else {
        return Ok(None);
    };
    let history = tally.history();
    if prop.phase != Phase::Model {
        return Ok(None);
    }
    let Some(models) = models_from_proposal(d, &history, step, prop)? else {
        return Ok(None);
    };
    let lambda = match (sc.configured_lambda(config), auto.as_ref()) {
        (Some(l), _) => l,
        (None, Some(a)) => a.lambda,
        (None, None) => {
            // λ = U/(B − C), once, from the first model fit.
            let a = auto_lambda(&models.model, sc, config, tally.spent, trials.len())?;
            let l = a.lambda;
            *auto = Some(a);
            l
        }
    };
    let mut rule = sc.rule.build(Some(lambda))?;
    replay_rule(rule.as_mut(), trials, lambda)?;
    let unknown = models.cost_model.is_some();
    let mut supplied = supplied_from_proposal(step, &history, prop, unknown, Some(lambda));
    // Always the LogEIPC form, so every trial records the same statistic.
    supplied.max_pbgi_index = None;
    let linear = LinearMeanCost {
        offset: config.cost.offset,
        slope: config.cost.slope,
    };
    let cost_info = match (&models.cost_model, config.cost.kind) {
        (Some(cm), _) => CostInfo::Unknown(cm),
        (None, CostKind::Known) => CostInfo::Known(&linear),
        _ => CostInfo::Uniform,
    };
    let n_init = step.initial_design.unwrap_or(2 * (d + 1));
    let run = RunState {
        d,
        x: &tally.x,
        y: &tally.y,
        cost: &tally.c,
        n_initial: n_init.min(tally.y.len()),
        model: Some(&models.model),
        previous_model: None,
        cost_info,
        candidates: None,
        // The stopping statistic over exactly the points the study can propose.
        space: step.space.as_ref(),
        supplied,
        seed: step_seed(config, trials.len()),
    };
    let dec = rule.check(&run)?;
    let check = StoppingCheck::new(dec.report(), lambda, dec.is_stop());
    let reason = match dec {
        Decision::Stop { reason, .. } => Some(reason),
        Decision::Continue(_) => None,
    };
    Ok(Some((check, reason)))
}
