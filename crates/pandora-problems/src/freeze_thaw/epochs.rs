//! Epoch-wise learning curves of a scikit-learn MLP with measured epoch times, as a
//! freeze-thaw instance.
//!
//! # Data
//! `data/epochs_freeze_thaw.csv` (see `data/README.md`: how it was made, with which versions
//! and on which CPU; `data/epochs_extract.py` regenerates it): a scikit-learn `MLPClassifier`
//! (SGD with Nesterov momentum) on the digits data set shipped with scikit-learn, one row per
//! configuration and epoch, with the configuration's design point in `[0, 1]^5` (log learning
//! rate, log L2 penalty, log hidden units, log batch size, momentum; a scrambled Sobol design)
//! and its raw values, the validation and test accuracy after the epoch (fixed split) and the
//! epoch's measured wall time and CPU time.
//!
//! # The instance
//! Configurations are the file's configurations (in the order of their ids), embedded by their
//! design points (a real embedding: the learning-curve model can learn across
//! configurations). Steps are the epochs `1..T`, at positions `t`, with prior step costs
//! `w_t = 1` (every epoch costs about the same). Values are the validation accuracies, step
//! costs the measured wall times in seconds, and the final objective the test accuracy after
//! the last epoch.
//!
//! # Errors
//! A malformed file names the line and the column (`line 12: time_s: …`); a configuration
//! whose rows disagree on its hyperparameters, or that misses an epoch, names the
//! configuration (and the epoch).

use super::{Table, TableParts};
use crate::error::ProblemError;
use std::collections::BTreeMap;

/// The shipped file.
pub const EPOCHS_CSV: &str = include_str!("../../data/epochs_freeze_thaw.csv");

/// The columns, in order.
pub const COLUMNS: [&str; 16] = [
    "config",
    "u_lr",
    "u_alpha",
    "u_hidden",
    "u_batch",
    "u_momentum",
    "learning_rate",
    "alpha",
    "hidden",
    "batch_size",
    "momentum",
    "epoch",
    "valid_acc",
    "test_acc",
    "time_s",
    "cpu_s",
];

/// Number of hyperparameters (the `u_` columns).
pub const DIM: usize = 5;

/// One row of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Configuration id.
    pub config: u64,
    /// The design point in `[0, 1]^5`.
    pub u: [f64; DIM],
    /// Raw hyperparameters: learning rate, L2 penalty, hidden units, batch size, momentum.
    pub raw: [f64; DIM],
    /// Epoch (from 1).
    pub epoch: u64,
    /// Validation accuracy after the epoch.
    pub valid: f64,
    /// Test accuracy after the epoch.
    pub test: f64,
    /// Measured wall time of the epoch (s).
    pub time: f64,
}

/// Parses the CSV text (header [`COLUMNS`]).
pub fn parse(text: &str) -> Result<Vec<Row>, ProblemError> {
    super::parse_csv(text, &COLUMNS, parse_row)
}

/// One data line's fields (as many as [`COLUMNS`]).
fn parse_row(f: &[&str]) -> Result<Row, ProblemError> {
    let num = |i: usize, ok: fn(f64) -> bool, what: &str| -> Result<f64, ProblemError> {
        let v = f[i].parse::<f64>().ok().filter(|v| v.is_finite());
        match v {
            Some(v) if ok(v) => Ok(v),
            Some(_) => Err(ProblemError(format!(
                "{}: {} must be {what}",
                COLUMNS[i], f[i]
            ))),
            None => Err(ProblemError(format!(
                "{}: `{}` is not a finite number",
                COLUMNS[i], f[i]
            ))),
        }
    };
    let int = |i: usize| -> Result<u64, ProblemError> {
        f[i].parse::<u64>()
            .map_err(|_| ProblemError(format!("{}: `{}` is not a whole number", COLUMNS[i], f[i])))
    };
    let unit = |v: f64| (0.0..=1.0).contains(&v);
    let positive = |v: f64| v > 0.0;
    let any = |_: f64| true;
    let mut u = [0.0; DIM];
    let mut raw = [0.0; DIM];
    for j in 0..DIM {
        u[j] = num(1 + j, unit, "in [0, 1]")?;
        raw[j] = num(1 + DIM + j, any, "")?;
    }
    let row = Row {
        config: int(0)?,
        u,
        raw,
        epoch: int(11)?,
        valid: num(12, unit, "in [0, 1]")?,
        test: num(13, unit, "in [0, 1]")?,
        time: num(14, positive, "> 0")?,
    };
    if row.epoch == 0 {
        return Err(ProblemError("epoch: must be ≥ 1".into()));
    }
    num(15, positive, "> 0")?;
    Ok(row)
}

