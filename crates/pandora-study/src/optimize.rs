//! The worker loop, written once: ask, evaluate, tell, with `K` workers on one study
//! ([`optimize()`], or [`Study::optimize`] on a study already open). `pandora run` and Python's
//! `pandora.minimize` are thin adapters over it (options, progress, the summary); any front end
//! with an objective of its own implements [`Objective`].
//!
//! # Definition
//!
//! Each of `K` workers opens the study on a connection of its own (worker 0 runs on the calling
//! thread, with the caller's study under [`Study::optimize`]; the others on threads) and
//! repeats: `ask` (under the storage's lock: no two workers receive the same trial), evaluate
//! the trial while a heartbeat thread keeps the trial's heartbeat fresh over a third
//! connection, then `tell` the outcome at once (for a trial with steps: each reported step in
//! order, then its pause, failure or completion, `steps`). A worker ends when the study is finished (budget, trials,
//! stopping rule: the reason is returned), when another worker failed, when a signal came, or
//! when the objective ends the loop ([`Objective::ended`]: a Python exception).
//!
//! # What ends the loop with an error
//!
//! - a storage error (opening, asking, telling), naming the trial;
//! - a panic in an evaluation (the trial is failed with "internal error: ...", then the loop
//!   stops) or in a worker;
//! - trials failing in a row with the same reason: [`worker::SAME_FAILURES_AT_START`] before any
//!   trial of the loop completed (a command that cannot start), [`worker::SAME_FAILURES`] after
//!   (unless [`OptimizeOptions::stop_on_repeated_failures`] is off).
//!
//! The first error stops the other workers after their current trial.
//!
//! # Signals
//!
//! Given a [`Shutdown`] ([`crate::shutdown::listen`]), no trial is handed out once a signal
//! came; a trial handed out as the signal came is abandoned before its evaluation; running
//! evaluations may finish within the grace period (command objectives are stopped at its end
//! and their trials abandoned). [`Optimized::after_signal`] lists which trials finished and
//! which were abandoned.
//!
//! # Degenerate cases
//!
//! - `workers = 0` is refused before anything is opened.
//! - A study that is already finished returns at once with its reason.
//! - An in-memory SQLite study (`sqlite::memory:`) would be one database per connection: it
//!   runs under [`Study::optimize`] with one worker only (more is [`OptimizeError::InMemory`]),
//!   and its trials have no heartbeat (no other process can see them).

mod evaluation;
mod objective;
mod steps;
mod worker;

pub use evaluation::{Ending, Evaluation, Objective};
pub use objective::{ConfigObjective, EXTERNAL_OBJECTIVE};
pub use worker::{AfterSignal, Opener, SAME_FAILURES, SAME_FAILURES_AT_START};

use crate::error::Error;
use crate::shutdown::{Shutdown, StopSignal};
use crate::study::{Study, Summary};
use crate::trial::Trial;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;
use worker::{FailureStreak, Workers, lock};

/// Seconds between heartbeats of a running evaluation: the same in every loop, so that no loop
/// can take another's live trial for abandoned.
pub const HEARTBEAT_S: f64 = 1.0;
/// The shortest time without a heartbeat after which a running trial may be taken for
/// abandoned ([`crate::Study::abandon_stale`] at the start of `pandora run`): ten heartbeat
/// periods, so that a live trial (whose heartbeat is at most [`HEARTBEAT_S`] old, plus a wait
/// for the storage's lock) is never abandoned.
pub const MIN_ABANDON_S: f64 = 10.0;
/// By default, a running trial without a heartbeat for this long is abandoned when a loop
/// starts.
pub const STALE_S: f64 = 120.0;

/// Why the loop ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    /// `workers` was 0.
    #[error("workers: must be at least 1, got 0")]
    NoWorkers,
    /// A worker could not open the study.
    #[error("opening the study")]
    Open(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Asking for a trial, or reading the study's summary, failed.
    #[error("asking for a trial")]
    Ask(#[source] Error),
    /// Recording a trial's outcome failed.
    #[error("storing trial {trial}")]
    Store {
        /// The trial.
        trial: u64,
        /// Why.
        #[source]
        source: Error,
    },
    /// An evaluation panicked (its trial is failed).
    #[error("trial {trial} failed: the evaluation panicked ({message}); stopping")]
    Panicked {
        /// The trial.
        trial: u64,
        /// The panic's message.
        message: String,
    },
    /// A worker panicked outside an evaluation.
    #[error("a worker panicked: {0}")]
    WorkerPanicked(String),
    /// More than one worker on an in-memory study (each connection would be a database of
    /// its own).
    #[error(
        "workers: an in-memory study (sqlite::memory:) runs with one worker, got {0}; \
         store the study in a file (sqlite:PATH) or PostgreSQL to share it between workers"
    )]
    InMemory(usize),
    /// Trials kept failing the same way.
    #[error("stopped after {count} trials in a row failed with the same error: {reason}")]
    SameFailures {
        /// Trials in the streak.
        count: usize,
        /// Their failure.
        reason: String,
    },
}

/// What the loop reports as it goes (progress bars, log lines). Called from the worker
/// threads, one report at a time, in the order of the summaries.
pub trait Observer: Sync {
    /// `worker` told `trial`; `summary` is the study's right after.
    fn told(&self, worker: &str, trial: &Trial, summary: &Summary);
    /// Something worth a warning (an outcome that came late, ...).
    fn warn(&self, message: &str);
}

