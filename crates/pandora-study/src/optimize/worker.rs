//! One worker of the loop: ask, evaluate with a fresh heartbeat, tell, until the study is
//! finished, another worker failed, or a signal came ([`Workers::work`]).

use super::evaluation::{Ending, Evaluation, Objective};
use super::steps;
use super::{Observer, OptimizeError};
use crate::error::Error;
use crate::shutdown::{Shutdown, StopSignal};
use crate::storage::Storage;
use crate::study::{Ask, Study};
use crate::trial::{Outcome, Trial, TrialState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

/// The worker loop stops, with an error, when its first trials fail this many times in a row with the
/// same reason (a command that cannot start, a script that is missing, ...).
pub const SAME_FAILURES_AT_START: usize = 3;
/// ... or, after a trial of the loop completed, this many times in a row (something broke).
pub const SAME_FAILURES: usize = 10;

/// Opens a study for one worker (each worker has its own storage connection).
pub type Opener<'a> =
    dyn Fn() -> Result<Study, Box<dyn std::error::Error + Send + Sync>> + Sync + 'a;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps the heartbeat of trial `number` fresh, over its own connection to `url`, until `stop`
/// receives a message or its sender is dropped. A connection that cannot be opened, or fails, is
/// opened again at the next beat: a passing storage outage does not silence a live trial for good.
fn heartbeat(url: &str, name: &str, number: u64, every: Duration, stop: mpsc::Receiver<()>) {
    let mut storage: Option<Box<dyn Storage>> = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(every) {
        if storage.is_none() {
            storage = crate::storage::open(url).ok();
        }
        if let Some(s) = storage.as_mut()
            && let Err(e) = s.heartbeat(name, number)
            && !matches!(e, Error::Invalid { .. })
        {
            storage = None;
        }
    }
}

/// The message of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// Records an evaluation of `trial`: its steps (a trial with steps), then its outcome, or its
/// abandonment when the evaluation says so.
fn record(study: &mut Study, trial: &Trial, ev: Evaluation) -> crate::Result<Ending> {
    if trial.step_to.is_some() {
        return steps::record(study, trial, ev);
    }
    if let Some(reason) = ev.abandon {
        return study
            .abandon(trial.number, &reason)
            .map(|_| Ending::Abandoned);
    }
    let outcome = ev.outcome.unwrap_or(Outcome::Failed {
        reason: "internal error: the evaluation gave no outcome".into(),
        cost: None,
    });
    study
        .tell(trial.number, &outcome)
        .map(|r| Ending::Told(Box::new(r)))
}

/// Evaluates `trial` while its heartbeat is kept fresh, and records the outcome (or abandons the
/// trial, when the evaluation says so) as soon as the evaluation returns, before anything else
/// (the heartbeat stops after).
///
/// A panic during the evaluation fails the trial ("internal error: ...") and is returned (the
/// loop then ends with an error); the heartbeat stops whatever happens.
fn evaluate_and_tell(
    study: &mut Study,
    trial: &Trial,
    every: Duration,
    eval: impl FnOnce(&Study, &Trial) -> Evaluation,
) -> Result<(Ending, Option<String>), OptimizeError> {
    let name = study.config().study.name.clone();
    let url = study.config().study.storage.clone();
    std::thread::scope(|s| {
        // Dropped on every way out of this closure, unwinding included: the heartbeat ends.
        let (alive, stop) = mpsc::channel::<()>();
        // An in-memory study lives in this process alone: no other loop can see its heartbeat
        // (and a new connection would open another, empty database).
        if !crate::storage::is_in_memory(&url) {
            s.spawn(move || heartbeat(&url, &name, trial.number, every, stop));
        }
        let evaluated =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| eval(&*study, trial)));
        let (ev, panicked) = match evaluated {
            Ok(ev) => (ev, None),
            Err(payload) => {
                let msg = panic_message(&*payload);
                let reason = format!("internal error: the evaluation panicked: {msg}");
                (Evaluation::failed(reason), Some(msg))
            }
        };
        let ending = record(study, trial, ev).map_err(|source| OptimizeError::Store {
            trial: trial.number,
            source,
        });
        drop(alive);
        ending.map(|e| (e, panicked))
    })
}

/// Consecutive failed trials with the same reason, across the workers of a loop.
#[derive(Debug, Default)]
pub(crate) struct FailureStreak {
    reason: Option<String>,
    count: usize,
    /// Whether a trial of this loop completed (the objective can work).
    worked: bool,
}

