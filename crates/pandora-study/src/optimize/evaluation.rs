//! What one evaluation comes to ([`Evaluation`]), what an objective is ([`Objective`]), and how
//! a command is run for one: shared by the study's configured objectives
//! ([`super::objective`]), trials with steps ([`super::steps`]) and the worker loop
//! ([`super::worker`]), so that none imports another's internals.

use crate::command::{CommandError, CommandSpec, Reported, ReportedStep};
use crate::config::CostKind;
use crate::shutdown::Shutdown;
use crate::study::{Recorded, Study};
use crate::trial::{Outcome, Trial};
use std::path::Path;
use std::time::Duration;

/// The result of evaluating one trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The outcome to tell. For a trial with steps (whose steps are in `steps`): a failure, or
    /// `None` when the run ended normally.
    pub outcome: Option<Outcome>,
    /// Set when the worker was stopped by a signal and the evaluation did not succeed: the trial
    /// is abandoned with this reason instead of being told.
    pub abandon: Option<String>,
    /// A trial with steps: the steps the evaluation reported, told first, in order.
    pub steps: Vec<ReportedStep>,
}

impl Evaluation {
    /// An evaluation whose outcome is told.
    pub fn told(outcome: Outcome) -> Self {
        Self {
            outcome: Some(outcome),
            abandon: None,
            steps: Vec::new(),
        }
    }

    /// A failed evaluation (no cost).
    pub fn failed(reason: impl Into<String>) -> Self {
        Self::told(Outcome::Failed {
            reason: reason.into(),
            cost: None,
        })
    }

    /// The evaluation of `trial` that returned `result` (a value and perhaps a cost, or why it
    /// failed) after `elapsed` seconds, with its cost as the study's `[cost] kind` says:
    /// `uniform`/`known` the known cost (1 for uniform), `runtime` the wall time, `reported`
    /// the returned cost (its absence fails the trial). A failed trial keeps a known or measured
    /// cost.
    pub fn of_result(
        study: &Study,
        trial: &Trial,
        result: std::result::Result<Reported, String>,
        elapsed: f64,
    ) -> Self {
        Self::told(outcome(study, trial, result, elapsed))
    }
}

/// An objective the worker loop can evaluate: the study's configured one
/// ([`super::ConfigObjective`]) or any function of the study and the trial.
///
/// `stop` is the worker's [`Shutdown`], when it listens for signals: an evaluation that can be
/// interrupted stops once its grace period has ended and says so in
/// [`Evaluation::abandon`]. Evaluations run on the worker threads, in parallel.
pub trait Objective: Sync {
    /// Evaluates `trial` of `study`.
    fn evaluate(&self, study: &Study, trial: &Trial, stop: Option<&Shutdown>) -> Evaluation;

    /// Whether the objective ends the loop: checked before each ask, so that no worker asks for
    /// another trial once it says so (e.g. a Python objective raised an exception, which the
    /// caller re-raises). The loop then returns as after a signal, without a finish reason.
    fn ended(&self) -> bool {
        false
    }
}

impl<F> Objective for F
where
    F: Fn(&Study, &Trial, Option<&Shutdown>) -> Evaluation + Sync,
{
    fn evaluate(&self, study: &Study, trial: &Trial, stop: Option<&Shutdown>) -> Evaluation {
        self(study, trial, stop)
    }
}

/// What became of an evaluated trial.
#[derive(Debug)]
pub enum Ending {
    /// Its outcome was recorded.
    Told(Box<Recorded>),
    /// It was abandoned (the worker was stopped by a signal).
    Abandoned,
}

/// How to run the study's command (`env`: variables besides the worker's own).
pub(crate) fn command_spec<'a>(
    cmd: &'a [String],
    timeout_s: Option<f64>,
    dir: Option<&'a Path>,
    stop: Option<&'a Shutdown>,
    env: &'a [(String, String)],
) -> Result<CommandSpec<'a>, String> {
    // Validated by the configuration; checked again, as converting may not panic.
    let timeout = timeout_s
        .map(Duration::try_from_secs_f64)
        .transpose()
        .map_err(|e| format!("objective.timeout_s: {e}"))?;
    Ok(CommandSpec {
        argv: cmd,
        dir,
        timeout,
        stop,
        env,
    })
}

/// Why a trial is abandoned rather than told after its command ended with `error`: it was
/// stopped at the end of the grace period, or failed after the worker's signal (a scheduler
/// signals every process of the job, so the evaluation may have been killed by the same signal).
pub(crate) fn abandon_reason(
    error: Option<&CommandError>,
    stop: Option<&Shutdown>,
) -> Option<String> {
    match (error, stop.and_then(Shutdown::signal)) {
        (Some(e @ CommandError::Stopped { .. }), _) => Some(format!("abandoned: {e}")),
        (Some(e), Some(signal)) => Some(format!(
            "abandoned: stopped by {signal}; the evaluation then failed: {e}"
        )),
        _ => None,
    }
}

/// The outcome of an evaluation that returned `result` after `elapsed` seconds, with its cost
/// as `[cost] kind` says (a failed trial keeps a known or measured cost).
fn outcome(
    study: &Study,
    trial: &Trial,
    result: std::result::Result<Reported, String>,
    elapsed: f64,
) -> Outcome {
    let kind = study.config().cost.kind;
    let known = study.known_cost(&trial.x);
    match result {
        Ok(r) => {
            let cost = match kind {
                CostKind::Uniform | CostKind::Known => Ok(known.unwrap_or(1.0)),
                CostKind::Runtime => Ok(elapsed.max(1e-9)),
                CostKind::Reported => r.cost.ok_or_else(|| {
                    "cost.kind = \"reported\" but the output has no \"cost\"".to_string()
                }),
            };
            match cost {
                Ok(cost) => Outcome::Complete {
                    objective: r.objective,
                    cost,
                },
                Err(reason) => Outcome::Failed { reason, cost: None },
            }
        }
        Err(reason) => {
            let cost = match kind {
                CostKind::Runtime => Some(elapsed),
                CostKind::Uniform | CostKind::Known => known,
                CostKind::Reported => None,
            };
            Outcome::Failed { reason, cost }
        }
    }
}
