//! Exact cost-aware freeze-thaw with discrete learning curves (the same instance format as
//! `pandora freeze-thaw`, `pandora_core::gittins::freeze_thaw::format`, see docs/freeze-thaw.md).

use crate::error::{core_err, json_err};
use pandora_core::gittins::freeze_thaw::format::{Instance, solve};
use pyo3::prelude::*;

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
