//! Mapping of Rust errors to Python exceptions.

use pyo3::PyErr;
use pyo3::exceptions::{PyLookupError, PyRuntimeError, PyValueError};

/// A core error as a Python exception: invalid input and dimension mismatches are `ValueError`,
/// numerical failures `RuntimeError`.
pub fn core_err(e: pandora_core::Error) -> PyErr {
    use pandora_core::Error as E;
    match e {
        E::DimensionMismatch { .. } | E::InvalidInput { .. } => {
            PyValueError::new_err(e.to_string())
        }
        E::NotPositiveDefinite { .. } | E::Numerical(_) => PyRuntimeError::new_err(e.to_string()),
    }
}

/// A study error as a Python exception: invalid input is `ValueError`, a missing study or trial
/// `LookupError`, storage failures `RuntimeError`.
pub fn study_err(e: pandora_study::Error) -> PyErr {
    use pandora_study::Error as E;
    match e {
        E::Invalid { .. } => PyValueError::new_err(e.to_string()),
        E::NotFound(_) => PyLookupError::new_err(e.to_string()),
        E::Storage(_) | E::Postgres(_) => PyRuntimeError::new_err(e.to_string()),
        E::Core(c) => core_err(c),
    }
}

/// A JSON (de)serialization error as `ValueError`, in user words ("expected a number", not
/// "expected f64").
pub fn json_err(e: serde_json::Error) -> PyErr {
    PyValueError::new_err(format!(
        "invalid JSON: {}",
        pandora_study::error::plain_words(&e.to_string())
    ))
}

/// `ValueError(msg)`.
pub fn value_err(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}
