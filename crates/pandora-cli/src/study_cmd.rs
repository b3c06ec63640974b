//! Study commands: `run`, `ask`, `tell`, `status`, `best`, `export`, `plot`.
//!
//! Every command names its study by a configuration file or by `--storage URL --study NAME`
//! ([`Target`]).

use crate::plot;
use crate::progress::Progress;
use crate::study_eval::{Ending, Evaluation, abandon_reason, command_spec};
use crate::study_text as text;
use anyhow::{Context, Result, anyhow, bail};
use pandora_problems::Problem;
use pandora_study::command::{self, Reported};
use pandora_study::config::{CostKind, MAX_DURATION_S, ObjectiveKind};
use pandora_study::shutdown::{self, Shutdown, StopSignal};
use pandora_study::space::Direction;
use pandora_study::storage::Storage;
use pandora_study::{Ask, Outcome, Study, StudyConfig, Trial, TrialState};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The environment variable that gives the storage URL when neither `--storage` nor the
/// configuration file's `[study] storage` does (so that a URL holding a password stays out of
/// the process list and of configuration files). See docs/postgres.md.
pub const STORAGE_ENV: &str = "PANDORA_STORAGE_URL";

/// The storage URL of [`STORAGE_ENV`], if set and not empty.
fn env_storage() -> Option<String> {
    std::env::var(STORAGE_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// Loads and validates a study configuration file. A file without `[study] storage` takes the
/// storage URL from [`STORAGE_ENV`] when it is set.
pub fn load_config(path: &str) -> Result<StudyConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut cfg = StudyConfig::from_toml(&text).with_context(|| path.to_string())?;
    let has_storage = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("study")?.get("storage").cloned())
        .is_some();
    if !has_storage && let Some(url) = env_storage() {
        cfg.study.storage = url;
    }
    Ok(cfg)
}

/// Opens the storage named by a URL (`sqlite:PATH`, relative paths from the current directory).
pub fn open_storage(url: &str) -> Result<Box<dyn Storage>> {
    // The URL may hold a password: messages show it redacted.
    pandora_study::storage::open(url).with_context(|| {
        format!(
            "study.storage: opening {}",
            pandora_study::storage::redact_url(url)
        )
    })
}

/// Which study a command works on: a configuration file, or `--storage URL --study NAME` (an
/// existing study, opened with its stored configuration).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Target {
    /// Study configuration (TOML).
    pub config: Option<String>,
    /// Storage URL of an existing study (with --study), instead of CONFIG; default: the
    /// PANDORA_STORAGE_URL environment variable.
    #[arg(long, value_name = "URL")]
    pub storage: Option<String>,
    /// Name of the study in --storage.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
}

impl Target {
    /// Opens the study; also returns the storage URL (for a second connection).
    pub fn open(&self) -> Result<(Study, String)> {
        let storage = match (&self.config, &self.storage) {
            (None, None) => env_storage(),
            (_, s) => s.clone(),
        };
        match (&self.config, &storage, &self.study) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                bail!("give either a CONFIG file or --storage URL --study NAME, not both")
            }
            (Some(path), None, None) => {
                let cfg = load_config(path)?;
                let url = cfg.study.storage.clone();
                let storage = open_storage(&url)?;
                let study = Study::open(cfg, storage).with_context(|| path.clone())?;
                Ok((study, url))
            }
            (None, Some(url), Some(name)) => {
                if url.starts_with("sqlite:") {
                    // Opening a missing file would create an empty database.
                    let file = pandora_study::storage::sqlite::SqliteStorage::path_of_url(url)?;
                    if file != ":memory:" && !std::path::Path::new(file).exists() {
                        bail!("--storage {url}: no such database file '{file}'");
                    }
                }
                let storage = open_storage(url)?;
                let study = Study::load_at(name, storage, url)
                    .with_context(|| format!("--study {name}"))?;
                Ok((study, url.clone()))
            }
            (None, Some(_), None) => bail!("--storage URL needs --study NAME"),
            (None, None, Some(_)) => {
                bail!(
                    "--study NAME needs --storage URL (or the {STORAGE_ENV} environment variable)"
                )
            }
            (None, None, None) => {
                bail!("give a CONFIG file, or --storage URL --study NAME of an existing study")
            }
        }
    }

    /// The target as command-line arguments, for the commands a message suggests (a URL's
    /// password redacted).
    pub fn args(&self) -> String {
        match (&self.config, &self.storage, &self.study) {
            (Some(c), _, _) => c.clone(),
            (None, Some(url), Some(name)) => format!(
                "--storage {} --study {name}",
                pandora_study::storage::redact_url(url)
            ),
            (None, None, Some(name)) => format!("--study {name}"),
            _ => "CONFIG".to_string(),
        }
    }

    /// Opens the study (see [`Target::open`]).
    pub fn study(&self) -> Result<Study> {
        Ok(self.open()?.0)
    }
}

