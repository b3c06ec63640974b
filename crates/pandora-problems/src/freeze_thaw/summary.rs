//! Running the benchmark: policies by name, one trace per (instance, policy, seed), and the
//! regret-against-cost summary.
//!
//! # Budget and λ
//! The budget of an instance is `budget_fraction` times the cost of training every
//! configuration to the end. The cost-aware policies trade value for cost at
//! `λ = lambda / budget`: `lambda` is the value a user would give up to save the whole budget
//! (the same for every cost-aware policy; the others ignore it, see
//! [`PolicyName::uses_lambda`]).
//!
//! # Summary
//! Regret at cumulative costs `f·C` (`C` the cost of the whole table) for fractions `f` on a
//! logarithmic grid from `grid_low` to `budget_fraction`, over seeds: the quartiles by linear
//! interpolation between order statistics (the "type 7" rule: `q(p)` at position `p (n − 1)`).

use super::baselines::{Asha, Hyperband, MedianStopping, RandomSearch};
use super::model_policies::{GittinsPolicy, ModelSettings, NoPausePolicy, NoPauseRule};
use super::{Policy, Table, Trace, play};
use crate::error::ProblemError;
use serde::{Deserialize, Serialize};

/// The policies of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyName {
    /// The cost-aware freeze-thaw Gittins index policy.
    Gittins,
    /// Hyperband (brackets of successive halving).
    Hyperband,
    /// ASHA with one worker.
    Asha,
    /// The median stopping rule.
    Median,
    /// PBGI over configurations, runs trained to the end.
    Pbgi,
    /// LogEIPC over configurations, runs trained to the end.
    LogEipc,
    /// Random search, runs trained to the end.
    Random,
}

impl PolicyName {
    /// Every policy, in the order of figures.
    pub const ALL: [PolicyName; 7] = [
        PolicyName::Gittins,
        PolicyName::Pbgi,
        PolicyName::LogEipc,
        PolicyName::Hyperband,
        PolicyName::Asha,
        PolicyName::Median,
        PolicyName::Random,
    ];

    /// The name in configurations and CSV files.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Gittins => "gittins",
            PolicyName::Hyperband => "hyperband",
            PolicyName::Asha => "asha",
            PolicyName::Median => "median",
            PolicyName::Pbgi => "pbgi",
            PolicyName::LogEipc => "log_eipc",
            PolicyName::Random => "random",
        }
    }

    /// Whether the policy's decisions depend on `λ` (the Gittins policy's steps and stop, and
    /// PBGI's choice of configuration); the others ignore it, so a `λ` sweep runs them once.
    pub fn uses_lambda(self) -> bool {
        matches!(self, PolicyName::Gittins | PolicyName::Pbgi)
    }
}

/// Settings of a benchmark run (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchSettings {
    /// Budget as a fraction of the whole table's cost (in `(0, 1]`).
    pub budget_fraction: f64,
    /// Value worth the whole budget (`λ = lambda / budget`).
    pub lambda: f64,
    /// Hyperband's and ASHA's reduction factor.
    pub eta: usize,
    /// Median rule: first step at which a run may be stopped.
    pub median_grace: usize,
    /// Median rule: earlier runs needed at a step.
    pub median_min_runs: usize,
    /// The model-based policies (its `lambda` is overwritten per instance).
    pub model: ModelSettings,
}

impl Default for BenchSettings {
    fn default() -> Self {
        Self {
            budget_fraction: 0.3,
            lambda: 0.05,
            eta: 3,
            median_grace: 3,
            median_min_runs: 3,
            model: ModelSettings {
                lambda: 1.0,
                initial: 2,
                refit_every: 5,
                grid_points: 51,
                fit_restarts: 1,
            },
        }
    }
}

