//! Studies over persistent storage (the native half of `pandora.Study`).
//!
//! Everything crosses the boundary as JSON text (configurations, trials, summaries): the Python
//! layer turns it into dictionaries. Every operation holds the study's mutex and runs with the GIL
//! released.

use crate::error::{json_err, study_err, value_err};
use pandora_core::run::record::DecisionRecord;
use pandora_study::storage::Storage;
use pandora_study::trial::Decided;
use pandora_study::{Ask, Outcome, Study, StudyConfig, Trial, TrialState};
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// A study bound to its storage.
#[pyclass(module = "pandora._pandora", frozen)]
pub struct NativeStudy {
    inner: Mutex<Study>,
}

/// Opens the storage named by a URL (`sqlite:PATH`, `sqlite:///abs/path`, `sqlite::memory:`,
/// `postgresql://user:pass@host/db`).
fn open_storage(url: &str) -> PyResult<Box<dyn Storage>> {
    pandora_study::storage::open(url).map_err(study_err)
}

impl NativeStudy {
    fn with<T>(&self, f: impl FnOnce(&mut Study) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("study lock poisoned"))?;
        f(&mut guard)
    }
}

#[pymethods]
impl NativeStudy {
    /// Opens (creating if needed) the study described by a JSON configuration (the TOML
    /// configuration's structure). An existing study must have the same space and direction.
    #[staticmethod]
    fn open(py: Python<'_>, config_json: &str) -> PyResult<Self> {
        let config: StudyConfig = serde_json::from_str(config_json).map_err(json_err)?;
        config.validate().map_err(study_err)?;
        py.detach(|| {
            let storage = open_storage(&config.study.storage)?;
            let study = Study::open(config, storage).map_err(study_err)?;
            Ok(Self {
                inner: Mutex::new(study),
            })
        })
    }

    /// Opens the existing study `name` in the storage `url` with its stored configuration.
    #[staticmethod]
    fn load(py: Python<'_>, name: &str, url: &str) -> PyResult<Self> {
        py.detach(|| {
            let storage = open_storage(url)?;
            let study = Study::load_at(name, storage, url).map_err(study_err)?;
            Ok(Self {
                inner: Mutex::new(study),
            })
        })
    }

    /// The configuration as JSON.
    fn config_json(&self) -> PyResult<String> {
        self.with(|s| serde_json::to_string(s.config()).map_err(json_err))
    }

    /// The configuration as TOML (a file `pandora status/best/ask/tell` accept).
    fn config_toml(&self) -> PyResult<String> {
        self.with(|s| toml::to_string(s.config()).map_err(|e| value_err(format!("TOML: {e}"))))
    }

    /// Runs the worker loop on this study with a Python objective (see
    /// [`crate::optimize`]): returns why the study is finished, or `None` when `evaluate` ended
    /// the loop or `n_trials` trials were handed out. An exception raised by either callable is
    /// raised from here.
    #[pyo3(signature = (evaluate, told, workers = 1, prefix = None, n_trials = None))]
    fn optimize(
        &self,
        py: Python<'_>,
        evaluate: Py<PyAny>,
        told: Py<PyAny>,
        workers: usize,
        prefix: Option<String>,
        n_trials: Option<u64>,
    ) -> PyResult<Option<String>> {
        let prefix = prefix.unwrap_or_else(|| {
            format!(
                "{}-py{}",
                pandora_study::optimize::hostname(),
                std::process::id()
            )
        });
        crate::optimize::run(py, &self.inner, evaluate, told, workers, prefix, n_trials)
    }

    /// Hands out the next trial: `(trial_json, None)`, or `(None, reason)` when the study is
    /// finished.
    fn ask(&self, py: Python<'_>, worker: &str) -> PyResult<(Option<String>, Option<String>)> {
        py.detach(|| {
            self.with(|s| match s.ask(worker).map_err(study_err)? {
                Ask::Trial(t) => Ok((Some(serde_json::to_string(&*t).map_err(json_err)?), None)),
                Ask::Finished(f) => Ok((None, Some(f.to_string()))),
            })
        })
    }

    /// Records a complete trial; returns the stored trial as JSON.
    fn tell(&self, py: Python<'_>, number: u64, objective: f64, cost: f64) -> PyResult<String> {
        if !objective.is_finite() {
            return Err(value_err(format!(
                "value must be finite, got {objective} (report a failure with tell(..., failed=reason))"
            )));
        }
        if !(cost.is_finite() && cost > 0.0) {
            return Err(value_err(format!(
                "cost must be finite and > 0, got {cost}"
            )));
        }
        py.detach(|| {
            self.with(|s| {
                let t = s
                    .tell(number, &Outcome::Complete { objective, cost })
                    .map_err(study_err)?;
                recorded_json(t)
            })
        })
        .and_then(|r| warn_late(py, r))
    }