/// Opens the study of a configuration file.
#[allow(dead_code)] // kept for callers outside the study commands
pub fn open_study(path: &str) -> Result<Study> {
    Target {
        config: Some(path.to_string()),
        ..Target::default()
    }
    .study()
}

/// Evaluates a trial of a `[cvs]` study on its builtin problem: nature (the random parameters'
/// distributions, seeded by the study's seed and the trial number) sets the parameters the
/// control set leaves random.
fn evaluate_cvs(study: &Study, trial: &Trial, builtin: &dyn Problem) -> Evaluation {
    let realized = study
        .draw_random(trial)
        .and_then(|r| pandora_study::cvs::realize(study.space(), trial, &r));
    let outcome = match realized {
        Ok((params, x)) => Outcome::CompleteAt {
            objective: builtin.eval(&x),
            cost: study.trial_cost(trial).unwrap_or(1.0),
            params,
            x,
        },
        Err(e) => Outcome::Failed {
            reason: e.to_string(),
            cost: None,
        },
    };
    Evaluation::told(outcome)
}

/// The working directory of a command objective: the configuration file's directory (absolute),
/// or `None` (the current directory) for a study opened by `--storage`/`--study`.
fn command_dir(target: &Target) -> Result<Option<PathBuf>> {
    let Some(config) = &target.config else {
        return Ok(None);
    };
    let parent = Path::new(config)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = parent
        .canonicalize()
        .with_context(|| format!("{config}: finding the directory of the configuration file"))?;
    Ok(Some(dir))
}

