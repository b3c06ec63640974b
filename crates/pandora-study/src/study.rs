//! The ask/tell loop over any storage.
//!
//! `ask` decides under the storage's lock, or (`[study] decide = "snapshot"`) on a snapshot of the
//! trials, claiming the trial under the lock ([`crate::claim`]): it reads every trial, conditions the model on the pending (running) ones,
//! asks `pandora_core::policy` for the next point, snaps it to the search space and stores it
//! as a running trial with its typed [`DecisionRecord`]; or it says why the study is finished
//! ([`Finished`], a value, never an error). `tell` records the outcome durably. PBGI-D's λ is
//! not stored as mutable state: it is replayed from the completed trials' records
//! ([`pandora_core::run::replay_pbgi_d`]: λ0 divided once for every model-phase trial whose index
//! fell below the best value observed including that trial), so a study resumes exactly where it
//! stopped. What an ask carries to the next (the warm start, B-MS-EI's carry, the automatic λ,
//! the stop) is the typed [`StudyState`].

use crate::claim::{self, AskTiming, ClaimPath, OPTIMISTIC_ATTEMPTS};
use crate::config::{CostKind, DecideMode, StudyConfig, counts_toward_budget};
use crate::error::{Error, Result};
use crate::space::SearchSpace;
use crate::storage::{Snapshot, Storage, TrialPage};
use crate::trial::{
    Decided, NewTrial, Outcome, StepOutcome, Told, Trial, TrialCounts, TrialState, finish,
};
use pandora_core::acquisition::LinearMeanCost;
use pandora_core::gp::GpParams;
use pandora_core::gp::fit::{FitOptions, NoiseSpec};
use pandora_core::policy::{CostSetting, Phase, Proposal, StepConfig, StepModels};
use pandora_core::run::driver::{
    self, BudgetSpec, Entry, KnownCostFn, Policy, Run, StopLambda, StopSpec, Verdict,
};
use pandora_core::run::record::{
    BmseiSummary, DecisionRecord, HyperRecord, RecordKind, StepRecord, StopRecord, StoppingCheck,
    StudyState,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Instant;

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
    /// Number of trials in each state.
    pub counts: TrialCounts,
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
    /// Wall-clock time of the optimizer and of the objective ([`TimeSpent`]).
    pub time: TimeSpent,
}

/// Where a study's wall-clock time went: the optimizer's decisions against the objective's
/// evaluations. Budgets and runtime costs count only the objective; this shows the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TimeSpent {
    /// Seconds the optimizer took to hand out trials (model fits, acquisition maximization,
    /// stopping checks): the sum of the trials' `decision.seconds`.
    pub optimizer_s: f64,
    /// Trials whose decision time is recorded (trials of releases before it are not).
    pub optimizer_trials: usize,
    /// Seconds from handing out a trial to its outcome, over finished trials: the objective's
    /// evaluations (plus whatever the caller did in between, for `ask`/`tell` loops).
    pub objective_s: f64,
}

impl TimeSpent {
    /// The time of `trials`.
    pub fn of(trials: &[Trial]) -> Self {
        let mut t = Self::default();
        for trial in trials {
            if let Some(s) = trial.decision.seconds {
                t.optimizer_s += s;
                t.optimizer_trials += 1;
            }
            if let Some(done) = trial.finished_at {
                t.objective_s += (done - trial.created_at).max(0.0);
            }
        }
        t
    }
}

impl Summary {
    /// The summary as JSON, as `pandora status` prints it and the Python package reads it:
    /// `running`, `complete`, `failed`, `abandoned`, `paused` (trials with steps waiting to be
    /// resumed), `total_cost`, `budget_spent`, `lambda`,
    /// `best` (`{number, objective, params}` or null), `stopping` (`{rule, lambda, statistic,
    /// value, threshold, iteration, fired}` or null; a value not available yet is null),
    /// `stop_reason` (why the study is finished, in words, or null) and `finished` (the same as
    /// data: `{"budget": {spent, total}}`, `{"max_trials": N}`, `{"stopped": {rule, reason}}`,
    /// or null) and `time` (`{optimizer_s, optimizer_trials, objective_s}`: [`TimeSpent`]).
    pub fn to_json(&self) -> serde_json::Value {
        let finite = |v: f64| v.is_finite().then_some(v);
        json!({
            "running": self.counts.running,
            "complete": self.counts.complete,
            "failed": self.counts.failed,
            "abandoned": self.counts.abandoned,
            "paused": self.counts.paused,
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
            "time": self.time,
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
    last_ask: AskTiming,
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
        let stored = crate::config::stored::from_stored_json(&stored)?;
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
            last_ask: AskTiming::default(),
        })
    }