    /// Records a complete trial of a `[cvs]` study with the realized values of its random
    /// parameters (`random_json`: a JSON object `name -> value`); `cost` defaults to the control
    /// set's cost. Returns the stored trial (with the realized point) as JSON.
    #[pyo3(signature = (number, objective, cost, random_json))]
    fn tell_realized(
        &self,
        py: Python<'_>,
        number: u64,
        objective: f64,
        cost: Option<f64>,
        random_json: &str,
    ) -> PyResult<String> {
        if !objective.is_finite() {
            return Err(value_err(format!(
                "value must be finite, got {objective} (report a failure with tell(..., failed=reason))"
            )));
        }
        let random: serde_json::Value = serde_json::from_str(random_json).map_err(json_err)?;
        let Some(random) = random.as_object() else {
            return Err(value_err("random must be a dict name -> value".to_string()));
        };
        py.detach(|| {
            self.with(|s| {
                let t = s
                    .tell_realized(number, objective, cost, random)
                    .map_err(study_err)?;
                recorded_json(t)
            })
        })
        .and_then(|r| warn_late(py, r))
    }

    /// Records step `step` of trial `number` of a `[fidelity]` study with the objective `value`
    /// at that step (`cost`: required for reported costs, computed by the study otherwise);
    /// returns the stored trial (with its steps) as JSON.
    #[pyo3(signature = (number, step, value, cost=None))]
    fn tell_step(
        &self,
        py: Python<'_>,
        number: u64,
        step: u32,
        value: f64,
        cost: Option<f64>,
    ) -> PyResult<String> {
        py.detach(|| {
            self.with(|s| {
                let t = s.tell_step(number, step, value, cost).map_err(study_err)?;
                serde_json::to_string(&t).map_err(json_err)
            })
        })
    }

    /// Records a failed trial; returns the stored trial as JSON.
    #[pyo3(signature = (number, reason, cost=None))]
    fn fail(
        &self,
        py: Python<'_>,
        number: u64,
        reason: String,
        cost: Option<f64>,
    ) -> PyResult<String> {
        if let Some(c) = cost
            && !(c.is_finite() && c >= 0.0)
        {
            return Err(value_err(format!("cost must be finite and >= 0, got {c}")));
        }
        py.detach(|| {
            self.with(|s| {
                let t = s
                    .tell(number, &Outcome::Failed { reason, cost })
                    .map_err(study_err)?;
                recorded_json(t)
            })
        })
        .and_then(|r| warn_late(py, r))
    }

    /// The known cost of a unit-cube point (`None` unless costs are uniform or known).
    fn known_cost(&self, x: Vec<f64>) -> PyResult<Option<f64>> {
        self.with(|s| Ok(s.known_cost(&x)))
    }

