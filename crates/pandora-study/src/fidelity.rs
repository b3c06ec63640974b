//! Studies with steps (cost-aware freeze-thaw): every trial is a training run of up to
//! `max_steps` steps that can be paused after any step and resumed later, and every ask decides
//! between resuming a paused run, starting a new configuration and stopping the study, on one
//! scale (see `docs/freeze-thaw.md`, "Studies with steps").
//!
//! # The decision
//! After an initial design (configurations started from a scrambled Sobol sequence, as in every
//! study), an ask fits the learning-curve model to the told steps of every live trial (running,
//! paused or complete; failed and abandoned ones are left out) and applies the Gittins index
//! policy of [`pandora_core::freeze_thaw`]: the index of every paused run, the index of the best
//! new configuration and the best complete run's value. The largest index wins: resume that run
//! ([`Decided::Resume`]) or start that configuration ([`Decided::Trial`]), each for up to
//! `steps_per_ask` steps. If the best complete run's value is at least every index, the study
//! stops (more steps are not worth their cost at this λ). Running trials are busy: their told
//! steps inform the model, but they cannot be chosen.
//!
//! # Costs and budget
//! Step `t` of configuration `x` costs `c(x)·w_t`: `c` is 1 (uniform), the known formula, or
//! learned from the reported step costs by the log-cost GP (each trial's reported cost per unit
//! of step weight); `w` is `step_weights`. The budget counts every told step (and the cost of a
//! failure); the steps handed out but not told yet are committed against it at their expected
//! cost, and a run is handed out only for as many steps as the budget left can pay for
//! (at least one, or the study is finished).
//!
//! # Replay
//! Nothing but the trials and the learning-curve model's last hyperparameters (the warm start of
//! the next fit, in the study state) is carried between asks, and every decision is
//! deterministic for the trials, that state and the study's seed.

pub mod section;

use crate::config::{CostKind, StudyConfig};
use crate::error::Result;
use crate::space::SearchSpace;
use crate::trial::{Decided, NewTrial, Trial, TrialState, finish};
use pandora_core::acquisition::{CostModel, LinearMeanCost, UnknownCost, fit_log_cost_model};
use pandora_core::freeze_thaw::{self, Schedule, ThawAction, ThawDecision, ThawOptions};
use pandora_core::gp::GpModel;
use pandora_core::gp::fit::{FitOptions, NoiseSpec};
use pandora_core::gp::learning_curve::LcParams;
use pandora_core::policy::{Phase, design_point};
use pandora_core::run::Finished;
use pandora_core::run::record::{DecisionRecord, StudyState, ThawCarry};
pub use section::FidelitySection;

/// The acquisition name recorded with the trials the index policy starts.
pub const POLICY_NAME: &str = "freeze_thaw";

/// One ask of a `[fidelity]` study, under the storage lock.
pub fn decide(
    config: &StudyConfig,
    section: &FidelitySection,
    space: &SearchSpace,
    trials: &[Trial],
    mut state: StudyState,
) -> Result<Decided> {
    let schedule = section.schedule()?;
    let costs = StepCosts::new(config, &schedule, trials)?;
    let remaining = match config.budget.total {
        Some(total) => {
            let spent = spent(trials);
            let left = total - spent - committed(trials, &costs)?;
            if left <= 0.0 {
                return Ok(finish(Finished::Budget { spent, total }, state));
            }
            Some((left, spent, total))
        }
        None => None,
    };
    let d = space.dim();
    let n0 = config.policy.initial_design.unwrap_or(2 * (d + 1)).max(1);
    let reported = trials.iter().any(|t| !t.steps.is_empty());
    let action = if trials.len() < n0 || !reported {
        let x = space.snap(&design_point(d, trials.len() as u64, config.policy.seed)?);
        Action::Start(
            x,
            Box::new(DecisionRecord::new(Phase::InitialDesign, POLICY_NAME)),
        )
    } else {
        index_action(config, section, &schedule, &costs, trials, &mut state)?
    };
    let action = match action {
        Action::Start(..) if at_max_trials(config, trials) => {
            // No new configuration may start: the best run that can go on, if any.
            match best_paused(trials) {
                Some(number) => Action::Resume(number),
                None => {
                    let m = config.budget.max_trials.unwrap_or(0);
                    return Ok(finish(Finished::MaxTrials(m), state));
                }
            }
        }
        a => a,
    };
    let sizing = Sizing {
        steps_per_ask: section.steps_per_ask as usize,
        costs: &costs,
        remaining,
    };
    hand_out(space, &sizing, trials, action, state)
}

