//! What a worker reports about a trial, and what an ask hands out, as data: the one place that
//! turns a `tell` into an [`Outcome`] and an [`Ask`] into JSON, shared by `pandora tell`/`ask` and
//! the HTTP API of `pandora serve`.
//!
//! # Definition
//!
//! A [`Report`] holds what `pandora tell` accepts: an objective value (with an optional cost and,
//! in a `[cvs]` study, the realized values of the parameters its control set left random), or a
//! failure reason (with an optional cost). [`Study::report`] checks the combination, fills in the
//! cost where the study knows it (uniform and known costs, a control set's cost) and records the
//! outcome through [`Study::tell`] or [`Study::tell_realized`], so the storage's atomicity and
//! validation (finite numbers, positive costs, no second outcome) apply unchanged.
//!
//! # Errors
//!
//! A `[fidelity]` study's trials report their steps one at a time: a report with a `step` records
//! that step's value ([`Study::tell_step`]); a failure ends the trial as for any study.
//!
//! Every error names the field of the report: `objective`, `cost`, `failed`, `random`, `step`; a
//! trial that does not exist is [`Error::NotFound`].

use crate::config::CostKind;
use crate::error::{Error, Result};
use crate::study::{Recorded, Study};
use crate::trial::{Ask, Outcome};
use serde::Deserialize;
use serde_json::json;

/// The outcome of a trial as a worker reports it (the arguments of `pandora tell`, the body of
/// the HTTP API's `tell`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The objective value (user direction); with it, the trial is complete.
    #[serde(default)]
    pub objective: Option<f64>,
    /// The cost; required for complete trials of studies with `cost.kind` reported or runtime.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Why the evaluation failed; with it, the trial is failed.
    #[serde(default)]
    pub failed: Option<String>,
    /// The realized values of a `[cvs]` trial's random parameters (name → number).
    #[serde(default)]
    pub random: serde_json::Map<String, serde_json::Value>,
    /// A `[fidelity]` study: the step (1-based) whose value `objective` is; its cost is `cost`
    /// (reported costs) or known to the study.
    #[serde(default)]
    pub step: Option<u32>,
}

impl Study {
    /// Records `report` as the outcome of trial `number` (see the module docs).
    pub fn report(&mut self, number: u64, report: &Report) -> Result<Recorded> {
        let trials = self.trials()?;
        let trial = trials
            .iter()
            .find(|t| t.number == number)
            .ok_or_else(|| Error::NotFound(format!("trial {number}")))?;
        let known = self.trial_cost(trial);
        if let Some(step) = report.step {
            return self.report_step(number, step, report);
        }
        if !report.random.is_empty() && report.failed.is_some() {
            return Err(Error::invalid(
                "random",
                "only with an objective (a failed trial has no realized values)",
            ));
        }
        match (report.objective, &report.failed) {
            (Some(_), Some(_)) => Err(Error::invalid(
                "failed",
                "give either an objective or a failure reason, not both",
            )),
            (None, None) => Err(Error::invalid(
                "objective",
                "required (with a cost where needed), unless the trial failed",
            )),
            (Some(objective), None) if self.config().cvs.is_some() => {
                self.tell_realized(number, objective, report.cost, &report.random)
            }
            (Some(_), None) if !report.random.is_empty() => Err(Error::invalid(
                "random",
                "only a study with a [cvs] section has random parameters",
            )),
            (Some(objective), None) => {
                let cost = match (report.cost, self.config().cost.kind) {
                    (Some(c), _) => c,
                    (None, CostKind::Uniform | CostKind::Known) => known.unwrap_or(1.0),
                    (None, _) => {
                        return Err(Error::invalid(
                            "cost",
                            "required because cost.kind is reported or runtime",
                        ));
                    }
                };
                self.tell(number, &Outcome::Complete { objective, cost })
            }
            (None, Some(reason)) => self.tell(
                number,
                &Outcome::Failed {
                    reason: reason.clone(),
                    cost: report.cost,
                },
            ),
        }
    }
}

impl Study {
    /// A report of one step of a `[fidelity]` study's trial.
    fn report_step(&mut self, number: u64, step: u32, report: &Report) -> Result<Recorded> {
        if report.failed.is_some() {
            return Err(Error::invalid(
                "step",
                "a failure ends the whole trial: report it without a step",
            ));
        }
        if !report.random.is_empty() {
            return Err(Error::invalid(
                "random",
                "only a study with a [cvs] section has random parameters",
            ));
        }
        let Some(value) = report.objective else {
            return Err(Error::invalid(
                "objective",
                format!("required: the objective value at step {step}"),
            ));
        };
        let trial = self.tell_step(number, step, value, report.cost)?;
        Ok(Recorded { trial, late: None })
    }
}

impl Ask {
    /// The ask as JSON, as `pandora ask --json` prints it: `{"number", "params"}` (and, in a
    /// `[cvs]` study, `control_set`: `{index, name, controlled, random, cost}`; in a `[fidelity]`
    /// study, `steps`: `{from, to, resume}`), or `{"finished": REASON}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Ask::Trial(t) => {
                let mut out = json!({"number": t.number, "params": t.params});
                if let Some(c) = t.decision.cvs() {
                    // Which parameters to set, which are left to chance (their realized values
                    // go to `tell`'s `random`), and the cost.
                    out["control_set"] = json!({
                        "index": c.control_set,
                        "name": c.name,
                        "controlled": c.controlled,
                        "random": c.random,
                        "cost": c.cost,
                    });
                }
                if let (Some(from), Some(to)) = (t.step_from(), t.step_to) {
                    // Run steps `from..=to`; `resume`: continue from the checkpoint of the steps
                    // told before (`from − 1` of them).
                    out["steps"] = json!({"from": from, "to": to, "resume": from > 1});
                }
                out
            }
            Ask::Finished(f) => json!({"finished": f.to_string()}),
        }
    }
}
