//! The ask/tell loop over any storage.
//!
//! `ask` runs under the storage's lock: it reads every trial, conditions the model on the pending
//! (running) ones, asks `pandora_core::policy` for the next point, snaps it to the search space and
//! stores it as a running trial. `tell` records the outcome durably. PBGI-D's λ is not stored as
//! mutable state: it is replayed from the completed trials (λ0 divided once for every model-phase
//! trial whose index fell below the best value observed including that trial), so a study resumes
//! exactly where it stopped.

use crate::config::{CostKind, StudyConfig};
use crate::error::{Error, Result};
use crate::space::SearchSpace;
use crate::storage::Storage;
use crate::trial::{NewTrial, Outcome, Trial, TrialState};
use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, LinearMeanCost};
use pandora_core::gp::fit::{FitOptions, NoiseSpec};
use pandora_core::gp::{GpParams, Kernel, KernelKind};
use pandora_core::policy::{
    CostSetting, History, Phase, Proposal, StepConfig, StepContext, design_point, propose,
};
use pandora_core::stopping::budget::{
    UEstimatorOptions, UReference, estimate_u, lambda_from_budget,
};
use pandora_core::stopping::step::{models_from_proposal, supplied_from_proposal};
use pandora_core::stopping::{CostInfo, Decision, Report, RunState, StoppingRule};
use serde_json::json;

/// Why a study does not hand out another trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    /// The budget cannot pay for the next proposal.
    Budget {
        /// Cost spent so far (counted toward the budget).
        spent: f64,
        /// The total budget.
        total: f64,
    },
    /// The configured number of trials is reached.
    MaxTrials(u64),
    /// The cost-aware stopping rule fired: more evaluations are not worth their cost.
    Stopped {
        /// The rule's name (`"pbgi"`).
        rule: String,
        /// Why, with the statistic and its threshold.
        reason: String,
    },
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finished::Budget { spent, total } => {
                write!(f, "budget exhausted: spent {spent:.4} of {total:.4}")
            }
            Finished::MaxTrials(n) => write!(f, "reached max_trials = {n}"),
            Finished::Stopped { reason, .. } => write!(f, "stopping rule fired: {reason}"),
        }
    }
}

/// The result of [`Study::ask`].
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Evaluate this trial.
    Trial(Box<Trial>),
    /// The study is done.
    Finished(Finished),
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
    /// Why the stopping rule stopped the study (`None` while it runs).
    pub stop_reason: Option<String>,
}