/// What an ask does before the budget sizes it.
enum Action {
    Start(Vec<f64>, Box<DecisionRecord>),
    Resume(u64),
    Stop(Finished),
}

/// The index policy's action on the live trials (see the module doc).
fn index_action(
    config: &StudyConfig,
    section: &FidelitySection,
    schedule: &Schedule,
    costs: &StepCosts,
    trials: &[Trial],
    state: &mut StudyState,
) -> Result<Action> {
    let live: Vec<&Trial> = trials
        .iter()
        .filter(|t| {
            matches!(
                t.state,
                TrialState::Running | TrialState::Paused | TrialState::Complete
            )
        })
        .collect();
    let dir = config.study.direction;
    let views: Vec<freeze_thaw::TrialState> = live
        .iter()
        .map(|t| freeze_thaw::TrialState {
            x: t.x.clone(),
            values: t.steps.iter().map(|s| dir.to_internal(s.value)).collect(),
            busy: t.state != TrialState::Paused,
        })
        .collect();
    let mut opts = ThawOptions::new(section.lambda);
    opts.grid_points = section.grid();
    let warm = state
        .freeze_thaw
        .as_ref()
        .and_then(|c| LcParams::from_theta(opts.fit.kind, &c.theta).ok());
    let seed = step_seed(config, trials.len());
    let dec = costs.with_model(|cost| {
        freeze_thaw::decide(&views, schedule, cost, &opts, warm.as_ref(), seed)
    })?;
    state.freeze_thaw = Some(carry(&dec));
    Ok(match dec.action {
        ThawAction::Start { ref x } => {
            let mut record = DecisionRecord::new(Phase::Model, POLICY_NAME);
            record.acquisition_value = Some(dec.start.index);
            record.lambda = Some(section.lambda);
            record.predicted_cost = Some(costs.config_cost(x)?);
            record.pending = trials
                .iter()
                .filter(|t| t.state == TrialState::Running)
                .count();
            Action::Start(x.clone(), Box::new(record))
        }
        ThawAction::Continue { trial, .. } => Action::Resume(live[trial].number),
        ThawAction::Stop => Action::Stop(Finished::Stopped {
            rule: POLICY_NAME.into(),
            reason: stop_reason(&dec, dir),
        }),
    })
}

/// The study-state record of a decision.
fn carry(dec: &ThawDecision) -> ThawCarry {
    let action = match dec.action {
        ThawAction::Start { .. } => "start",
        ThawAction::Continue { .. } => "continue",
        ThawAction::Stop => "stop",
    };
    ThawCarry {
        theta: dec.params.to_theta(),
        action: action.into(),
        start_index: dec.start.index,
        best_continue: dec.indices.iter().flatten().copied().max_by(f64::total_cmp),
    }
}

/// Why the index rule stopped, in the study's direction.
fn stop_reason(dec: &ThawDecision, dir: crate::space::Direction) -> String {
    let best = dec.fallback.map_or(f64::NAN, |v| dir.from_internal(v));
    let mut why = format!(
        "freeze_thaw: the best complete run's value {best:.6} is at least every Gittins index \
         (new configuration: {:.6}",
        dir.from_internal(dec.start.index)
    );
    if let Some(g) = dec.indices.iter().flatten().copied().max_by(f64::total_cmp) {
        why += &format!(", best paused run: {:.6}", dir.from_internal(g));
    }
    why + ")"
}

