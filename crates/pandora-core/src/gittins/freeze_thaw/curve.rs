//! One training run as a Markov chain over learning-curve states, and the Gittins index of each
//! state by backward induction on its local MDP (see the [module doc](super)).

use crate::error::{Error, Result};
use crate::gittins::MarkovChain;

/// Most states of one run ([`CurveRun`]). The indices cost one backward pass whose work grows
/// with the breakpoints of the local value functions (see `local.rs`); this limit keeps the
/// worst case (every index a breakpoint of every earlier state, `O(n²)`) to seconds.
pub const MAX_RUN_NODES: usize = 20_000;

/// One state of a run's learning curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveNode {
    /// The value observed in this state (the objective of the model trained so far), `None` for
    /// the state of a run that has not started. Required for complete states.
    pub value: Option<f64>,
    /// Cost of the next step from this state (ignored for complete states). Finite, `≥ 0`.
    pub cost: f64,
    /// The states the next step leads to, `(node, probability)`, each later in the list than
    /// this one. Empty for a **complete** state: its run is trained to the end and its value may
    /// be kept as the study's result.
    pub next: Vec<(usize, f64)>,
}

impl CurveNode {
    /// Whether the run is complete in this state (no further step).
    pub fn is_complete(&self) -> bool {
        self.next.is_empty()
    }
}

/// A run: its learning-curve states in topological order (every transition goes to a later
/// state) and the state it is in now.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveRun {
    /// The states; `nodes[at]` is the current one.
    pub(super) nodes: Vec<CurveNode>,
    /// The current state.
    pub(super) at: usize,
}

impl CurveRun {
    /// The states, in topological order.
    pub fn nodes(&self) -> &[CurveNode] {
        &self.nodes
    }

    /// The current state.
    pub fn at(&self) -> usize {
        self.at
    }

    /// Validate and build a run.
    pub fn new(nodes: Vec<CurveNode>, at: usize) -> Result<Self> {
        let run = CurveRun { nodes, at };
        run.validate()?;
        Ok(run)
    }

