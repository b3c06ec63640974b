//! Persistent storage of studies and trials: one trait, backends in submodules.
//!
//! [`open`] picks the backend from a URL: `sqlite:PATH` ([`sqlite::SqliteStorage`], an embedded
//! file) or `postgresql://USER[:PASSWORD]@HOST[:PORT]/DB` ([`postgres::PostgresStorage`], a server
//! shared by workers on many machines). Both have the same semantics, documented on [`Storage`].

pub mod postgres;
pub mod sqlite;

use crate::error::{Error, Result};
use crate::trial::{Ask, Decided, Outcome, Told, Trial};

/// The decision callback of [`Storage::ask_with`]: given the study's trials and state, the next
/// trial and the new state, or why there is none.
pub type Decide<'a> = dyn FnMut(&[Trial], &serde_json::Value) -> Result<Decided> + 'a;

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
    /// the last fit's hyperparameters), lets `decide` choose the next trial and the new state,
    /// and inserts that trial as running for `worker`; or, if `decide` finds the study finished,
    /// stores the state it gives (if any) and inserts nothing. No other worker can interleave
    /// between the read and the write, so no two workers receive the same trial and each
    /// decision sees all pending trials.
    fn ask_with(&mut self, study: &str, worker: &str, decide: &mut Decide<'_>) -> Result<Ask>;

    /// Atomically reads the study's state and, if `update` returns a new one, stores it (no trial
    /// is inserted); returns the state now stored. `update` returning `None` makes this a read.
    fn update_state(
        &mut self,
        study: &str,
        update: &mut dyn FnMut(&serde_json::Value) -> Result<Option<serde_json::Value>>,
    ) -> Result<serde_json::Value>;

    /// Records the outcome of a running trial (durable before returning). A late outcome for an
    /// abandoned trial is recorded too (the evaluation was paid for, its cost counts) and
    /// reported as late ([`Told::late`]); telling a complete or failed trial is an error that
    /// changes nothing.
    fn tell_outcome(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Told>;

    /// [`Storage::tell_outcome`], without saying whether the outcome was late.
    fn tell(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Trial> {
        self.tell_outcome(study, number, outcome).map(|t| t.trial)
    }

    /// All trials of the study, by number.
    fn trials(&mut self, study: &str) -> Result<Vec<Trial>>;

    /// Marks a running trial as alive now.
    fn heartbeat(&mut self, study: &str, number: u64) -> Result<()>;

    /// Marks running trials whose last heartbeat is older than `timeout_s` as abandoned;
    /// returns their numbers.
    fn abandon_stale(&mut self, study: &str, timeout_s: f64) -> Result<Vec<u64>>;

    /// Marks trial `number` abandoned with `reason` if it is running (its worker gives it up,
    /// e.g. when stopped by a signal); returns whether it was. A trial already told or abandoned
    /// is left as it is (`false`); a late outcome is recorded as for [`Storage::abandon_stale`].
    fn abandon(&mut self, study: &str, number: u64, reason: &str) -> Result<bool>;
}

/// Opens the storage named by a URL: `sqlite:PATH` (also `sqlite://PATH`, `sqlite::memory:`;
/// see [`sqlite::SqliteStorage::open_url`]) or `postgresql://...` / `postgres://...` (see
/// [`postgres`]). Anything else is an [`Error::Invalid`] naming the accepted forms. Error messages
/// never contain a password from the URL.
pub fn open(url: &str) -> Result<Box<dyn Storage>> {
    if url.starts_with("sqlite:") {
        Ok(Box::new(sqlite::SqliteStorage::open_url(url)?))
    } else if url.starts_with("postgresql://") || url.starts_with("postgres://") {
        Ok(Box::new(postgres::PostgresStorage::open_url(url)?))
    } else {
        Err(Error::invalid(
            "storage URL",
            format!(
                "unsupported storage URL {:?}: expected sqlite:PATH or \
                 postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                redact_url(url)
            ),
        ))
    }
}

/// The URL with its password hidden, for messages and logs (see [`crate::redact`]).
pub use crate::redact::redact_url;

/// The longest study name accepted, in bytes. PostgreSQL cannot index a name much longer than
/// 2700 bytes; both backends refuse longer names than this with the same error.
pub const MAX_STUDY_NAME_BYTES: usize = 1024;

/// Checks a study name before it is stored: not empty, no NUL character, at most
/// [`MAX_STUDY_NAME_BYTES`] bytes.
pub(crate) fn check_study_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("study name", "must not be empty"));
    }
    if name.contains('\0') {
        return Err(Error::invalid(
            "study name",
            "must not contain NUL characters",
        ));
    }
    if name.len() > MAX_STUDY_NAME_BYTES {
        return Err(Error::invalid(
            "study name",
            format!(
                "is {} bytes long; at most {MAX_STUDY_NAME_BYTES} bytes are allowed",
                name.len()
            ),
        ));
    }
    Ok(())
}