/// Runs the objective command on `trial` in `dir` (see [`command`]), stopped by `stop`'s
/// deadline; returns its result, its wall time, and why its trial is abandoned, if it is: it was
/// stopped at the end of the grace period, or failed after the signal (a scheduler signals every
/// process of the job, so the evaluation may have been killed by the same signal).
fn run_objective_command(
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

/// Evaluates `trial`: on `builtin` (the study's builtin problem, built once per run) or by running
/// the study's command in `dir`.
fn evaluate(
    study: &Study,
    trial: &Trial,
    builtin: Option<&dyn Problem>,
    dir: Option<&Path>,
    stop: Option<&Shutdown>,
) -> Evaluation {
    let cfg = study.config();
    if let (Some(_), Some(b)) = (&cfg.cvs, builtin) {
        return evaluate_cvs(study, trial, b);
    }
    if let (Some(_), Some(cmd)) = (trial.step_to, cfg.objective.command.as_ref()) {
        return crate::study_steps::evaluate(study, trial, cmd, dir, stop);
    }
    let known = study.known_cost(&trial.x);
    let (result, elapsed, abandon) = if let Some(b) = builtin {
        let start = Instant::now();
        let objective = b.eval(&trial.x);
        let reported = Reported {
            objective,
            cost: None,
        };
        (Ok(reported), start.elapsed().as_secs_f64(), None)
    } else if let Some(cmd) = cfg.objective.command.as_ref() {
        run_objective_command(cmd, cfg.objective.timeout_s, dir, trial, stop)
    } else {
        // `run` refuses external objectives before any trial is handed out.
        (Err(EXTERNAL_RUN.to_string()), 0.0, None)
    };
    let cost_of = |reported: Option<f64>| -> std::result::Result<f64, String> {
        match cfg.cost.kind {
            CostKind::Uniform | CostKind::Known => Ok(known.unwrap_or(1.0)),
            CostKind::Runtime => Ok(elapsed.max(1e-9)),
            CostKind::Reported => reported.ok_or_else(|| {
                "cost.kind = \"reported\" but the output has no \"cost\"".to_string()
            }),
        }
    };
    let outcome = match result {
        Ok(r) => match cost_of(r.cost) {
            Ok(cost) => Outcome::Complete {
                objective: r.objective,
                cost,
            },
            Err(reason) => Outcome::Failed { reason, cost: None },
        },
        Err(reason) => {
            let cost = match cfg.cost.kind {
                CostKind::Runtime => Some(elapsed),
                CostKind::Uniform | CostKind::Known => known,
                CostKind::Reported => None,
            };
            Outcome::Failed { reason, cost }
        }
    };
    Evaluation {
        outcome: Some(outcome),
        abandon,
        steps: Vec::new(),
    }
}

/// Seconds between heartbeats of a running evaluation: the same in every `pandora run`, whatever
/// its `--abandon-after`, so that no run can take another's live trial for abandoned.
pub const HEARTBEAT_S: f64 = 1.0;
/// The shortest `--abandon-after` accepted: ten heartbeat periods, so that a live trial (whose
/// heartbeat is at most [`HEARTBEAT_S`] old, plus a wait for the storage's lock) is never
/// abandoned by any run.
pub const MIN_ABANDON_S: f64 = 10.0;
/// By default, a running trial without a heartbeat for this long is abandoned when a run starts.
pub const STALE_S: f64 = 120.0;
/// `pandora run` stops, with an error, when its first trials fail this many times in a row with the
/// same reason (a command that cannot start, a script that is missing, ...).
pub const SAME_FAILURES_AT_START: usize = 3;
/// ... or, after a trial of the run completed, this many times in a row (something broke).
pub const SAME_FAILURES: usize = 10;

/// Keeps the heartbeat of trial `number` fresh, over its own connection to `url`, until `stop`
/// receives a message or its sender is dropped. A connection that cannot be opened, or fails, is
/// opened again at the next beat: a passing storage outage does not silence a live trial for good.
fn heartbeat(url: &str, name: &str, number: u64, every: Duration, stop: mpsc::Receiver<()>) {
    let mut storage = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(every) {
        if storage.is_none() {
            storage = open_storage(url).ok();
        }
        if let Some(s) = storage.as_mut()
            && let Err(e) = s.heartbeat(name, number)
            && !matches!(e, pandora_study::Error::Invalid { .. })
        {
            storage = None;
        }
    }
}

/// The message of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// Evaluates `trial` with `eval` while its heartbeat is kept fresh, and records the outcome (or
/// abandons the trial, when the evaluation says so) as soon as the evaluation returns, before
/// anything else (the heartbeat stops after).
///
/// A panic during the evaluation fails the trial ("internal error: ...") and is returned (the
/// run then ends with an error); the heartbeat stops whatever happens.
fn evaluate_and_tell(
    study: &mut Study,
    url: &str,
    trial: &Trial,
    every: Duration,
    eval: impl FnOnce(&Study, &Trial) -> Evaluation,
) -> Result<(Ending, Option<String>)> {
    let name = study.config().study.name.clone();
    std::thread::scope(|s| {
        // Dropped on every way out of this closure, unwinding included: the heartbeat ends.
        let (alive, stop) = mpsc::channel::<()>();
        s.spawn(move || heartbeat(url, &name, trial.number, every, stop));
        let evaluated =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| eval(&*study, trial)));
        let (ev, panicked) = match evaluated {
            Ok(ev) => (ev, None),
            Err(payload) => {
                let msg = panic_message(&*payload);
                let reason = format!("internal error: the evaluation panicked: {msg}");
                (
                    Evaluation::told(Outcome::Failed { reason, cost: None }),
                    Some(msg),
                )
            }
        };
        let ending = match trial.step_to {
            Some(_) => crate::study_steps::record(study, trial, ev),
            None => match ev.abandon {
                Some(reason) => study
                    .abandon(trial.number, &reason)
                    .map(|_| Ending::Abandoned),
                None => {
                    let outcome = ev.outcome.unwrap_or(Outcome::Failed {
                        reason: "internal error: the evaluation gave no outcome".into(),
                        cost: None,
                    });
                    study
                        .tell(trial.number, &outcome)
                        .map(|r| Ending::Told(Box::new(r)))
                }
            },
        }
        .with_context(|| format!("storing trial {}", trial.number));
        drop(alive);
        ending.map(|e| (e, panicked))
    })
}

