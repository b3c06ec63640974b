//! # pandora-py
//!
//! The native part (`pandora._pandora`) of Pandora's Python package. The public Python API lives
//! in `python/pandora/` and validates shapes and types before calling in here; this crate only
//! sees contiguous `float64` arrays and JSON strings, and never panics on bad input: every error
//! of the Rust core becomes a Python exception (`ValueError` for invalid input, `LookupError` for
//! a missing study or trial, `RuntimeError` for storage and numerical failures).
//!
//! Heavy work (acquisition batches, GP fits and predictions, path sampling, every study operation)
//! runs with the GIL released (`Python::detach`). [`experiment`] runs the experiment harness
//! (`pandora_experiment`) that `pandora experiment` and `pandora cvs` run.

pub mod acq;
pub mod boxes;
pub mod error;
pub mod experiment;
pub mod freeze_thaw;
pub mod gp;
pub mod optimize;
pub mod study;

use pyo3::prelude::*;

/// The native module `pandora._pandora`.
#[pymodule]
fn _pandora(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(acq::acquisition_values, m)?)?;
    m.add_function(wrap_pyfunction!(boxes::solve_boxes, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::run_grid, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::summarize_grid, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::plan_grid, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::freeze_thaw_bench, m)?)?;
    m.add_function(wrap_pyfunction!(freeze_thaw::solve_freeze_thaw, m)?)?;
    m.add_class::<gp::NativeGp>()?;
    m.add_class::<gp::NativePaths>()?;
    m.add_class::<study::NativeStudy>()?;
    Ok(())
}