    /// A run whose value moves by a random increment at every step: from `from`, step `t`
    /// (`0 ≤ t < step_costs.len()`) costs `step_costs[t]` and adds `increments[j]` with
    /// probability `probs[j]`, independently of the past. States are the multisets of increments
    /// taken so far (a lattice, not a tree: `C(t + m − 1, m − 1)` states at depth `t` for `m`
    /// increments). `started` says whether the run has already been observed at `from` (then
    /// its first state carries that value) or not yet started.
    pub fn walk(
        from: f64,
        step_costs: &[f64],
        increments: &[f64],
        probs: &[f64],
        started: bool,
    ) -> Result<Self> {
        check_walk(from, increments, probs)?;
        for (t, c) in step_costs.iter().enumerate() {
            if !(c.is_finite() && *c >= 0.0) {
                return Err(Error::invalid(
                    format!("step_costs[{t}]"),
                    "must be finite and ≥ 0",
                ));
            }
        }
        let m = increments.len();
        let depth = step_costs.len();
        let mut layer: Vec<Vec<u32>> = vec![vec![0; m]];
        let mut nodes = Vec::new();
        for t in 0..=depth {
            let first = nodes.len();
            let next_layer = if t < depth {
                lattice_layer(&layer, m)
            } else {
                Vec::new()
            };
            if first + layer.len() + next_layer.len() > MAX_RUN_NODES {
                return Err(Error::invalid(
                    "steps",
                    format!("more than {MAX_RUN_NODES} states (fewer steps or increments)"),
                ));
            }
            for counts in &layer {
                let value = from
                    + counts
                        .iter()
                        .zip(increments)
                        .map(|(&k, d)| k as f64 * d)
                        .sum::<f64>();
                let next = if t < depth {
                    let base = first + layer.len();
                    (0..m)
                        .map(|j| {
                            let mut c = counts.clone();
                            c[j] += 1;
                            let pos = next_layer.binary_search_by(|x| c.cmp(x)).expect("in layer");
                            (base + pos, probs[j])
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let observed = started || t > 0 || depth == 0;
                nodes.push(CurveNode {
                    value: observed.then_some(value),
                    cost: step_costs.get(t).copied().unwrap_or(0.0),
                    next,
                });
            }
            layer = next_layer;
        }
        CurveRun::new(nodes, 0)
    }

    /// Check indices, probabilities, costs, values and the topological order.
    pub fn validate(&self) -> Result<()> {
        let n = self.nodes.len();
        if n == 0 {
            return Err(Error::invalid("nodes", "a run needs at least one state"));
        }
        if n > MAX_RUN_NODES {
            return Err(Error::invalid(
                "nodes",
                format!("{n} states is more than the limit of {MAX_RUN_NODES}"),
            ));
        }
        if self.at >= n {
            return Err(Error::invalid(
                "at",
                format!("state {} out of range (the run has {n})", self.at),
            ));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            check_node(i, node, n)?;
        }
        Ok(())
    }

    /// The run as a [`MarkovChain`] (for the generic Markov chain selection code): a state per
    /// node plus one terminal state; a complete state earns its value and terminates (the run is
    /// selected), any other state earns `−cost` and steps on.
    pub fn to_chain(&self) -> Result<MarkovChain> {
        let n = self.nodes.len();
        let mut rewards = vec![0.0; n + 1];
        let mut transitions = vec![vec![0.0; n + 1]; n + 1];
        let mut terminal = vec![false; n + 1];
        for (u, node) in self.nodes.iter().enumerate() {
            if node.is_complete() {
                rewards[u] = node.value.expect("complete");
                transitions[u][n] = 1.0;
            } else {
                rewards[u] = -node.cost;
                for &(v, p) in &node.next {
                    transitions[u][v] += p;
                }
            }
        }
        terminal[n] = true;
        transitions[n][n] = 1.0;
        MarkovChain::new(rewards, transitions, terminal)
    }
}

fn check_node(i: usize, node: &CurveNode, n: usize) -> Result<()> {
    let field = |f: &str| format!("nodes[{i}].{f}");
    if let Some(v) = node.value
        && !v.is_finite()
    {
        return Err(Error::invalid(field("value"), "must be finite"));
    }
    if node.is_complete() {
        if node.value.is_none() {
            return Err(Error::invalid(
                field("value"),
                "a complete state (no \"next\") needs a value",
            ));
        }
        return Ok(());
    }
    if !(node.cost.is_finite() && node.cost >= 0.0) {
        return Err(Error::invalid(field("cost"), "must be finite and ≥ 0"));
    }
    let mut sum = 0.0;
    for (k, &(v, p)) in node.next.iter().enumerate() {
        if v <= i || v >= n {
            return Err(Error::invalid(
                format!("nodes[{i}].next[{k}].node"),
                format!("must be a later state ({} to {}), got {v}", i + 1, n - 1),
            ));
        }
        if !(p.is_finite() && p >= 0.0) {
            return Err(Error::invalid(
                format!("nodes[{i}].next[{k}].prob"),
                "must be finite and ≥ 0",
            ));
        }
        sum += p;
    }
    if (sum - 1.0).abs() > 1e-9 {
        return Err(Error::invalid(
            field("next"),
            format!("probabilities must sum to 1, got {sum}"),
        ));
    }
    Ok(())
}

fn check_walk(from: f64, increments: &[f64], probs: &[f64]) -> Result<()> {
    if !from.is_finite() {
        return Err(Error::invalid("from", "must be finite"));
    }
    if increments.is_empty() {
        return Err(Error::invalid("increments.values", "must not be empty"));
    }
    if probs.len() != increments.len() {
        return Err(Error::dim(
            "increments.probs",
            increments.len(),
            probs.len(),
        ));
    }
    if let Some(j) = increments.iter().position(|d| !d.is_finite()) {
        return Err(Error::invalid(
            format!("increments.values[{j}]"),
            "must be finite",
        ));
    }
    if let Some(j) = probs.iter().position(|p| !(p.is_finite() && *p >= 0.0)) {
        return Err(Error::invalid(
            format!("increments.probs[{j}]"),
            "must be finite and ≥ 0",
        ));
    }
    let sum: f64 = probs.iter().sum();
    if (sum - 1.0).abs() > 1e-9 {
        return Err(Error::invalid(
            "increments.probs",
            format!("must sum to 1, got {sum}"),
        ));
    }
    Ok(())
}

/// The next layer of the increment lattice: every count vector reachable in one step, sorted in
/// descending order (the order `binary_search_by(|x| c.cmp(x))` expects).
fn lattice_layer(layer: &[Vec<u32>], m: usize) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = layer
        .iter()
        .flat_map(|c| {
            (0..m).map(move |j| {
                let mut c = c.clone();
                c[j] += 1;
                c
            })
        })
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out.dedup();
    out
}