/// Consecutive failed trials with the same reason, across the workers of a run.
#[derive(Debug, Default)]
struct FailureStreak {
    reason: Option<String>,
    count: usize,
    /// Whether a trial of this run completed (the command can work).
    worked: bool,
}

impl FailureStreak {
    /// Records a told trial (`Some(reason)` if it failed); returns the length of the streak and
    /// its reason once [`SAME_FAILURES_AT_START`] trials in a row failed with it before any
    /// trial of the run completed, or [`SAME_FAILURES`] after.
    fn record(&mut self, failure: Option<&str>) -> Option<(usize, &str)> {
        match failure {
            Some(r) if self.reason.as_deref() == Some(r) => self.count += 1,
            Some(r) => {
                self.reason = Some(r.to_string());
                self.count = 1;
            }
            None => {
                self.reason = None;
                self.count = 0;
                self.worked = true;
            }
        }
        let limit = if self.worked {
            SAME_FAILURES
        } else {
            SAME_FAILURES_AT_START
        };
        let count = self.count;
        self.reason
            .as_deref()
            .filter(|_| count >= limit)
            .map(|r| (count, r))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the workers of one `pandora run` share.
struct Workers<'a> {
    target: &'a Target,
    progress: Progress,
    /// Heartbeat period.
    every: Duration,
    /// Working directory of command objectives.
    dir: Option<PathBuf>,
    /// The builtin problem, for a study with `[objective] builtin`.
    builtin: Option<Box<dyn Problem>>,
    /// Set when a worker ends with an error: the others stop asking for trials.
    stop: AtomicBool,
    /// `SIGTERM`/`SIGINT`: no new trial, a grace period for the running ones.
    shutdown: Arc<Shutdown>,
    /// Trials finished or abandoned after the signal.
    after_signal: Mutex<AfterSignal>,
    streak: Mutex<FailureStreak>,
    /// Held while a trial's summary is computed and its line printed: lines come whole, in the
    /// order of their summaries (the counts and the cost spent never go back).
    report: Mutex<()>,
}

impl Workers<'_> {
    /// One worker: asks, evaluates and tells until the study is finished (`Some(reason)`),
    /// another worker failed or a signal came (`None`).
    fn work(&self, worker: &str) -> Result<Option<String>> {
        let (mut study, url) = self.target.open()?;
        while !self.stop.load(Ordering::SeqCst) && self.shutdown.signal().is_none() {
            let trial = match study.ask(worker)? {
                Ask::Finished(f) => return Ok(Some(f.to_string())),
                Ask::Trial(t) => t,
            };
            // A signal during the ask: the trial is given back before its evaluation starts.
            if let Some(signal) = self.shutdown.signal() {
                let reason = format!("abandoned: stopped by {signal} before the evaluation");
                study
                    .abandon(trial.number, &reason)
                    .with_context(|| format!("storing trial {}", trial.number))?;
                lock(&self.after_signal).abandoned.push(trial.number);
                break;
            }
            let (dir, builtin) = (self.dir.as_deref(), self.builtin.as_deref());
            let stop = Some(&*self.shutdown);
            let (ending, panicked) =
                evaluate_and_tell(&mut study, &url, &trial, self.every, |s, t| {
                    evaluate(s, t, builtin, dir, stop)
                })?;
            let recorded = match ending {
                Ending::Told(r) => *r,
                Ending::Abandoned => {
                    lock(&self.after_signal).abandoned.push(trial.number);
                    break;
                }
            };
            if self.shutdown.signal().is_some() {
                lock(&self.after_signal).finished.push(trial.number);
            }
            if let Some(late) = &recorded.late {
                self.progress.warn(&late.to_string());
            }
            let told = recorded.trial;
            if let Some(msg) = panicked {
                bail!(
                    "trial {} failed: the evaluation panicked ({msg}); stopping",
                    trial.number
                );
            }
            let failure = match told.state {
                TrialState::Failed => told.error.as_deref(),
                _ => None,
            };
            if let Some((count, reason)) = lock(&self.streak).record(failure) {
                bail!("stopped after {count} trials in a row failed with the same error: {reason}");
            }
            let _line = lock(&self.report);
            let s = study.summary()?;
            self.progress.trial(worker, &told, &s);
        }
        Ok(None)
    }