    /// All trials as a JSON array.
    fn trials_json(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| {
            self.with(|s| {
                // With ISO 8601 UTC timestamps next to the Unix ones, as `pandora export`.
                let trials: Vec<serde_json::Value> = s
                    .trials()
                    .map_err(study_err)?
                    .iter()
                    .map(pandora_study::Trial::export_json)
                    .collect();
                serde_json::to_string(&trials).map_err(json_err)
            })
        })
    }

    /// The summary as JSON, exactly as `pandora status --format json` prints it
    /// ([`pandora_study::Summary::to_json`]: counts, costs, the best trial, λ, the stopping rule's
    /// last check and its stop reason).
    fn summary_json(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| {
            self.with(|s| {
                let sum = s.summary().map_err(study_err)?;
                serde_json::to_string(&sum.to_json()).map_err(json_err)
            })
        })
    }

    /// The next point on a history kept elsewhere (an Optuna storage), without touching this
    /// study's storage: `history_json` is a JSON array of [`HistoryTrial`]s (running ones are the
    /// pending points), `state_json` the study state the last decision returned (`null` at
    /// first). Returns a [`Proposed`] as JSON.
    fn propose(&self, py: Python<'_>, history_json: &str, state_json: &str) -> PyResult<String> {
        let history: Vec<HistoryTrial> = serde_json::from_str(history_json).map_err(json_err)?;
        let state: serde_json::Value = serde_json::from_str(state_json).map_err(json_err)?;
        py.detach(|| {
            self.with(|s| {
                let trials = history
                    .into_iter()
                    .map(|h| h.into_trial(s))
                    .collect::<PyResult<Vec<_>>>()?;
                let out = match s.decide_on(&trials, &state).map_err(study_err)? {
                    Decided::Trial(t, state) => Proposed {
                        params: Some(t.params),
                        x: Some(t.x),
                        decision: Some(t.decision),
                        finished: None,
                        state: Some(state),
                    },
                    Decided::Finished(f, state) => Proposed {
                        params: None,
                        x: None,
                        decision: None,
                        finished: Some(f.to_string()),
                        state,
                    },
                    // Optuna trials have no steps; `Study::decide_on` resumes only trials with
                    // steps, which a history of Optuna trials does not hold.
                    Decided::Resume { number, .. } => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "the decision resumes trial {number}: studies with steps \
                             ([fidelity]) cannot propose on an outside history"
                        )));
                    }
                };
                serde_json::to_string(&out).map_err(json_err)
            })
        })
    }

    /// One decision of the freeze-thaw index policy on learning curves kept elsewhere (an Optuna
    /// storage), in this study's space and direction: `request_json` is a
    /// [`crate::freeze_thaw::CurvesRequest`], the result a [`crate::freeze_thaw::CurvesDecision`]
    /// as JSON. This study's storage is not touched.
    fn decide_curves(&self, py: Python<'_>, request_json: &str) -> PyResult<String> {
        let request: crate::freeze_thaw::CurvesRequest =
            serde_json::from_str(request_json).map_err(json_err)?;
        py.detach(|| {
            self.with(|s| {
                let d = crate::freeze_thaw::decide_curves(s, &request)?;
                serde_json::to_string(&d).map_err(json_err)
            })
        })
    }

    /// Marks running trials silent for longer than `timeout_s` as abandoned; returns their numbers.
    fn abandon_stale(&self, py: Python<'_>, timeout_s: f64) -> PyResult<Vec<u64>> {
        py.detach(|| self.with(|s| s.abandon_stale(timeout_s).map_err(study_err)))
    }

    /// Marks a running trial alive.
    fn heartbeat(&self, py: Python<'_>, number: u64) -> PyResult<()> {
        py.detach(|| self.with(|s| s.heartbeat(number).map_err(study_err)))
    }
}

/// A told trial as JSON, with the message of a late outcome.
fn recorded_json(r: pandora_study::Recorded) -> PyResult<(String, Option<String>)> {
    let json = serde_json::to_string(&r.trial).map_err(json_err)?;
    Ok((json, r.late.map(|l| l.to_string())))
}

/// Says so (a `RuntimeWarning`) when a told outcome came late: the trial had been abandoned, its
/// cost counts all the same and spending may now exceed the budget.
fn warn_late(py: Python<'_>, (json, late): (String, Option<String>)) -> PyResult<String> {
    if let Some(msg) = late {
        let msg = std::ffi::CString::new(msg.replace('\0', " ")).unwrap_or_default();
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(),
            &msg,
            1,
        )?;
    }
    Ok(json)
}

/// One trial of a history given to [`NativeStudy::propose`], its parameters in the study's terms.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryTrial {
    number: u64,
    state: TrialState,
    params: serde_json::Value,
    #[serde(default)]
    objective: Option<f64>,
    #[serde(default)]
    cost: Option<f64>,
    #[serde(default)]
    created_at: f64,
    #[serde(default)]
    finished_at: Option<f64>,
    /// The record of the decision that proposed it; `None` for a trial the policy did not
    /// propose (recorded as a random point: charged, not part of the initial design or of
    /// PBGI-D's λ schedule).
    #[serde(default)]
    decision: Option<DecisionRecord>,
}

impl HistoryTrial {
    /// The study's trial: the parameters encoded in the unit cube (errors name the parameter).
    fn into_trial(self, study: &Study) -> PyResult<Trial> {
        let x = study
            .space()
            .encode(&self.params)
            .map_err(|e| value_err(format!("history trial {}: {e}", self.number)))?;
        let decision = match self.decision {
            Some(d) => d,
            None => {
                serde_json::from_value(serde_json::json!({"phase": "random"})).map_err(json_err)?
            }
        };
        Ok(Trial {
            number: self.number,
            state: self.state,
            params: self.params,
            x,
            objective: self.objective,
            cost: self.cost,
            worker: None,
            created_at: self.created_at,
            finished_at: self.finished_at,
            heartbeat_at: self.created_at,
            decision,
            error: None,
            step_to: None,
            steps: Vec::new(),
        })
    }
}

/// What [`NativeStudy::propose`] decided: a point (`params`, `x`, `decision`) or why there is
/// none (`finished`), with the study's new state (`None`: keep the old one).
#[derive(Serialize)]
struct Proposed {
    params: Option<serde_json::Value>,
    x: Option<Vec<f64>>,
    decision: Option<DecisionRecord>,
    finished: Option<String>,
    state: Option<serde_json::Value>,
}
