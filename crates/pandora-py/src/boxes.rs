//! Exact Pandora's Box solutions (the same instance format as `pandora boxes`, see docs/boxes.md).

use crate::error::{core_err, json_err, value_err};
use pandora_core::gittins::{Cost, DP_MAX_BOXES, PandoraBox, Problem, Reward, dp_optimum};
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    boxes: Vec<BoxSpec>,
    #[serde(default)]
    fallback: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoxSpec {
    cost: CostSpec,
    rewards: Option<Discrete>,
    normal: Option<NormalSpec>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CostSpec {
    Fixed(f64),
    Random(Discrete),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Discrete {
    values: Vec<f64>,
    probs: Vec<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NormalSpec {
    mean: f64,
    std: f64,
}

#[derive(Serialize)]
struct Output {
    indices: Vec<f64>,
    order: Vec<usize>,
    open_probs: Vec<f64>,
    expected_utility: f64,
    expected_reward: f64,
    expected_cost: f64,
    dp_expected_utility: Option<f64>,
}

/// Solves a Pandora's Box instance given as JSON (`{"boxes": [...], "fallback": null}`) and
/// returns the solution as JSON. With `verify`, also the brute-force DP optimum (discrete rewards,
/// at most `DP_MAX_BOXES` boxes).
#[pyfunction]
#[pyo3(signature = (instance_json, verify=false))]
pub fn solve_boxes(py: Python<'_>, instance_json: &str, verify: bool) -> PyResult<String> {
    let input: Input = serde_json::from_str(instance_json).map_err(json_err)?;
    let mut boxes = Vec::with_capacity(input.boxes.len());
    for (i, b) in input.boxes.into_iter().enumerate() {
        let reward = match (b.rewards, b.normal) {
            (Some(d), None) => Reward::Discrete {
                values: d.values,
                probs: d.probs,
            },
            (None, Some(n)) => Reward::Normal {
                mean: n.mean,
                std: n.std,
            },
            _ => {
                return Err(value_err(format!(
                    "boxes[{i}]: give exactly one of \"rewards\" and \"normal\""
                )));
            }
        };
        let cost = match b.cost {
            CostSpec::Fixed(c) => Cost::Fixed(c),
            CostSpec::Random(d) => Cost::Discrete {
                values: d.values,
                probs: d.probs,
            },
        };
        boxes.push(PandoraBox { reward, cost });
    }
    let problem = Problem::new(boxes, input.fallback).map_err(core_err)?;
    let out = py.detach(|| -> PyResult<Output> {
        let pol = problem.weitzman().map_err(core_err)?;
        let dp = if verify {
            // The DP's error names the cause (a box without discrete rewards, or the count).
            Some(dp_optimum(&problem).map_err(|e| {
                value_err(format!(
                    "verify (dynamic programming needs discrete rewards and at most \
                     {DP_MAX_BOXES} boxes): {e}"
                ))
            })?)
        } else {
            None
        };
        Ok(Output {
            indices: pol.indices,
            order: pol.order,
            open_probs: pol.open_probs,
            expected_utility: pol.expected_utility,
            expected_reward: pol.expected_reward,
            expected_cost: pol.expected_cost,
            dp_expected_utility: dp,
        })
    })?;
    serde_json::to_string(&out).map_err(json_err)
}