/// An [`Observer`] that reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn told(&self, _: &str, _: &Trial, _: &Summary) {}
    fn warn(&self, _: &str) {}
}

/// How to run the loop.
#[derive(Debug, Clone)]
pub struct OptimizeOptions<'a> {
    /// Worker threads evaluating trials in parallel (at least 1).
    pub workers: usize,
    /// Worker `k` is named `{prefix}-{k}` in the storage (default: host and process id).
    pub prefix: String,
    /// Heartbeat period (default [`HEARTBEAT_S`]).
    pub heartbeat: Duration,
    /// The signals the loop listens to, if any ([`crate::shutdown::listen`]).
    pub shutdown: Option<&'a Shutdown>,
    /// Whether trials failing in a row with the same reason end the loop with
    /// [`OptimizeError::SameFailures`] (default). Off for objectives whose failures are part of
    /// the landscape (a Python function returning NaN where it is undefined).
    pub stop_on_repeated_failures: bool,
    /// At most this many trials handed out by this loop, over all its workers (Optuna's
    /// `n_trials`); `None` (default): until the study is finished. The study's own limits
    /// (budget, `max_trials`, stopping rule) still apply.
    pub n_trials: Option<u64>,
}

impl OptimizeOptions<'_> {
    /// `workers` workers named after this host and process, the default heartbeat, no signals,
    /// repeated failures stopping the loop.
    pub fn new(workers: usize) -> Self {
        Self {
            workers,
            prefix: format!("{}-{}", hostname(), std::process::id()),
            heartbeat: Duration::from_secs_f64(HEARTBEAT_S),
            shutdown: None,
            stop_on_repeated_failures: true,
            n_trials: None,
        }
    }
}

/// How the loop ended without an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimized {
    /// Why the study is finished (the first worker's reason), if it is.
    pub finished: Option<String>,
    /// The signal that stopped the loop, and what became of the trials it found running.
    pub after_signal: Option<(StopSignal, AfterSignal)>,
}

impl Optimized {
    /// "stopped by SIGTERM: ..." when a signal stopped the loop.
    pub fn signal_line(&self) -> Option<String> {
        self.after_signal.as_ref().map(|(s, a)| a.line(*s))
    }
}

/// Runs `options.workers` workers on the study `open` opens, evaluating `objective`, until the
/// study is finished, a signal came, or a worker failed (see the module documentation).
pub fn optimize(
    open: &Opener<'_>,
    objective: &dyn Objective,
    observer: &dyn Observer,
    options: &OptimizeOptions<'_>,
) -> Result<Optimized, OptimizeError> {
    run(None, open, objective, observer, options)
}

impl Study {
    /// Runs the worker loop ([`optimize()`]) on this study: worker 0 uses this study (so an
    /// in-memory study works, with one worker), workers 1, 2, ... each open it again on a
    /// connection of their own. Worker 0 runs on the calling thread.
    pub fn optimize(
        &mut self,
        objective: &dyn Objective,
        observer: &dyn Observer,
        options: &OptimizeOptions<'_>,
    ) -> Result<Optimized, OptimizeError> {
        let config = self.config().clone();
        if options.workers > 1 && crate::storage::is_in_memory(&config.study.storage) {
            return Err(OptimizeError::InMemory(options.workers));
        }
        let open = move || -> Result<Study, Box<dyn std::error::Error + Send + Sync>> {
            let storage = crate::storage::open(&config.study.storage)?;
            Ok(Study::open(config.clone(), storage)?)
        };
        run(Some(self), &open, objective, observer, options)
    }
}

/// The loop: worker 0 on the calling thread (on `first` when given), the others on threads of
/// their own.
fn run(
    first: Option<&mut Study>,
    open: &Opener<'_>,
    objective: &dyn Objective,
    observer: &dyn Observer,
    options: &OptimizeOptions<'_>,
) -> Result<Optimized, OptimizeError> {
    if options.workers == 0 {
        return Err(OptimizeError::NoWorkers);
    }
    let workers = Workers {
        open,
        objective,
        observer,
        every: options.heartbeat,
        stop: AtomicBool::new(false),
        shutdown: options.shutdown,
        after_signal: Mutex::new(AfterSignal::default()),
        streak: options
            .stop_on_repeated_failures
            .then(|| Mutex::new(FailureStreak::default())),
        report: Mutex::new(()),
        n_trials: options.n_trials,
        handed: AtomicU64::new(0),
    };
    let ends: Vec<Result<Option<String>, OptimizeError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..options.workers)
            .map(|k| {
                let name = format!("{}-{k}", options.prefix);
                let workers = &workers;
                s.spawn(move || workers.work_or_stop(&name, None))
            })
            .collect();
        let mine = workers.work_or_stop(&format!("{}-0", options.prefix), first);
        let theirs = handles.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|p| Err(OptimizeError::WorkerPanicked(worker::panic_message(&*p))))
        });
        std::iter::once(mine).chain(theirs).collect()
    });
    let mut finished = None;
    for end in ends {
        if let Some(reason) = end? {
            finished.get_or_insert(reason);
        }
    }
    let after_signal = options
        .shutdown
        .and_then(Shutdown::signal)
        .map(|signal| (signal, lock(&workers.after_signal).clone()));
    Ok(Optimized {
        finished,
        after_signal,
    })
}

/// This machine's name (`/etc/hostname`), or "local" (worker names start with it).
pub fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}
