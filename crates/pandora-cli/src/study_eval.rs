//! What one evaluation of a `pandora run` worker comes to, and how a command is run for it:
//! shared by the worker loop (`study_cmd`) and trials with steps (`study_steps`), so that neither
//! imports the other's internals.

use pandora_study::command::{self, CommandSpec, ReportedStep};
use pandora_study::shutdown::Shutdown;
use pandora_study::{Outcome, Recorded};
use std::path::Path;
use std::time::Duration;

/// The result of evaluating one trial.
pub(crate) struct Evaluation {
    /// The outcome to tell. For a trial with steps (whose steps are in `steps`): a failure, or
    /// `None` when the run ended normally.
    pub(crate) outcome: Option<Outcome>,
    /// Set when the worker was stopped by a signal and the evaluation did not succeed: the trial
    /// is abandoned with this reason instead of being told.
    pub(crate) abandon: Option<String>,
    /// A trial with steps: the steps the command reported, told first, in order.
    pub(crate) steps: Vec<ReportedStep>,
}

impl Evaluation {
    pub(crate) fn told(outcome: Outcome) -> Self {
        Self {
            outcome: Some(outcome),
            abandon: None,
            steps: Vec::new(),
        }
    }
}

/// How to run the study's command (`env`: variables besides the worker's own).
pub(crate) fn command_spec<'a>(
    cmd: &'a [String],
    timeout_s: Option<f64>,
    dir: Option<&'a Path>,
    stop: Option<&'a Shutdown>,
    env: &'a [(String, String)],
) -> std::result::Result<CommandSpec<'a>, String> {
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
/// stopped at the end of the grace period, or failed after the worker's signal.
pub(crate) fn abandon_reason(
    error: Option<&command::CommandError>,
    stop: Option<&Shutdown>,
) -> Option<String> {
    match (error, stop.and_then(Shutdown::signal)) {
        (Some(e @ command::CommandError::Stopped { .. }), _) => Some(format!("abandoned: {e}")),
        (Some(e), Some(signal)) => Some(format!(
            "abandoned: stopped by {signal}; the evaluation then failed: {e}"
        )),
        _ => None,
    }
}

/// What became of an evaluated trial.
pub(crate) enum Ending {
    /// Its outcome was recorded.
    Told(Box<Recorded>),
    /// It was abandoned (the worker was stopped by a signal).
    Abandoned,
}