impl FailureStreak {
    /// Records a told trial (`Some(reason)` if it failed); returns the length of the streak and
    /// its reason once [`SAME_FAILURES_AT_START`] trials in a row failed with it before any
    /// trial of the loop completed, or [`SAME_FAILURES`] after.
    pub(crate) fn record(&mut self, failure: Option<&str>) -> Option<(usize, &str)> {
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

/// The trials of a loop that ended after its stop signal.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AfterSignal {
    /// Told during the grace period.
    pub finished: Vec<u64>,
    /// Abandoned: still running at its end, or handed out as the signal came.
    pub abandoned: Vec<u64>,
}

impl AfterSignal {
    /// "stopped by SIGTERM: 1 trial finished during the grace period, trial 17 abandoned".
    pub fn line(&self, signal: StopSignal) -> String {
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

/// What the workers of one loop share.
pub(crate) struct Workers<'a> {
    pub(crate) open: &'a Opener<'a>,
    pub(crate) objective: &'a dyn Objective,
    pub(crate) observer: &'a dyn Observer,
    /// Heartbeat period.
    pub(crate) every: Duration,
    /// Set when a worker ends with an error: the others stop asking for trials.
    pub(crate) stop: AtomicBool,
    /// `SIGTERM`/`SIGINT`: no new trial, a grace period for the running ones.
    pub(crate) shutdown: Option<&'a Shutdown>,
    /// Trials finished or abandoned after the signal.
    pub(crate) after_signal: Mutex<AfterSignal>,
    /// Consecutive failures with the same reason, when they stop the loop (`None`: they do
    /// not, [`super::OptimizeOptions::stop_on_repeated_failures`]).
    pub(crate) streak: Option<Mutex<FailureStreak>>,
    /// Held while a trial's summary is computed and reported: reports come whole, in the order
    /// of their summaries (the counts and the cost spent never go back).
    pub(crate) report: Mutex<()>,
    /// At most this many asks over all workers ([`super::OptimizeOptions::n_trials`]).
    pub(crate) n_trials: Option<u64>,
    /// Asks reserved so far (counted only with `n_trials`).
    pub(crate) handed: AtomicU64,
}

impl Workers<'_> {
    fn signal(&self) -> Option<StopSignal> {
        self.shutdown.and_then(Shutdown::signal)
    }

    /// Whether workers stop asking: another worker failed, a signal came, or the objective
    /// ended the loop.
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.signal().is_some() || self.objective.ended()
    }

    /// Reserves one of the loop's `n_trials` asks; false once they are all taken.
    fn reserve_ask(&self) -> bool {
        match self.n_trials {
            None => true,
            Some(n) => self.handed.fetch_add(1, Ordering::SeqCst) < n,
        }
    }

    /// One worker on `study`: asks, evaluates and tells until the study is finished
    /// (`Some(reason)`), another worker failed, a signal came or the objective ended the loop
    /// (`None`).
    fn work(&self, worker: &str, study: &mut Study) -> Result<Option<String>, OptimizeError> {
        while !self.stopping() {
            if !self.reserve_ask() {
                break;
            }
            let trial = match study.ask(worker).map_err(OptimizeError::Ask)? {
                Ask::Finished(f) => return Ok(Some(f.to_string())),
                Ask::Trial(t) => t,
            };
            // A signal during the ask: the trial is given back before its evaluation starts.
            if let Some(signal) = self.signal() {
                let reason = format!("abandoned: stopped by {signal} before the evaluation");
                study
                    .abandon(trial.number, &reason)
                    .map_err(|source| OptimizeError::Store {
                        trial: trial.number,
                        source,
                    })?;
                lock(&self.after_signal).abandoned.push(trial.number);
                break;
            }
            let (objective, stop) = (self.objective, self.shutdown);
            let (ending, panicked) = evaluate_and_tell(study, &trial, self.every, |s, t| {
                objective.evaluate(s, t, stop)
            })?;
            let Ending::Told(recorded) = ending else {
                lock(&self.after_signal).abandoned.push(trial.number);
                break;
            };
            if self.signal().is_some() {
                lock(&self.after_signal).finished.push(trial.number);
            }
            if let Some(late) = &recorded.late {
                self.observer.warn(&late.to_string());
            }
            let told = recorded.trial;
            if let Some(message) = panicked {
                return Err(OptimizeError::Panicked {
                    trial: trial.number,
                    message,
                });
            }
            let failure = match told.state {
                TrialState::Failed => told.error.as_deref(),
                _ => None,
            };
            if let Some(streak) = &self.streak
                && let Some((count, reason)) = lock(streak).record(failure)
            {
                return Err(OptimizeError::SameFailures {
                    count,
                    reason: reason.to_string(),
                });
            }
            let _line = lock(&self.report);
            let s = study.summary().map_err(OptimizeError::Ask)?;
            self.observer.told(worker, &told, &s);
        }
        Ok(None)
    }

    /// [`Workers::work`] on `lent`, or else on a study of its own (opened with
    /// [`Workers::open`]), with any error or panic stopping the other workers.
    pub(crate) fn work_or_stop(
        &self,
        worker: &str,
        lent: Option<&mut Study>,
    ) -> Result<Option<String>, OptimizeError> {
        let work = || match lent {
            Some(study) => self.work(worker, study),
            None => {
                let mut study = (self.open)().map_err(OptimizeError::Open)?;
                self.work(worker, &mut study)
            }
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|p| Err(OptimizeError::WorkerPanicked(panic_message(&*p))));
        if r.is_err() {
            self.stop.store(true, Ordering::SeqCst);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
