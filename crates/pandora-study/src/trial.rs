//! Trials: one evaluation of the objective, from proposal to outcome.

use pandora_core::run::Finished;
use pandora_core::run::record::{DecisionRecord, StudyState};
use serde::{Deserialize, Serialize};

/// The life cycle of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialState {
    /// Handed to a worker, no outcome yet.
    Running,
    /// Evaluated: objective and cost recorded.
    Complete,
    /// The evaluation failed (the reason is recorded); it may still have cost something.
    Failed,
    /// The worker vanished (no heartbeat before the timeout).
    Abandoned,
    /// A trial with steps (a study with a `[fidelity]` section) between two runs: its told steps
    /// are kept and a later ask may resume it from the next step.
    Paused,
}

/// How many trials are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrialCounts {
    /// Handed out, no outcome yet.
    pub running: usize,
    /// Evaluated.
    pub complete: usize,
    /// Failed.
    pub failed: usize,
    /// Abandoned by their worker.
    pub abandoned: usize,
    /// Trials with steps waiting to be resumed.
    pub paused: usize,
}

impl TrialCounts {
    /// Counts one more trial in `state`.
    pub fn add(&mut self, state: TrialState) {
        match state {
            TrialState::Running => self.running += 1,
            TrialState::Complete => self.complete += 1,
            TrialState::Failed => self.failed += 1,
            TrialState::Abandoned => self.abandoned += 1,
            TrialState::Paused => self.paused += 1,
        }
    }

    /// Trials with an outcome: complete, failed or abandoned.
    pub fn done(&self) -> usize {
        self.complete + self.failed + self.abandoned
    }
}

impl TrialState {
    /// The name stored in databases.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Abandoned => "abandoned",
            Self::Paused => "paused",
        }
    }

    /// Parses [`TrialState::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "complete" => Some(Self::Complete),
            "failed" => Some(Self::Failed),
            "abandoned" => Some(Self::Abandoned),
            "paused" => Some(Self::Paused),
            _ => None,
        }
    }
}

/// One trial of a study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// 0-based number within the study, in order of creation.
    pub number: u64,
    /// State.
    pub state: TrialState,
    /// The parameters in user terms (a JSON object: name → value).
    pub params: serde_json::Value,
    /// The same point encoded in the unit cube.
    pub x: Vec<f64>,
    /// The objective value as reported (user direction), when complete.
    pub objective: Option<f64>,
    /// The cost of the evaluation, when known.
    pub cost: Option<f64>,
    /// Which worker ran it.
    pub worker: Option<String>,
    /// Unix time (seconds) of creation.
    pub created_at: f64,
    /// Unix time of the outcome.
    pub finished_at: Option<f64>,
    /// Unix time of the worker's last sign of life.
    pub heartbeat_at: f64,
    /// What the step that proposed it decided (phase, acquisition value, λ, model
    /// hyperparameters, ...).
    pub decision: DecisionRecord,
    /// Why it failed.
    pub error: Option<String>,
    /// A trial with steps: the last step its current (or last) run may report. `None` for the
    /// trials of studies without a `[fidelity]` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_to: Option<u32>,
    /// A trial with steps: the values told so far, one per step from step 1, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
}

/// One told step of a trial with steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The step (1-based).
    pub step: u32,
    /// The objective value reported at this step (user direction).
    pub value: f64,
    /// What the step cost.
    pub cost: f64,
    /// Unix time (seconds) when it was told.
    pub at: f64,
}

/// A step a worker reports ([`crate::storage::Storage::tell_step`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOutcome {
    /// The step (1-based): the one after the trial's last told step.
    pub step: u32,
    /// The objective value at this step (user direction).
    pub value: f64,
    /// The step's cost (finite, > 0).
    pub cost: f64,
    /// The study's last step: telling it completes the trial with this value as its objective.
    pub max_steps: u32,
}

impl Trial {
    /// The first step of the trial's current run (a trial with steps resumes after its last told
    /// step); `None` for a trial without steps.
    pub fn step_from(&self) -> Option<u32> {
        self.step_to.map(|_| self.steps.len() as u32 + 1)
    }

    /// The trial as JSON for exports: every field, and next to each Unix timestamp
    /// (`created_at`, `finished_at`, `heartbeat_at`, in seconds) the same instant as an ISO 8601
    /// UTC string (`created_at_iso`, ... ; `null` when the timestamp is absent).
    pub fn export_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(obj) = v.as_object_mut() {
            for (key, secs) in [
                ("created_at_iso", Some(self.created_at)),
                ("finished_at_iso", self.finished_at),
                ("heartbeat_at_iso", Some(self.heartbeat_at)),
            ] {
                obj.insert(key.into(), secs.and_then(iso8601_utc).into());
            }
        }
        v
    }
}

/// A Unix time in seconds as an ISO 8601 UTC timestamp with milliseconds
/// (`2026-11-25T22:40:20.123Z`); `None` if it is not finite or beyond year ±262143.
///
/// The calendar date comes from the day count by Howard Hinnant's `civil_from_days` (proleptic
/// Gregorian calendar, exact for every day), so no date library is needed.
pub fn iso8601_utc(unix_seconds: f64) -> Option<String> {
    let ms = (unix_seconds * 1e3).round();
    if !ms.is_finite() || ms.abs() > 8.0e18 {
        return None;
    }
    let ms = ms as i64;
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(-262_143..=262_143).contains(&year) {
        return None;
    }
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
    ))
}

