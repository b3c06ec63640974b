//! The JSON format of a freeze-thaw instance and of its solution, shared by `pandora
//! freeze-thaw` and Python's `pandora.freeze_thaw` (docs/freeze-thaw.md).

use super::{Action, CurveNode, CurveRun, DP_MAX_STATES, FreezeThaw};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Most runs in one instance.
pub const MAX_RUNS: usize = 1_000;

/// An instance as given by a user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    /// The runs.
    pub runs: Vec<RunSpec>,
    /// A value that can be kept without any further step.
    #[serde(default)]
    pub fallback: Option<f64>,
}

/// One run: exactly one of `nodes` (with `at`), `walk` and `gaussian`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Echoed in the output (default `run K`).
    #[serde(default)]
    pub name: Option<String>,
    /// Explicit states in topological order.
    #[serde(default)]
    pub nodes: Option<Vec<NodeSpec>>,
    /// The current state (with `nodes`; default 0).
    #[serde(default)]
    pub at: Option<usize>,
    /// A random-walk curve.
    #[serde(default)]
    pub walk: Option<WalkSpec>,
    /// A run whose final value is predicted by a Gaussian model.
    #[serde(default)]
    pub gaussian: Option<GaussianSpec>,
}

/// A run given by the Gaussian prediction of its final value (see [`CurveRun::gaussian`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianSpec {
    /// The current prediction of the final value.
    pub mean: f64,
    /// The variance of the final value each step removes.
    pub variance_drops: Vec<f64>,
    /// The cost of each step.
    pub step_costs: Vec<f64>,
    /// Grid values per step (odd).
    #[serde(default = "default_points")]
    pub points: usize,
    /// Whether the run has been observed already.
    #[serde(default)]
    pub started: bool,
}

fn default_points() -> usize {
    41
}

/// One explicit state (see [`CurveNode`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Observed value (absent before the run starts; required when complete).
    #[serde(default)]
    pub value: Option<f64>,
    /// Cost of the next step.
    #[serde(default)]
    pub cost: f64,
    /// Where the next step leads; empty for a complete state.
    #[serde(default)]
    pub next: Vec<Edge>,
}

/// A transition to a later state.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    /// The state it leads to.
    pub node: usize,
    /// Its probability.
    pub prob: f64,
}

/// A run whose value moves by a random increment per step (see [`CurveRun::walk`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkSpec {
    /// The current (or starting) value.
    pub from: f64,
    /// Whether the run has been observed at `from` already.
    #[serde(default)]
    pub started: bool,
    /// Number of steps (with `step_cost`).
    #[serde(default)]
    pub steps: Option<usize>,
    /// Cost of every step (with `steps`).
    #[serde(default)]
    pub step_cost: Option<f64>,
    /// Cost of each step (instead of `steps` and `step_cost`).
    #[serde(default)]
    pub step_costs: Option<Vec<f64>>,
    /// The increments' distribution.
    pub increments: Discrete,
}

/// A discrete distribution.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Discrete {
    /// Support points.
    pub values: Vec<f64>,
    /// Their probabilities (summing to 1).
    pub probs: Vec<f64>,
}

/// The solution: the next action, the indices and the policy's value.
#[derive(Debug, Clone, Serialize)]
pub struct Solution {
    /// The index policy's next action.
    pub action: ActionOut,
    /// Every run's indices.
    pub runs: Vec<RunOut>,
    /// The exact expected net utility of the index policy.
    pub expected_utility: f64,
    /// With verification: the optimum over all policies by dynamic programming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dp_expected_utility: Option<f64>,
    /// With verification: the index policy's value by the same recursion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dp_index_policy_utility: Option<f64>,
}

/// An [`Action`] with the run's name.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionOut {
    /// Take the first step of a run.
    Start {
        /// The run's number.
        run: usize,
        /// Its name.
        name: String,
    },
    /// Take one more step of a paused or running run.
    Continue {
        /// The run's number.
        run: usize,
        /// Its name.
        name: String,
    },
    /// Keep a complete run and end.
    Select {
        /// The run's number.
        run: usize,
        /// Its name.
        name: String,
        /// Its value.
        value: f64,
    },
    /// Keep the fallback and end.
    Stop {
        /// The fallback.
        value: f64,
    },
}

