//! Cost-aware freeze-thaw, discrete and exact: which training run to start, continue, pause or
//! keep, by Gittins indices, with the optimality of the index policy checked against brute force.
//!
//! # Setting
//! Training runs proceed step by step (epochs, training-set sizes). Each step of a run costs
//! something (time, money), and after each step the run's current value (validation accuracy,
//! negative loss) is observed. The goal of the tutorial's *cost-aware freeze-thaw* problem
//! (Gittins index tutorial slides, "Back to our motivating application") is
//!
//! `max E[ value of the run kept − Σ costs of all steps taken ]`
//!
//! (the Lagrangian, cost-per-sample form; costs are in the value's units, i.e. already multiplied
//! by λ, as in PBGI). A run can be paused after any step and resumed later at no extra cost
//! (freeze-thaw); a run that is never resumed is dropped.
//!
//! # Runs as Markov chains
//! A run is a [`CurveRun`]: a finite acyclic Markov chain over learning-curve states. A state that
//! is not **complete** has a step cost `c(s)` and a distribution over the states the next step
//! leads to (the belief about the curve's next value given the curve so far). A complete state
//! (the run is trained to the end) has a value `v(s)` that can be kept. In Markov chain terms
//! ([`super::chain`]) a state that is not complete earns `−c(s)` when advanced; a complete state
//! earns `v(s)` and moves to the absorbing state: keeping a run ends the study, as opening the
//! box with the best reward does in Pandora's Box. "Start a new configuration" is advancing a run
//! from its first state, a Pandora's box whose opening is a whole chain (a closed box is the
//! one-step case, see the tests). A fallback `y₀` (a result already in hand) is the one-state
//! chain of index `y₀`. With these definitions the instance is **Markov chain selection**, and
//! the Gittins index policy is optimal (Gittins 1979; Dumitriu, Tetali and Winkler 2003, "On
//! playing golf with two balls"; the tutorial's "Markov chain selection" slides).
//!
//! # The index
//! The `(s, α)`-local MDP may stop in any state and collect `α`, or step on:
//! `V_α(u) = max(α, −c(u) + Σ p(u'|u) V_α(u'))`, `V_α(u) = max(α, v(u))` for complete `u`. The
//! Gittins index `G(s)` is the smallest `α` at which stopping is optimal in `s`:
//! the root of `d(α) = −c(s) + Σ p V_α − α`, which is non-increasing and piecewise affine in `α`.
//! For a complete state `G = v`. [`CurveRun::indices`] computes every index of a run in one
//! backward pass over its states (`local.rs`): each `α ↦ V_α(u)` is convex and piecewise linear,
//! kept as its breakpoints, and `d` is affine between breakpoints, so each root is exact on its
//! linear piece (no bisection, no tolerance).
//!
//! # The policy and its value
//! [`FreezeThaw::action_at`]: take the largest current index; if it belongs to a complete run,
//! keep that run (the study ends); if the fallback's `y₀` is at least every index, stop; else
//! step that run on ("start" if it has not been observed yet, "continue" otherwise; every other
//! run stays paused). Its expected utility follows without exploring joint states, by the
//! amortization of Kleinberg, Waggoner and Weyl (2016, "Descending price auctions and Pandora's
//! box") carried to chains: let `κ_k` be the smallest index on run `k`'s path from its current
//! state to completion when it is advanced alone; then the index policy earns
//! `E[max(y₀, κ₁, …, κ_K)]` ([`FreezeThaw::policy_value`]). The `κ_k` are independent and
//! discrete, so this is a sorted sweep over their supports.
//!
//! # Verification
//! [`FreezeThaw::dp_optimum`] maximizes over all policies by dynamic programming over the joint
//! state (exponential in the number of runs), [`FreezeThaw::dp_policy_value`] evaluates the index
//! policy the same way, and [`CurveRun::to_chain`] hands a run to the generic local-MDP solver of
//! [`super::chain`] (policy iteration, an independent index computation). The tests check on
//! random instances that all four agree to 1e-9.
//!
//! # Degenerate cases and limits
//! - Free steps: if every step after `s` costs nothing, `G(s)` is the largest complete value
//!   reachable from `s` (training on costs nothing and `α` can still be taken at the end).
//! - A run whose states are all worth less than their costs has an index below every value
//!   (negative utility of stepping on); with a fallback the policy stops.
//! - Keeping a run is only possible once it is complete: a run's value can be kept only at the
//!   end of its training (a model trained to the end). Allowing a run to be kept at any step
//!   makes each run a superprocess, and the index policy is then not optimal in general (it
//!   contains Pandora's Box with nonobligatory inspection, Doval 2018).
//! - Ties: the lowest-numbered run wins, and stopping wins over stepping on; any tie-breaking is
//!   optimal.
//! - From a Gaussian model: [`CurveRun::gaussian`] turns the predicted final value of a run
//!   under a Gaussian learning-curve model into such a chain (the posterior mean of the final
//!   value is a Gaussian martingale; see `gaussian.rs`).
//! - At most [`MAX_RUN_NODES`] states per run; [`DP_MAX_STATES`] joint states for the DP.