/// A trial just told ([`crate::storage::Storage::tell_outcome`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Told {
    /// The trial as stored now (complete or failed).
    pub trial: Trial,
    /// Whether the trial had been abandoned (no heartbeat before the timeout) when its outcome
    /// arrived: the outcome and its cost are recorded all the same, but the budget may have been
    /// given to other trials meanwhile.
    pub late: bool,
}

/// The outcome a worker reports for a trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The objective value and the cost.
    Complete {
        /// Objective (user direction).
        objective: f64,
        /// Cost (> 0).
        cost: f64,
    },
    /// Complete, at a point that differs from the one handed out: with cost-varying variable
    /// subsets only the controlled parameters are chosen and the others are realized at random,
    /// so the trial's parameters and unit-cube point are replaced by the realized ones.
    CompleteAt {
        /// Objective (user direction).
        objective: f64,
        /// Cost (> 0).
        cost: f64,
        /// Every parameter in user terms, the realized ones included.
        params: serde_json::Value,
        /// The same point encoded in the unit cube.
        x: Vec<f64>,
    },
    /// The evaluation failed; `cost` is what it consumed, if known.
    Failed {
        /// The reason (e.g. the tail of stderr).
        reason: String,
        /// Cost consumed, if known.
        cost: Option<f64>,
    },
}

/// A trial about to be created: everything but the number and the timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTrial {
    /// Parameters in user terms.
    pub params: serde_json::Value,
    /// Unit-cube encoding.
    pub x: Vec<f64>,
    /// What the step decided.
    pub decision: DecisionRecord,
    /// A trial with steps: the last step of its first run (`None` otherwise).
    pub step_to: Option<u32>,
}

/// The result of [`crate::study::Study::ask`].
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Evaluate this trial.
    Trial(Box<Trial>),
    /// The study is done.
    Finished(Finished),
}

/// What a decision made under the storage's lock ([`crate::storage::Storage::ask_with`]) comes
/// to: a trial to insert, or the reason there is none; either with the study's new state (JSON,
/// [`pandora_core::run::record::StudyState`]) to store in the same transaction.
// One value per ask, moved once: boxing the trial would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// Insert this trial as running and store the state.
    Trial(NewTrial, serde_json::Value),
    /// Resume paused trial `number` (a trial with steps) for its steps up to `step_to`, running
    /// for the asking worker, and store the state.
    Resume {
        /// The paused trial.
        number: u64,
        /// The last step of this run.
        step_to: u32,
        /// The study's new state.
        state: serde_json::Value,
    },
    /// No trial; store the state if given.
    Finished(Finished, Option<serde_json::Value>),
}

/// No trial: `finished`, recorded in the study state so that reports say why.
pub(crate) fn finish(finished: Finished, mut state: StudyState) -> Decided {
    state.finished = Some(finished.clone());
    Decided::Finished(finished, Some(state.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_each_state_to_its_own_field() {
        let mut c = TrialCounts::default();
        for s in [
            TrialState::Running,
            TrialState::Complete,
            TrialState::Complete,
            TrialState::Failed,
            TrialState::Complete,
            TrialState::Abandoned,
            TrialState::Failed,
            TrialState::Paused,
        ] {
            c.add(s);
        }
        let want = TrialCounts {
            running: 1,
            complete: 3,
            failed: 2,
            abandoned: 1,
            paused: 1,
        };
        assert_eq!(c, want);
        assert_eq!(c.done(), 6);
    }

    /// Reference values from GNU `date -u -d @SECONDS +%Y-%m-%dT%H:%M:%S` (an independent
    /// implementation), including leap days, century rules and times before 1970.
    #[test]
    fn iso8601_matches_gnu_date() {
        for (secs, want) in [
            (0.0, "1970-01-01T00:00:00.000Z"),
            (1_764_110_420.123, "2025-11-25T22:40:20.123Z"),
            (951_782_400.0, "2000-02-29T00:00:00.000Z"),
            (4_107_542_400.0, "2100-03-01T00:00:00.000Z"),
            (1_709_251_199.999_6, "2024-03-01T00:00:00.000Z"),
            (-1.5, "1969-12-31T23:59:58.500Z"),
            (-2_208_988_800.0, "1900-01-01T00:00:00.000Z"),
            (253_402_300_799.0, "9999-12-31T23:59:59.000Z"),
        ] {
            assert_eq!(iso8601_utc(secs).as_deref(), Some(want), "{secs}");
        }
        assert_eq!(iso8601_utc(f64::NAN), None);
        assert_eq!(iso8601_utc(f64::INFINITY), None);
        assert_eq!(iso8601_utc(1e300), None);
    }

    #[test]
    fn export_json_puts_iso_timestamps_next_to_the_numbers() {
        let t = Trial {
            number: 3,
            state: TrialState::Running,
            params: serde_json::json!({"a": 1}),
            x: vec![0.5],
            objective: None,
            cost: None,
            worker: Some("w".into()),
            created_at: 0.25,
            finished_at: None,
            heartbeat_at: 60.0,
            decision: DecisionRecord::new(pandora_core::policy::Phase::InitialDesign, "test"),
            error: None,
            step_to: None,
            steps: Vec::new(),
        };
        let v = t.export_json();
        assert_eq!(v["created_at"], 0.25);
        assert_eq!(v["created_at_iso"], "1970-01-01T00:00:00.250Z");
        assert_eq!(v["finished_at_iso"], serde_json::Value::Null);
        assert_eq!(v["heartbeat_at_iso"], "1970-01-01T00:01:00.000Z");
        assert_eq!(v["number"], 3);
    }
}
