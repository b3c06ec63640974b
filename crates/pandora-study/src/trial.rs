//! Trials: one evaluation of the objective, from proposal to outcome.

use pandora_core::run::Finished;
use pandora_core::run::record::DecisionRecord;
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
}

impl TrialState {
    /// The name stored in databases.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Abandoned => "abandoned",
        }
    }

    /// Parses [`TrialState::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "complete" => Some(Self::Complete),
            "failed" => Some(Self::Failed),
            "abandoned" => Some(Self::Abandoned),
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
    /// No trial; store the state if given.
    Finished(Finished, Option<serde_json::Value>),
}
