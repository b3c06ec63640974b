//! Command objectives of studies with steps (`[fidelity]`, `pandora run`): the protocol of a
//! training run that can be paused and resumed.
//!
//! # Protocol
//! The command gets the trial's parameters as JSON on stdin, as every objective command does, and
//! in its environment:
//! - `PANDORA_TRIAL`: the trial's number;
//! - `PANDORA_STEP_FROM`, `PANDORA_STEP_TO`: the steps to run now (from 1: start; later: resume
//!   from the checkpoint saved after step `PANDORA_STEP_FROM − 1`);
//! - `PANDORA_MAX_STEPS`: the steps of a complete run;
//! - `PANDORA_CHECKPOINT_DIR`: a directory of this trial's own, kept between its runs, for the
//!   command's checkpoints.
//!
//! It prints one line `{"step": t, "objective": v}` per step as it finishes it (with `"cost": c`
//! when costs are reported), for the steps `from..=to` in order
//! ([`crate::command::parse_steps`]).
//!
//! # What is recorded
//! The steps printed are told in order ([`Study::tell_step`]), also when the command then fails,
//! so a step that finished is never run again. Then:
//! - every step of the run printed: the trial is paused (or complete at `max_steps`) by the
//!   storage;
//! - the command failed, or printed a line that is not the next step: the trial fails with the
//!   reason (its steps' costs stay spent);
//! - it exited successfully after fewer steps: the trial is paused with the steps it told
//!   ([`Study::abandon`] pauses a trial with steps), to be resumed later;
//! - the worker was stopped by a signal: the steps printed are told and the trial is paused.
//!
//! The steps are read when the command exits (a run that `pandora run` loses, e.g. to `kill -9`,
//! is paused by the heartbeat timeout with the steps told before; its steps are run again from
//! the last one told).

use super::evaluation::{Ending, Evaluation, abandon_reason, command_spec};
use crate::command::{self, ReportedStep};
use crate::error::{Error, Result};
use crate::shutdown::Shutdown;
use crate::study::{Recorded, Study};
use crate::trial::{Outcome, Trial, TrialState};
use std::path::{Path, PathBuf};

/// Runs the study's command `cmd` for the steps of `trial`'s current run (see the module doc).
pub(crate) fn evaluate(
    study: &Study,
    trial: &Trial,
    cmd: &[String],
    dir: Option<&Path>,
    stop: Option<&Shutdown>,
) -> Evaluation {
    let failed = |reason: String| Evaluation::failed(reason);
    let (Some(from), Some(to)) = (trial.step_from(), trial.step_to) else {
        return failed("internal error: not a trial with steps".into());
    };
    let cfg = study.config();
    let name = &cfg.study.name;
    let ckpt = match checkpoint_dir(dir, name, trial.number) {
        Ok(p) => p,
        Err(e) => return failed(format!("creating the checkpoint directory: {e}")),
    };
    let max_steps = cfg.fidelity.as_ref().map_or(to, |f| f.max_steps);
    let env = step_env(trial.number, from, to, max_steps, &ckpt);
    let spec = match command_spec(cmd, cfg.objective.timeout_s, dir, stop, &env) {
        Ok(spec) => spec,
        Err(e) => return failed(e),
    };
    let raw = command::run_raw(&spec, trial.params.to_string().as_bytes());
    let (steps, bad_line) = command::parse_steps(&raw.stdout, from, to);
    let abandon = abandon_reason(raw.status.as_ref().err(), stop);
    let reason = match (raw.status, bad_line) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(()), why) => why,
    };
    Evaluation {
        outcome: reason.map(|reason| Outcome::Failed { reason, cost: None }),
        abandon,
        steps,
    }
}

/// Records an evaluation of `trial`, a trial with steps: its steps, then its failure, its pause
/// (stopped by a signal, or fewer steps than handed out) or nothing more (see the module doc).
pub(crate) fn record(study: &mut Study, trial: &Trial, ev: Evaluation) -> Result<Ending> {
    let n = trial.number;
    let mut last = None;
    let mut outcome = ev.outcome;
    for ReportedStep {
        step,
        objective,
        cost,
    } in ev.steps
    {
        // Known costs are the study's to compute; a reported one must be given.
        let cost = cost.filter(|_| study.known_cost(&trial.x).is_none());
        match study.tell_step(n, step, objective, cost) {
            Ok(t) => last = Some(t),
            // The command's report is at fault (e.g. no cost where costs are reported).
            Err(Error::Invalid { what, reason }) => {
                let reason = format!("step {step}: {what}: {reason}");
                outcome = Some(Outcome::Failed { reason, cost: None });
                break;
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(reason) = ev.abandon {
        study.abandon(n, &reason)?;
        return Ok(Ending::Abandoned);
    }
    if let Some(outcome) = outcome {
        return study.tell(n, &outcome).map(|r| Ending::Told(Box::new(r)));
    }
    let trial = match last {
        Some(t) if t.state != TrialState::Running => t,
        _ => {
            let told = last.as_ref().map_or(0, |t| t.steps.len());
            let reason = format!(
                "paused: the command reported steps up to {told} of this run's {}",
                trial.step_to.unwrap_or(0)
            );
            study.abandon(n, &reason)?;
            study
                .trials()?
                .into_iter()
                .find(|t| t.number == n)
                .ok_or_else(|| Error::NotFound(format!("trial {n}")))?
        }
    };
    Ok(Ending::Told(Box::new(Recorded { trial, late: None })))
}

/// The checkpoint directory of trial `number` of study `name`, created if needed:
/// `DIR/pandora-checkpoints/STUDY/NUMBER` under the command's directory (the current one without
/// a configuration file). `STUDY` is the study name reduced to `[A-Za-z0-9._-]` (at most 64
/// characters) with a hash of the whole name, so no study name can reach outside the directory
/// and two names never share one.
fn checkpoint_dir(dir: Option<&Path>, name: &str, number: u64) -> std::io::Result<PathBuf> {
    let base = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir()?,
    };
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    // FNV-1a of the whole name: stable across releases and platforms.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let path = base
        .join("pandora-checkpoints")
        .join(format!("study-{safe}-{hash:016x}"))
        .join(number.to_string());
    std::fs::create_dir_all(&path)?;
    Ok(path)
}

/// The environment of a run (see the module doc).
fn step_env(number: u64, from: u32, to: u32, max_steps: u32, ckpt: &Path) -> Vec<(String, String)> {
    vec![
        ("PANDORA_TRIAL".into(), number.to_string()),
        ("PANDORA_STEP_FROM".into(), from.to_string()),
        ("PANDORA_STEP_TO".into(), to.to_string()),
        ("PANDORA_MAX_STEPS".into(), max_steps.to_string()),
        (
            "PANDORA_CHECKPOINT_DIR".into(),
            ckpt.to_string_lossy().into_owned(),
        ),
    ]
}