impl Summary {
    /// The summary as JSON, as `pandora status` prints it and the Python package reads it:
    /// `running`, `complete`, `failed`, `abandoned`, `total_cost`, `budget_spent`, `lambda`,
    /// `best` (`{number, objective, params}` or null), `stopping` (`{rule, lambda, statistic,
    /// value, threshold, iteration, fired}` or null; a value not available yet is null) and
    /// `stop_reason` (the stopping rule's reason, or null).
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
    pub fn ask(&mut self, worker: &str) -> Result<Ask> {
        if let Some(section) = self.config.cvs.clone() {
            return self.ask_cvs(worker, &section);
        }
        let name = self.config.study.name.clone();
        let step = self.step_config()?;
        let d = self.space.dim();
        let config = self.config.clone();
        let space = self.space.clone();
        let linear = LinearMeanCost {
            offset: config.cost.offset,
            slope: config.cost.slope,
        };
        let mut finished: Option<Finished> = None;
        let mut stop_record: Option<serde_json::Value> = None;
        let mut pending_stopping_state: Option<serde_json::Value> = None;
        let mut decide = |trials: &[Trial], state: &serde_json::Value| {
            let n_init = step.initial_design.unwrap_or(2 * (d + 1));
            let mut x = Vec::new();
            let mut y = Vec::new();
            let mut c = Vec::new();
            let mut pending = Vec::new();
            let mut spent = 0.0;
            for t in trials {
                if counts_toward_budget(&config, t) {
                    spent += t.cost.unwrap_or(0.0);
                }
                match t.state {
                    TrialState::Complete => {
                        let (Some(obj), Some(cost)) = (t.objective, t.cost) else {
                            continue;
                        };
                        x.extend_from_slice(&t.x);
                        y.push(config.study.direction.to_internal(obj));
                        c.push(cost);
                    }
                    TrialState::Running => pending.extend_from_slice(&t.x),
                    _ => {}
                }
            }
            // Budget decisions count what running trials will cost when the cost is known, so
            // parallel workers cannot overspend together.
            let committed = spent
                + trials
                    .iter()
                    .filter(|t| t.state == TrialState::Running && counts_toward_budget(&config, t))
                    .filter_map(|t| known_cost(&config, &t.x))
                    .sum::<f64>();
            if let Some(stopped) = stored_stop(&config, state) {
                finished = Some(stopped);
                return Err(Error::invalid("study", "finished"));
            }
            if let Some(m) = config.budget.max_trials
                && trials.len() as u64 >= m
            {
                finished = Some(Finished::MaxTrials(m));
                return Err(Error::invalid("study", "finished"));
            }
            let lambda = replay_lambda(&config, trials, pbgi_d_start(&config, state));
            let mut ctx = StepContext {
                cumulative_cost: spent,
                remaining_budget: config.budget.total.map(|b| b - spent),
                total_budget: config.budget.total,
                lambda,
                // B-MS-EI's refill state and warm-start trees from the previous ask.
                bmsei: state
                    .get("bmsei")
                    .and_then(|v| serde_json::from_value(v.clone()).ok()),
            };
            let cost = match config.cost.kind {
                CostKind::Uniform => CostSetting::Uniform,
                CostKind::Known => CostSetting::Known(&linear),
                CostKind::Reported | CostKind::Runtime => {
                    if y.is_empty() {
                        CostSetting::Uniform
                    } else {
                        CostSetting::Unknown
                    }
                }
            };
            let warm: Option<GpParams> = state.get("params").and_then(params_from_json);
            let history = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &pending,
            };
            // A different seed per trial, derived from the run's seed.
            let seed =
                config.policy.seed ^ (trials.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            // The initial design continues over pending (and failed) trials too: the k-th trial
            // gets design point k until enough evaluations are complete to fit a model.
            let mut prop = if trials.len() < n_init || y.len() < n_init {
                Proposal {
                    x: design_point(d, trials.len() as u64, step.design_seed)?,
                    phase: Phase::InitialDesign,
                    acquisition_value: f64::NAN,
                    params: None,
                    cost_params: None,
                    lambda: None,
                    predicted_cost: None,
                    bmsei: None,
                }
            } else {
                propose(d, history, &step, &ctx, cost, seed, warm.as_ref())?
            };
            // PBGI-D started from the automatic λ: at the first model step, fit, choose λ, and
            // propose again from it.
            let mut auto_record: Option<serde_json::Value> = None;
            if let Some(sc) = &config.policy.stopping
                && sc.start_pbgi_d
                && prop.phase == Phase::Model
                && pbgi_d_start(&config, state).is_none()
                && let Some(models) = models_from_proposal(d, &history, &step, &prop)?
            {
                let (lam, rec) = auto_lambda(&models.model, sc, &config, spent, trials.len())?;
                auto_record = Some(rec);
                ctx.lambda = Some(lam);
                prop = propose(d, history, &step, &ctx, cost, seed, warm.as_ref())?;
            }
            prop.x = space.snap(&prop.x);
            if let (Some(total), Some(next)) = (config.budget.total, known_cost(&config, &prop.x)) {
                let counts = config.budget.count_initial || prop.phase != Phase::InitialDesign;
                if counts && committed + next > total * (1.0 + 1e-12) {
                    finished = Some(Finished::Budget { spent, total });
                    return Err(Error::invalid("study", "finished"));
                }
            }
            // Unknown costs: propose only if the predicted cost fits (configurable).
            if let (Some(total), Some(pc), CostKind::Reported | CostKind::Runtime) =
                (config.budget.total, prop.predicted_cost, config.cost.kind)
                && config.budget.predicted_cost_must_fit
                && committed + pc > total
            {
                finished = Some(Finished::Budget { spent, total });
                return Err(Error::invalid("study", "finished"));
            }
            if let Some(total) = config.budget.total
                && committed >= total
            {
                finished = Some(Finished::Budget { spent, total });
                return Err(Error::invalid("study", "finished"));
            }
            let phase = match prop.phase {
                Phase::InitialDesign => "initial",
                Phase::Random => "random",
                Phase::Model => "model",
            };
            let acq_value = if prop.acquisition_value.is_finite() {
                json!(prop.acquisition_value)
            } else {
                serde_json::Value::Null
            };
            // The stopping rule, on the posterior of all complete data (after-posterior-update
            // semantics): if it fires, the proposal is discarded.
            let mut stopping_state = auto_record.or_else(|| state.get("stopping").cloned());
            let mut stopping_data = serde_json::Value::Null;
            if let (Some(sc), Phase::Model) = (&config.policy.stopping, prop.phase)
                && let Some(models) = models_from_proposal(d, &history, &step, &prop)?
            {
                let lambda = match sc.configured_lambda(&config) {
                    Some(l) => l,
                    None => match stopping_state.as_ref().and_then(|s| s["lambda"].as_f64()) {
                        Some(l) => l,
                        None => {
                            // λ = U/(B − C), once, from the first model fit.
                            let (lam, rec) =
                                auto_lambda(&models.model, sc, &config, spent, trials.len())?;
                            stopping_state = Some(rec);
                            lam
                        }
                    },
                };
                let mut rule = sc.rule.build(Some(lambda))?;
                replay_rule(rule.as_mut(), trials, lambda)?;
                let unknown = models.cost_model.is_some();
                let mut supplied =
                    supplied_from_proposal(&step, &history, &prop, unknown, Some(lambda));
                // Always the LogEIPC form, so every trial records the same statistic.
                supplied.max_pbgi_index = None;
                let cost_info = match (&models.cost_model, config.cost.kind) {
                    (Some(cm), _) => CostInfo::Unknown(cm),
                    (None, CostKind::Known) => CostInfo::Known(&linear),
                    _ => CostInfo::Uniform,
                };
                let run = RunState {
                    d,
                    x: &x,
                    y: &y,
                    cost: &c,
                    n_initial: n_init.min(y.len()),
                    model: Some(&models.model),
                    previous_model: None,
                    cost_info,
                    candidates: None,
                    // The stopping statistic over exactly the points the study can propose.
                    space: step.space.as_ref(),
                    supplied,
                    seed,
                };
                let dec = rule.check(&run)?;
                stopping_data = report_json(dec.report(), lambda, dec.is_stop());
                if let Decision::Stop { reason, report } = dec {
                    stop_record = Some(json!({
                        "rule": report.rule,
                        "reason": reason,
                        "config": serde_json::Value::from(sc.clone()),
                        "check": stopping_data,
                        "at_trial": trials.len(),
                    }));
                    finished = Some(Finished::Stopped {
                        rule: report.rule.clone(),
                        reason,
                    });
                    pending_stopping_state = stopping_state;
                    return Err(Error::invalid("study", "finished"));
                }
            }
            let decision = json!({
                "phase": phase,
                "acquisition": config.policy.acquisition,
                "acquisition_value": acq_value,
                "lambda": prop.lambda,
                "params": prop.params.as_ref().map(params_to_json),
                "cost_params": prop.cost_params.as_ref().map(params_to_json),
                "predicted_cost": prop.predicted_cost.or(known_cost(&config, &prop.x)),
                "pending": pending.len() / d.max(1),
                "stopping": stopping_data,
            });
            let mut decision = decision;
            if let Some(b) = &prop.bmsei {
                decision["bmsei"] = json!({
                    "suggested_budget": b.suggested_budget,
                    "lower_bound": b.lower_bound,
                });
            }
            let mut new_state = match state {
                serde_json::Value::Object(_) => state.clone(),
                _ => json!({}),
            };
            if let Some(p) = &prop.params {
                new_state["params"] = params_to_json(p);
            }
            if let Some(b) = &prop.bmsei {
                new_state["bmsei"] =
                    serde_json::to_value(b).map_err(|e| Error::invalid("bmsei", e.to_string()))?;
            }
            // A stop of an earlier stopping config no longer applies once the study continues.
            if let Some(m) = new_state.as_object_mut() {
                m.remove("stopped");
            }
            if let Some(s) = stopping_state {
                new_state["stopping"] = s;
            }
            Ok((
                NewTrial {
                    params: space.decode(&prop.x),
                    x: prop.x,
                    decision,
                },
                new_state,
            ))
        };
        let result = self.storage.ask_with(&name, worker, &mut decide);
        if let Some(record) = stop_record {
            // Keep the stop (and an automatic λ) in the study state: a later ask or resume
            // reports it without refitting.
            self.storage.update_state(&name, &mut |state| {
                let mut s = match state {
                    serde_json::Value::Object(_) => state.clone(),
                    _ => json!({}),
                };
                s["stopped"] = record.clone();
                if let Some(l) = &pending_stopping_state {
                    s["stopping"] = l.clone();
                }
                Ok(Some(s))
            })?;
        }
        match result {
            Ok(t) => Ok(Ask::Trial(Box::new(t))),
            Err(e) => match finished {
                Some(f) => Ok(Ask::Finished(f)),
                None => Err(e),
            },
        }
    }

