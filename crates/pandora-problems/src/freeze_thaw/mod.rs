//! The freeze-thaw benchmark: tables of learning curves with per-step costs, the policies that
//! play them, one driver and the regret-against-cost summary.
//!
//! # Setting
//! An instance is a finite table: configurations `k = 1..K` (each with an embedding `x_k` in
//! the unit cube, the learning-curve model's input), steps `t = 1..T` at positions `s_t` on the
//! model's time axis, the validation value `y_{k,t}` a run of `k` reports after step `t`, the
//! cost `c_{k,t} > 0` of that step, and the final objective `z_k` of a run trained to the end
//! (the test value at step `T`). A policy sees only what its runs reported. At each decision it
//! starts a run of a configuration (its step 1), continues a run by one step, or stops; the
//! [`driver`] charges the step's cost and hands it the value, until the budget is spent, the
//! policy stops, or nothing is left to run. Runs can be paused and resumed at no extra cost
//! (freeze-thaw); a configuration may be run again from scratch (Hyperband's later brackets
//! do), paying again.
//!
//! # Metric
//! The incumbent after a decision is the complete run (trained to step `T`) of largest final
//! validation value `y_{k,T}` (ties: the earliest); its regret is `max_j z_j − z_k`. Before any
//! run completes nothing can be deployed and the regret is `max_j z_j − min_j z_j` (the worst
//! case). [`summary`] takes the regret at a grid of cumulative costs (as fractions of the cost
//! of training every configuration to the end) over seeds: median and quartiles.
//!
//! # Instances
//! - [`lcdb`]: LCDB 1.0 learning curves (scikit-learn learners on OpenML datasets): steps are
//!   growing training-set sizes, values the mean validation accuracy, the final objective the
//!   mean test accuracy at the largest size kept, costs the measured training times.
//! - [`epochs`]: epoch-wise learning curves of a scikit-learn MLP on the digits data (a few
//!   hundred configurations on a Sobol design over five hyperparameters, embedded by their
//!   design points): steps are epochs, values the validation accuracy, the final objective the
//!   test accuracy after the last epoch, costs the measured epoch times.
//! - [`synthetic`]: curves decaying exponentially toward asymptotes drawn from a Gaussian
//!   process over `x`, with costs from another, seeded (known ground truth).
//!
//! # Policies ([`baselines`], [`model_policies`])
//! Random search, Hyperband (successive halving in brackets, Li et al. 2017), ASHA (Li et al.
//! 2020), the median stopping rule (Golovin et al. 2017), PBGI and LogEIPC over the table's
//! configurations on the learning-curve model's predicted final values, each started run
//! trained to its end, and the cost-aware freeze-thaw Gittins index policy of
//! `pandora_core::freeze_thaw`. Everything is deterministic for a seed.

pub mod baselines;
pub mod driver;
pub mod epochs;
pub mod lcdb;
pub mod model_policies;
pub mod summary;
pub mod synthetic;
#[cfg(test)]
mod tests;

pub use driver::{Action, Policy, RunState, Trace, TraceRow, View, play};

use crate::error::ProblemError;

/// A freeze-thaw instance: a table of learning curves with per-step costs (validated by
/// [`Table::new`]; fields private so a policy cannot read values it has not paid for).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    name: String,
    labels: Vec<String>,
    x: Vec<Vec<f64>>,
    positions: Vec<f64>,
    weights: Vec<f64>,
    values: Vec<Vec<f64>>,
    costs: Vec<Vec<f64>>,
    finals: Vec<f64>,
}

/// The parts of a [`Table`], before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct TableParts {
    /// Instance name (for traces and figures).
    pub name: String,
    /// One label per configuration.
    pub labels: Vec<String>,
    /// One embedding per configuration, in `[0, 1]^d`, all of one length `d ≥ 1`.
    pub x: Vec<Vec<f64>>,
    /// Step positions on the model's time axis (finite, `≥ 0`, increasing).
    pub positions: Vec<f64>,
    /// Prior relative step costs (finite, `> 0`), known to the policies: the cost profile of a
    /// run before any is observed (e.g. proportional to the training-set size).
    pub weights: Vec<f64>,
    /// `values[k][t]`: the value configuration `k` reports after step `t` (finite).
    pub values: Vec<Vec<f64>>,
    /// `costs[k][t]`: the cost of step `t` of configuration `k` (finite, `> 0`).
    pub costs: Vec<Vec<f64>>,
    /// The final objective of each configuration (finite).
    pub finals: Vec<f64>,
}

fn bad(field: impl std::fmt::Display, msg: impl std::fmt::Display) -> ProblemError {
    ProblemError(format!("{field}: {msg}"))
}