mod curve;
mod dp;
pub mod format;
mod gaussian;
mod local;

pub use curve::{CurveNode, CurveRun, MAX_RUN_NODES};
pub use dp::DP_MAX_STATES;
pub use gaussian::check_grid;

use crate::error::{Error, Result};

/// A discrete freeze-thaw instance: the runs (started, paused or not yet started) and an
/// optional fallback value already in hand.
#[derive(Debug, Clone, PartialEq)]
pub struct FreezeThaw {
    /// The runs, each in its current state.
    runs: Vec<CurveRun>,
    /// Value that can be kept by stopping without any further step.
    fallback: Option<f64>,
}

/// What the index policy does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Take the first step of run `run` (it has not been observed yet).
    Start {
        /// The run.
        run: usize,
    },
    /// Take one more step of run `run` (paused or running); every other run stays paused.
    Continue {
        /// The run.
        run: usize,
    },
    /// Keep run `run`, which is complete, and end the study.
    Select {
        /// The run.
        run: usize,
        /// Its value.
        value: f64,
    },
    /// Stop and keep the fallback.
    Stop {
        /// The fallback value.
        value: f64,
    },
}

/// The index policy's decision in an instance's current state.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The index of every state of every run (`indices[k][s]`).
    pub indices: Vec<Vec<f64>>,
    /// The next action.
    pub action: Action,
    /// The exact expected net utility of following the index policy from here.
    pub expected_utility: f64,
}

impl FreezeThaw {
    /// Validate and build an instance. It needs at least one run or a fallback.
    pub fn new(runs: Vec<CurveRun>, fallback: Option<f64>) -> Result<Self> {
        for (k, run) in runs.iter().enumerate() {
            run.validate()
                .map_err(|e| e.within(format_args!("runs[{k}]")))?;
        }
        if let Some(y) = fallback
            && !y.is_finite()
        {
            return Err(Error::invalid("fallback", "must be finite"));
        }
        if runs.is_empty() && fallback.is_none() {
            return Err(Error::invalid(
                "runs",
                "need at least one run or a fallback",
            ));
        }
        Ok(FreezeThaw { runs, fallback })
    }

    /// The runs, each in its current state.
    pub fn runs(&self) -> &[CurveRun] {
        &self.runs
    }

    /// The value that can be kept by stopping without any further step.
    pub fn fallback(&self) -> Option<f64> {
        self.fallback
    }

    /// The index of every state of every run.
    pub fn indices(&self) -> Vec<Vec<f64>> {
        self.runs.iter().map(CurveRun::indices).collect()
    }

    /// Indices, the next action and the policy's expected utility.
    pub fn decide(&self) -> Decision {
        let indices = self.indices();
        let states: Vec<usize> = self.runs.iter().map(|r| r.at).collect();
        let action = self.action_at(&indices, &states);
        let expected_utility = self.policy_value(&indices);
        Decision {
            indices,
            action,
            expected_utility,
        }
    }

