//! The worker loop for Python objectives (the native half of `pandora.minimize` and
//! `pandora.maximize`): [`pandora_study::Study::optimize`] with a Python function as the
//! objective and a Python callback as the observer, so that Python runs the same loop as
//! `pandora run` (one implementation of ask, evaluate with heartbeat, tell).
//!
//! # Protocol
//!
//! The Python side passes two callables:
//!
//! - `evaluate(trial_json) -> (value, cost, error, elapsed, stop)`: evaluates the trial (its
//!   JSON, as `Study.ask` returns it). `value` is the objective or `None`; `cost` the cost the
//!   function reported (or `None`: the study's `[cost] kind` decides, [`Evaluation::of_result`]);
//!   `error` a failure reason or `None`; `elapsed` the function's wall time in seconds; `stop`
//!   whether the loop ends after this trial (the function raised: the Python side keeps the
//!   exception and raises it once the loop has returned);
//! - `told(trial_json)`: called after each recorded trial, in the order of the records
//!   (progress, history).
//!
//! Each call takes the GIL and first lets Python run its signal handlers, so Ctrl-C raises
//! `KeyboardInterrupt` in the loop's thread (worker 0 runs on the caller's thread). An exception
//! from either callable fails the current trial ("exception in the objective: ..."), ends the
//! loop, and is raised from [`run`]. Failures do not stop the loop by themselves: a Python
//! function may return NaN where it is undefined.

use crate::error::study_err;
use pandora_study::command::Reported;
use pandora_study::optimize::{Evaluation, Observer, OptimizeError, OptimizeOptions};
use pandora_study::redact::redact_text;
use pandora_study::shutdown::Shutdown;
use pandora_study::{Objective, Study, Summary, Trial};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the Python `evaluate` callable returns.
type Returned = (Option<f64>, Option<f64>, Option<String>, f64, bool);

/// The Python callables of one loop, and the first exception either raised.
struct PyLoop {
    evaluate: Py<PyAny>,
    told: Py<PyAny>,
    raised: Mutex<Option<PyErr>>,
    stopped: AtomicBool,
}

impl PyLoop {
    /// Keeps the first exception; the loop ends.
    fn raise(&self, e: PyErr) {
        let mut slot = self.raised.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    fn call(&self, trial: &Trial) -> PyResult<Returned> {
        let json = serde_json::to_string(trial)
            .map_err(|e| PyRuntimeError::new_err(format!("trial {}: {e}", trial.number)))?;
        Python::attach(|py| {
            py.check_signals()?;
            self.evaluate.call1(py, (json,))?.extract::<Returned>(py)
        })
    }
}

impl Objective for PyLoop {
    fn evaluate(&self, study: &Study, trial: &Trial, _: Option<&Shutdown>) -> Evaluation {
        match self.call(trial) {
            Ok((value, cost, error, elapsed, stop)) => {
                if stop {
                    self.stop();
                }
                let result = match (value, error) {
                    (_, Some(reason)) => Err(reason),
                    (Some(objective), None) => Ok(Reported { objective, cost }),
                    (None, None) => Err("the objective returned no value".to_string()),
                };
                Evaluation::of_result(study, trial, result, elapsed)
            }
            Err(e) => {
                let reason = format!("exception in the objective: {e}");
                self.raise(e);
                Evaluation::failed(reason)
            }
        }
    }

    fn ended(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
            || self
                .raised
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
    }
}

impl Observer for PyLoop {
    fn told(&self, _: &str, trial: &Trial, _: &Summary) {
        let Ok(json) = serde_json::to_string(trial) else {
            return;
        };
        let called = Python::attach(|py| {
            py.check_signals()?;
            self.told.call1(py, (json,)).map(drop)
        });
        if let Err(e) = called {
            self.raise(e);
        }
    }

    fn warn(&self, message: &str) {
        let msg = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
        let warned = Python::attach(|py| {
            PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(),
                &msg,
                1,
            )
        });
        if let Err(e) = warned {
            self.raise(e);
        }
    }
}

/// The loop's error as a Python exception.
fn loop_err(e: OptimizeError) -> PyErr {
    match e {
        OptimizeError::Ask(source) | OptimizeError::Store { source, .. } => study_err(source),
        OptimizeError::NoWorkers | OptimizeError::InMemory(_) => {
            PyValueError::new_err(e.to_string())
        }
        other => PyRuntimeError::new_err(redact_text(&other.to_string())),
    }
}

/// Runs the loop on `study` with `workers` workers named `{prefix}-{k}`, handing out at most
/// `n_trials` trials (see the module documentation); returns why the study is finished, or
/// `None` when the loop ended because `evaluate` asked it to (then the Python side raises what it
/// kept) or `n_trials` were handed out.
pub fn run(
    py: Python<'_>,
    study: &Mutex<Study>,
    evaluate: Py<PyAny>,
    told: Py<PyAny>,
    workers: usize,
    prefix: String,
    n_trials: Option<u64>,
) -> PyResult<Option<String>> {
    let callables = PyLoop {
        evaluate,
        told,
        raised: Mutex::new(None),
        stopped: AtomicBool::new(false),
    };
    let options = OptimizeOptions {
        prefix,
        stop_on_repeated_failures: false,
        n_trials,
        ..OptimizeOptions::new(workers)
    };
    let ended = py.detach(|| {
        let mut guard = study
            .lock()
            .map_err(|_| PyRuntimeError::new_err("study lock poisoned"))?;
        guard
            .optimize(&callables, &callables, &options)
            .map_err(loop_err)
    });
    if let Some(e) = callables
        .raised
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        return Err(e);
    }
    Ok(ended?.finished)
}
