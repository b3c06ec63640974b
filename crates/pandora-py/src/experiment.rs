//! The experiment harness ([`pandora_experiment`]) for Python: `pandora.experiment.run`,
//! `summarize`, `plan` and `freeze_thaw_bench` call these functions, the same ones behind
//! `pandora experiment`, `pandora cvs` and `pandora freeze-thaw-bench`, so a grid run from Python
//! writes the same traces, summaries and figures as the command line, and either can resume the
//! other's directory.
//!
//! The GIL is released while a grid runs (its runs use a rayon pool). The harness's lines (a run
//! that failed, a calibration starting, where the files went) go to Python's `sys.stderr` when
//! `verbose`, taking the GIL for each line; otherwise they are dropped. Errors are `ValueError`
//! for the arguments checked here (the grid kind, a shard, a missing `bin`) and `RuntimeError`
//! for what the harness refuses or fails at (a configuration naming its bad field, an output
//! directory that cannot be written), with the whole error chain and secrets redacted.

use pandora_experiment::cluster::PlanArgs;
use pandora_experiment::shard::Shard;
use pandora_experiment::{Options, Outcome, Reporter, cluster, cvs, execute, report};
use pandora_study::redact::redact_text;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;
use std::path::PathBuf;

/// The harness's lines to `sys.stderr` (or nowhere).
struct PyReporter {
    verbose: bool,
}

impl Reporter for PyReporter {
    fn note(&self, line: &str) {
        if !self.verbose {
            return;
        }
        Python::attach(|py| {
            let written = py
                .import("sys")
                .and_then(|sys| sys.getattr("stderr"))
                .and_then(|err| err.call_method1("write", (format!("{line}\n"),)));
            if written.is_err() {
                // No usable sys.stderr (an embedded interpreter): the line is not essential.
                eprintln!("{line}");
            }
        });
    }
}

/// A harness error as `RuntimeError`, with its chain and without secrets.
fn run_err(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(redact_text(&format!("{e:#}")))
}

/// Which grid a call is about.
#[derive(Clone, Copy)]
enum Kind {
    Experiment,
    Cvs,
}

fn kind(name: &str) -> PyResult<Kind> {
    match name {
        "experiment" => Ok(Kind::Experiment),
        "cvs" => Ok(Kind::Cvs),
        other => Err(PyValueError::new_err(format!(
            "kind: expected \"experiment\" or \"cvs\", got {other:?}"
        ))),
    }
}

/// What a grid run returns to Python (as JSON).
#[derive(Serialize)]
struct GridResult {
    out: PathBuf,
    shard: Option<String>,
    failures: usize,
    busy: usize,
    table: Option<String>,
    /// The error the command line would exit with (runs failed or busy), if any.
    problem: Option<String>,
}

impl From<Outcome> for GridResult {
    fn from(o: Outcome) -> Self {
        GridResult {
            problem: o.check().err().map(|e| format!("{e:#}")),
            shard: o.shard.map(|s| s.to_string()),
            failures: o.tally.failures,
            busy: o.tally.busy,
            out: o.out,
            table: o.table,
        }
    }
}

/// Runs the grid configured in the TOML file `config` (`kind` "experiment" or "cvs"); returns
/// the outcome as JSON (`out`, `shard`, `failures`, `busy`, `table`, `problem`).
#[pyfunction]
#[pyo3(signature = (kind_name, config, out=None, jobs=None, smoke=false, shard=None, verbose=true))]
#[allow(clippy::too_many_arguments)]
pub fn run_grid(
    py: Python<'_>,
    kind_name: &str,
    config: &str,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    smoke: bool,
    shard: Option<&str>,
    verbose: bool,
) -> PyResult<String> {
    let kind = kind(kind_name)?;
    let shard = match shard {
        Some(s) => Some(Shard::parse(s).map_err(|e| PyValueError::new_err(format!("{e:#}")))?),
        None => None,
    };
    let options = Options {
        out,
        jobs,
        smoke,
        shard,
    };
    let reporter = PyReporter { verbose };
    let outcome = py
        .detach(|| match kind {
            Kind::Experiment => execute::run_config(config, &options, &reporter),
            Kind::Cvs => cvs::run_config(config, &options, &reporter),
        })
        .map_err(run_err)?;
    serde_json::to_string(&GridResult::from(outcome))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Writes the summary of the grid directory `dir` and returns its table; refused while runs are
/// missing unless `partial` (then they are named on `sys.stderr` when `verbose`).
#[pyfunction]
#[pyo3(signature = (kind_name, dir, partial=false, verbose=true))]
pub fn summarize_grid(
    py: Python<'_>,
    kind_name: &str,
    dir: PathBuf,
    partial: bool,
    verbose: bool,
) -> PyResult<String> {
    let kind = kind(kind_name)?;
    let reporter = PyReporter { verbose };
    py.detach(|| match kind {
        Kind::Experiment => {
            let (table, warning) = report::summarize_dir(&dir, partial)?;
            if let Some(w) = warning {
                reporter.note(&format!(
                    "warning: {w}; summarized the complete runs only (partial=True)"
                ));
            }
            Ok(table)
        }
        Kind::Cvs => cvs::summarize_checked(&dir, partial, &reporter),
    })
    .map_err(run_err)
}

/// The plan of a grid (CPU-hours, the longest run, the array), writing an sbatch script to
/// `slurm` when given (its `bin` is then required: the `pandora` executable the tasks run).
#[pyfunction]
#[pyo3(signature = (kind_name, config, smoke=false, out=None, calibration_steps=4, slurm=None,
    shards=None, cpus_per_task=1, mem="4G".to_string(), max_parallel=None, time_margin=1.5,
    partition=None, bin=None, verbose=true))]
#[allow(clippy::too_many_arguments)]
pub fn plan_grid(
    py: Python<'_>,
    kind_name: &str,
    config: String,
    smoke: bool,
    out: Option<PathBuf>,
    calibration_steps: usize,
    slurm: Option<PathBuf>,
    shards: Option<usize>,
    cpus_per_task: usize,
    mem: String,
    max_parallel: Option<usize>,
    time_margin: f64,
    partition: Option<String>,
    bin: Option<PathBuf>,
    verbose: bool,
) -> PyResult<String> {
    let kind = kind(kind_name)?;
    if slurm.is_some() && bin.is_none() {
        return Err(PyValueError::new_err(
            "bin: give the pandora executable the sbatch script runs (from Python there is no \
             `pandora` binary to default to), e.g. bin=shutil.which(\"pandora\")",
        ));
    }
    let args = PlanArgs {
        smoke,
        out,
        calibration_steps,
        slurm,
        shards,
        cpus_per_task,
        mem,
        max_parallel,
        time_margin,
        partition,
        bin,
        ..PlanArgs::new(config)
    };
    let reporter = PyReporter { verbose };
    py.detach(|| match kind {
        Kind::Experiment => cluster::plan_experiment(&args, &reporter),
        Kind::Cvs => cvs::plan::plan(&args, &reporter),
    })
    .map_err(run_err)
}

/// Runs the freeze-thaw benchmark configured in `config`; returns the table of final regrets.
#[pyfunction]
#[pyo3(signature = (config, out=None, smoke=false, verbose=true))]
pub fn freeze_thaw_bench(
    py: Python<'_>,
    config: &str,
    out: Option<PathBuf>,
    smoke: bool,
    verbose: bool,
) -> PyResult<String> {
    let reporter = PyReporter { verbose };
    py.detach(|| {
        pandora_experiment::freeze_thaw_bench::run_config(config, out.as_deref(), smoke, &reporter)
    })
    .map_err(run_err)
}
