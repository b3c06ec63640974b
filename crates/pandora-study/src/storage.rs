//! Persistent storage of studies and trials: one trait, backends in submodules.
//!
//! [`open`] picks the backend from a URL: `sqlite:PATH` ([`sqlite::SqliteStorage`], an embedded
//! file) or `postgresql://USER[:PASSWORD]@HOST[:PORT]/DB` ([`postgres::PostgresStorage`], a server
//! shared by workers on many machines). Both have the same semantics, documented on [`Storage`].

pub mod postgres;
pub mod sqlite;

use crate::error::{Error, Result};
use crate::trial::{Ask, Decided, Outcome, StepOutcome, StepReport, Told, Trial, TrialState};

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

    /// The study's trials and state read in one consistent snapshot *without* taking the lock
    /// of [`Storage::ask_with`]: a decision made on it is checked again under the lock before
    /// its trial is claimed ([`crate::claim`]).
    fn snapshot(&mut self, study: &str) -> Result<Snapshot>;

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

    /// Records one step of a running trial with steps (durable before returning): the step must
    /// be the one after the trial's last told step and within its current run
    /// ([`Trial::step_to`]). Telling the run's last step pauses the trial; telling the study's
    /// last step (`max_steps`) completes it with that value as its objective. Step costs add up
    /// in the trial's cost. A step of a trial that is not running (paused because its worker was
    /// presumed gone, or done) is an error that changes nothing, so no step is ever recorded
    /// twice. See `apply_step` for the rules, shared by every backend.
    fn tell_step(&mut self, study: &str, number: u64, step: &StepOutcome) -> Result<Trial>;

    /// [`Storage::tell_outcome`], without saying whether the outcome was late.
    fn tell(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Trial> {
        self.tell_outcome(study, number, outcome).map(|t| t.trial)
    }

    /// All trials of the study, by number.
    fn trials(&mut self, study: &str) -> Result<Vec<Trial>>;

    /// One page of the study's trials: those numbered `from` and up, at most `limit` of them, by
    /// number and with their steps, and how many trials the study has, read in one consistent
    /// snapshot. Trials are numbered 0, 1, ... without gaps, so this is the page at offset
    /// `from`; it reads the page's rows only (a range of the `(study, number)` key), whatever the
    /// study's size. `limit` 0 gives the total only; a `from` past the last trial gives no trials.
    fn trials_page(&mut self, study: &str, from: u64, limit: u64) -> Result<TrialPage>;

    /// Marks a running trial as alive now.
    fn heartbeat(&mut self, study: &str, number: u64) -> Result<()>;

    /// Marks running trials whose last heartbeat is older than `timeout_s` as abandoned (a trial
    /// with steps as paused instead, keeping its told steps, so that it can be resumed); returns
    /// their numbers.
    fn abandon_stale(&mut self, study: &str, timeout_s: f64) -> Result<Vec<u64>>;

    /// Marks trial `number` abandoned (a trial with steps: paused) with `reason` if it is running
    /// (its worker gives it up, e.g. when stopped by a signal); returns whether it was. A trial
    /// already told or abandoned is left as it is (`false`); a late outcome is recorded as for
    /// [`Storage::abandon_stale`].
    fn abandon(&mut self, study: &str, number: u64, reason: &str) -> Result<bool>;
}

/// A study's trials and state as read together ([`Storage::snapshot`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// All trials, by number, with their steps.
    pub trials: Vec<Trial>,
    /// The study state (JSON, as [`Storage::ask_with`] gives it to its decision).
    pub state: serde_json::Value,
}

/// One page of a study's trials ([`Storage::trials_page`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialPage {
    /// How many trials the study has, in the snapshot the page was read from.
    pub total: u64,
    /// The page's trials, by number, with their steps.
    pub trials: Vec<Trial>,
}

