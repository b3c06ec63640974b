//! The BO loop's shared pieces: typed decision records and why a run is finished.
//!
//! Every front end (studies, the experiment harness, Python) decides with the same driver,
//! [`driver::Run`] (budget gates, initial design, λ, the stopping rule, the carry, around the BO
//! step [`crate::policy::propose_fitted`]), and records what it decided in the same types:
//!
//! - [`record::DecisionRecord`]: what the step that proposed a trial decided (phase, acquisition
//!   value, λ, hyperparameters, predicted cost, the stopping check, B-MS-EI's summary, or a CVS
//!   study's control set), stored with the trial as JSON and read back only through serde;
//! - [`record::StudyState`]: what a study carries from one ask to the next (the warm start,
//!   B-MS-EI's carry, the automatic λ, the stopping rule's stop);
//! - [`Finished`]: why no further trial is proposed. It is a value, never an error.
//!
//! What a run decides with is configured by [`spec::PolicySpec`]: the acquisition and the keys
//! that apply to it, one serde type for a study's `[policy]`, an experiment's `[[policy]]` and
//! Python. Front ends turn it into the step's parameters ([`spec::PolicySpec::params`]) and
//! PBGI-D's schedule ([`spec::PolicySpec::decay`]). It lives here, beside the driver whose
//! [`driver::DecaySpec`] it produces: `run` already depends on `acquisition` (the registry, the
//! tree type, PBGI-D's rule) and nothing in `acquisition` depends on `run`, so no import circle.
//!
//! PBGI-D's λ is replayed from the records by [`replay_pbgi_d`], the one implementation of the
//! rule both studies and experiments use.

pub mod driver;
pub mod record;
pub mod spec;

use crate::acquisition::PbgiDecay;
use crate::error::Result;
use crate::policy::Phase;
use serde::{Deserialize, Serialize};

/// Why a run or study does not propose another trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finished {
    /// The budget cannot pay for the next proposal.
    Budget {
        /// Cost spent so far (counted toward the budget).
        spent: f64,
        /// The total budget.
        total: f64,
    },
    /// The configured number of trials is reached.
    MaxTrials(u64),
    /// The configured number of evaluations after the initial design is reached.
    MaxEvaluations(u64),
    /// The cost-aware stopping rule fired: more evaluations are not worth their cost.
    Stopped {
        /// The rule's name (`"pbgi"`).
        rule: String,
        /// Why, with the statistic and its threshold.
        reason: String,
    },
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finished::Budget { spent, total } => {
                write!(f, "budget exhausted: spent {spent:.4} of {total:.4}")
            }
            Finished::MaxTrials(n) => write!(f, "reached max_trials = {n}"),
            Finished::MaxEvaluations(n) => write!(f, "reached max_evaluations = {n}"),
            Finished::Stopped { reason, .. } => write!(f, "stopping rule fired: {reason}"),
        }
    }
}

/// One evaluated step as PBGI-D's λ rule sees it, in the order of evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayStep {
    /// How the step's point was chosen.
    pub phase: Phase,
    /// The acquisition value the step recorded (its largest PBGI index), if any.
    pub acquisition_value: Option<f64>,
    /// The observed objective value (maximization convention).
    pub y: f64,
}

/// PBGI-D's state after `steps`, replayed from `λ0 = lambda0` with divisor `decay`: every
/// model step ends an iteration ([`PbgiDecay::end_iteration`]) with its recorded index against
/// the best value observed including that step, and starts the next one. The returned state's
/// [`PbgiDecay::begin_iteration`] gives the λ of the next step.
pub fn replay_pbgi_d(
    lambda0: f64,
    decay: f64,
    steps: impl IntoIterator<Item = DecayStep>,
) -> Result<PbgiDecay> {
    let mut state = PbgiDecay::new(lambda0, decay)?;
    let mut best = f64::NEG_INFINITY;
    for s in steps {
        best = best.max(s.y);
        if s.phase == Phase::Model {
            state.begin_iteration();
            if let Some(a) = s.acquisition_value {
                state.end_iteration(a, best);
            }
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed form of the rule: λ0 divided once for every model step whose index fell below
    /// the best value observed including that step (the form studies used before the replay was
    /// shared).
    fn closed_form(lambda0: f64, decay: f64, steps: &[DecayStep]) -> f64 {
        let mut best = f64::NEG_INFINITY;
        let mut lambda = lambda0;
        for s in steps {
            best = best.max(s.y);
            if s.phase == Phase::Model && s.acquisition_value.is_some_and(|a| a < best) {
                lambda /= decay;
            }
        }
        lambda
    }

    #[test]
    fn replay_matches_the_closed_form_and_the_incremental_rule() {
        // A deterministic pseudo-random walk over phases, indices and values.
        let mut u = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            u ^= u << 13;
            u ^= u >> 7;
            u ^= u << 17;
            (u >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..200 {
            let n = (next() * 30.0) as usize;
            let steps: Vec<DecayStep> = (0..n)
                .map(|k| DecayStep {
                    phase: match (k < 3, next() < 0.1) {
                        (true, _) => Phase::InitialDesign,
                        (false, true) => Phase::Random,
                        (false, false) => Phase::Model,
                    },
                    acquisition_value: (next() < 0.9).then(|| next() * 2.0),
                    y: next() * 2.0,
                })
                .collect();
            let mut replayed = replay_pbgi_d(0.1, 2.0, steps.iter().copied()).unwrap();
            let lambda = replayed.begin_iteration();
            assert_eq!(lambda, closed_form(0.1, 2.0, &steps), "{steps:?}");
            // The experiment harness's incremental use of the rule gives the same λ.
            let mut live = PbgiDecay::new(0.1, 2.0).unwrap();
            let mut best = f64::NEG_INFINITY;
            for s in &steps {
                best = best.max(s.y);
                if s.phase == Phase::Model {
                    live.begin_iteration();
                    if let Some(a) = s.acquisition_value {
                        live.end_iteration(a, best);
                    }
                }
            }
            assert_eq!(live.begin_iteration(), lambda);
        }
    }

    #[test]
    fn replay_refuses_invalid_parameters() {
        assert!(replay_pbgi_d(0.0, 2.0, []).is_err());
        assert!(replay_pbgi_d(0.1, 1.0, []).is_err());
    }

    #[test]
    fn finished_reads_back_and_says_why() {
        for f in [
            Finished::Budget {
                spent: 12.5,
                total: 20.0,
            },
            Finished::MaxTrials(7),
            Finished::Stopped {
                rule: "pbgi".into(),
                reason: "pbgi: max_log_eipc = -3 <= threshold -2".into(),
            },
        ] {
            let v = serde_json::to_value(&f).unwrap();
            assert_eq!(serde_json::from_value::<Finished>(v).unwrap(), f);
        }
        assert_eq!(Finished::MaxTrials(7).to_string(), "reached max_trials = 7");
    }
}
