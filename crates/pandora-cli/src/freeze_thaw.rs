//! `pandora freeze-thaw`: solve a discrete cost-aware freeze-thaw instance exactly. JSON in, JSON
//! out: the Gittins index of every run's current state (and of all its states), the next action
//! of the index policy (start, continue or keep a run, or stop) and the policy's exact expected
//! net utility; with `--verify`, also the brute-force optimum over all policies. See
//! docs/freeze-thaw.md.

use anyhow::{Context, Result, bail};
use pandora_core::gittins::freeze_thaw::{Action, CurveNode, CurveRun, DP_MAX_STATES, FreezeThaw};
use serde::{Deserialize, Serialize};

/// Most runs in one instance (each costs `O(n²)` in its number of states).
pub const MAX_RUNS: usize = 1_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    runs: Vec<RunSpec>,
    #[serde(default)]
    fallback: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    nodes: Option<Vec<NodeSpec>>,
    #[serde(default)]
    at: Option<usize>,
    #[serde(default)]
    walk: Option<WalkSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSpec {
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    cost: f64,
    #[serde(default)]
    next: Vec<Edge>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Edge {
    node: usize,
    prob: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WalkSpec {
    from: f64,
    #[serde(default)]
    started: bool,
    #[serde(default)]
    steps: Option<usize>,
    #[serde(default)]
    step_cost: Option<f64>,
    #[serde(default)]
    step_costs: Option<Vec<f64>>,
    increments: Discrete,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Discrete {
    values: Vec<f64>,
    probs: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct Output {
    action: ActionOut,
    runs: Vec<RunOut>,
    expected_utility: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dp_expected_utility: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dp_index_policy_utility: Option<f64>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ActionOut {
    Start {
        run: usize,
        name: String,
    },
    Continue {
        run: usize,
        name: String,
    },
    Select {
        run: usize,
        name: String,
        value: f64,
    },
    Stop {
        value: f64,
    },
}

#[derive(Debug, Serialize)]
struct RunOut {
    name: String,
    at: usize,
    /// The index of the current state.
    index: f64,
    /// The index of every state (`null` where it is −∞).
    state_indices: Vec<f64>,
}

fn build_run(k: usize, spec: RunSpec) -> Result<CurveRun> {
    let field = |f: &str| format!("runs[{k}].{f}");
    match (spec.nodes, spec.walk) {
        (Some(nodes), None) => {
            let nodes = nodes
                .into_iter()
                .map(|n| CurveNode {
                    value: n.value,
                    cost: n.cost,
                    next: n.next.into_iter().map(|e| (e.node, e.prob)).collect(),
                })
                .collect();
            // Validated with the instance, which names the run in its errors.
            Ok(CurveRun {
                nodes,
                at: spec.at.unwrap_or(0),
            })
        }
        (None, Some(w)) => {
            if spec.at.is_some() {
                bail!(
                    "{}: a walk always starts in its first state (give the current value as \
                     \"from\" and the remaining steps)",
                    field("at")
                );
            }
            let costs = match (w.step_costs, w.steps, w.step_cost) {
                (Some(c), None, None) => c,
                (None, Some(n), Some(c)) => vec![c; n],
                _ => bail!(
                    "{}: give either \"step_costs\" (one per step) or both \"steps\" and \
                     \"step_cost\"",
                    field("walk")
                ),
            };
            CurveRun::walk(
                w.from,
                &costs,
                &w.increments.values,
                &w.increments.probs,
                w.started,
            )
            .map_err(|e| e.within(field("walk")).into())
        }
        _ => bail!("runs[{k}]: give exactly one of \"nodes\" and \"walk\""),
    }
}

/// Parse, solve and (optionally) verify one request.
fn solve(text: &str, verify: bool) -> Result<Output> {
    let input: Input = crate::input::parse(text)?;
    if input.runs.len() > MAX_RUNS {
        bail!(
            "runs: {} runs is more than the limit of {MAX_RUNS}",
            input.runs.len()
        );
    }
    let mut names = Vec::with_capacity(input.runs.len());
    let mut runs = Vec::with_capacity(input.runs.len());
    for (k, spec) in input.runs.into_iter().enumerate() {
        names.push(spec.name.clone().unwrap_or_else(|| format!("run {k}")));
        runs.push(build_run(k, spec)?);
    }
    let ft = FreezeThaw::new(runs, input.fallback)?;
    let decision = ft.decide();
    let (dp_expected_utility, dp_index_policy_utility) = if verify {
        let ctx =
            || format!("--verify (dynamic programming over at most {DP_MAX_STATES} joint states)");
        (
            Some(ft.dp_optimum().with_context(ctx)?),
            Some(ft.dp_policy_value(&decision.indices).with_context(ctx)?),
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
        .zip(&names)
        .map(|((run, idx), name)| RunOut {
            name: name.clone(),
            at: run.at,
            index: idx[run.at],
            state_indices: idx,
        })
        .collect();
    Ok(Output {
        action,
        runs,
        expected_utility: decision.expected_utility,
        dp_expected_utility,
        dp_index_policy_utility,
    })
}

/// Reads the instance from `path` (stdin if `None` or `-`) and prints the solution.
pub fn main(path: Option<&str>, verify: bool) -> Result<()> {
    let text = crate::input::read(path, "freeze-thaw instance")?;
    let out = solve(&text, verify)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of docs/freeze-thaw.md.
    const EXAMPLE: &str = include_str!("../../../examples/freeze_thaw.json");

    #[test]
    fn the_documented_example_solves_and_verifies() {
        let out = solve(EXAMPLE, true).unwrap();
        let dp = out.dp_expected_utility.unwrap();
        assert!((dp - out.expected_utility).abs() < 1e-9, "{out:?}");
        assert!((dp - out.dp_index_policy_utility.unwrap()).abs() < 1e-9);
        assert_eq!(out.runs.len(), 3);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                EXAMPLE.replacen("\"prob\": 0.5", "\"prob\": 0.4", 1),
                "runs[0].nodes[0].next",
            ),
            (
                EXAMPLE.replacen("\"node\": 1", "\"node\": 0", 1),
                "runs[0].nodes[0].next[0].node",
            ),
            (EXAMPLE.replacen("\"from\"", "\"form\"", 1), "runs[2].walk"),
            (EXAMPLE.replacen("\"steps\": 3,", "", 1), "runs[2].walk"),
            (
                EXAMPLE.replacen("0.4, 0.3]", "0.4, 0.4]", 1),
                "runs[2].walk.increments.probs",
            ),
            (
                EXAMPLE.replacen("\"fallback\": 0.6", "\"fallback\": \"x\"", 1),
                "fallback",
            ),
        ];
        for (text, field) in cases {
            assert_ne!(text, EXAMPLE, "{field}: the replacement did not apply");
            let e = format!("{:#}", solve(&text, false).unwrap_err());
            assert!(e.contains(field), "{field}: {e}");
        }
    }
}
