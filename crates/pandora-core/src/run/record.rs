//! Typed decision records: what a BO step decided and why, stored with every trial.
//!
//! A study stores one [`DecisionRecord`] with every trial it hands out (as JSON in its storage),
//! and a handful of values it carries from one ask to the next in a [`StudyState`]. Everything
//! the loop needs again later is read back from these records — PBGI-D's λ is replayed from the
//! phases and acquisition values, the stopping rule's window from the recorded checks, the next
//! fit warm-starts from the recorded hyperparameters — so a study resumes in any process and
//! makes the same decisions. The records are read and written only through serde: no code reads
//! a field of the stored JSON by its name.
//!
//! ## Format and compatibility
//!
//! The JSON layout is the one studies have been written in since the first release that stored
//! decisions (the fixture `crates/pandora-study/tests/fixtures/v0` holds studies written by it).
//! Every record of that layout reads into these types and writes back to the same JSON value
//! (tested on every trial of the fixture), so exports of old studies do not change. Fields added
//! later are optional, so records written before them still read.
//!
//! - A BO step's record ([`StepRecord`]) always carries `cost_params` and `stopping` (`null`
//!   when absent), B-MS-EI's `bmsei` summary only when the acquisition is `b_ms_ei`, and how
//!   the model was fitted (`fit`: `"full"`, `"warm"` or `"kept"`) only at model steps.
//! - A cost-varying-variable-subsets step's record ([`CvsRecord`], key `cvs`) carries the control
//!   set and the policy's scores instead.
//!
//! Non-finite numbers are `null` in JSON (JSON has no NaN); an acquisition value that is not
//! available (initial design) is `None`.

use crate::acquisition::bmsei::BmseiCarry;
use crate::error::{Error, Result};
use crate::gp::{GpParams, Kernel, KernelKind};
use crate::policy::{FitKind, Phase};
use crate::run::Finished;
use crate::stopping::Report;
use serde::{Deserialize, Serialize};

/// GP hyperparameters as recorded (internal, standardized space): the warm start of the next
/// fit, and what rebuilds a model without refitting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HyperRecord {
    /// The kernel's name ([`KernelKind::name`], e.g. `"matern52"`).
    pub kernel: String,
    /// ARD lengthscales, one per input dimension.
    pub lengthscales: Vec<f64>,
    /// Kernel outputscale.
    pub outputscale: f64,
    /// Constant prior mean.
    pub mean: f64,
    /// Observation-noise variance.
    pub noise: f64,
}

impl From<&GpParams> for HyperRecord {
    fn from(p: &GpParams) -> Self {
        Self {
            kernel: p.kernel.kind.name().to_string(),
            lengthscales: p.kernel.lengthscales.clone(),
            outputscale: p.kernel.outputscale,
            mean: p.mean,
            noise: p.noise,
        }
    }
}

impl HyperRecord {
    /// The hyperparameters, or an error naming the field that is invalid.
    pub fn to_params(&self) -> Result<GpParams> {
        let kind = KernelKind::parse(&self.kernel)?;
        Ok(GpParams {
            kernel: Kernel::new(kind, self.lengthscales.clone(), self.outputscale)?,
            mean: self.mean,
            noise: self.noise,
        })
    }

    /// [`HyperRecord::to_params`], `None` if invalid (a warm start that cannot be used is
    /// skipped, as a cold start is always valid).
    pub fn params(&self) -> Option<GpParams> {
        self.to_params().ok()
    }
}

/// One check of the cost-aware stopping rule, as recorded with the step it was made at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoppingCheck {
    /// The rule (`"pbgi"`).
    pub rule: String,
    /// The rule's λ.
    pub lambda: f64,
    /// BO evaluations at the check.
    pub iteration: usize,
    /// The headline statistic's name (`None` if the rule reported none).
    pub statistic: Option<String>,
    /// Its value (`None` when not available, e.g. before a moving-average window is full).
    pub value: Option<f64>,
    /// Its threshold.
    pub threshold: Option<f64>,
    /// The raw `max log EIPC` statistic, what a rebuilt rule is fed to continue its window.
    pub max_log_eipc: Option<f64>,
    /// Whether the raw condition held at this check.
    pub triggered: bool,
    /// Consecutive checks at which it held.
    pub consecutive: usize,
    /// Whether the rule fired (the step's proposal was then discarded).
    pub fired: bool,
    /// The rule's full report.
    pub report: Option<Report>,
}

