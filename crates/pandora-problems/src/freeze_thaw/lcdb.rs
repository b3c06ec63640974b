//! LCDB 1.0 learning curves as freeze-thaw instances.
//!
//! # Data
//! `data/lcdb_freeze_thaw.csv` (see `data/README.md`: source, licence, selection): per OpenML
//! dataset, learner and training-set size (anchor), the mean validation and test accuracy and
//! the mean training time over LCDB's splits; every learner kept has every anchor.
//!
//! # The instance of a dataset
//! Configurations are the learners (in the file's order), embedded one-hot in `[0, 1]^L` (an
//! exchangeable prior: no learner is closer to another a priori). Steps are the anchors
//! `n_1 < … < n_T`, at positions `1 + 2 log₂(n_t/n_1)` (one unit per factor √2, LCDB's anchor
//! spacing), with prior step costs `w_t = n_t/n_1` (training time proportional to the size).
//! Values are the mean validation accuracies, step costs the mean training times in seconds at
//! that size (a step retrains on the larger set), and the final objective the mean test
//! accuracy at the last anchor.
//!
//! # Errors
//! A malformed file names the line and the column (`line 12: traintime_mean_s: …`); a learner
//! missing an anchor names the dataset, the learner and the size.

use super::{Table, TableParts};
use crate::error::ProblemError;
use std::collections::BTreeMap;

/// The shipped file.
pub const LCDB_CSV: &str = include_str!("../../data/lcdb_freeze_thaw.csv");

/// The columns, in order.
pub const COLUMNS: [&str; 7] = [
    "openmlid",
    "learner",
    "size_train",
    "n_runs",
    "valid_acc_mean",
    "test_acc_mean",
    "traintime_mean_s",
];

/// One row of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// OpenML dataset id.
    pub openmlid: u64,
    /// Learner name.
    pub learner: String,
    /// Training-set size.
    pub size_train: u64,
    /// Mean validation accuracy.
    pub valid: f64,
    /// Mean test accuracy.
    pub test: f64,
    /// Mean training time (s).
    pub time: f64,
}

/// Parses the CSV text (header [`COLUMNS`]).
pub fn parse(text: &str) -> Result<Vec<Row>, ProblemError> {
    super::parse_csv(text, &COLUMNS, parse_row)
}

/// One data line's fields (as many as [`COLUMNS`]).
fn parse_row(f: &[&str]) -> Result<Row, ProblemError> {
    let num = |i: usize| -> Result<f64, ProblemError> {
        f[i].parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                ProblemError(format!("{}: `{}` is not a finite number", COLUMNS[i], f[i]))
            })
    };
    let int = |i: usize| -> Result<u64, ProblemError> {
        f[i].parse::<u64>()
            .map_err(|_| ProblemError(format!("{}: `{}` is not a whole number", COLUMNS[i], f[i])))
    };
    let row = Row {
        openmlid: int(0)?,
        learner: f[1].to_string(),
        size_train: int(2)?,
        valid: num(4)?,
        test: num(5)?,
        time: num(6)?,
    };
    if row.learner.is_empty() {
        return Err(ProblemError("learner: empty".into()));
    }
    if row.size_train == 0 {
        return Err(ProblemError("size_train: must be > 0".into()));
    }
    if row.time <= 0.0 {
        return Err(ProblemError(format!(
            "traintime_mean_s: {} must be > 0",
            row.time
        )));
    }
    int(3)?;
    Ok(row)
}

/// The dataset ids in the shipped file, in order.
pub fn datasets() -> Result<Vec<u64>, ProblemError> {
    let mut ids: Vec<u64> = Vec::new();
    for r in parse(LCDB_CSV)? {
        if !ids.contains(&r.openmlid) {
            ids.push(r.openmlid);
        }
    }
    Ok(ids)
}

/// The instance of dataset `openmlid` from the shipped file.
pub fn instance(openmlid: u64) -> Result<Table, ProblemError> {
    instance_from(&parse(LCDB_CSV)?, openmlid)
}

/// The instance of dataset `openmlid` from parsed rows (module doc).
pub fn instance_from(rows: &[Row], openmlid: u64) -> Result<Table, ProblemError> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.openmlid == openmlid).collect();
    if rows.is_empty() {
        return Err(ProblemError(format!(
            "openmlid: no rows for dataset {openmlid}"
        )));
    }
    let mut learners: Vec<&str> = Vec::new();
    let mut cells: BTreeMap<(&str, u64), &Row> = BTreeMap::new();
    for r in &rows {
        if !learners.contains(&r.learner.as_str()) {
            learners.push(&r.learner);
        }
        if cells.insert((&r.learner, r.size_train), r).is_some() {
            return Err(ProblemError(format!(
                "dataset {openmlid}, learner {}, size_train {}: duplicate row",
                r.learner, r.size_train
            )));
        }
    }
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.size_train).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let n1 = sizes[0] as f64;
    let (l, t) = (learners.len(), sizes.len());
    let mut parts = TableParts {
        name: format!("lcdb-{openmlid}"),
        labels: learners.iter().map(|s| s.to_string()).collect(),
        x: (0..l)
            .map(|i| (0..l).map(|j| f64::from(u8::from(i == j))).collect())
            .collect(),
        positions: sizes
            .iter()
            .map(|&n| 1.0 + 2.0 * (n as f64 / n1).log2())
            .collect(),
        weights: sizes.iter().map(|&n| n as f64 / n1).collect(),
        values: vec![Vec::with_capacity(t); l],
        costs: vec![Vec::with_capacity(t); l],
        finals: vec![0.0; l],
    };
    for (i, learner) in learners.iter().enumerate() {
        for &n in &sizes {
            let r = cells.get(&(*learner, n)).ok_or_else(|| {
                ProblemError(format!(
                    "dataset {openmlid}, learner {learner}, size_train {n}: missing (every learner needs every anchor)"
                ))
            })?;
            parts.values[i].push(r.valid);
            parts.costs[i].push(r.time);
            parts.finals[i] = r.test;
        }
    }
    Table::new(parts)
}
