//! Cost-aware freeze-thaw from Python: the exact discrete instances of `pandora freeze-thaw`
//! (`pandora_core::gittins::freeze_thaw::format`, see docs/freeze-thaw.md) and one decision of
//! the index policy over the learning-curve model (`pandora_core::freeze_thaw::decide`) on
//! curves kept elsewhere (an Optuna storage: `pandora.optuna.GittinsPruner`).

use crate::error::{core_err, json_err, value_err};
use pandora_core::freeze_thaw::{self, Schedule, ThawAction, ThawOptions, TrialState};
use pandora_core::gittins::freeze_thaw::format::{Instance, solve};
use pandora_study::Study;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};

/// Solves a freeze-thaw instance given as JSON (`{"runs": [...], "fallback": null}`) and returns
/// the solution as JSON. With `verify`, also the optimum over all policies by dynamic
/// programming (small instances).
#[pyfunction]
#[pyo3(signature = (instance_json, verify=false))]
pub fn solve_freeze_thaw(py: Python<'_>, instance_json: &str, verify: bool) -> PyResult<String> {
    let input: Instance = serde_json::from_str(instance_json).map_err(json_err)?;
    let out = py.detach(|| solve(input, verify)).map_err(core_err)?;
    serde_json::to_string(&out).map_err(json_err)
}

/// One decision of the index policy on learning curves given from outside, in a study's space
/// and direction (the input of [`decide_curves`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurvesRequest {
    /// The runs: the configuration in the study's terms, the values reported at the schedule's
    /// first steps (in the study's direction) and whether it can be continued by this decision.
    pub curves: Vec<Curve>,
    /// The steps' positions on the model's time axis (strictly increasing, `≥ 0`).
    pub positions: Vec<f64>,
    /// The relative cost of each step (default 1 each).
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// λ: objective units per unit of step weight (`> 0`).
    pub lambda: f64,
    /// Grid values per step of each run's chain (odd; default 101).
    #[serde(default = "default_grid")]
    pub grid_points: usize,
    /// Seed of the model fit and of the new configuration's search.
    #[serde(default)]
    pub seed: u64,
}

fn default_grid() -> usize {
    101
}

/// One run of a [`CurvesRequest`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Curve {
    /// The configuration, `name → value` in the study's terms (encoded by its space).
    pub params: serde_json::Value,
    /// The values reported at the schedule's first steps, in the study's direction.
    pub values: Vec<f64>,
    /// Held by a worker, pruned or finished: informs the model, cannot be continued.
    #[serde(default)]
    pub busy: bool,
}

/// The decision of [`decide_curves`], every value in the study's direction (for a minimized
/// objective an index is a loss: the smaller, the more promising).
#[derive(Debug, Serialize, PartialEq)]
pub struct CurvesDecision {
    /// `{"action": "continue", "trial": k, "step": s}` (`k` indexes the request's curves),
    /// `{"action": "start", "x": [...]}` or `{"action": "stop"}`.
    pub action: ThawAction,
    /// The index of continuing each curve (`null`: busy or complete).
    pub indices: Vec<Option<f64>>,
    /// The best new configuration's index.
    pub start_index: f64,
    /// The best new configuration, in the study's terms.
    pub start_params: serde_json::Value,
    /// The best complete run's value, if any.
    pub fallback: Option<f64>,
    /// For each curve: its index is at most the best complete run's value, so the index policy
    /// never continues it again (the best complete value only grows while the run waits);
    /// `false` for busy and complete curves and before any run is complete.
    pub dominated: Vec<bool>,
}