/// The paused trial with the most told steps (the lowest number among equals): the run to go on
/// with when no new configuration may start. The index policy is not consulted here because its
/// choice was a start.
fn best_paused(trials: &[Trial]) -> Option<u64> {
    trials
        .iter()
        .filter(|t| t.state == TrialState::Paused)
        .max_by(|a, b| {
            a.steps
                .len()
                .cmp(&b.steps.len())
                .then(b.number.cmp(&a.number))
        })
        .map(|t| t.number)
}

fn at_max_trials(config: &StudyConfig, trials: &[Trial]) -> bool {
    config
        .budget
        .max_trials
        .is_some_and(|m| trials.len() as u64 >= m)
}

/// How many steps an ask may hand out: `steps_per_ask`, within the schedule and the budget left
/// (`remaining`: the budget left, the cost spent and the total).
struct Sizing<'a> {
    steps_per_ask: usize,
    costs: &'a StepCosts,
    remaining: Option<(f64, f64, f64)>,
}

impl Sizing<'_> {
    /// The last step of a run of `x` that has told `done` steps, or the budget finish if not
    /// even one more step fits.
    fn last_step(&self, x: &[f64], done: usize) -> Result<std::result::Result<u32, Finished>> {
        let weights = &self.costs.weights;
        let last = (done + self.steps_per_ask).min(weights.len());
        let Some((left, spent, total)) = self.remaining else {
            return Ok(Ok(last as u32));
        };
        let c = self.costs.config_cost(x)?;
        let (mut sum, mut to) = (0.0, done);
        for w in &weights[done..last] {
            sum += c * w;
            if sum > left * (1.0 + 1e-12) {
                break;
            }
            to += 1;
        }
        Ok(if to == done {
            Err(Finished::Budget { spent, total })
        } else {
            Ok(to as u32)
        })
    }
}

/// Turns an action into the trial to insert or resume, sized by [`Sizing`].
fn hand_out(
    space: &SearchSpace,
    sizing: &Sizing<'_>,
    trials: &[Trial],
    action: Action,
    mut state: StudyState,
) -> Result<Decided> {
    let (x, done) = match &action {
        Action::Stop(f) => {
            state.finished = Some(f.clone());
            return Ok(Decided::Finished(f.clone(), Some(state.to_json())));
        }
        Action::Start(x, _) => (x.clone(), 0),
        Action::Resume(number) => {
            let t = trials.iter().find(|t| t.number == *number).ok_or_else(|| {
                crate::error::Error::NotFound(format!("trial {number} to resume"))
            })?;
            (t.x.clone(), t.steps.len())
        }
    };
    let step_to = match sizing.last_step(&x, done)? {
        Ok(to) => to,
        Err(budget) => return Ok(finish(budget, state)),
    };
    state.finished = None;
    Ok(match action {
        Action::Start(x, decision) => Decided::Trial(
            NewTrial {
                params: space.decode(&x),
                x,
                decision: *decision,
                step_to: Some(step_to),
            },
            state.to_json(),
        ),
        Action::Resume(number) => Decided::Resume {
            number,
            step_to,
            state: state.to_json(),
        },
        Action::Stop(f) => Decided::Finished(f, Some(state.to_json())),
    })
}

/// Cost counted toward the budget: every told step and every failure's cost.
fn spent(trials: &[Trial]) -> f64 {
    trials.iter().filter_map(|t| t.cost).sum()
}

/// The expected cost of the steps handed out and not told yet.
fn committed(trials: &[Trial], costs: &StepCosts) -> Result<f64> {
    let mut sum = 0.0;
    for t in trials.iter().filter(|t| t.state == TrialState::Running) {
        let (Some(to), done) = (t.step_to, t.steps.len()) else {
            continue;
        };
        let c = costs.config_cost(&t.x)?;
        let to = (to as usize).min(costs.weights.len());
        sum += costs.weights[done.min(to)..to]
            .iter()
            .map(|w| c * w)
            .sum::<f64>();
    }
    Ok(sum)
}

