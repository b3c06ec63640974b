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
//! ([`crate::command::StepReader`]). With `[cost] kind = "runtime"` a step costs the wall
//! time from the previous step line (the first: from the command's start, so starting the
//! process and loading the checkpoint are part of it).
//!
//! # What is recorded
//! Each step is told as soon as its line is read ([`Study::tell_step`], over a storage
//! connection of the evaluation's own; [`crate::command::run_lines`]), also when the command
//! then fails or is stopped, so a step that finished is never run again, even if `pandora run`
//! is then killed. Then, when the command has ended:
//! - every step of the run printed: the trial is paused (or complete at `max_steps`) by the
//!   storage;
//! - the command failed, or printed a line that is not the next step: the trial fails with the
//!   reason (its steps' costs stay spent);
//! - it exited successfully after fewer steps: the trial is paused with the steps it told
//!   ([`Study::abandon`] pauses a trial with steps), to be resumed later;
//! - the worker was stopped by a signal: the steps printed are told and the trial is paused.
//!
//! A run that `pandora run` loses (e.g. to `kill -9`) is paused by the heartbeat timeout with the
//! steps told before and resumed from the first step not told; only a step whose line was
//! printed but not yet read when the worker died is run again. An in-memory study (which a
//! second connection cannot see) tells its steps when the command ends.

use super::evaluation::{Ending, Evaluation, abandon_reason, command_spec};
use crate::command::{self, ReportedStep, StepReader};
use crate::config::CostKind;
use crate::error::{Error, Result};
use crate::shutdown::Shutdown;
use crate::storage;
use crate::study::{Recorded, Study};
use crate::trial::{Outcome, Trial, TrialState};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    let mut stream = StepStream::new(study, trial, from, to);
    let raw = command::run_lines(
        &spec,
        trial.params.to_string().as_bytes(),
        &mut |line, at| stream.line(line, at),
    );
    let abandon = abandon_reason(raw.status.as_ref().err(), stop);
    let reason = match (raw.status, stream.reader.refused) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(()), why) => why,
    };
    Evaluation {
        outcome: reason.map(|reason| Outcome::Failed { reason, cost: None }),
        abandon,
        steps: stream.untold,
    }
}

/// The steps of a run as the command prints them: each is told at once over a connection of
/// its own (the worker's study is busy waiting for the command), so a step that finished is
/// recorded even if `pandora run` is then killed. Steps that could not be told that way (an
/// in-memory study, which no second connection can see, or a storage error) are left to
/// [`record`], in order.
struct StepStream {
    number: u64,
    /// The step lines read so far; its `refused` says why the stream stopped: a line that is
    /// not the next step, or a step the study refused.
    reader: StepReader,
    /// The second connection; `None`: every step is left to [`record`].
    teller: Option<Study>,
    /// The steps not told yet, in order.
    untold: Vec<ReportedStep>,
    /// With `[cost] kind = "runtime"`: a step costs the time since the previous line.
    runtime: bool,
    /// Known costs are the study's to compute: a reported cost is dropped.
    known: bool,
    /// When the previous step line was read (since the command started).
    last_at: Duration,
}

impl StepStream {
    fn new(study: &Study, trial: &Trial, from: u32, to: u32) -> Self {
        let cfg = study.config();
        let url = &cfg.study.storage;
        let teller = (!storage::is_in_memory(url))
            .then(|| {
                storage::open(url)
                    .and_then(|s| Study::open(cfg.clone(), s))
                    .ok()
            })
            .flatten();
        Self {
            number: trial.number,
            reader: StepReader::new(from, to),
            teller,
            untold: Vec::new(),
            runtime: cfg.cost.kind == CostKind::Runtime,
            known: study.known_cost(&trial.x).is_some(),
            last_at: Duration::ZERO,
        }
    }

    /// A line of the command's stdout, read `at` after its start.
    fn line(&mut self, line: &str, at: Duration) {
        let Some(mut step) = self.reader.read(line) else {
            return;
        };
        if self.runtime {
            step.cost = Some((at - self.last_at).as_secs_f64().max(1e-9));
        } else if self.known {
            step.cost = None;
        }
        self.last_at = at;
        if !self.untold.is_empty() {
            self.untold.push(step);
            return;
        }
        let Some(teller) = self.teller.as_mut() else {
            self.untold.push(step);
            return;
        };
        match teller.tell_step(self.number, step.step, step.objective, step.cost) {
            Ok(_) => {}
            Err(Error::Invalid { what, reason }) => {
                self.reader.refused = Some(format!("step {}: {what}: {reason}", step.step));
            }
            // Left to the worker's own connection.
            Err(_) => self.untold.push(step),
        }
    }
}

/// Records an evaluation of `trial`, a trial with steps: the steps not told yet, then its
/// failure, its pause (stopped by a signal, or fewer steps than handed out) or nothing more (see
/// the module doc).
pub(crate) fn record(study: &mut Study, trial: &Trial, ev: Evaluation) -> Result<Ending> {
    let n = trial.number;
    let mut outcome = ev.outcome;
    for ReportedStep {
        step,
        objective,
        cost,
    } in ev.steps
    {
        match study.tell_step(n, step, objective, cost) {
            Ok(_) => {}
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
    let mut now = current(study, n)?;
    if now.state == TrialState::Running {
        let reason = format!(
            "paused: the command reported steps up to {} of this run's {}",
            now.steps.len(),
            trial.step_to.unwrap_or(0)
        );
        study.abandon(n, &reason)?;
        now = current(study, n)?;
    }
    Ok(Ending::Told(Box::new(Recorded {
        trial: now,
        late: None,
    })))
}

/// Trial `number` as stored now.
fn current(study: &mut Study, number: u64) -> Result<Trial> {
    study
        .trials()?
        .into_iter()
        .find(|t| t.number == number)
        .ok_or_else(|| Error::NotFound(format!("trial {number}")))
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