impl Table {
    /// Validates the parts (every error names the field, e.g. `costs[3][7]`).
    pub fn new(p: TableParts) -> Result<Self, ProblemError> {
        let k = p.x.len();
        let t = p.positions.len();
        if k == 0 || t == 0 {
            return Err(bad(
                "table",
                "needs at least one configuration and one step",
            ));
        }
        let d = p.x[0].len();
        for (field, len) in [
            ("labels", p.labels.len()),
            ("values", p.values.len()),
            ("costs", p.costs.len()),
            ("finals", p.finals.len()),
        ] {
            if len != k {
                return Err(bad(field, format!("{len} entries for {k} configurations")));
            }
        }
        if p.weights.len() != t {
            return Err(bad(
                "weights",
                format!("{} entries for {t} steps", p.weights.len()),
            ));
        }
        for (i, xi) in p.x.iter().enumerate() {
            if xi.len() != d || d == 0 || xi.iter().any(|v| !(0.0..=1.0).contains(v)) {
                return Err(bad(
                    format!("x[{i}]"),
                    format!("must have {d} (≥ 1) coordinates in [0, 1]"),
                ));
            }
        }
        for (i, s) in p.positions.iter().enumerate() {
            if !(s.is_finite() && *s >= 0.0) || (i > 0 && *s <= p.positions[i - 1]) {
                return Err(bad(
                    format!("positions[{i}]"),
                    "must be finite, ≥ 0 and increasing",
                ));
            }
        }
        if let Some(i) = p.weights.iter().position(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(bad(format!("weights[{i}]"), "must be finite and > 0"));
        }
        for i in 0..k {
            check_row(&format!("values[{i}]"), &p.values[i], t, |v| v.is_finite())?;
            check_row(&format!("costs[{i}]"), &p.costs[i], t, |c| {
                c.is_finite() && c > 0.0
            })?;
            if !p.finals[i].is_finite() {
                return Err(bad(format!("finals[{i}]"), "must be finite"));
            }
        }
        Ok(Self {
            name: p.name,
            labels: p.labels,
            x: p.x,
            positions: p.positions,
            weights: p.weights,
            values: p.values,
            costs: p.costs,
            finals: p.finals,
        })
    }

    /// Instance name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Number of configurations `K`.
    pub fn configs(&self) -> usize {
        self.x.len()
    }
    /// Number of steps `T`.
    pub fn steps(&self) -> usize {
        self.positions.len()
    }
    /// Configuration labels.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }
    /// Configuration embeddings.
    pub fn x(&self) -> &[Vec<f64>] {
        &self.x
    }
    /// Step positions.
    pub fn positions(&self) -> &[f64] {
        &self.positions
    }
    /// Prior relative step costs.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
    /// Value of configuration `k` after step `t` (0-based).
    pub fn value(&self, k: usize, t: usize) -> f64 {
        self.values[k][t]
    }
    /// Cost of step `t` (0-based) of configuration `k`.
    pub fn cost(&self, k: usize, t: usize) -> f64 {
        self.costs[k][t]
    }
    /// Final objective of configuration `k`.
    pub fn final_objective(&self, k: usize) -> f64 {
        self.finals[k]
    }
    /// Cost of training every configuration to the end.
    pub fn total_cost(&self) -> f64 {
        self.costs.iter().flatten().sum()
    }
    /// `(max_k z_k, min_k z_k)`.
    pub fn final_range(&self) -> (f64, f64) {
        let hi = self
            .finals
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let lo = self.finals.iter().copied().fold(f64::INFINITY, f64::min);
        (hi, lo)
    }
}

fn check_row(
    field: &str,
    row: &[f64],
    t: usize,
    ok: impl Fn(f64) -> bool,
) -> Result<(), ProblemError> {
    if row.len() != t {
        return Err(bad(field, format!("{} entries for {t} steps", row.len())));
    }
    match row.iter().position(|v| !ok(*v)) {
        Some(j) => Err(bad(
            format!("{field}[{j}]"),
            "must be finite (costs: and > 0)",
        )),
        None => Ok(()),
    }
}

/// A deterministic generator for the policies and the synthetic family.
pub(crate) fn rng(seed: u64) -> rand_xoshiro::Xoshiro256PlusPlus {
    use rand::SeedableRng;
    rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A uniformly random permutation of `0..n` (Fisher–Yates).
pub(crate) fn permutation(n: usize, rng: &mut impl rand::Rng) -> Vec<usize> {
    use rand::RngExt;
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        p.swap(i, j);
    }
    p
}

/// Parses a shipped table: a header line that must start with `columns` (in order), then one row
/// per non-empty line, split at commas into exactly `columns.len()` fields and read by `row`.
/// Errors name the line (`line 12: …`) and, for the header, the column.
fn parse_csv<R>(
    text: &str,
    columns: &[&str],
    row: impl Fn(&[&str]) -> Result<R, ProblemError>,
) -> Result<Vec<R>, ProblemError> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, h)| h.trim()).unwrap_or("");
    let names: Vec<&str> = header.split(',').collect();
    for (i, col) in columns.iter().enumerate() {
        if names.get(i) != Some(col) {
            return Err(ProblemError(format!(
                "line 1: column {} must be `{col}` (found `{}`)",
                i + 1,
                names.get(i).unwrap_or(&"")
            )));
        }
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.trim().split(',').collect();
        let parsed = if fields.len() == columns.len() {
            row(&fields)
        } else {
            Err(ProblemError(format!(
                "{} fields, expected {}",
                fields.len(),
                columns.len()
            )))
        };
        rows.push(parsed.map_err(|e| ProblemError(format!("line {}: {e}", i + 1)))?);
    }
    Ok(rows)
}