    /// [`Workers::work`], with any error or panic stopping the other workers.
    fn work_or_stop(&self, worker: &str) -> Result<Option<String>> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.work(worker)))
            .unwrap_or_else(|p| Err(anyhow!("a worker panicked: {}", panic_message(&*p))));
        if r.is_err() {
            self.stop.store(true, Ordering::SeqCst);
        }
        r
    }
}

/// The trials of a run that ended after its stop signal.
#[derive(Debug, Default)]
struct AfterSignal {
    /// Told during the grace period.
    finished: Vec<u64>,
    /// Abandoned: still running at its end, or handed out as the signal came.
    abandoned: Vec<u64>,
}

impl AfterSignal {
    /// "stopped by SIGTERM: 1 trial finished during the grace period, trial 17 abandoned".
    fn line(&self, signal: StopSignal) -> String {
        let mut parts = Vec::new();
        match self.finished.len() {
            0 => {}
            1 => parts.push("1 trial finished during the grace period".to_string()),
            n => parts.push(format!("{n} trials finished during the grace period")),
        }
        let mut abandoned = self.abandoned.clone();
        abandoned.sort_unstable();
        let numbers: Vec<String> = abandoned.iter().map(u64::to_string).collect();
        match numbers.len() {
            0 => {}
            1 => parts.push(format!("trial {} abandoned", numbers[0])),
            _ => parts.push(format!("trials {} abandoned", numbers.join(", "))),
        }
        if parts.is_empty() {
            parts.push("no trial was running".to_string());
        }
        format!("stopped by {signal}: {}", parts.join(", "))
    }
}

/// Options of `pandora run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Worker threads evaluating trials in parallel (at least 1).
    pub workers: usize,
    /// No progress output.
    pub quiet: bool,
    /// Running trials without a heartbeat for this many seconds are marked abandoned at start.
    pub abandon_after_s: f64,
    /// End with the JSON summary instead of the summary in words.
    pub json: bool,
    /// Seconds the running evaluations may take to finish after `SIGTERM`/`SIGINT`.
    pub grace_s: f64,
}

/// Why `pandora run` cannot evaluate a study with an external objective.
const EXTERNAL_RUN: &str = "has an external objective ([objective] kind = \"external\", e.g. \
     created from Python with pandora.Study): its trials are evaluated outside Pandora. Use \
     `pandora ask` and `pandora tell` (or Python), or give the configuration an [objective] \
     command for `pandora run`";