impl StoppingCheck {
    /// The record of a check of rule at `lambda` that produced `report`.
    pub fn new(report: &Report, lambda: f64, fired: bool) -> Self {
        let finite = |v: f64| v.is_finite().then_some(v);
        let head = report.statistics.first();
        let raw = report.statistics.iter().find(|s| s.name == "max_log_eipc");
        Self {
            rule: report.rule.clone(),
            lambda,
            iteration: report.iteration,
            statistic: head.map(|s| s.name.clone()),
            value: head.and_then(|s| finite(s.value)),
            threshold: head.and_then(|s| finite(s.threshold)),
            max_log_eipc: raw.and_then(|s| finite(s.value)),
            triggered: report.triggered,
            consecutive: report.consecutive,
            fired,
            report: Some(report.clone()),
        }
    }
}

/// B-MS-EI's budget summary recorded with a step (the full carry lives in the study state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BmseiSummary {
    /// The suggested budget of the look-ahead tree.
    pub suggested_budget: Option<f64>,
    /// Its lower bound.
    pub lower_bound: Option<f64>,
}

/// What a BO step (any acquisition of `docs/acquisitions.md`) records besides the common fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StepRecord {
    /// Log-cost-model hyperparameters (unknown costs, model steps).
    #[serde(default)]
    pub cost_params: Option<HyperRecord>,
    /// The stopping rule's check at this step.
    #[serde(default)]
    pub stopping: Option<StoppingCheck>,
    /// B-MS-EI's budget summary (`b_ms_ei` only; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmsei: Option<BmseiSummary>,
    /// How the objective model's hyperparameters were obtained: `"full"`, `"warm"` or `"kept"`
    /// ([`FitKind`]; model steps only, absent in records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitKind>,
}

/// What a step of a cost-varying-variable-subsets study records: the control set and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CvsRecord {
    /// Index of the control set in the study's `[cvs] control_sets`.
    pub control_set: usize,
    /// The control set's label, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// Names of the parameters the trial sets.
    pub controlled: Vec<String>,
    /// Names of the parameters left to chance (their realized values come with `tell`).
    pub random: Vec<String>,
    /// The control set's cost.
    pub cost: f64,
    /// The controlled coordinates on the unit cube, in the set's order.
    pub x_ctrl: Vec<f64>,
    /// The policy's score of the chosen set (`None` in the initial design).
    #[serde(default)]
    pub score: Option<f64>,
    /// The scores of all sets (`None` where not scored).
    #[serde(default)]
    pub scores: Vec<Option<f64>>,
    /// UCB-CVS's ε at this step.
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// ETC's phase at this step (`"explore"` or `"commit"`).
    #[serde(default)]
    pub etc_phase: Option<String>,
    /// The Gittins policies' λ at this step.
    #[serde(default)]
    pub lambda: Option<f64>,
}

/// The part of a record that depends on the kind of study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordKind {
    /// A step of a cost-varying-variable-subsets study.
    Cvs {
        /// The control set and the policy's scores.
        cvs: CvsRecord,
    },
    /// A BO step.
    Step(StepRecord),
}

impl Default for RecordKind {
    fn default() -> Self {
        RecordKind::Step(StepRecord::default())
    }
}

/// What the step that proposed a trial decided: the trial's `decision` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// How the point was chosen.
    pub phase: Phase,
    /// The acquisition (or CVS policy) name.
    #[serde(default)]
    pub acquisition: String,
    /// The acquisition value at the point (`None` outside the model phase).
    #[serde(default)]
    pub acquisition_value: Option<f64>,
    /// λ used by the step (PBGI, PBGI-D, the Gittins CVS policies).
    #[serde(default)]
    pub lambda: Option<f64>,
    /// The objective model's hyperparameters.
    #[serde(default)]
    pub params: Option<HyperRecord>,
    /// The expected cost of the point, when known or predicted.
    #[serde(default)]
    pub predicted_cost: Option<f64>,
    /// Trials pending (handed out, not told) when the decision was made.
    #[serde(default)]
    pub pending: usize,
    /// What depends on the kind of study.
    #[serde(flatten)]
    pub kind: RecordKind,
    /// Wall-clock seconds the optimizer took to decide (the whole ask: model fit, acquisition
    /// maximization, stopping check); absent in records written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

impl DecisionRecord {
    /// A record of `phase` with no model data (initial design, random search).
    pub fn new(phase: Phase, acquisition: &str) -> Self {
        Self {
            phase,
            acquisition: acquisition.to_string(),
            acquisition_value: None,
            lambda: None,
            params: None,
            predicted_cost: None,
            pending: 0,
            kind: RecordKind::default(),
            seconds: None,
        }
    }

