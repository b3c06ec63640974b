//! Stopping a study worker on `SIGTERM`/`SIGINT`: no new trial, a grace period for the running
//! evaluations, then their process groups are stopped and their trials abandoned.
//!
//! # The problem
//!
//! A scheduler ends a job by signal: Slurm sends `SIGTERM` at preemption and at the time limit,
//! then `SIGKILL` after its `KillWait` (30 s by default); a user at a terminal presses Ctrl-C.
//! Before, `pandora run` died at once: its running trial stayed `running` until another run, after
//! `--abandon-after` seconds without a heartbeat (120 s by default), marked it abandoned, and an
//! evaluation one second from its end was thrown away.
//!
//! # Definition
//!
//! A [`Shutdown`] is the state of one worker process with respect to the signals:
//!
//! * **running** — no signal yet;
//! * **draining** — the first signal arrived at `t₀`: no trial is handed out any more, and the
//!   evaluations under way may finish until the deadline `t₀ + grace`;
//! * **urgent** — a second signal arrived (or the deadline passed): the evaluations under way are
//!   stopped now.
//!
//! # Algorithm
//!
//! [`listen`] registers `SIGTERM` and `SIGINT` with `signal-hook`'s iterator: the handler itself
//! only writes a byte to a pipe (async-signal-safe, no logic), and a thread of its own reads the
//! signals and calls [`Shutdown::notify`], which updates the state under a mutex. The workers and
//! the command runner ([`crate::command`]) *poll* the state ([`Shutdown::signal`],
//! [`Shutdown::deadline`], [`Shutdown::urgent`]) at most [`TICK`] apart while they wait, so that a
//! signal is acted on within a tick, never inside the handler.
//!
//! # Accuracy
//!
//! The grace period is honoured to within [`TICK`] plus the command runner's `SIGTERM`→`SIGKILL`
//! wait ([`crate::command::KILL_GRACE`]) after the deadline; the default grace
//! ([`DEFAULT_GRACE_S`]) is chosen so that grace, kill wait and the final storage write fit in
//! Slurm's default `KillWait` of 30 s.
//!
//! # Degenerate cases
//!
//! * A grace of 0 stops the evaluations at the first signal (still `SIGTERM` first).
//! * Further signals after the second change nothing.
//! * Builtin objectives are evaluated in-process and cannot be interrupted: they finish (they
//!   take milliseconds).
//! * On non-Unix systems [`listen`] registers nothing: the default action ends the process.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default grace period (seconds): 20 s for the evaluations, then up to 5 s between `SIGTERM`
/// and `SIGKILL` of an evaluation still running, within Slurm's default `KillWait` of 30 s.
pub const DEFAULT_GRACE_S: f64 = 20.0;

/// The longest a waiter takes to notice a change of the state.
pub const TICK: Duration = Duration::from_millis(50);

/// A signal that stops a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// `SIGTERM` (a scheduler's preemption or time limit, `kill`).
    Term,
    /// `SIGINT` (Ctrl-C).
    Int,
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Term => "SIGTERM",
            Self::Int => "SIGINT",
        })
    }
}

/// What the signals said so far.
#[derive(Debug, Default)]
struct State {
    /// The first signal and when it arrived.
    first: Option<(StopSignal, Instant)>,
    /// Signals received.
    count: usize,
}

/// The shutdown state of a worker process (see the module documentation).
#[derive(Debug)]
pub struct Shutdown {
    grace: Duration,
    state: Mutex<State>,
}

impl Shutdown {
    /// A worker with no signal yet, whose evaluations get `grace` after the first one.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            state: Mutex::new(State::default()),
        }
    }

    /// Records a signal (called by the listening thread, or by tests).
    pub fn notify(&self, signal: StopSignal) {
        let mut s = self.lock();
        s.count += 1;
        s.first.get_or_insert((signal, Instant::now()));
    }

    /// The first signal, once one arrived: no new trial may start.
    pub fn signal(&self) -> Option<StopSignal> {
        self.lock().first.map(|(s, _)| s)
    }

    /// When the running evaluations must be stopped: the first signal plus the grace period, or
    /// the first signal itself once a second one arrived; `None` before any signal.
    pub fn deadline(&self) -> Option<Instant> {
        let s = self.lock();
        let (_, at) = s.first?;
        Some(if s.count >= 2 {
            at
        } else {
            at.checked_add(self.grace).unwrap_or(at)
        })
    }

    /// Whether a second signal arrived: stop everything now, without a kill wait.
    pub fn urgent(&self) -> bool {
        self.lock().count >= 2
    }

    /// The grace period.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Replaces the default action of `SIGTERM` and `SIGINT` in this process by notifying the
/// returned [`Shutdown`] (from a thread of its own; the handler only writes to a pipe).
pub fn listen(grace: Duration) -> std::io::Result<Arc<Shutdown>> {
    let shutdown = Arc::new(Shutdown::new(grace));
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
        let notified = Arc::clone(&shutdown);
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    notified.notify(if sig == SIGINT {
                        StopSignal::Int
                    } else {
                        StopSignal::Term
                    });
                }
            })?;
    }
    Ok(shutdown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_starts_the_grace_and_the_second_ends_it() {
        let s = Shutdown::new(Duration::from_secs(100));
        assert_eq!((s.signal(), s.deadline(), s.urgent()), (None, None, false));
        s.notify(StopSignal::Int);
        assert_eq!(s.signal(), Some(StopSignal::Int));
        let d = s.deadline().unwrap();
        assert!(d > Instant::now() + Duration::from_secs(50));
        assert!(!s.urgent());
        s.notify(StopSignal::Term);
        // The first signal names the stop; the second moves the deadline to it.
        assert_eq!(s.signal(), Some(StopSignal::Int));
        assert!(s.urgent());
        assert!(s.deadline().unwrap() <= Instant::now());
        assert_eq!(StopSignal::Term.to_string(), "SIGTERM");
    }
}