/// `pandora run CONFIG [--workers K] [--quiet] [--abandon-after S] [--grace S]`.
///
/// Refuses (an error, exit code 2) a study whose objective is external
/// (`[objective] kind = "external"`), before changing anything; ends with an error when a worker
/// fails (storage error, panic) or trials keep failing the same way ([`SAME_FAILURES_AT_START`],
/// [`SAME_FAILURES`]).
///
/// On `SIGTERM` or `SIGINT` no trial is handed out any more; the running evaluations may finish
/// within `--grace` seconds, after which they are stopped and their trials abandoned (at once
/// on a second signal); the run then ends normally, saying so in one line on stderr
/// ([`pandora_study::shutdown`]).
pub fn run(target: &Target, opts: &RunOptions) -> Result<()> {
    if opts.workers == 0 {
        bail!("--workers: must be at least 1, got 0");
    }
    let grace = opts.grace_s;
    if !(grace.is_finite() && (0.0..=MAX_DURATION_S).contains(&grace)) {
        bail!("--grace: must be a number of seconds from 0 to {MAX_DURATION_S}, got {grace}");
    }
    let stale = opts.abandon_after_s;
    if !(stale.is_finite() && (MIN_ABANDON_S..=MAX_DURATION_S).contains(&stale)) {
        bail!(
            "--abandon-after: must be a number of seconds from {MIN_ABANDON_S} (ten heartbeats of \
             {HEARTBEAT_S} s) to {MAX_DURATION_S}, got {stale}"
        );
    }
    let workers = {
        // Trials of workers that vanished (killed, machine lost) are marked abandoned, not lost.
        let (mut study, _) = target.open()?;
        if study.config().objective_kind() == ObjectiveKind::External {
            bail!(
                "pandora run: study '{}' {EXTERNAL_RUN}",
                study.config().study.name
            );
        }
        let gone = study.abandon_stale(stale)?;
        let budget = study.config().budget.clone();
        let progress = Progress::new(opts.quiet, budget.max_trials, budget.total);
        if !gone.is_empty() {
            progress.note(&format!(
                "marked abandoned (no heartbeat for {stale} s): trials {gone:?}"
            ));
        }
        progress.start(&study.summary()?);
        let shutdown = shutdown::listen(Duration::from_secs_f64(grace))
            .context("listening for SIGTERM and SIGINT")?;
        Workers {
            target,
            progress,
            every: Duration::from_secs_f64(HEARTBEAT_S),
            dir: command_dir(target)?,
            builtin: study.config().builtin_problem()?,
            stop: AtomicBool::new(false),
            shutdown,
            after_signal: Mutex::new(AfterSignal::default()),
            streak: Mutex::new(FailureStreak::default()),
            report: Mutex::new(()),
        }
    };
    let reasons: Vec<Result<Option<String>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.workers)
            .map(|k| {
                let name = format!("{}-{}-{k}", hostname(), std::process::id());
                let workers = &workers;
                s.spawn(move || workers.work_or_stop(&name))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a worker panicked")))
            })
            .collect()
    });
    workers.progress.finish();
    let mut first_reason = None;
    for r in reasons {
        if let Some(reason) = r? {
            first_reason.get_or_insert(reason);
        }
    }
    let signal_line = workers.shutdown.signal().map(|signal| {
        let line = lock(&workers.after_signal).line(signal);
        eprintln!("{line}");
        line
    });
    let mut study = target.study()?;
    let s = study.summary()?;
    if opts.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "study": study.config().study.name,
                "stopped": signal_line.or(first_reason),
                "summary": summary_json(&s),
            }))?
        );
    } else {
        let trials = study.trials()?;
        print!("{}", text::summary(&text_context(&study, &trials), &s));
        let c = study.config();
        if s.stop_reason.is_none()
            && signal_line.is_none()
            && let Some(r) = &first_reason
        {
            println!("finished: {r}");
        }
        print!(
            "{}",
            text::next_steps(&target.args(), &format!("{}.png", c.study.name))
        );
    }
    Ok(())
}