    /// The index policy's action when run `k` is in state `states[k]`.
    pub fn action_at(&self, indices: &[Vec<f64>], states: &[usize]) -> Action {
        let mut best: Option<(usize, f64)> = None;
        for (k, (&s, idx)) in states.iter().zip(indices).enumerate() {
            if best.is_none_or(|(_, g)| idx[s] > g) {
                best = Some((k, idx[s]));
            }
        }
        match (best, self.fallback) {
            (Some((_, g)), Some(y)) if y >= g => Action::Stop { value: y },
            (None, Some(y)) => Action::Stop { value: y },
            (Some((k, _)), _) => {
                let node = &self.runs[k].nodes[states[k]];
                match node.value {
                    Some(value) if node.is_complete() => Action::Select { run: k, value },
                    Some(_) => Action::Continue { run: k },
                    None => Action::Start { run: k },
                }
            }
            (None, None) => unreachable!("validated: a run or a fallback"),
        }
    }

    /// The exact expected net utility of the index policy from the current states,
    /// `E[max(y₀, κ₁, …, κ_K)]` where `κ_k` is the smallest index on run `k`'s path to completion
    /// (see the module doc). `indices` as from [`FreezeThaw::indices`].
    pub fn policy_value(&self, indices: &[Vec<f64>]) -> f64 {
        let kappas: Vec<Vec<(f64, f64)>> = self
            .runs
            .iter()
            .zip(indices)
            .map(|(run, g)| prevailing_distribution(run, g))
            .collect();
        expected_max(&kappas, self.fallback)
    }
}

/// `E[max(y₀, κ₁, …, κ_K)]` for independent discrete `κ_k` (each sorted, distinct values), as
/// `Σ_x x (F(x) − F(x⁻))` with `F = Π_k F_k` maintained over one sorted sweep of all atoms
/// (`F` is 0 below `y₀`).
fn expected_max(kappas: &[Vec<(f64, f64)>], fallback: Option<f64>) -> f64 {
    let mut events: Vec<(f64, usize, f64)> = kappas
        .iter()
        .enumerate()
        .flat_map(|(k, d)| d.iter().map(move |&(x, p)| (x, k, p)))
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let y0 = fallback.unwrap_or(f64::NEG_INFINITY);
    let mut points: Vec<f64> = events.iter().map(|e| e.0).filter(|&x| x > y0).collect();
    if let Some(y) = fallback {
        points.insert(0, y);
    }
    points.dedup();
    // F_k, the product of the non-zero ones and how many are zero.
    let mut f = vec![0.0; kappas.len()];
    let (mut product, mut zeros) = (1.0, kappas.len());
    let (mut next, mut prev, mut e) = (0, 0.0, 0.0);
    for &x in &points {
        while next < events.len() && events[next].0 <= x {
            let (_, k, p) = events[next];
            let old = f[k];
            f[k] += p;
            if old == 0.0 {
                zeros -= 1;
                product *= f[k];
            } else {
                product *= f[k] / old;
            }
            next += 1;
        }
        let big_f = if zeros == 0 { product } else { 0.0 };
        e += x * (big_f - prev);
        prev = big_f;
    }
    e
}

/// The distribution of `κ`, the smallest index on the run's path from its current state to a
/// complete state, as `(value, probability)` pairs with distinct values.
fn prevailing_distribution(run: &CurveRun, g: &[f64]) -> Vec<(f64, f64)> {
    let n = run.nodes.len();
    let mut at: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n];
    at[run.at].push((g[run.at], 1.0));
    let mut out = Vec::new();
    for u in run.at..n {
        let here = merge(std::mem::take(&mut at[u]));
        if run.nodes[u].is_complete() {
            out.extend(here);
            continue;
        }
        for &(v, p) in &run.nodes[u].next {
            if p > 0.0 {
                at[v].extend(here.iter().map(|&(m, q)| (m.min(g[v]), q * p)));
            }
        }
    }
    merge(out)
}

/// Sort by value and add up the probabilities of equal values.
fn merge(mut d: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    d.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(d.len());
    for (x, p) in d {
        match out.last_mut() {
            Some(last) if last.0 == x => last.1 += p,
            _ => out.push((x, p)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