    /// [`Study::ask`] of a `[cvs]` study: a control set and values for its parameters.
    fn ask_cvs(&mut self, worker: &str, section: &crate::cvs::CvsSection) -> Result<Ask> {
        let name = self.config.study.name.clone();
        let config = self.config.clone();
        let space = self.space.clone();
        let mut finished: Option<Finished> = None;
        let mut decide = |trials: &[Trial], state: &serde_json::Value| match crate::cvs::decide(
            &config, section, &space, trials, state,
        )? {
            Ok(next) => Ok(next),
            Err(f) => {
                finished = Some(f);
                Err(Error::invalid("study", "finished"))
            }
        };
        let result = self.storage.ask_with(&name, worker, &mut decide);
        match result {
            Ok(t) => Ok(Ask::Trial(Box::new(t))),
            Err(e) => match finished {
                Some(f) => Ok(Ask::Finished(f)),
                None => Err(e),
            },
        }
    }

    /// Records the outcome of trial `number`.
    ///
    /// In a `[cvs]` study, a complete outcome of a trial that leaves parameters random must come
    /// with their realized values ([`Study::tell_realized`]); this is an error otherwise.
    pub fn tell(&mut self, number: u64, outcome: &Outcome) -> Result<Trial> {
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
        self.storage.tell(&self.config.study.name, number, outcome)
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
    ) -> Result<Trial> {
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
        self.storage.tell(
            &self.config.study.name,
            number,
            &Outcome::CompleteAt {
                objective,
                cost,
                params,
                x,
            },
        )
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
        let stopped = stored_stop(&self.config, &state);
        let last = match &stopped {
            Some(_) => Some(&state["stopped"]["check"]),
            None => trials
                .iter()
                .rev()
                .map(|t| &t.decision["stopping"])
                .find(|s| s.is_object()),
        };
        let stopping = if self.config.policy.stopping.is_some() {
            last.and_then(status_from_json)
        } else {
            None
        };
        Ok(Summary {
            counts,
            total_cost,
            budget_spent,
            best,
            lambda: match &self.config.cvs {
                // The Gittins policies record their λ with every decision.
                Some(_) => trials
                    .iter()
                    .rev()
                    .find_map(|t| t.decision["lambda"].as_f64()),
                None => replay_lambda(&self.config, &trials, pbgi_d_start(&self.config, &state)),
            },
            stopping,
            stop_reason: stopped.map(|f| match f {
                Finished::Stopped { reason, .. } => reason,
                other => other.to_string(),
            }),
        })
    }
}