/// What the summary in words needs from `study` besides its summary.
fn text_context<'a>(study: &'a Study, trials: &'a [Trial]) -> text::Context<'a> {
    let c = study.config();
    // Builtin problems have a known maximum (the optimum of a study that maximizes them).
    let optimum = match c.study.direction {
        Direction::Maximize => c.builtin_problem().ok().flatten().and_then(|p| p.optimum()),
        Direction::Minimize => None,
    };
    text::Context {
        name: &c.study.name,
        budget: c.budget.total,
        optimum,
        trials,
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}

fn trial_json(t: &Trial) -> serde_json::Value {
    serde_json::to_value(t).unwrap_or(serde_json::Value::Null)
}

fn summary_json(s: &pandora_study::Summary) -> serde_json::Value {
    s.to_json()
}

/// `pandora ask CONFIG`: hands out one trial and prints `{"number", "params"}`.
pub fn ask(target: &Target, worker: Option<&str>, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    let w = worker.map_or_else(
        || format!("{}-{}", hostname(), std::process::id()),
        str::to_string,
    );
    match study.ask(&w)? {
        ask @ Ask::Trial(_) if as_json => println!("{}", ask.to_json()),
        Ask::Trial(t) => println!("{}", asked_text(target, &t)),
        ask @ Ask::Finished(_) if as_json => println!("{}", ask.to_json()),
        Ask::Finished(f) => println!("no trial: the study is finished ({f})"),
    }
    Ok(())
}

/// `pandora ask`'s words: the trial, its control set (`[cvs]` studies) and the `tell` to run.
fn asked_text(target: &Target, t: &Trial) -> String {
    let mut out = format!("trial {}: {}", t.number, text::params(&t.params));
    let mut random = String::new();
    if let Some(c) = t.decision.cvs() {
        out.push_str(&format!(
            "\ncontrol set {}{}: set {}; left to chance: {}; cost {}",
            c.control_set,
            c.name.as_ref().map_or(String::new(), |n| format!(" ({n})")),
            c.controlled.join(", "),
            if c.random.is_empty() {
                "nothing".to_string()
            } else {
                c.random.join(", ")
            },
            text::num(c.cost)
        ));
        random = c
            .random
            .iter()
            .map(|r| format!(" --random {r}=V"))
            .collect();
    }
    if let (Some(from), Some(to)) = (t.step_from(), t.step_to) {
        let how = if from > 1 {
            format!("resume from the checkpoint after step {}", from - 1)
        } else {
            "start".to_string()
        };
        out.push_str(&format!(
            "\nsteps {from} to {to}: {how}; after each step T:\n  pandora tell {} {} --step T \
             --objective V",
            target.args(),
            t.number
        ));
        return out;
    }
    out.push_str(&format!(
        "\nthen: pandora tell {} {} --objective V{random}   (--json for scripts)",
        target.args(),
        t.number
    ));
    out
}

/// What `pandora tell` reports about a trial.
#[derive(Debug, Clone, Default)]
pub struct TellArgs {
    /// `--objective`.
    pub objective: Option<f64>,
    /// `--cost`.
    pub cost: Option<f64>,
    /// `--failed`.
    pub failed: Option<String>,
    /// `--random NAME=VALUE`, repeated.
    pub random: Vec<String>,
    /// `--step T`.
    pub step: Option<u32>,
    /// `--json`: print the trial as JSON.
    pub json: bool,
}

/// Parses `--random NAME=VALUE` arguments into a JSON object (values must be numbers).
fn parse_random(args: &[String]) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut out = serde_json::Map::new();
    for a in args {
        let Some((name, value)) = a.split_once('=') else {
            bail!("--random: expected NAME=VALUE, got '{a}'");
        };
        let v: f64 = value
            .trim()
            .parse()
            .map_err(|_| anyhow!("--random {name}: '{value}' is not a number"))?;
        if out.insert(name.trim().to_string(), json!(v)).is_some() {
            bail!("--random: '{name}' is given twice");
        }
    }
    Ok(out)
}

/// `pandora tell CONFIG NUMBER (--objective V [--cost C] [--random NAME=VALUE ...] |
/// --failed REASON)`.
pub fn tell(target: &Target, number: u64, args: TellArgs) -> Result<()> {
    let TellArgs {
        objective,
        cost,
        failed,
        random,
        step,
        json: as_json,
    } = args;
    let random = parse_random(&random)?;
    // The flags' combinations in the flags' words; `Study::report` checks them again (for the
    // HTTP API) and does the rest.
    if !random.is_empty() && failed.is_some() {
        bail!("--random: only with --objective (a failed trial has no realized values)");
    }
    match (objective, &failed) {
        (Some(_), Some(_)) => bail!("give either --objective or --failed"),
        (None, None) => bail!("give --objective V (and --cost C) or --failed REASON"),
        (None, Some(_)) if step.is_some() => {
            bail!("--step: a failure ends the whole trial; give --failed without --step")
        }
        _ => {}
    }
    let mut study = target.study()?;
    let report = pandora_study::Report {
        objective,
        cost,
        failed,
        random,
        step,
    };
    let t = study.report(number, &report).map_err(|e| match e {
        pandora_study::Error::NotFound(what) => anyhow!("{what} does not exist"),
        pandora_study::Error::Invalid { what, reason }
            if matches!(
                what.as_str(),
                "objective" | "cost" | "failed" | "random" | "step"
            ) =>
        {
            anyhow!("--{what}: {reason}")
        }
        e => e.into(),
    })?;
    if let Some(late) = &t.late {
        eprintln!("warning: {late}");
    }
    if as_json {
        println!("{}", trial_json(&t.trial));
    } else {
        println!("{}", text::trial(&t.trial));
    }
    Ok(())
}

/// `pandora status CONFIG [--json]` (or the older `--format json|text`): the summary in words,
/// or as JSON.
pub fn status(target: &Target, format: Option<&str>, as_json: bool) -> Result<()> {
    let as_json = match format {
        None => as_json,
        Some("json") => true,
        Some("text") if !as_json => false,
        Some("text") => bail!("--format text: contradicts --json"),
        Some(other) => bail!("--format: expected json or text, got '{other}'"),
    };
    let mut study = target.study()?;
    let s = study.summary()?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&summary_json(&s))?);
    } else {
        let trials = study.trials()?;
        print!("{}", text::summary(&text_context(&study, &trials), &s));
    }
    Ok(())
}

