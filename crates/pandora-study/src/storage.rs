//! Persistent storage of studies and trials: one trait, backends in submodules.

pub mod sqlite;

use crate::error::Result;
use crate::trial::{NewTrial, Outcome, Trial};

/// The decision callback of [`Storage::ask_with`]: given the study's trials and state, the next
/// trial and the new state.
pub type Decide<'a> =
    dyn FnMut(&[Trial], &serde_json::Value) -> Result<(NewTrial, serde_json::Value)> + 'a;

/// Where studies live. Every method is atomic; a `tell` is durable when it returns.
pub trait Storage: Send {
    /// Creates the study `name` with its configuration (JSON) if it does not exist, and returns
    /// the stored configuration (the existing one if the study existed).
    fn open_study(&mut self, name: &str, config_json: &str) -> Result<String>;

    /// The stored configuration (JSON) of the study `name`, or `None` if there is no such study.
    fn study_config(&mut self, name: &str) -> Result<Option<String>>;

    /// Names of all studies.
    fn studies(&mut self) -> Result<Vec<String>>;

    /// Atomically reads the study's trials and its state (a JSON value kept by the study, e.g.
    /// PBGI-D's λ), lets `decide` choose the next trial and the new state, and inserts that trial
    /// as running for `worker`. No other worker can interleave between the read and the insert,
    /// so no two workers receive the same trial and each decision sees all pending trials.
    fn ask_with(&mut self, study: &str, worker: &str, decide: &mut Decide<'_>) -> Result<Trial>;

    /// Atomically reads the study's state and, if `update` returns a new one, stores it (no trial
    /// is inserted); returns the state now stored. `update` returning `None` makes this a read.
    fn update_state(
        &mut self,
        study: &str,
        update: &mut dyn FnMut(&serde_json::Value) -> Result<Option<serde_json::Value>>,
    ) -> Result<serde_json::Value>;

    /// Records the outcome of a running trial (durable before returning). A late outcome for an
    /// abandoned trial is recorded too (the evaluation was paid for); telling a complete or
    /// failed trial is an error that changes nothing.
    fn tell(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Trial>;

    /// All trials of the study, by number.
    fn trials(&mut self, study: &str) -> Result<Vec<Trial>>;

    /// Marks a running trial as alive now.
    fn heartbeat(&mut self, study: &str, number: u64) -> Result<()>;

    /// Marks running trials whose last heartbeat is older than `timeout_s` as abandoned;
    /// returns their numbers.
    fn abandon_stale(&mut self, study: &str, timeout_s: f64) -> Result<Vec<u64>>;
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
