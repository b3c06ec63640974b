//! `[cvs]`: the configuration section of a study with cost-varying variable subsets.
//!
//! The section names the control sets (which parameters the user sets, and what a trial costs
//! when they set exactly those), the distributions of the parameters left to chance, and the
//! policy. [`CvsSection::problem`] turns it, with the study's search space, into the unit-cube
//! [`CvsProblem`] of `pandora_core::cvs`. It reads only the search space, so the study's
//! configuration can hold it without the CVS decision step (`super::decide`) coming along.

use crate::error::{Error, Result};
use crate::space::{Param, SearchSpace};
use pandora_core::cvs::{ControlSet, CvsProblem, Distribution, build_policy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[cvs]`: control sets, random parameters and the policy of a study with cost-varying variable
/// subsets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CvsSection {
    /// The policy (`pandora_core::cvs::POLICY_NAMES`; default `ucb-cvs`).
    #[serde(default = "default_policy")]
    pub policy: String,
    /// λ of `gittins` and the start of `gittins-d`, in objective units per cost unit (default
    /// 0.01).
    #[serde(default = "default_lambda")]
    pub lambda: f64,
    /// `T` of `ucb-cvs-linear`'s ε decay, in trials (default: the budget divided by the largest
    /// cost, or 100 without a budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_cut: Option<f64>,
    /// Trials of the initial design before the model is used (default 5).
    #[serde(default = "default_initial")]
    pub initial_design: usize,
    /// Rows of the quasi-Monte-Carlo sample bank for expectations over the random parameters
    /// (default 1024).
    #[serde(default = "default_bank")]
    pub bank_size: usize,
    /// The control sets.
    pub control_sets: Vec<ControlSetConfig>,
    /// The distribution of every parameter some control set leaves random, by name.
    #[serde(default)]
    pub random: BTreeMap<String, RandomConfig>,
}

fn default_policy() -> String {
    "ucb-cvs".into()
}

fn default_lambda() -> f64 {
    0.01
}

fn default_initial() -> usize {
    5
}

fn default_bank() -> usize {
    pandora_core::cvs::DEFAULT_BANK_SIZE
}

/// One control set: `{ params = ["a", "b"], cost = 0.1, name = "soil only" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSetConfig {
    /// The parameters set by the user (the others are random).
    pub params: Vec<String>,
    /// The cost of a trial with this control set (> 0).
    pub cost: f64,
    /// An optional label shown with trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The distribution of a random parameter, in the parameter's own units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum RandomConfig {
    /// A normal `N(mean, sd²)` truncated to the parameter's bounds.
    TruncatedNormal {
        /// Location.
        mean: f64,
        /// Scale (> 0).
        sd: f64,
    },
    /// Uniform on `[low, high]` (default: the parameter's bounds).
    Uniform {
        /// Lower end (default: the parameter's lower bound).
        #[serde(default)]
        low: Option<f64>,
        /// Upper end (default: the parameter's upper bound).
        #[serde(default)]
        high: Option<f64>,
    },
    /// Finitely many values with probabilities proportional to `weights` (default equal).
    Discrete {
        /// The values (inside the parameter's bounds).
        values: Vec<f64>,
        /// Non-negative weights, one per value.
        #[serde(default)]
        weights: Option<Vec<f64>>,
    },
}

impl CvsSection {
    /// Checks the section against the search space (linear float parameters only); errors name
    /// the field. The rules that tie `[cvs]` to the other sections (no `[cost]`, no stopping rule,
    /// no command) are checked by [`StudyConfig::validate`](crate::config::StudyConfig::validate).
    pub fn validate(&self, space: &SearchSpace) -> Result<()> {
        for p in &space.params {
            if !matches!(p, Param::Float { log: false, .. }) {
                return Err(linear_floats_only(p.name()));
            }
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(Error::invalid("cvs.lambda", "must be finite and > 0"));
        }
        if let Some(t) = self.t_cut
            && !(t.is_finite() && t > 0.0)
        {
            return Err(Error::invalid("cvs.t_cut", "must be finite and > 0"));
        }
        if self.initial_design == 0 {
            return Err(Error::invalid(
                "cvs.initial_design",
                "must be at least 1 (the model needs data)",
            ));
        }
        build_policy(&self.policy, 1.0, self.lambda)
            .map_err(|e| Error::invalid("cvs.policy", e.to_string()))?;
        if self.bank_size == 0 {
            return Err(Error::invalid("cvs.bank_size", "must be at least 1"));
        }
        self.problem_with_bank(space, 0, 1).map(|_| ())
    }

    /// The unit-cube problem: control sets by variable index, distributions mapped to `[0, 1]`
    /// and a sample bank of `bank_size` rows seeded by `seed`.
    pub fn problem(&self, space: &SearchSpace, seed: u64) -> Result<CvsProblem> {
        if self.bank_size == 0 {
            return Err(Error::invalid("cvs.bank_size", "must be at least 1"));
        }
        self.problem_with_bank(space, seed, self.bank_size)
    }

    /// [`CvsSection::problem`] with a bank of `bank_size` rows (1 where no expectation is taken:
    /// validation, drawing the random parameters).
    pub(crate) fn problem_with_bank(
        &self,
        space: &SearchSpace,
        seed: u64,
        bank_size: usize,
    ) -> Result<CvsProblem> {
        let names: Vec<&str> = space.names().collect();
        let index = |n: &str, what: &str| {
            names.iter().position(|&m| m == n).ok_or_else(|| {
                Error::invalid(
                    what.to_string(),
                    format!("unknown parameter '{n}' (parameters: {})", names.join(", ")),
                )
            })
        };
        if self.control_sets.is_empty() {
            return Err(Error::invalid("cvs.control_sets", "need at least one"));
        }
        let mut sets = Vec::with_capacity(self.control_sets.len());
        for (i, cs) in self.control_sets.iter().enumerate() {
            let what = format!("cvs.control_sets[{i}]");
            let mut vars = Vec::with_capacity(cs.params.len());
            for n in &cs.params {
                let v = index(n, &what)?;
                if vars.contains(&v) {
                    return Err(Error::invalid(what, format!("'{n}' is listed twice")));
                }
                vars.push(v);
            }
            if !(cs.cost.is_finite() && cs.cost > 0.0) {
                return Err(Error::invalid(
                    format!("{what}.cost"),
                    format!("must be finite and > 0, got {}", cs.cost),
                ));
            }
            sets.push(ControlSet::new(vars, cs.cost));
        }
        let mut dists: Vec<Option<Distribution>> = vec![None; names.len()];
        for (n, rc) in &self.random {
            let what = format!("cvs.random.{n}");
            let v = index(n, &what)?;
            let Param::Float { low, high, .. } = space.params[v] else {
                return Err(linear_floats_only(n));
            };
            let u = |t: f64| (t - low) / (high - low);
            let inside = |t: f64, field: &str| {
                if t.is_finite() && (low..=high).contains(&t) {
                    Ok(u(t))
                } else {
                    Err(Error::invalid(
                        format!("{what}.{field}"),
                        format!("{t} is outside the parameter's bounds [{low}, {high}]"),
                    ))
                }
            };
            let dist = match rc {
                RandomConfig::TruncatedNormal { mean, sd } => {
                    if !(sd.is_finite() && *sd > 0.0 && mean.is_finite()) {
                        return Err(Error::invalid(
                            what,
                            "truncated_normal needs a finite mean and sd > 0",
                        ));
                    }
                    Distribution::truncated_normal(u(*mean), sd / (high - low), 0.0, 1.0)
                }
                RandomConfig::Uniform { low: a, high: b } => {
                    let a = inside(a.unwrap_or(low), "low")?;
                    let b = inside(b.unwrap_or(high), "high")?;
                    Distribution::uniform(a, b)
                }
                RandomConfig::Discrete { values, weights } => {
                    let vals = values
                        .iter()
                        .map(|&t| inside(t, "values"))
                        .collect::<Result<Vec<f64>>>()?;
                    let w = weights.clone().unwrap_or_else(|| vec![1.0; vals.len()]);
                    Distribution::discrete(vals, w)
                }
            }
            .map_err(|e| Error::invalid(what.clone(), e.to_string()))?;
            dists[v] = Some(dist);
        }
        for (i, s) in sets.iter().enumerate() {
            if let Some(v) = (0..names.len()).find(|v| !s.vars.contains(v) && dists[*v].is_none()) {
                return Err(Error::invalid(
                    "cvs.random",
                    format!(
                        "control set {i} leaves '{}' random, but it has no distribution \
                         (add cvs.random.{} = {{ dist = \"uniform\" }} or another)",
                        names[v], names[v]
                    ),
                ));
            }
        }
        Ok(CvsProblem::new(names.len(), sets, dists, bank_size, seed)?)
    }
}

/// The error for a parameter a `[cvs]` study cannot leave random or control.
fn linear_floats_only(name: &str) -> Error {
    Error::invalid(
        format!("space.{name}"),
        "a [cvs] study supports float parameters on a linear scale only",
    )
}
