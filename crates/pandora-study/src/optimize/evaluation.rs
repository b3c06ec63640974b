//! What one evaluation comes to ([`Evaluation`]), what an objective is ([`Objective`]), and how
//! a command is run for one: shared by the study's configured objectives
//! ([`super::objective`]), trials with steps ([`super::steps`]) and the worker loop
//! ([`super::worker`]), so that none imports another's internals.

use crate::command::{CommandError, CommandSpec, ReportedStep};
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
