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
use pandora_core::gp::{GpParams, Kernel, KernelKind};
use pandora_core::policy::{
    CostSetting, History, Phase, Proposal, StepConfig, StepContext, design_point, propose,
};
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
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finished::Budget { spent, total } => {
                write!(f, "budget exhausted: spent {spent:.4} of {total:.4}")
            }
            Finished::MaxTrials(n) => write!(f, "reached max_trials = {n}"),
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
        let json = serde_json::to_string(&config)?;
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
        let space = config.search_space();
        Ok(Self {
            storage,
            config,
            space,
        })
    }

    /// Opens the existing study `name` in `storage` with its stored configuration (for commands
    /// given `--storage URL --study NAME` instead of a config file).
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
        Ok(StepConfig {
            acquisition,
            params: AcquisitionParams {
                lambda: p.lambda,
                beta: p.beta,
                ..AcquisitionParams::default()
            },
            initial_design: p.initial_design,
            design_seed: p.seed,
            ..StepConfig::default()
        })
    }

    /// The known cost of a unit-cube point, if costs are known.
    pub fn known_cost(&self, x: &[f64]) -> Option<f64> {
        known_cost(&self.config, x)
    }

    /// Hands out the next trial to `worker`, or says why the study is finished.
    pub fn ask(&mut self, worker: &str) -> Result<Ask> {
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
            if let Some(m) = config.budget.max_trials
                && trials.len() as u64 >= m
            {
                finished = Some(Finished::MaxTrials(m));
                return Err(Error::invalid("study", "finished"));
            }
            let lambda = replay_lambda(&config, trials);
            let ctx = StepContext {
                cumulative_cost: spent,
                remaining_budget: config.budget.total.map(|b| b - spent),
                total_budget: config.budget.total,
                lambda,
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
            // The initial design continues over pending trials too.
            let mut prop = if trials.len() < n_init {
                Proposal {
                    x: design_point(d, trials.len() as u64, step.design_seed)?,
                    phase: Phase::InitialDesign,
                    acquisition_value: f64::NAN,
                    params: None,
                    cost_params: None,
                    lambda: None,
                    predicted_cost: None,
                }
            } else {
                propose(d, history, &step, &ctx, cost, seed, warm.as_ref())?
            };
            prop.x = space.snap(&prop.x);
            if let (Some(total), Some(next)) = (config.budget.total, known_cost(&config, &prop.x)) {
                let counts = config.budget.count_initial || prop.phase != Phase::InitialDesign;
                if counts && spent + next > total * (1.0 + 1e-12) {
                    finished = Some(Finished::Budget { spent, total });
                    return Err(Error::invalid("study", "finished"));
                }
            }
            // Unknown costs: propose only if the predicted cost fits (configurable).
            if let (Some(total), Some(pc), CostKind::Reported | CostKind::Runtime) =
                (config.budget.total, prop.predicted_cost, config.cost.kind)
                && config.budget.predicted_cost_must_fit
                && spent + pc > total
            {
                finished = Some(Finished::Budget { spent, total });
                return Err(Error::invalid("study", "finished"));
            }
            if let Some(total) = config.budget.total
                && spent >= total
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
            let decision = json!({
                "phase": phase,
                "acquisition": config.policy.acquisition,
                "acquisition_value": acq_value,
                "lambda": prop.lambda,
                "params": prop.params.as_ref().map(params_to_json),
                "cost_params": prop.cost_params.as_ref().map(params_to_json),
                "predicted_cost": prop.predicted_cost.or(known_cost(&config, &prop.x)),
                "pending": pending.len() / d.max(1),
            });
            let new_state = match &prop.params {
                Some(p) => json!({ "params": params_to_json(p) }),
                None => state.clone(),
            };
            Ok((
                NewTrial {
                    params: space.decode(&prop.x),
                    x: prop.x,
                    decision,
                },
                new_state,
            ))
        };
        match self.storage.ask_with(&name, worker, &mut decide) {
            Ok(t) => Ok(Ask::Trial(Box::new(t))),
            Err(e) => match finished {
                Some(f) => Ok(Ask::Finished(f)),
                None => Err(e),
            },
        }
    }

    /// Records the outcome of trial `number`.
    pub fn tell(&mut self, number: u64, outcome: &Outcome) -> Result<Trial> {
        self.storage.tell(&self.config.study.name, number, outcome)
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
        Ok(Summary {
            counts,
            total_cost,
            budget_spent,
            best,
            lambda: replay_lambda(&self.config, &trials),
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
fn counts_toward_budget(config: &StudyConfig, t: &Trial) -> bool {
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
fn replay_lambda(config: &StudyConfig, trials: &[Trial]) -> Option<f64> {
    match config.policy.acquisition.as_str() {
        "pbgi" => config.policy.lambda,
        "pbgi_d" => {
            let mut lambda = config.policy.lambda0;
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