/// `pandora best CONFIG [--json]`.
pub fn best(target: &Target, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    match study.best()? {
        Some(t) if as_json => println!("{}", serde_json::to_string_pretty(&trial_json(&t))?),
        Some(t) => println!("{}", text::trial(&t)),
        None => bail!("no complete trial yet"),
    }
    Ok(())
}

/// `pandora export CONFIG --format csv|json`: every trial, parameters flattened into columns for
/// CSV (`param.NAME`); cells that a spreadsheet would run as formulas are neutralized
/// ([`crate::csv::field`]).
pub fn export(target: &Target, format: &str) -> Result<()> {
    if !matches!(format, "csv" | "json") {
        bail!("--format: expected csv or json, got '{format}'");
    }
    let mut study = target.study()?;
    let trials = study.trials()?;
    match format {
        "json" => println!("{}", pandora_study::export::json(&trials)?),
        _ => print!("{}", pandora_study::export::csv(&study, &trials)),
    }
    Ok(())
}

/// `pandora plot CONFIG [--out FILE]`: writes the study's figure (PNG or SVG by extension;
/// default `<study>.png`) and says so (with `--json`: `{"figure": FILE, "trials": N}`).
pub fn plot(target: &Target, out: Option<&str>, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    let trials = study.trials()?;
    let out = out.map_or_else(
        || format!("{}.png", study.config().study.name),
        str::to_string,
    );
    let c = study.config();
    let fig = crate::study_plot::study_figure(&c.study.name, c.study.direction, &trials);
    plot::render(&fig, std::path::Path::new(&out))?;
    if as_json {
        println!("{}", json!({"figure": out, "trials": trials.len()}));
    } else {
        println!("wrote {out} ({} trials)", trials.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic during an evaluation fails the trial with the reason and returns (the heartbeat
    /// thread stops); it used to leave the heartbeat running and the run hanging.
    #[test]
    fn a_panicking_evaluation_fails_its_trial_and_returns() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("s.db").display());
        let cfg = StudyConfig::from_toml(&format!(
            "[study]\nname = \"p\"\nstorage = \"{url}\"\n[objective]\nbuiltin = \"ackley\"\n\
             dim = 2\n[budget]\nmax_trials = 3\n"
        ))
        .unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut study = Study::open(cfg, open_storage(&url).unwrap()).unwrap();
            let Ask::Trial(trial) = study.ask("w").unwrap() else {
                panic!("no trial")
            };
            let r = evaluate_and_tell(
                &mut study,
                &url,
                &trial,
                Duration::from_millis(50),
                |_, _| panic!("boom"),
            );
            let stored = study.trials().unwrap();
            let _ = tx.send((
                r.ok().and_then(|(e, p)| match e {
                    Ending::Told(t) => Some((t.trial.state, t.trial.error, p)),
                    Ending::Abandoned => None,
                }),
                stored,
            ));
        });
        let (r, stored) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("evaluate_and_tell returned");
        let (state, error, panicked) = r.expect("the failure was stored");
        assert_eq!(state, TrialState::Failed);
        assert!(error.unwrap().contains("panicked: boom"));
        assert_eq!(panicked.as_deref(), Some("boom"));
        assert_eq!(stored[0].state, TrialState::Failed);
    }

    #[test]
    fn identical_failures_in_a_row_make_a_streak() {
        let mut s = FailureStreak::default();
        assert_eq!(s.record(Some("a")), None);
        assert_eq!(s.record(Some("a")), None);
        assert_eq!(s.record(Some("b")), None);
        assert_eq!(s.record(Some("b")), None);
        assert_eq!(s.record(Some("b")), Some((3, "b")));
        // Once a trial completed, it takes SAME_FAILURES.
        let mut s = FailureStreak::default();
        assert_eq!(s.record(None), None);
        for _ in 1..SAME_FAILURES {
            assert_eq!(s.record(Some("a")), None);
        }
        assert_eq!(s.record(Some("a")), Some((SAME_FAILURES, "a")));
    }
}