/// One run's indices.
#[derive(Debug, Clone, Serialize)]
pub struct RunOut {
    /// Its name.
    pub name: String,
    /// Its current state.
    pub at: usize,
    /// The index of the current state.
    pub index: f64,
    /// The index of every state.
    pub state_indices: Vec<f64>,
}

impl RunSpec {
    fn build(self, k: usize) -> Result<CurveRun> {
        let within = |e: Error| e.within(format_args!("runs[{k}].walk"));
        if self.at.is_some() && self.nodes.is_none() {
            return Err(Error::invalid(
                format!("runs[{k}].at"),
                "only runs given by \"nodes\" take \"at\"; a walk or a gaussian run starts in \
                 its first state (give its current value and its remaining steps)",
            ));
        }
        match (self.nodes, self.walk, self.gaussian) {
            (None, None, Some(g)) => CurveRun::gaussian(
                g.mean,
                &g.variance_drops,
                &g.step_costs,
                g.points,
                g.started,
            )
            .map_err(|e| e.within(format_args!("runs[{k}].gaussian"))),
            (Some(nodes), None, None) => Ok(CurveRun {
                // Validated with the instance, which names the run in its errors.
                nodes: nodes
                    .into_iter()
                    .map(|n| CurveNode {
                        value: n.value,
                        cost: n.cost,
                        next: n.next.into_iter().map(|e| (e.node, e.prob)).collect(),
                    })
                    .collect(),
                at: self.at.unwrap_or(0),
            }),
            (None, Some(w), None) => {
                let costs = match (w.step_costs, w.steps, w.step_cost) {
                    (Some(c), None, None) => c,
                    (None, Some(n), Some(c)) => vec![c; n],
                    _ => {
                        return Err(within(Error::invalid(
                            "steps",
                            "give either \"step_costs\" (one per step) or both \"steps\" and \
                             \"step_cost\"",
                        )));
                    }
                };
                let inc = &w.increments;
                CurveRun::walk(w.from, &costs, &inc.values, &inc.probs, w.started).map_err(within)
            }
            _ => Err(Error::invalid(
                format!("runs[{k}]"),
                "give exactly one of \"nodes\", \"walk\" and \"gaussian\"",
            )),
        }
    }
}

/// Build, solve and (with `verify`) check an instance against dynamic programming.
pub fn solve(instance: Instance, verify: bool) -> Result<Solution> {
    if instance.runs.len() > MAX_RUNS {
        return Err(Error::invalid(
            "runs",
            format!(
                "{} runs is more than the limit of {MAX_RUNS}",
                instance.runs.len()
            ),
        ));
    }
    let mut names = Vec::with_capacity(instance.runs.len());
    let mut runs = Vec::with_capacity(instance.runs.len());
    for (k, spec) in instance.runs.into_iter().enumerate() {
        names.push(spec.name.clone().unwrap_or_else(|| format!("run {k}")));
        runs.push(spec.build(k)?);
    }
    let ft = FreezeThaw::new(runs, instance.fallback)?;
    let decision = ft.decide();
    let (dp_expected_utility, dp_index_policy_utility) = if verify {
        let note = |e: Error| {
            Error::invalid(
                "verify",
                format!("dynamic programming over at most {DP_MAX_STATES} joint states: {e}"),
            )
        };
        (
            Some(ft.dp_optimum().map_err(note)?),
            Some(ft.dp_policy_value(&decision.indices).map_err(note)?),
        )
    } else {
        (None, None)
    };
    let name = |run: usize| names[run].clone();
    let action = match decision.action {
        Action::Start { run } => ActionOut::Start {
            run,
            name: name(run),
        },
        Action::Continue { run } => ActionOut::Continue {
            run,
            name: name(run),
        },
        Action::Select { run, value } => ActionOut::Select {
            run,
            name: name(run),
            value,
        },
        Action::Stop { value } => ActionOut::Stop { value },
    };
    let runs = ft
        .runs
        .iter()
        .zip(decision.indices)
        .zip(names)
        .map(|((run, state_indices), name)| RunOut {
            name,
            at: run.at,
            index: state_indices[run.at],
            state_indices,
        })
        .collect();
    Ok(Solution {
        action,
        runs,
        expected_utility: decision.expected_utility,
        dp_expected_utility,
        dp_index_policy_utility,
    })
}