/// Decides on `request` (see [`CurvesRequest`]) with `study`'s space and direction, by
/// [`freeze_thaw::decide`] without a warm start (so the decision depends on the request alone).
pub fn decide_curves(study: &Study, request: &CurvesRequest) -> PyResult<CurvesDecision> {
    let dir = study.config().study.direction;
    let trials = request
        .curves
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let x = study
                .space()
                .encode(&c.params)
                .map_err(|e| value_err(format!("curves[{k}].params: {e}")))?;
            let values = c.values.iter().map(|&v| dir.to_internal(v)).collect();
            Ok(TrialState {
                x,
                values,
                busy: c.busy,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let weights = request
        .weights
        .clone()
        .unwrap_or_else(|| vec![1.0; request.positions.len()]);
    let schedule = Schedule::new(request.positions.clone(), weights).map_err(core_err)?;
    let mut opts = ThawOptions::new(request.lambda);
    opts.grid_points = request.grid_points;
    let dec = freeze_thaw::decide(&trials, &schedule, None, &opts, None, request.seed)
        .map_err(core_err)?;
    let dominated = dec
        .indices
        .iter()
        .map(|g| g.zip(dec.fallback).is_some_and(|(g, y)| g <= y))
        .collect();
    Ok(CurvesDecision {
        dominated,
        action: dec.action,
        indices: dec
            .indices
            .iter()
            .map(|g| g.map(|g| dir.from_internal(g)))
            .collect(),
        start_index: dir.from_internal(dec.start.index),
        start_params: study.space().decode(&dec.start.x),
        fallback: dec.fallback.map(|v| dir.from_internal(v)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pandora_study::StudyConfig;

    fn study(direction: &str) -> Study {
        let config: StudyConfig = serde_json::from_value(serde_json::json!({
            "study": {"name": "curves", "storage": "sqlite::memory:", "direction": direction},
            "objective": {"kind": "external"},
            "space": [{"name": "lr", "type": "float", "low": 0.0, "high": 2.0}],
        }))
        .unwrap();
        let storage = pandora_study::storage::open("sqlite::memory:").unwrap();
        Study::open(config, storage).unwrap()
    }

    fn request(sign: f64) -> CurvesRequest {
        let curve = |lr: f64, values: &[f64], busy: bool| Curve {
            params: serde_json::json!({ "lr": lr }),
            values: values.iter().map(|v| sign * v).collect(),
            busy,
        };
        CurvesRequest {
            curves: vec![
                curve(1.6, &[0.2, 0.25], false),
                curve(0.6, &[0.5, 0.7, 0.78, 0.8], true),
                curve(0.4, &[0.45, 0.66, 0.75, 0.79], true),
                curve(1.0, &[0.4, 0.55], true),
            ],
            positions: vec![1.0, 2.0, 3.0, 4.0],
            weights: None,
            lambda: 0.01,
            grid_points: 41,
            seed: 3,
        }
    }

    /// The binding is the core's decision on the encoded, direction-mapped inputs.
    #[test]
    fn decide_curves_is_the_core_decision_in_the_study_direction() {
        let max = decide_curves(&study("maximize"), &request(1.0)).unwrap();
        let trials: Vec<TrialState> = request(1.0)
            .curves
            .iter()
            .map(|c| TrialState {
                x: vec![c.params["lr"].as_f64().unwrap() / 2.0],
                values: c.values.clone(),
                busy: c.busy,
            })
            .collect();
        let schedule = Schedule::epochs(4).unwrap();
        let mut opts = ThawOptions::new(0.01);
        opts.grid_points = 41;
        let core = freeze_thaw::decide(&trials, &schedule, None, &opts, None, 3).unwrap();
        assert_eq!(max.action, core.action);
        assert_eq!(max.indices, core.indices);
        assert_eq!(max.start_index, core.start.index);
        assert_eq!(max.fallback, Some(0.8));
        // The clearly bad paused curve is not continued.
        assert!(
            max.indices[0].unwrap() < max.start_index.max(0.8),
            "{max:?}"
        );
        assert_ne!(max.action, ThawAction::Continue { trial: 0, step: 3 });
        assert_eq!(max.dominated, vec![true, false, false, false]);
        // A minimized study of the negated values: the same decision, values negated back.
        let min = decide_curves(&study("minimize"), &request(-1.0)).unwrap();
        assert_eq!(min.action, max.action);
        assert_eq!(min.fallback, Some(-0.8));
        assert_eq!(min.start_index, -max.start_index);
        assert_eq!(min.indices[0], max.indices[0].map(|g| -g));
        assert_eq!(min.dominated, max.dominated);
    }

    #[test]
    fn bad_curves_name_their_field() {
        let mut r = request(1.0);
        r.curves[2].params = serde_json::json!({"lr": 5.0});
        let e = decide_curves(&study("maximize"), &r).unwrap_err();
        pyo3::Python::initialize();
        let msg = pyo3::Python::attach(|py| e.value(py).to_string());
        assert!(msg.contains("curves[2].params"), "{msg}");
    }
}