impl BenchSettings {
    /// Checks the settings, naming the field.
    pub fn validate(&self) -> Result<(), ProblemError> {
        let f = self.budget_fraction;
        if !(f.is_finite() && f > 0.0 && f <= 1.0) {
            return Err(ProblemError(format!(
                "budget_fraction: {f} must be in (0, 1]"
            )));
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(ProblemError(format!("lambda: {} must be > 0", self.lambda)));
        }
        let m = &self.model;
        if m.initial == 0 || m.refit_every == 0 {
            return Err(ProblemError(
                "model: initial and refit_every must be ≥ 1".into(),
            ));
        }
        if m.grid_points < 3 || m.grid_points.is_multiple_of(2) {
            return Err(ProblemError(format!(
                "model.grid_points: {} must be odd and ≥ 3",
                m.grid_points
            )));
        }
        Ok(())
    }

    /// The budget on `table`.
    pub fn budget(&self, table: &Table) -> f64 {
        self.budget_fraction * table.total_cost()
    }
}

/// The policy `name` for an instance of budget `budget` and a seed.
pub fn make_policy(
    name: PolicyName,
    s: &BenchSettings,
    budget: f64,
    seed: u64,
) -> Result<Box<dyn Policy>, ProblemError> {
    let model = ModelSettings {
        lambda: s.lambda / budget,
        ..s.model.clone()
    };
    Ok(match name {
        PolicyName::Gittins => Box::new(GittinsPolicy::new(model, seed)),
        PolicyName::Pbgi => Box::new(NoPausePolicy::new(NoPauseRule::Pbgi, model, seed)),
        PolicyName::LogEipc => Box::new(NoPausePolicy::new(NoPauseRule::LogEipc, model, seed)),
        PolicyName::Hyperband => Box::new(Hyperband::new(s.eta, seed)?),
        PolicyName::Asha => Box::new(Asha::new(s.eta, seed)?),
        PolicyName::Median => Box::new(MedianStopping::new(
            s.median_grace,
            s.median_min_runs,
            seed,
        )?),
        PolicyName::Random => Box::new(RandomSearch::new(seed)),
    })
}

/// Plays policy `name` on `table` for `seed`.
pub fn play_one(
    table: &Table,
    name: PolicyName,
    s: &BenchSettings,
    seed: u64,
) -> Result<Trace, ProblemError> {
    s.validate()?;
    let budget = s.budget(table);
    let mut policy = make_policy(name, s, budget, seed)?;
    play(table, policy.as_mut(), budget).map_err(|e| {
        ProblemError(format!(
            "{} on {}, seed {seed}: {e}",
            name.as_str(),
            table.name()
        ))
    })
}

/// `points` fractions on a logarithmic grid from `low` to `high` (`0 < low < high`, points ≥ 2).
pub fn fraction_grid(low: f64, high: f64, points: usize) -> Vec<f64> {
    let (a, b) = (low.ln(), high.ln());
    (0..points)
        .map(|i| (a + (b - a) * i as f64 / (points - 1).max(1) as f64).exp())
        .collect()
}

/// Lower quartile, median and upper quartile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quartiles {
    /// 25 % quantile.
    pub q25: f64,
    /// Median.
    pub median: f64,
    /// 75 % quantile.
    pub q75: f64,
}

/// The quartiles of `values` (type 7; NaN for none).
pub fn quartiles(values: &[f64]) -> Quartiles {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        if v.is_empty() {
            return f64::NAN;
        }
        let h = p * (v.len() - 1) as f64;
        let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
        v[lo] + (h - lo as f64) * (v[hi] - v[lo])
    };
    Quartiles {
        q25: q(0.25),
        median: q(0.5),
        q75: q(0.75),
    }
}

/// Regret quartiles over `runs` (each a trace and the whole cost of its table) at cumulative
/// costs `f ·` that cost, for each fraction `f`.
pub fn regret_quartiles(runs: &[(&Trace, f64)], fractions: &[f64]) -> Vec<Quartiles> {
    fractions
        .iter()
        .map(|f| {
            let r: Vec<f64> = runs.iter().map(|(t, c)| t.regret_at(f * c)).collect();
            quartiles(&r)
        })
        .collect()
}