/// The per-configuration cost `c(x)` of a study's steps (step `t` costs `c(x)·w_t`).
pub struct StepCosts {
    weights: Vec<f64>,
    kind: CostModelKind,
}

enum CostModelKind {
    Uniform,
    Known(LinearMeanCost),
    /// The log-cost GP on the reported cost per unit of step weight; `None` before any step is
    /// told (a cost of 1 per unit of weight until then).
    Learned(Option<Box<GpModel>>),
}

impl StepCosts {
    /// The cost model of `config` given the trials' told steps.
    pub fn new(config: &StudyConfig, schedule: &Schedule, trials: &[Trial]) -> Result<Self> {
        let kind = match config.cost.kind {
            CostKind::Uniform => CostModelKind::Uniform,
            CostKind::Known => CostModelKind::Known(LinearMeanCost {
                offset: config.cost.offset,
                slope: config.cost.slope,
            }),
            CostKind::Reported | CostKind::Runtime => {
                CostModelKind::Learned(learned(schedule, trials)?)
            }
        };
        Ok(Self {
            weights: schedule.weights().to_vec(),
            kind,
        })
    }

    /// Calls `f` with the cost model the index policy prices steps with (`None`: 1 per unit of
    /// step weight).
    pub fn with_model<R>(&self, f: impl FnOnce(Option<&dyn CostModel>) -> R) -> R {
        match &self.kind {
            CostModelKind::Uniform | CostModelKind::Learned(None) => f(None),
            CostModelKind::Known(c) => f(Some(c)),
            CostModelKind::Learned(Some(gp)) => f(Some(&UnknownCost(gp.as_ref()))),
        }
    }

    /// `E[c(x)] = exp(m + v/2)` of the cost model (1 without one).
    pub fn config_cost(&self, x: &[f64]) -> Result<f64> {
        self.with_model(|model| match model {
            None => Ok(1.0),
            Some(m) => {
                let lc = m.log_cost(x, x.len(), false)?;
                Ok((lc.mean[0] + 0.5 * lc.var[0]).exp())
            }
        })
    }

    /// The cost of step `step` (1-based) of `x` when costs are known (uniform or a formula);
    /// `None` for reported costs or a step beyond the schedule.
    pub fn known_step_cost(&self, x: &[f64], step: u32) -> Option<f64> {
        let w = *self.weights.get((step as usize).checked_sub(1)?)?;
        match &self.kind {
            CostModelKind::Uniform => Some(w),
            CostModelKind::Known(c) => {
                Some(w * (c.offset + c.slope * x.iter().sum::<f64>() / x.len().max(1) as f64))
            }
            CostModelKind::Learned(_) => None,
        }
    }
}

/// The log-cost GP of reported step costs: one point per trial with told steps, its cost per
/// unit of step weight (`None` before any step is told).
fn learned(schedule: &Schedule, trials: &[Trial]) -> Result<Option<Box<GpModel>>> {
    let mut x = Vec::new();
    let mut rates = Vec::new();
    let mut d = 0;
    for t in trials.iter().filter(|t| !t.steps.is_empty()) {
        let cost: f64 = t.steps.iter().map(|s| s.cost).sum();
        let weight: f64 = schedule.weights()[..t.steps.len().min(schedule.len())]
            .iter()
            .sum();
        x.extend_from_slice(&t.x);
        rates.push(cost / weight);
        d = t.x.len();
    }
    if rates.is_empty() {
        return Ok(None);
    }
    // Reported costs are noisy: the noise variance is learned (never below 1e-4), as for the
    // log-cost GP of other studies with reported costs.
    let opts = FitOptions {
        noise: NoiseSpec::Learned { floor: 1e-4 },
        ..FitOptions::default()
    };
    Ok(Some(Box::new(fit_log_cost_model(&x, &rates, d, &opts)?)))
}

/// A different seed per decision, derived from the study's seed.
fn step_seed(config: &StudyConfig, trials: usize) -> u64 {
    config.policy.seed ^ (trials as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