/// Checks that `v` is a finite number; the error names `what`.
pub(crate) fn finite(what: &str, v: f64) -> Result<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(Error::invalid(what, format!("must be finite, got {v}")))
    }
}

/// An outcome checked by [`validate_outcome`], as stored in the `trials` columns.
pub(crate) struct ValidOutcome<'a> {
    pub(crate) state: crate::trial::TrialState,
    pub(crate) objective: Option<f64>,
    pub(crate) cost: Option<f64>,
    pub(crate) error: Option<&'a str>,
    /// The realized point of a [`Outcome::CompleteAt`]: parameters and unit-cube point as JSON
    /// text, replacing the stored ones.
    pub(crate) point: Option<(String, String)>,
}

/// Validates an outcome before anything is written (NaN, infinities and impossible costs are
/// refused with an error naming the field): a complete trial needs a finite objective and a
/// finite cost > 0, a failed trial's cost, if known, must be finite and >= 0.
pub(crate) fn validate_outcome(outcome: &Outcome) -> Result<ValidOutcome<'_>> {
    use crate::trial::TrialState;
    match outcome {
        Outcome::Complete { objective, cost } => {
            let objective = finite("objective", *objective)?;
            let cost = finite("cost", *cost)?;
            if cost <= 0.0 {
                return Err(Error::invalid(
                    "cost",
                    format!("a complete trial's cost must be > 0, got {cost}"),
                ));
            }
            Ok(ValidOutcome {
                state: TrialState::Complete,
                objective: Some(objective),
                cost: Some(cost),
                error: None,
                point: None,
            })
        }
        Outcome::CompleteAt {
            objective,
            cost,
            params,
            x,
        } => {
            let ValidOutcome {
                state,
                objective,
                cost,
                ..
            } = validate_outcome(&Outcome::Complete {
                objective: *objective,
                cost: *cost,
            })?;
            if !params.is_object() {
                return Err(Error::invalid("params", "must be a JSON object"));
            }
            for &xi in x {
                finite("x", xi)?;
            }
            Ok(ValidOutcome {
                state,
                objective,
                cost,
                error: None,
                point: Some((serde_json::to_string(params)?, serde_json::to_string(x)?)),
            })
        }
        Outcome::Failed { reason, cost } => {
            let cost = match cost {
                None => None,
                Some(c) => {
                    let c = finite("cost", *c)?;
                    if c < 0.0 {
                        return Err(Error::invalid(
                            "cost",
                            format!("a failed trial's cost must be >= 0, got {c}"),
                        ));
                    }
                    Some(c)
                }
            };
            Ok(ValidOutcome {
                state: TrialState::Failed,
                objective: None,
                cost,
                error: Some(reason.as_str()),
                point: None,
            })
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_dispatches_on_the_scheme() {
        let mut s = open("sqlite::memory:").unwrap();
        assert!(s.studies().unwrap().is_empty());
        for bad in ["mysql://u:pw-x@h/db", "pandora.db", "", "SQLITE:a.db"] {
            match open(bad) {
                Err(Error::Invalid { what, reason }) => {
                    assert_eq!(what, "storage URL");
                    assert!(reason.contains("sqlite:PATH"), "{reason}");
                    assert!(!reason.contains("pw-x"), "{reason}");
                }
                Err(e) => panic!("{bad:?}: unexpected error {e}"),
                Ok(_) => panic!("{bad:?} must be refused"),
            }
        }
        // A PostgreSQL URL goes to the PostgreSQL backend: nothing listens on port 1.
        match open("postgresql://u:pw-secret@127.0.0.1:1/db?connect_timeout=5") {
            Err(Error::Postgres(msg)) => {
                assert!(msg.contains("127.0.0.1"), "{msg}");
                assert!(!msg.contains("pw-secret"), "{msg}");
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("nothing listens on port 1"),
        }
    }
}