    /// Opens the existing study `name` in `storage` with its stored configuration (for commands
    /// given `--storage URL --study NAME` instead of a config file). The stored storage URL has
    /// its password redacted ([`crate::config::redact_url`]); connect with the URL you have.
    pub fn load(name: &str, mut storage: Box<dyn Storage>) -> Result<Self> {
        let stored = storage.study_config(name)?.ok_or_else(|| {
            Error::invalid("study", format!("no study named '{name}' in this storage"))
        })?;
        let config = crate::config::stored::from_stored_json(&stored)?;
        let space = config.search_space();
        Ok(Self {
            storage,
            config,
            space,
            last_ask: AskTiming::default(),
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

    /// Gives the storage back (e.g. to a connection pool) when the study is no longer needed.
    pub fn into_storage(self) -> Box<dyn Storage> {
        self.storage
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

    /// The trials numbered `from` and up, at most `limit`, and how many there are
    /// ([`Storage::trials_page`]).
    pub fn trials_page(&mut self, from: u64, limit: u64) -> Result<TrialPage> {
        self.storage
            .trials_page(&self.config.study.name, from, limit)
    }

    /// Trial `number`, if the study has it.
    pub fn trial(&mut self, number: u64) -> Result<Option<Trial>> {
        let page = self.trials_page(number, 1)?;
        Ok(page.trials.into_iter().find(|t| t.number == number))
    }

    fn step_config(&self) -> Result<StepConfig> {
        let p = &self.config.policy;
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
            acquisition: p.spec.name(),
            params: p.spec.params(),
            initial_design: p.initial_design,
            design_seed: p.seed,
            // Mixed spaces (issue 20.1/21.4): acquisitions maximized over valid points only.
            space: Some(self.space.mixed_space()),
            refit: p.refit.unwrap_or_default().refit(),
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
    /// With `[study] decide = "snapshot"`, a study without `[cvs]` or `[fidelity]` section
    /// decides on a snapshot read without the
    /// storage's lock and holds the lock only to claim the trial, checking that the decision is
    /// still valid ([`crate::claim`]: the budget, a recorded stop and the pending-point exclusion
    /// as under the lock; at most [`crate::claim::OPTIMISTIC_ATTEMPTS`] snapshots, then under the
    /// lock). Other studies (and every study by default, `decide = "locked"`) decide under the
    /// lock ([`Study::ask_locked`]): a `[cvs]` study's in
    /// `crate::cvs::decide`, a `[fidelity]` study's in [`crate::fidelity::decide`]. Where the
    /// time went is in [`Study::last_ask`].
    pub fn ask(&mut self, worker: &str) -> Result<Ask> {
        let start = Instant::now();
        let mut timing = AskTiming::default();
        let ask = self.ask_timed(worker, &mut timing);
        timing.total_s = start.elapsed().as_secs_f64();
        self.last_ask = timing;
        ask
    }

    /// [`Study::ask`] with the whole decision made under the storage's lock
    /// ([`Storage::ask_with`]), as every ask did before decisions moved out of the lock: for
    /// comparisons (the `ask_bench` example) and for callers that want it.
    pub fn ask_locked(&mut self, worker: &str) -> Result<Ask> {
        let start = Instant::now();
        let mut timing = AskTiming::default();
        let ask = self.decide_locked(worker, None, &mut timing);
        timing.total_s = start.elapsed().as_secs_f64();
        self.last_ask = timing;
        ask
    }

    /// Where the time of the last [`Study::ask`] or [`Study::ask_locked`] went.
    pub fn last_ask(&self) -> AskTiming {
        self.last_ask
    }

    fn ask_timed(&mut self, worker: &str, timing: &mut AskTiming) -> Result<Ask> {
        let snapshot = self.config.study.decide == DecideMode::Snapshot;
        if snapshot && self.config.cvs.is_none() && self.config.fidelity.is_none() {
            while timing.attempts < OPTIMISTIC_ATTEMPTS {
                timing.attempts += 1;
                if let Some(ask) = self.try_claim(worker, timing)? {
                    return Ok(ask);
                }
            }
        }
        let seed_worker = self.seed_worker(worker);
        self.decide_locked(worker, seed_worker.as_deref(), timing)
    }

    /// The worker whose name a snapshot study folds into its decisions' seed
    /// ([`crate::claim::worker_salt`]); `None` for a study that decides under the lock.
    fn seed_worker(&self, worker: &str) -> Option<String> {
        (self.config.study.decide == DecideMode::Snapshot).then(|| worker.to_string())
    }

    /// The whole decision under the lock (`seed_worker`: see [`Study::seed_worker`]).
    fn decide_locked(
        &mut self,
        worker: &str,
        seed_worker: Option<&str>,
        timing: &mut AskTiming,
    ) -> Result<Ask> {
        let name = self.config.study.name.clone();
        let step = self.step_config()?;
        let (config, space) = (&self.config, &self.space);
        let (asked, mut locked, mut compute) = (Instant::now(), None, 0.0);
        let mut decide = |trials: &[Trial], state: &serde_json::Value| {
            locked = Some(Instant::now());
            let d = decide_timed(config, space, &step, trials, state, seed_worker);
            compute = seconds_since(locked);
            d.map(|d| d.decided)
        };
        let ask = self.storage.ask_with(&name, worker, &mut decide);
        timing.add_lock(asked, locked);
        timing.compute_s += compute;
        timing.path = ClaimPath::Locked;
        ask
    }

    /// One snapshot decision and its claim ([`crate::claim`]); `None` if the decision was no
    /// longer valid at the claim and nothing was written.
    fn try_claim(&mut self, worker: &str, timing: &mut AskTiming) -> Result<Option<Ask>> {
        let started = Some(Instant::now());
        let (snap, decision) = self.snapshot_decision(worker)?;
        timing.compute_s += seconds_since(started);
        let ask = self.claim(worker, &snap, &decision, timing)?;
        Ok(ask.inspect(|_| {
            if timing.attempts > 1 && timing.path != ClaimPath::Locked {
                timing.path = ClaimPath::Retried;
            }
        }))
    }

    /// Reads a snapshot without the lock and decides on it for `worker`.
    fn snapshot_decision(&mut self, worker: &str) -> Result<(Snapshot, Decision)> {
        let step = self.step_config()?;
        let snap = self.storage.snapshot(&self.config.study.name)?;
        let seed_worker = self.seed_worker(worker);
        let (trials, state) = (&snap.trials, &snap.state);
        let decision = decide_timed(
            &self.config,
            &self.space,
            &step,
            trials,
            state,
            seed_worker.as_deref(),
        )?;
        Ok((snap, decision))
    }

    /// Claims `decision`, made on `snap`, under the lock: takes it (or one of its runner-ups) if
    /// still valid, decides again under the lock if that needs no model, or writes nothing and
    /// returns `None`.
    fn claim(
        &mut self,
        worker: &str,
        snap: &Snapshot,
        decision: &Decision,
        timing: &mut AskTiming,
    ) -> Result<Option<Ask>> {
        let seed_worker = self.seed_worker(worker);
        let name = self.config.study.name.clone();
        let step = self.step_config()?;
        let (config, space) = (&self.config, &self.space);
        let (asked, mut locked, mut compute, mut path) = (Instant::now(), None, 0.0, None);
        let mut claim = |trials: &[Trial], state: &serde_json::Value| {
            locked = Some(Instant::now());
            match claim_decision(config, space, &step, snap, decision, trials, state)? {
                Claim::Take(d, p) => {
                    path = Some(p);
                    Ok(d)
                }
                Claim::DecideNow => {
                    path = Some(ClaimPath::Locked);
                    let d =
                        decide_timed(config, space, &step, trials, state, seed_worker.as_deref());
                    compute = seconds_since(locked);
                    d.map(|d| d.decided)
                }
                // Writes nothing (and the answer is dropped below): the lock is released.
                Claim::Retry => Ok(Decided::Finished(Finished::MaxTrials(0), None)),
            }
        };
        let ask = self.storage.ask_with(&name, worker, &mut claim);
        timing.add_lock(asked, locked);
        timing.compute_s += compute;
        let ask = ask?;
        Ok(path.map(|p| {
            timing.path = p;
            ask
        }))
    }

    /// The decision [`Study::ask`] would make on `trials` and the study state `state`, without
    /// reading or writing the storage: for callers that keep the trials elsewhere (the Optuna
    /// sampler of the Python package reads them from an Optuna storage, under its own lock).
    /// Running trials are the pending points; the new state is in the returned [`Decided`]. In a
    /// `decide = "snapshot"` study with running trials, `ask` also folds the worker's name into
    /// the seed ([`crate::claim::worker_salt`]); `decide_on` does not (it knows no worker).
    pub fn decide_on(&self, trials: &[Trial], state: &serde_json::Value) -> Result<Decided> {
        let step = self.step_config()?;
        decide_timed(&self.config, &self.space, &step, trials, state, None).map(|d| d.decided)
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

    /// Records step `step` of trial `number` of a `[fidelity]` study, with the objective `value`
    /// at that step (durably). `cost` is the step's cost: required when costs are reported,
    /// refused when they are known (uniform or a formula: the study computes it). Telling the
    /// last step of the trial's run pauses it; telling step `max_steps` completes it. See
    /// [`Storage::tell_step`].
    pub fn tell_step(
        &mut self,
        number: u64,
        step: u32,
        value: f64,
        cost: Option<f64>,
    ) -> Result<Trial> {
        let Some(section) = self.config.fidelity.clone() else {
            return Err(Error::invalid(
                "step",
                "only a study with a [fidelity] section has steps",
            ));
        };
        let schedule = section.schedule()?;
        let trials = self.trials()?;
        let trial = trials
            .iter()
            .find(|t| t.number == number)
            .ok_or_else(|| Error::NotFound(format!("trial {number}")))?;
        let costs = crate::fidelity::StepCosts::new(&self.config, &schedule, &[])?;
        let cost = match (costs.known_step_cost(&trial.x, step), cost) {
            (Some(c), None) => c,
            (None, Some(c)) => c,
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "cost",
                    "this study's step costs are known (cost.kind): do not tell a cost",
                ));
            }
            (None, None) if self.config.cost.kind == CostKind::Reported => {
                return Err(Error::invalid(
                    "cost",
                    "required: this study's step costs are reported (cost.kind = \"reported\")",
                ));
            }
            (None, None) if self.config.cost.kind == CostKind::Runtime => {
                return Err(Error::invalid(
                    "cost",
                    "required: this study's step costs are runtimes (cost.kind = \"runtime\"); \
                     `pandora run` measures them, an external loop tells each step's seconds",
                ));
            }
            (None, None) => {
                return Err(Error::invalid(
                    "step",
                    format!("must be between 1 and max_steps = {}", section.max_steps),
                ));
            }
        };
        let outcome = StepOutcome {
            step,
            value,
            cost,
            max_steps: section.max_steps,
        };
        self.storage
            .tell_step(&self.config.study.name, number, &outcome)
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

    /// Gives up running trial `number` (marks it abandoned with `reason`, so that its point may
    /// be proposed again); returns whether it was running. See [`Storage::abandon`].
    pub fn abandon(&mut self, number: u64, reason: &str) -> Result<bool> {
        self.storage
            .abandon(&self.config.study.name, number, reason)
    }

    /// The best complete trial (in the study's direction).
    pub fn best(&mut self) -> Result<Option<Trial>> {
        Ok(self.summary()?.best)
    }

    /// The λ of the next step (PBGI's fixed λ, PBGI-D's replayed one), `None` for other
    /// acquisitions.
    fn next_lambda(&self, trials: &[Trial], state: &StudyState) -> Result<Option<f64>> {
        let step = self.step_config()?;
        let linear = LinearMeanCost {
            offset: self.config.cost.offset,
            slope: self.config.cost.slope,
        };
        let config = &self.config;
        let known = |x: &[f64]| known_cost(config, x).unwrap_or(1.0);
        let policy = policy(config, self.space.dim(), &step, &linear, &known);
        Ok(resume(&policy, &self.config, trials, state)?.next_lambda()?)
    }

    /// Counts, costs, the best trial and the current λ.
    pub fn summary(&mut self) -> Result<Summary> {
        let trials = self.trials()?;
        let dir = self.config.study.direction;
        let mut counts = TrialCounts::default();
        let mut total_cost = 0.0;
        let mut budget_spent = 0.0;
        let mut best: Option<Trial> = None;
        for t in &trials {
            counts.add(t.state);
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
        let finished = stopped
            .or_else(|| still_finished(&self.config, &state))
            .or_else(|| thaw_stop(&self.config, &state));
        Ok(Summary {
            counts,
            total_cost,
            budget_spent,
            best,
            lambda: match (&self.config.cvs, &self.config.fidelity) {
                // The Gittins policies record their λ with every decision.
                (Some(_), _) => trials.iter().rev().find_map(|t| t.decision.lambda),
                (None, Some(f)) => Some(f.lambda),
                (None, None) => self.next_lambda(&trials, &state)?,
            },
            stopping,
            stop_reason: finished.as_ref().map(Finished::to_string),
            finished,
            time: TimeSpent::of(&trials),
        })
    }
}

#[cfg(test)]
#[path = "claim_tests.rs"]
mod claim_tests;

/// GP hyperparameters as JSON, the form decisions and experiment traces record them in
/// ([`HyperRecord`]).
pub fn params_to_json(p: &GpParams) -> serde_json::Value {
    serde_json::to_value(HyperRecord::from(p)).unwrap_or(serde_json::Value::Null)
}

/// Reads [`params_to_json`] back (None if anything is missing or invalid).
pub fn params_from_json(v: &serde_json::Value) -> Option<GpParams> {
    HyperRecord::deserialize(v).ok()?.params()
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

/// A `[fidelity]` study's stop by its index rule, recorded by the last ask.
fn thaw_stop(config: &StudyConfig, state: &StudyState) -> Option<Finished> {
    config.fidelity.as_ref()?;
    match state.finished.as_ref()? {
        f @ Finished::Stopped { .. } => Some(f.clone()),
        _ => None,
    }
}

/// One decision under the storage lock ([`Study::ask`]) or on given trials
/// ([`Study::decide_on`]): a `[cvs]` study's in [`crate::cvs::decide`], every other study's in
/// [`decide`], a `[fidelity]` study's in [`crate::fidelity::decide`], with the optimizer's own
/// time in the record.
fn decide_timed(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    trials: &[Trial],
    state: &serde_json::Value,
    seed_worker: Option<&str>,
) -> Result<Decision> {
    let start = std::time::Instant::now();
    let state = StudyState::from_json(state)?;
    let mut decision = match (&config.cvs, &config.fidelity) {
        (Some(section), _) => {
            crate::cvs::decide(config, section, space, trials, state).map(Decision::from)
        }
        (None, Some(section)) => {
            crate::fidelity::decide(config, section, space, trials, state).map(Decision::from)
        }
        (None, None) => decide(config, space, step, trials, state, seed_worker),
    }?;
    // The optimizer's own time, next to the objective's (docs/studies.md "Time").
    let seconds = Some(start.elapsed().as_secs_f64());
    if let Decided::Trial(new, _) = &mut decision.decided {
        new.decision.seconds = seconds;
    }
    for alt in &mut decision.runners_up {
        alt.decision.seconds = seconds;
    }
    Ok(decision)
}

/// A decision and, for a model step, the trials its runner-up local optima would be
/// ([`pandora_core::policy::Proposal::runners_up`], best first): what a claim may hand out
/// instead when the decision's point was taken meanwhile ([`crate::claim`]).
struct Decision {
    decided: Decided,
    runners_up: Vec<NewTrial>,
    /// The step's models, to re-score the runner-ups at a claim ([`StepModels::rescore`]).
    models: Option<StepModels>,
}

impl From<Decided> for Decision {
    fn from(decided: Decided) -> Self {
        Decision {
            decided,
            runners_up: Vec::new(),
            models: None,
        }
    }
}

/// The driver's policy of a (non-`[cvs]`) study. `linear` is its known cost model and `known`
/// the same cost as a function (used only for uniform and known costs).
fn policy<'a>(
    config: &'a StudyConfig,
    d: usize,
    step: &StepConfig,
    linear: &'a LinearMeanCost,
    known: &'a KnownCostFn<'a>,
) -> Policy<'a> {
    let (cost, known_cost): (CostSetting<'a>, _) = match config.cost.kind {
        CostKind::Uniform => (CostSetting::Uniform, Some(known)),
        CostKind::Known => (CostSetting::Known(linear), Some(known)),
        CostKind::Reported | CostKind::Runtime => (CostSetting::Unknown, None),
    };
    let p = &config.policy;
    let stopping = p.stopping.as_ref().map(|sc| StopSpec {
        rule: sc.rule.clone(),
        lambda: match sc.configured_lambda(config) {
            Some(l) => StopLambda::Fixed(l),
            None => StopLambda::Auto {
                u_samples: sc.u_samples,
                seed: p.seed,
                start_pbgi_d: sc.start_pbgi_d,
            },
        },
    });
    Policy {
        d,
        step: step.clone(),
        cost,
        known_cost,
        decay: p.spec.decay(),
        stopping,
        budget: BudgetSpec {
            total: config.budget.total,
            horizon: config.budget.total,
            max_trials: config.budget.max_trials,
            max_bo_steps: None,
            charge_initial: config.budget.count_initial,
            must_fit: true,
            predicted_must_fit: config.budget.predicted_cost_must_fit,
        },
        initial_points: None,
    }
}

/// The driver's state after `trials` and what the last ask carried (`state`).
fn resume<'p>(
    policy: &'p Policy<'p>,
    config: &StudyConfig,
    trials: &[Trial],
    state: &StudyState,
) -> Result<Run<'p>> {
    let mut run = Run::new(policy)?;
    for t in trials {
        let outcome = match (t.state, t.objective) {
            (TrialState::Complete, Some(v)) => driver::Outcome::Complete {
                y: config.study.direction.to_internal(v),
                cost: t.cost,
            },
            (TrialState::Running, _) => driver::Outcome::Pending,
            _ => driver::Outcome::Failed,
        };
        run.record(Entry {
            x: &t.x,
            phase: t.decision.phase,
            outcome,
            cost: t.cost,
            acquisition_value: t.decision.acquisition_value,
            check: t.decision.stopping(),
        })?;
    }
    run.carry(
        state.params.as_ref().and_then(HyperRecord::params),
        state.bmsei.clone(),
    );
    run.set_auto_lambda(state.stopping.clone());
    Ok(run)
}

/// One decision of a (non-`[cvs]`) study, under the storage lock: a stop recorded earlier, or
/// the driver's step ([`Run::step`]) on the trials so far, turned into the trial with its
/// [`DecisionRecord`] and the new state.
fn decide(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    trials: &[Trial],
    mut state: StudyState,
    seed_worker: Option<&str>,
) -> Result<Decision> {
    if let Some(stopped) = stored_stop(config, &state) {
        return Ok(Decided::Finished(stopped, None).into());
    }
    let linear = LinearMeanCost {
        offset: config.cost.offset,
        slope: config.cost.slope,
    };
    let known = |x: &[f64]| known_cost(config, x).unwrap_or(1.0);
    let policy = policy(config, space.dim(), step, &linear, &known);
    let mut run = resume(&policy, config, trials, &state)?;
    let salt = seed_worker.map_or(0, |w| claim::worker_salt(w, run.pending()));
    let seed = step_seed(config, trials.len()) ^ salt;
    let out = run.step(seed, &|x| space.snap(x))?;
    // The automatic λ, if chosen now, is kept by a stop or a trial (not by a budget finish).
    let auto = run.auto_lambda().cloned();
    let prop = match out.verdict {
        Verdict::Propose(prop) => prop,
        Verdict::Finished(f @ Finished::Stopped { .. }) => {
            let (Finished::Stopped { rule, reason }, Some(check)) = (&f, out.check) else {
                unreachable!("a stop comes with its check")
            };
            state.stopped = Some(StopRecord {
                rule: rule.clone(),
                reason: reason.clone(),
                config: (config.policy.stopping.clone())
                    .map_or(serde_json::Value::Null, serde_json::Value::from),
                check,
                at_trial: trials.len(),
            });
            if auto.is_some() {
                state.stopping = auto;
            }
            return Ok(Decided::Finished(f, Some(state.to_json())).into());
        }
        Verdict::Finished(f) => return Ok(finish(f, state).into()),
    };
    let runners_up = runner_up_trials(config, space, &prop, run.pending(), &out.check);
    let decision = record_of(config, &prop, run.pending(), out.check);
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
        step_to: None,
    };
    Ok(Decision {
        decided: Decided::Trial(trial, state.to_json()),
        runners_up,
        models: out.models,
    })
}

/// The trials of `prop`'s runner-ups, recorded as `prop` is (same phase, fit, λ and stopping
/// check; their own point, acquisition value and predicted cost).
fn runner_up_trials(
    config: &StudyConfig,
    space: &SearchSpace,
    prop: &Proposal,
    pending: usize,
    check: &Option<StoppingCheck>,
) -> Vec<NewTrial> {
    (prop.runners_up.iter())
        .map(|r| {
            let alt = Proposal {
                x: r.x.clone(),
                acquisition_value: r.acquisition_value,
                predicted_cost: r.predicted_cost,
                runners_up: Vec::new(),
                ..prop.clone()
            };
            NewTrial {
                params: space.decode(&alt.x),
                decision: record_of(config, &alt, pending, check.clone()),
                x: alt.x,
                step_to: None,
            }
        })
        .collect()
}

/// What to do with a snapshot decision at its claim, under the lock ([`crate::claim`]).
// One value per claim, moved once.
#[allow(clippy::large_enum_variant)]
enum Claim {
    /// Hand out (or finish with) this decision.
    Take(Decided, ClaimPath),
    /// Decide again now, under the lock (no model fit needed, or the study may be finished).
    DecideNow,
    /// Release the lock and decide on a fresh snapshot.
    Retry,
}

/// Checks the snapshot decision `decided` against the trials and state read under the lock.
fn claim_decision(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    snap: &Snapshot,
    decision: &Decision,
    trials: &[Trial],
    state: &serde_json::Value,
) -> Result<Claim> {
    let decided = &decision.decided;
    if claim::unchanged(&snap.trials, &snap.state, trials, state) {
        return Ok(Claim::Take(decided.clone(), ClaimPath::Unchanged));
    }
    let Decided::Trial(new, ours) = decided else {
        return Ok(Claim::DecideNow);
    };
    if new.decision.phase != Phase::Model {
        return Ok(Claim::DecideNow);
    }
    let now = StudyState::from_json(state)?;
    if stored_stop(config, &now).is_some() || budget_gate(config, space, step, trials, &now, new)? {
        return Ok(Claim::DecideNow);
    }
    let since = snap.trials.len();
    let (taken, path) = match claim::near_taken(&new.x, trials, since) {
        false => (new.clone(), ClaimPath::Revalidated),
        true => match free_runner_up(config, space, step, decision, trials, &now, since)? {
            Some(alt) => (alt, ClaimPath::RunnerUp),
            None => return Ok(Claim::Retry),
        },
    };
    let merged = claim::merge_state(&now, StudyState::from_json(ours)?);
    Ok(Claim::Take(Decided::Trial(taken, merged.to_json()), path))
}

/// The best runner-up of `decision` that may be handed out now: re-scored on the decision's
/// model with the trials handed out since the snapshot (numbered `since` and up) fantasized as
/// pending ([`rescored_runners_up`]), the first in that order at least the exclusion radius from
/// every trial running now and every trial handed out since, and admitted by the budget gates on
/// `trials`.
fn free_runner_up(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    decision: &Decision,
    trials: &[Trial],
    now: &StudyState,
    since: usize,
) -> Result<Option<NewTrial>> {
    let handed_out = trials.get(since..).unwrap_or_default();
    for alt in rescored_runners_up(config, space, step, decision, handed_out)? {
        if !claim::near_taken(&alt.x, trials, since)
            && !budget_gate(config, space, step, trials, now, &alt)?
        {
            return Ok(Some(alt));
        }
    }
    Ok(None)
}

/// `decision`'s runner-ups best first on its model with the points of `handed_out` (the trials
/// handed out since its snapshot, told meanwhile or not) fantasized after the snapshot's pending
/// points, each recording its new acquisition value and the pending points it saw; in the
/// snapshot's order, as recorded, for acquisitions that keep no model to re-score on.
fn rescored_runners_up(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    decision: &Decision,
    handed_out: &[Trial],
) -> Result<Vec<NewTrial>> {
    let d = space.dim();
    let mut alts = decision.runners_up.clone();
    let Some(models) = &decision.models else {
        return Ok(alts);
    };
    let extra: Vec<f64> = (handed_out.iter())
        .filter(|t| t.x.len() == d)
        .flat_map(|t| t.x.iter().copied())
        .collect();
    let points: Vec<f64> = alts.iter().flat_map(|a| a.x.iter().copied()).collect();
    let linear = LinearMeanCost {
        offset: config.cost.offset,
        slope: config.cost.slope,
    };
    let known = |x: &[f64]| known_cost(config, x).unwrap_or(1.0);
    let cost = policy(config, d, step, &linear, &known).cost;
    let Some(values) = models.rescore(cost, &extra, &points)? else {
        return Ok(alts);
    };
    for (alt, v) in alts.iter_mut().zip(&values) {
        alt.decision.acquisition_value = v.is_finite().then_some(*v);
        alt.decision.pending += extra.len() / d;
    }
    let mut order: Vec<(f64, NewTrial)> = values.into_iter().zip(alts).collect();
    // Stable: equal values keep the snapshot's order; a value that is not a number goes last.
    order.sort_by(|a, b| match (a.0.is_nan(), b.0.is_nan()) {
        (false, false) => b.0.total_cmp(&a.0),
        (x, y) => x.cmp(&y),
    });
    Ok(order.into_iter().map(|(_, alt)| alt).collect())
}

/// Whether the driver's budget gates refuse `new` on `trials` (trials and budget left, with the
/// pending trials' known costs, then the trial's own known or predicted cost).
fn budget_gate(
    config: &StudyConfig,
    space: &SearchSpace,
    step: &StepConfig,
    trials: &[Trial],
    state: &StudyState,
    new: &NewTrial,
) -> Result<bool> {
    let linear = LinearMeanCost {
        offset: config.cost.offset,
        slope: config.cost.slope,
    };
    let known = |x: &[f64]| known_cost(config, x).unwrap_or(1.0);
    let policy = policy(config, space.dim(), step, &linear, &known);
    let run = resume(&policy, config, trials, state)?;
    let mut prop = Proposal::without_model(new.x.clone(), new.decision.phase);
    prop.predicted_cost = new.decision.predicted_cost;
    Ok(run.still_admits(&prop).is_some())
}

/// Seconds since `t` (0 if never).
fn seconds_since(t: Option<Instant>) -> f64 {
    t.map_or(0.0, |t| t.elapsed().as_secs_f64())
}

/// The record of a trial the driver proposed (`pending`: trials running when it was decided;
/// `check`: the stopping rule's check at this step).
fn record_of(
    config: &StudyConfig,
    prop: &Proposal,
    pending: usize,
    check: Option<StoppingCheck>,
) -> DecisionRecord {
    DecisionRecord {
        phase: prop.phase,
        acquisition: config.policy.spec.name().to_string(),
        acquisition_value: prop
            .acquisition_value
            .is_finite()
            .then_some(prop.acquisition_value),
        lambda: prop.lambda,
        params: prop.params.as_ref().map(HyperRecord::from),
        predicted_cost: prop.predicted_cost.or(known_cost(config, &prop.x)),
        pending,
        seconds: None,
        kind: RecordKind::Step(StepRecord {
            cost_params: prop.cost_params.as_ref().map(HyperRecord::from),
            stopping: check,
            bmsei: prop.bmsei.as_ref().map(|b| BmseiSummary {
                suggested_budget: Some(b.suggested_budget),
                lower_bound: Some(b.lower_bound),
            }),
            fit: prop.fit,
        }),
    }
}

/// A different seed per trial, derived from the study's seed.
fn step_seed(config: &StudyConfig, trials: usize) -> u64 {
    config.policy.seed ^ (trials as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