/// Attaches `steps` (trial number and step, by number then step) to the trials of a page (by
/// number); steps of trials outside the page are skipped.
pub(crate) fn attach_page_steps(
    trials: &mut [Trial],
    steps: impl IntoIterator<Item = (u64, StepReport)>,
) {
    for (number, step) in steps {
        if let Ok(i) = trials.binary_search_by_key(&number, |t| t.number) {
            trials[i].steps.push(step);
        }
    }
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

/// Whether `url` names a private in-memory SQLite database (`sqlite::memory:`): each
/// connection opened with it is a database of its own.
pub fn is_in_memory(url: &str) -> bool {
    url.starts_with("sqlite:")
        && sqlite::SqliteStorage::path_of_url(url).is_ok_and(|p| p == ":memory:")
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

/// The trial's state once a worker gives it up: abandoned, or paused for a trial with steps.
pub(crate) const GIVEN_UP_STATE_SQL: &str =
    "CASE WHEN step_to IS NULL THEN 'abandoned' ELSE 'paused' END";

/// Applies a told step to `trial` (as loaded under the backend's lock), after checking it: the
/// trial has steps and is running, the step is the next one and within the current run, the
/// value is finite and the cost finite and > 0. Appends the step (told at `at`), adds its cost,
/// refreshes the heartbeat and sets the new state: complete at `max_steps` (objective = value),
/// paused at the end of the run, running otherwise. On error `trial` is unchanged.
pub(crate) fn apply_step(trial: &mut Trial, s: &StepOutcome, at: f64) -> Result<()> {
    let value = finite("value", s.value)?;
    let cost = finite("cost", s.cost)?;
    if cost <= 0.0 {
        return Err(Error::invalid(
            "cost",
            format!("a step's cost must be > 0, got {cost}"),
        ));
    }
    let who = format!("trial {}", trial.number);
    let Some(step_to) = trial.step_to else {
        return Err(Error::invalid(
            who,
            "has no steps (its study has no [fidelity] section): tell its outcome instead",
        ));
    };
    if trial.state != TrialState::Running {
        return Err(Error::invalid(
            who,
            format!(
                "is {}, not running: step {} was not recorded (a paused trial's worker was \
                 presumed gone; ask again to resume it)",
                trial.state.as_str(),
                s.step
            ),
        ));
    }
    let next = trial.steps.len() as u32 + 1;
    if s.step != next {
        let why = if s.step < next {
            format!("step {} was already told; the next step is {next}", s.step)
        } else {
            format!("the next step is {next}, got {}", s.step)
        };
        return Err(Error::invalid("step", why));
    }
    if s.step > step_to.min(s.max_steps) {
        return Err(Error::invalid(
            "step",
            format!("this run of trial {} ends at step {step_to}", trial.number),
        ));
    }
    trial.steps.push(StepReport {
        step: s.step,
        value,
        cost,
        at,
    });
    trial.cost = Some(trial.cost.unwrap_or(0.0) + cost);
    trial.heartbeat_at = at;
    if s.step == s.max_steps {
        trial.state = TrialState::Complete;
        trial.objective = Some(value);
        trial.finished_at = Some(at);
    } else if s.step == step_to {
        trial.state = TrialState::Paused;
    }
    Ok(())
}

/// Checks an outcome against the trial it is told for, for a trial with steps: only a failure
/// can be told (of a running or paused trial; the steps are told one by one), and its cost adds
/// to the steps' costs. Returns the cost to store. Trials without steps: the outcome's cost.
pub(crate) fn outcome_cost(trial: &Trial, valid: &ValidOutcome<'_>) -> Result<Option<f64>> {
    if trial.step_to.is_none() {
        if trial.state == TrialState::Paused {
            return Err(Error::invalid(
                format!("trial {}", trial.number),
                "is paused without steps (corrupt storage?)",
            ));
        }
        return Ok(valid.cost);
    }
    if valid.state != TrialState::Failed {
        return Err(Error::invalid(
            format!("trial {}", trial.number),
            "has steps: tell each step's value (pandora tell ... --step T), or tell a failure",
        ));
    }
    Ok(match (trial.cost, valid.cost) {
        (None, c) => c,
        (Some(a), b) => Some(a + b.unwrap_or(0.0)),
    })
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