/// The instance of the shipped file.
pub fn instance() -> Result<Table, ProblemError> {
    instance_from(&parse(EPOCHS_CSV)?)
}

/// The rows of the first `configs` configurations (by id; the design's first points) and the
/// first `epochs` epochs; `None` keeps all. Asking for more than the rows have, or for none,
/// is an error naming `configs` or `epochs`.
pub fn subset(
    rows: &[Row],
    configs: Option<usize>,
    epochs: Option<usize>,
) -> Result<Vec<Row>, ProblemError> {
    let mut ids: Vec<u64> = rows.iter().map(|r| r.config).collect();
    ids.sort_unstable();
    ids.dedup();
    let max_epoch = rows.iter().map(|r| r.epoch).max().unwrap_or(0) as usize;
    let k = configs.unwrap_or(ids.len());
    let t = epochs.unwrap_or(max_epoch);
    if k == 0 || k > ids.len() {
        return Err(ProblemError(format!(
            "configs: {k} must be in 1..={}",
            ids.len()
        )));
    }
    if t == 0 || t > max_epoch {
        return Err(ProblemError(format!(
            "epochs: {t} must be in 1..={max_epoch}"
        )));
    }
    let kept = &ids[..k];
    Ok(rows
        .iter()
        .filter(|r| kept.binary_search(&r.config).is_ok() && r.epoch as usize <= t)
        .cloned()
        .collect())
}

/// A configuration's label: its raw hyperparameters (no commas: labels go into CSV files).
fn label(r: &Row) -> String {
    format!(
        "lr={:.3e} alpha={:.1e} hidden={} batch={} momentum={:.3}",
        r.raw[0], r.raw[1], r.raw[2], r.raw[3], r.raw[4]
    )
}

/// The instance from parsed rows (module doc): every configuration needs epochs `1..T` of one
/// `T` and the same hyperparameters on every row.
pub fn instance_from(rows: &[Row]) -> Result<Table, ProblemError> {
    let mut by_config: BTreeMap<u64, BTreeMap<u64, &Row>> = BTreeMap::new();
    for r in rows {
        let curve = by_config.entry(r.config).or_default();
        if let Some(first) = curve.values().next()
            && (first.u != r.u || first.raw != r.raw)
        {
            return Err(ProblemError(format!(
                "config {}, epoch {}: hyperparameters differ from the configuration's other rows",
                r.config, r.epoch
            )));
        }
        if curve.insert(r.epoch, r).is_some() {
            return Err(ProblemError(format!(
                "config {}, epoch {}: duplicate row",
                r.config, r.epoch
            )));
        }
    }
    let t = by_config.values().map(BTreeMap::len).max().unwrap_or(0) as u64;
    if t == 0 {
        return Err(ProblemError("epochs: the file has no rows".into()));
    }
    let mut parts = TableParts {
        name: format!("mlp-digits-K{}-T{t}", by_config.len()),
        labels: Vec::new(),
        x: Vec::new(),
        positions: (1..=t).map(|s| s as f64).collect(),
        weights: vec![1.0; t as usize],
        values: Vec::new(),
        costs: Vec::new(),
        finals: Vec::new(),
    };
    for (config, curve) in &by_config {
        let mut values = Vec::with_capacity(t as usize);
        let mut costs = Vec::with_capacity(t as usize);
        for epoch in 1..=t {
            let r = curve.get(&epoch).ok_or_else(|| {
                ProblemError(format!(
                    "config {config}, epoch {epoch}: missing (every configuration needs epochs 1 to {t})"
                ))
            })?;
            values.push(r.valid);
            costs.push(r.time);
        }
        let last = curve[&t];
        parts.labels.push(label(last));
        parts.x.push(last.u.to_vec());
        parts.values.push(values);
        parts.costs.push(costs);
        parts.finals.push(last.test);
    }
    Table::new(parts)
}