/// GP hyperparameters as JSON (recorded with every decision; warm start of the next fit).
pub fn params_to_json(p: &GpParams) -> serde_json::Value {
    json!({
        "kernel": p.kernel.kind.name(),
        "lengthscales": p.kernel.lengthscales,
        "outputscale": p.kernel.outputscale,
        "mean": p.mean,
        "noise": p.noise,
    })
}

/// Reads [`params_to_json`] back (None if anything is missing or invalid).
pub fn params_from_json(v: &serde_json::Value) -> Option<GpParams> {
    let kind = KernelKind::parse(v["kernel"].as_str()?).ok()?;
    let ls: Vec<f64> = v["lengthscales"]
        .as_array()?
        .iter()
        .map(|x| x.as_f64())
        .collect::<Option<_>>()?;
    Some(GpParams {
        kernel: Kernel::new(kind, ls, v["outputscale"].as_f64()?).ok()?,
        mean: v["mean"].as_f64()?,
        noise: v["noise"].as_f64()?,
    })
}

/// Whether a trial's cost is charged to the budget (the initial design's only if `count_initial`).
pub(crate) fn counts_toward_budget(config: &StudyConfig, t: &Trial) -> bool {
    config.budget.count_initial || t.decision["phase"] != "initial"
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

/// PBGI-D's λ replayed from the trials (see the module docs); the fixed λ for `pbgi`.
fn replay_lambda(config: &StudyConfig, trials: &[Trial], start: Option<f64>) -> Option<f64> {
    match config.policy.acquisition.as_str() {
        "pbgi" => config.policy.lambda,
        "pbgi_d" => {
            let mut lambda = start.unwrap_or(config.policy.lambda0);
            let mut best = f64::NEG_INFINITY;
            let dir = config.study.direction;
            for t in trials {
                if let (TrialState::Complete, Some(v)) = (t.state, t.objective) {
                    best = best.max(dir.to_internal(v));
                    if t.decision["phase"] == "model"
                        && let Some(g) = t.decision["acquisition_value"].as_f64()
                        && g < best
                    {
                        lambda /= config.policy.decay;
                    }
                }
            }
            Some(lambda)
        }
        _ => None,
    }
}

/// A non-finite number as JSON `null`.
fn finite_or_null(v: f64) -> serde_json::Value {
    if v.is_finite() {
        json!(v)
    } else {
        serde_json::Value::Null
    }
}

/// The decision data of one stopping check: the headline statistic and its threshold, whether the
/// rule fired, and the full report.
fn report_json(r: &Report, lambda: f64, fired: bool) -> serde_json::Value {
    let head = r.statistics.first();
    let raw = r.statistics.iter().find(|s| s.name == "max_log_eipc");
    json!({
        "rule": r.rule,
        "lambda": lambda,
        "iteration": r.iteration,
        "statistic": head.map(|s| s.name.clone()),
        "value": head.map_or(serde_json::Value::Null, |s| finite_or_null(s.value)),
        "threshold": head.map_or(serde_json::Value::Null, |s| finite_or_null(s.threshold)),
        "max_log_eipc": raw.map_or(serde_json::Value::Null, |s| finite_or_null(s.value)),
        "triggered": r.triggered,
        "consecutive": r.consecutive,
        "fired": fired,
        "report": serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
    })
}

/// Reads [`report_json`] back for [`Summary`].
fn status_from_json(v: &serde_json::Value) -> Option<StoppingStatus> {
    Some(StoppingStatus {
        rule: v["rule"].as_str()?.to_string(),
        lambda: v["lambda"].as_f64()?,
        statistic: v["statistic"].as_str().unwrap_or("").to_string(),
        value: v["value"].as_f64().unwrap_or(f64::NAN),
        threshold: v["threshold"].as_f64().unwrap_or(f64::NAN),
        iteration: v["iteration"].as_u64().unwrap_or(0) as usize,
        fired: v["fired"].as_bool().unwrap_or(false),
    })
}

/// The stop recorded in the study state, if the configured stopping rule is still the one that
/// fired (changing or removing `[policy] stopping` lets the study continue).
fn stored_stop(config: &StudyConfig, state: &serde_json::Value) -> Option<Finished> {
    let rec = state.get("stopped")?;
    let sc = config.policy.stopping.as_ref()?;
    if rec["config"] != serde_json::Value::from(sc.clone()) {
        return None;
    }
    Some(Finished::Stopped {
        rule: rec["rule"].as_str().unwrap_or("pbgi").to_string(),
        reason: rec["reason"].as_str().unwrap_or("").to_string(),
    })
}

/// Feeds a fresh rule the statistics recorded on earlier trials at the same λ, so its moving
/// window and debounce counter continue across asks (the rule is rebuilt on every ask).
fn replay_rule(rule: &mut dyn StoppingRule, trials: &[Trial], lambda: f64) -> Result<()> {
    for t in trials {
        let s = &t.decision["stopping"];
        if s["lambda"].as_f64() != Some(lambda) {
            continue;
        }
        let (Some(v), Some(it)) = (s["max_log_eipc"].as_f64(), s["iteration"].as_u64()) else {
            continue;
        };
        // A stand-in run with the recorded iteration count; only the supplied value is used.
        let zeros = vec![0.0; it as usize + 1];
        let mut run = RunState::new(1, &zeros, &zeros, &[], 1);
        run.supplied.max_log_eipc_exp = Some(v);
        rule.check(&run)?;
    }
    Ok(())
}

/// PBGI-D's starting λ when it starts from the automatic stopping λ (`start_pbgi_d = true`) and
/// that λ has been chosen.
fn pbgi_d_start(config: &StudyConfig, state: &serde_json::Value) -> Option<f64> {
    let sc = config.policy.stopping.as_ref()?;
    if !sc.start_pbgi_d {
        return None;
    }
    state.get("stopping")?.get("lambda")?.as_f64()
}

/// `λ = U/(B − C)` from the fitted model (prior paths, `u_samples` of them, the study's seed), with
/// the record kept in the study state.
fn auto_lambda(
    model: &pandora_core::gp::GpModel,
    sc: &crate::config::StudyStopping,
    config: &StudyConfig,
    spent: f64,
    at_trial: usize,
) -> Result<(f64, serde_json::Value)> {
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
    let lam = lambda_from_budget(est.u, total, spent)?;
    Ok((
        lam,
        json!({
            "lambda": lam,
            "u": est.u,
            "u_std_error": finite_or_null(est.std_error),
            "u_samples": est.samples,
            "budget": total,
            "spent": spent,
            "at_trial": at_trial,
        }),
    ))
}
