//! Mapping of Rust errors to Python exceptions.
//!
//! Every message passes through the one redaction ([`pandora_study::redact::redact_text`]) on
//! its way to Python: a storage URL quoted by an error (a connection failure, a refused URL)
//! never shows its password to a Python user, in any of the forms the redaction knows (userinfo
//! and `password=` parameters, raw or percent-encoded).

use pandora_study::redact::redact_text;
use pyo3::PyErr;
use pyo3::exceptions::{PyLookupError, PyRuntimeError, PyValueError};

/// A core error as a Python exception: invalid input and dimension mismatches are `ValueError`,
/// numerical failures `RuntimeError`.
pub fn core_err(e: pandora_core::Error) -> PyErr {
    use pandora_core::Error as E;
    match e {
        E::DimensionMismatch { .. } | E::InvalidInput { .. } => {
            PyValueError::new_err(redact_text(&e.to_string()))
        }
        E::NotPositiveDefinite { .. } | E::Numerical(_) => {
            PyRuntimeError::new_err(redact_text(&e.to_string()))
        }
    }
}

/// A study error as a Python exception: invalid input is `ValueError`, a missing study or trial
/// `LookupError`, storage failures `RuntimeError`.
pub fn study_err(e: pandora_study::Error) -> PyErr {
    use pandora_study::Error as E;
    match e {
        E::Invalid { .. } => PyValueError::new_err(redact_text(&e.to_string())),
        E::NotFound(_) => PyLookupError::new_err(redact_text(&e.to_string())),
        E::Storage(_) | E::Postgres(_) => PyRuntimeError::new_err(redact_text(&e.to_string())),
        E::Core(c) => core_err(c),
    }
}

/// A JSON (de)serialization error as `ValueError`, in user words ("expected a number", not
/// "expected f64").
pub fn json_err(e: serde_json::Error) -> PyErr {
    PyValueError::new_err(redact_text(&format!(
        "invalid JSON: {}",
        pandora_study::error::plain_words(&e.to_string())
    )))
}

/// `ValueError(msg)`.
pub fn value_err(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(redact_text(&msg.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of `e` as Python would show it.
    fn message(e: PyErr) -> String {
        pyo3::Python::initialize();
        pyo3::Python::attach(|py| e.value(py).to_string())
    }

    #[test]
    fn every_mapping_redacts_passwords() {
        let url = "postgresql://u:p@ss:w0rd&x@db.example/pandora?password=s3cr%40t";
        let errors = [
            study_err(pandora_study::Error::Postgres(format!(
                "connecting to {url}: refused"
            ))),
            study_err(pandora_study::Error::Storage(format!(
                "no storage at {url}"
            ))),
            study_err(pandora_study::Error::NotFound(format!("study at {url}"))),
            study_err(pandora_study::Error::invalid("storage URL", url)),
            value_err(format!("bad url {url}")),
        ];
        for e in errors {
            let m = message(e);
            for secret in ["p@ss", "w0rd", "s3cr"] {
                assert!(!m.contains(secret), "{secret} leaked: {m}");
            }
            assert!(m.contains("***"), "{m}");
        }
    }
}