    /// The BO step's part, if this is a BO step.
    pub fn step(&self) -> Option<&StepRecord> {
        match &self.kind {
            RecordKind::Step(s) => Some(s),
            RecordKind::Cvs { .. } => None,
        }
    }

    /// The CVS part, if this is a step of a cost-varying-variable-subsets study.
    pub fn cvs(&self) -> Option<&CvsRecord> {
        match &self.kind {
            RecordKind::Cvs { cvs } => Some(cvs),
            RecordKind::Step(_) => None,
        }
    }

    /// The stopping check recorded with this step, if any.
    pub fn stopping(&self) -> Option<&StoppingCheck> {
        self.step().and_then(|s| s.stopping.as_ref())
    }

    /// The record as JSON (the form stored and exported).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Reads a stored record.
    pub fn from_json(v: serde_json::Value) -> Result<Self> {
        serde_json::from_value(v).map_err(|e| Error::invalid("decision", e.to_string()))
    }
}

/// The automatic stopping λ `U/(B − C)`, chosen once from the first model fit and kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoLambda {
    /// The λ.
    pub lambda: f64,
    /// The estimate of `U`.
    pub u: f64,
    /// Its standard error.
    pub u_std_error: Option<f64>,
    /// Prior paths used for the estimate.
    pub u_samples: usize,
    /// The budget `B`.
    pub budget: f64,
    /// The cost `C` spent when λ was chosen.
    pub spent: f64,
    /// The number of trials then.
    pub at_trial: usize,
}

/// The stop of the cost-aware stopping rule, kept so that later asks and reports say the same
/// without refitting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// The rule that fired.
    pub rule: String,
    /// Why, in words.
    pub reason: String,
    /// The stopping configuration that fired, as configured (a changed configuration lets the
    /// study continue).
    pub config: serde_json::Value,
    /// The check that fired.
    pub check: StoppingCheck,
    /// The number of trials at the stop.
    pub at_trial: usize,
}

/// The values a study carries from one ask to the next (stored beside its trials).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StudyState {
    /// The last model fit's hyperparameters: the warm start of the next fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<HyperRecord>,
    /// B-MS-EI's refill state and warm-start trees from the last model step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmsei: Option<BmseiCarry>,
    /// The automatic stopping λ, once chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<AutoLambda>,
    /// The stopping rule's stop, once it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopRecord>,
    /// Why the last ask handed out no trial (cleared when a trial is handed out again), so that
    /// status reports say the study is finished, and why, without deciding again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Finished>,
    /// A study with steps: the learning-curve model's last fit, the warm start of the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_thaw: Option<ThawCarry>,
}

/// What a study with steps carries from one decision of the freeze-thaw policy to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThawCarry {
    /// The learning-curve model's hyperparameters as
    /// [`LcParams::to_theta`](crate::gp::learning_curve::LcParams::to_theta) (Matérn 5/2
    /// asymptote kernel).
    pub theta: Vec<f64>,
    /// The last decision's action (`"start"`, `"continue"` or `"stop"`).
    pub action: String,
    /// The best new configuration's index at the last decision.
    pub start_index: f64,
    /// The largest index of a run that could be continued at the last decision, if any.
    pub best_continue: Option<f64>,
}

impl StudyState {
    /// Reads the stored state (`null` or `{}` for a new study).
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        if v.is_null() {
            return Ok(Self::default());
        }
        Self::deserialize(v).map_err(|e| Error::invalid("study state", e.to_string()))
    }

    /// The state as stored.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_kind_is_recorded_at_model_steps_and_absent_before() {
        let mut r = DecisionRecord::new(Phase::Model, "log_ei");
        // A record without it (as written before it was recorded) reads back without it and
        // writes back the same JSON.
        let old = r.to_json();
        assert!(!old.to_string().contains("\"fit\""), "{old}");
        assert_eq!(
            DecisionRecord::from_json(old.clone()).unwrap().to_json(),
            old
        );
        for (kind, name) in [
            (FitKind::Full, "full"),
            (FitKind::Warm, "warm"),
            (FitKind::Kept, "kept"),
        ] {
            r.kind = RecordKind::Step(StepRecord {
                fit: Some(kind),
                ..StepRecord::default()
            });
            let v = r.to_json();
            assert!(
                v.to_string().contains(&format!("\"fit\":\"{name}\"")),
                "{v}"
            );
            let back = DecisionRecord::from_json(v).unwrap();
            assert_eq!(back.step().and_then(|s| s.fit), Some(kind));
        }
    }
}
