//! The study's configured objective, as `pandora run` evaluates it ([`ConfigObjective`]): a
//! builtin problem (in-process), a `[cvs]` study's builtin problem (nature sets the random
//! parameters), or a command (one process group per evaluation, [`crate::command`]; with steps
//! for a `[fidelity]` study, [`super::steps`]). Costs follow `[cost] kind`.

use super::evaluation::{Evaluation, Objective, abandon_reason, command_spec};
use super::steps;
use crate::command::{self, Reported};
use crate::config::ObjectiveKind;
use crate::error::{Error, Result};
use crate::shutdown::Shutdown;
use crate::study::Study;
use crate::trial::{Outcome, Trial};
use pandora_problems::Problem;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Why the worker loop cannot evaluate a study with an external objective.
pub const EXTERNAL_OBJECTIVE: &str = "has an external objective ([objective] kind = \
     \"external\", e.g. created from Python with pandora.Study): its trials are evaluated \
     outside Pandora. Use `pandora ask` and `pandora tell` (or Python), or give the \
     configuration an [objective] command for `pandora run`";

/// The objective of a study's configuration: its builtin problem (built once) or its command
/// (run in `dir`).
pub struct ConfigObjective {
    builtin: Option<Box<dyn Problem>>,
    dir: Option<PathBuf>,
}

impl ConfigObjective {
    /// The objective `study` is configured with; commands run in `dir` (`None`: the current
    /// directory). Refuses an external objective (one evaluated outside Pandora), naming the
    /// study.
    pub fn new(study: &Study, dir: Option<PathBuf>) -> Result<Self> {
        let config = study.config();
        if config.objective_kind() == ObjectiveKind::External {
            return Err(Error::invalid(
                format!("study '{}'", config.study.name),
                EXTERNAL_OBJECTIVE,
            ));
        }
        Ok(Self {
            builtin: config.builtin_problem()?,
            dir,
        })
    }
}

impl Objective for ConfigObjective {
    fn evaluate(&self, study: &Study, trial: &Trial, stop: Option<&Shutdown>) -> Evaluation {
        let cfg = study.config();
        let dir = self.dir.as_deref();
        if let (Some(_), Some(b)) = (&cfg.cvs, self.builtin.as_deref()) {
            return evaluate_cvs(study, trial, b);
        }
        if let (Some(_), Some(cmd)) = (trial.step_to, cfg.objective.command.as_ref()) {
            return steps::evaluate(study, trial, cmd, dir, stop);
        }
        let (result, elapsed, abandon) = if let Some(b) = self.builtin.as_deref() {
            let start = Instant::now();
            let objective = b.eval(&trial.x);
            let reported = Reported {
                objective,
                cost: None,
            };
            (Ok(reported), start.elapsed().as_secs_f64(), None)
        } else if let Some(cmd) = cfg.objective.command.as_ref() {
            run_command(cmd, cfg.objective.timeout_s, dir, trial, stop)
        } else {
            // `ConfigObjective::new` refuses external objectives.
            (Err(EXTERNAL_OBJECTIVE.to_string()), 0.0, None)
        };
        Evaluation {
            abandon,
            ..Evaluation::of_result(study, trial, result, elapsed)
        }
    }
}

/// Evaluates a trial of a `[cvs]` study on its builtin problem: nature (the random parameters'
/// distributions, seeded by the study's seed and the trial number) sets the parameters the
/// control set leaves random.
fn evaluate_cvs(study: &Study, trial: &Trial, builtin: &dyn Problem) -> Evaluation {
    let realized = study
        .draw_random(trial)
        .and_then(|r| crate::cvs::realize(study.space(), trial, &r));
    match realized {
        Ok((params, x)) => Evaluation::told(Outcome::CompleteAt {
            objective: builtin.eval(&x),
            cost: study.trial_cost(trial).unwrap_or(1.0),
            params,
            x,
        }),
        Err(e) => Evaluation::failed(e.to_string()),
    }
}

/// Runs the objective command on `trial` in `dir` (see [`crate::command`]), stopped by `stop`'s
/// deadline; returns its result, its wall time, and why its trial is abandoned, if it is.
fn run_command(
    cmd: &[String],
    timeout_s: Option<f64>,
    dir: Option<&Path>,
    trial: &Trial,
    stop: Option<&Shutdown>,
) -> (std::result::Result<Reported, String>, f64, Option<String>) {
    let spec = match command_spec(cmd, timeout_s, dir, stop, &[]) {
        Ok(spec) => spec,
        Err(e) => return (Err(e), 0.0, None),
    };
    let ev = command::run(&spec, trial.params.to_string().as_bytes());
    let abandon = abandon_reason(ev.result.as_ref().err(), stop);
    (ev.result.map_err(|e| e.to_string()), ev.elapsed_s, abandon)
}
