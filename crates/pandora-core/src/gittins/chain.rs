//! Markov chain selection and the Gittins index of a Markov chain via its local MDP.
//!
//! A Markov chain `(S, ∂S, r, p)` has finitely many states; terminal states `∂S` absorb. Advancing
//! a non-terminal state `s` earns `r(s)` and moves to `s' ~ p(·|s)`. In **Markov chain
//! selection** the decision maker repeatedly advances one of several independent chains; the
//! process ends as soon as any chain reaches a terminal state (undiscounted).
//!
//! The `(s, α)`-**local MDP** adds a one-shot alternative: in every non-terminal state one may
//! *stop* (collect `α`, end) or *go* (collect `r(s)`, move on); a terminal state is worth `0`:
//!
//! `V_α(s) = max(α, r(s) + Σ_{s'} p(s'|s) V_α(s'))`, `V_α = 0` on `∂S`.
//!
//! The **Gittins index** `G(s)` is the `α` at which stop and go are co-optimal at `s`:
//! `G(s) = r(s) + Σ_{s'} p(s'|s) V_G(s')` (`+∞` if go is strictly better for every `α`). The
//! difference `d(α) = r(s) + Σ p V_α − α` is convex, piecewise linear and non-increasing, so
//! [`MarkovChain::gittins_indices`] brackets its root, bisects with exact policy-iteration solves
//! of the local MDP, and finishes with a secant step on the final linear piece. Choosing the chain
//! whose current state has the largest index is optimal ([`index_policy_value`] evaluates that
//! policy, [`selection_optimum`] brute-forces the product MDP).
//!
//! Pandora's Box is the special case [`MarkovChain::pandora_box`]: a closed box (reward `−c`)
//! moves to an open state with reward `v` (index `v`), which then terminates; its closed-state
//! index solves `E[max(X − g, 0)] = c`. A fallback `y₀` is the one-state chain
//! [`MarkovChain::fallback`] (index `y₀`).

#![allow(clippy::needless_range_loop)] // dense index arithmetic reads clearer with indices

use crate::error::{Error, Result};
use std::collections::HashMap;

/// A finite Markov chain with rewards and absorbing terminal states.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkovChain {
    /// `rewards[s] = r(s)`, earned when advancing non-terminal `s` (ignored for terminal states).
    pub rewards: Vec<f64>,
    /// `transitions[s][s'] = p(s'|s)`: rows of non-terminal states sum to 1; terminal rows ignored.
    pub transitions: Vec<Vec<f64>>,
    /// `terminal[s]`: whether `s ∈ ∂S`.
    pub terminal: Vec<bool>,
}

impl MarkovChain {
    /// Validate and build a chain. Every non-terminal state must be able to reach a terminal state
    /// (so the local MDP is well posed).
    pub fn new(rewards: Vec<f64>, transitions: Vec<Vec<f64>>, terminal: Vec<bool>) -> Result<Self> {
        let c = MarkovChain {
            rewards,
            transitions,
            terminal,
        };
        c.validate()?;
        Ok(c)
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// `true` for a chain without states (never valid).
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Check shapes, probabilities and reachability of `∂S`.
    pub fn validate(&self) -> Result<()> {
        let n = self.rewards.len();
        if n == 0 {
            return Err(Error::invalid(
                "rewards",
                "a chain needs at least one state",
            ));
        }
        if self.transitions.len() != n {
            return Err(Error::dim("transitions", n, self.transitions.len()));
        }
        if self.terminal.len() != n {
            return Err(Error::dim("terminal", n, self.terminal.len()));
        }
        for s in 0..n {
            if self.terminal[s] {
                continue;
            }
            if !self.rewards[s].is_finite() {
                return Err(Error::invalid(format!("rewards[{s}]"), "must be finite"));
            }
            let row = &self.transitions[s];
            if row.len() != n {
                return Err(Error::dim(format!("transitions[{s}]"), n, row.len()));
            }
            if row.iter().any(|p| !(p.is_finite() && *p >= 0.0)) {
                return Err(Error::invalid(
                    format!("transitions[{s}]"),
                    "probabilities must be finite and non-negative",
                ));
            }
            let sum: f64 = row.iter().sum();
            if (sum - 1.0).abs() > 1e-9 {
                return Err(Error::invalid(
                    format!("transitions[{s}]"),
                    format!("must sum to 1, got {sum}"),
                ));
            }
        }
        // Backward reachability of ∂S.
        let mut reach = self.terminal.clone();
        loop {
            let mut changed = false;
            for s in 0..n {
                if !reach[s] && (0..n).any(|t| reach[t] && self.transitions[s][t] > 0.0) {
                    reach[s] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if let Some(s) = reach.iter().position(|r| !r) {
            return Err(Error::invalid(
                format!("transitions[{s}]"),
                "state cannot reach a terminal state",
            ));
        }
        Ok(())
    }

    /// The Pandora box chain: state 0 is the closed box (reward `−cost`), state `1 + j` the open
    /// box showing `values[j]` (reached with `probs[j]`, reward `values[j]`), the last state is
    /// terminal.
    pub fn pandora_box(values: &[f64], probs: &[f64], cost: f64) -> Result<Self> {
        let m = values.len();
        if m != probs.len() {
            return Err(Error::dim("probs", m, probs.len()));
        }
        if !cost.is_finite() {
            return Err(Error::invalid("cost", "must be finite"));
        }
        let n = m + 2;
        let mut rewards = vec![0.0; n];
        let mut transitions = vec![vec![0.0; n]; n];
        let mut terminal = vec![false; n];
        rewards[0] = -cost;
        for j in 0..m {
            transitions[0][1 + j] = probs[j];
            rewards[1 + j] = values[j];
            transitions[1 + j][n - 1] = 1.0;
        }
        terminal[n - 1] = true;
        MarkovChain::new(rewards, transitions, terminal)
    }

    /// The fallback chain: one state with reward `y0` followed by a terminal state (index `y0`).
    pub fn fallback(y0: f64) -> Result<Self> {
        MarkovChain::new(
            vec![y0, 0.0],
            vec![vec![0.0, 1.0], vec![0.0, 1.0]],
            vec![false, true],
        )
    }

    /// `V_α` of the local MDP (all states; `0` on `∂S`), by policy iteration with exact linear
    /// solves.
    pub fn local_values(&self, alpha: f64) -> Result<Vec<f64>> {
        self.validate()?;
        Ok(self.local_values_unchecked(alpha))
    }

    fn local_values_unchecked(&self, alpha: f64) -> Vec<f64> {
        let n = self.len();
        let mut go = vec![false; n];
        let mut v: Vec<f64> = (0..n)
            .map(|s| if self.terminal[s] { 0.0 } else { alpha })
            .collect();
        for _ in 0..(4 * n + 8) {
            let mut changed = false;
            for s in 0..n {
                if self.terminal[s] {
                    continue;
                }
                let q = self.q_go(&v, s);
                let tol = 1e-12 * (1.0 + v[s].abs());
                if !go[s] && q > v[s] + tol {
                    go[s] = true;
                    changed = true;
                } else if go[s] && q < alpha - tol {
                    go[s] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
            v = self.evaluate(&go, alpha);
        }
        v
    }

    fn q_go(&self, v: &[f64], s: usize) -> f64 {
        self.rewards[s]
            + self.transitions[s]
                .iter()
                .zip(v)
                .map(|(p, x)| p * x)
                .sum::<f64>()
    }

    /// Value of the stationary policy "go on `go`, stop elsewhere": solve
    /// `(I − P_GG) V_G = r_G + α P_{G,stop} 1`.
    fn evaluate(&self, go: &[bool], alpha: f64) -> Vec<f64> {
        let n = self.len();
        let idx: Vec<usize> = (0..n).filter(|&s| go[s] && !self.terminal[s]).collect();
        let k = idx.len();
        let mut a = vec![vec![0.0; k + 1]; k];
        for (r, &s) in idx.iter().enumerate() {
            a[r][r] = 1.0;
            let mut rhs = self.rewards[s];
            for t in 0..n {
                let p = self.transitions[s][t];
                if p == 0.0 || self.terminal[t] {
                    continue;
                }
                if go[t] {
                    let c = idx.binary_search(&t).expect("in go set");
                    a[r][c] -= p;
                } else {
                    rhs += p * alpha;
                }
            }
            a[r][k] = rhs;
        }
        let x = solve_augmented(a);
        let mut v = vec![0.0; n];
        for s in 0..n {
            if !self.terminal[s] {
                v[s] = alpha;
            }
        }
        for (r, &s) in idx.iter().enumerate() {
            v[s] = x[r];
        }
        v
    }

    /// Gittins index of every state (`None` for terminal states; `Some(+∞)` when go beats every
    /// alternative).
    pub fn gittins_indices(&self) -> Result<Vec<Option<f64>>> {
        self.validate()?;
        Ok((0..self.len())
            .map(|s| (!self.terminal[s]).then(|| self.index_of(s)))
            .collect())
    }

    fn index_of(&self, s: usize) -> f64 {
        let scale = 1.0
            + self
                .rewards
                .iter()
                .zip(&self.terminal)
                .filter(|(_, t)| !**t)
                .map(|(r, _)| r.abs())
                .fold(0.0, f64::max);
        // d(α) with rounding noise (row sums are 1 only to a few ulps) flushed to zero.
        let d = |a: f64| {
            let x = self.q_go(&self.local_values_unchecked(a), s) - a;
            if x.abs() <= 1e-13 * (scale + a.abs()) {
                0.0
            } else {
                x
            }
        };
        let (mut lo, mut hi) = (-scale, scale);
        while d(lo) <= 0.0 {
            lo *= 2.0;
            if lo < -1e300 {
                return f64::NEG_INFINITY;
            }
        }
        while d(hi) > 0.0 {
            hi *= 2.0;
            if hi > 1e18 * scale {
                return f64::INFINITY;
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if d(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-13 * (1.0 + lo.abs().max(hi.abs())) {
                break;
            }
        }
        // d is linear on a narrow bracket unless a kink sits inside: one secant step.
        let (dl, dh) = (d(lo), d(hi));
        if dl > dh {
            let x = lo + dl * (hi - lo) / (dl - dh);
            if (lo..=hi).contains(&x) {
                return x;
            }
        }
        0.5 * (lo + hi)
    }
}

/// Gaussian elimination with partial pivoting on an augmented `k × (k+1)` system.
fn solve_augmented(mut a: Vec<Vec<f64>>) -> Vec<f64> {
    let k = a.len();
    for c in 0..k {
        let piv = (c..k)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .expect("non-empty");
        a.swap(c, piv);
        let d = a[c][c];
        for r in 0..k {
            if r != c && a[r][c] != 0.0 {
                let f = a[r][c] / d;
                for j in c..=k {
                    a[r][j] -= f * a[c][j];
                }
            }
        }
    }
    (0..k).map(|r| a[r][k] / a[r][r]).collect()
}

/// Gittins indices of several chains (see [`MarkovChain::gittins_indices`]).
pub fn all_indices(chains: &[MarkovChain]) -> Result<Vec<Vec<Option<f64>>>> {
    chains.iter().map(|c| c.gittins_indices()).collect()
}

/// The Gittins index policy: the chain whose current state has the largest index (ties: the
/// lowest chain number), or `None` if some chain is in a terminal state (the process is over).
pub fn index_policy_choice(indices: &[Vec<Option<f64>>], states: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, (&s, idx)) in states.iter().zip(indices).enumerate() {
        let g = idx[s]?;
        if best.is_none_or(|(_, b)| g > b) {
            best = Some((i, g));
        }
    }
    best.map(|(i, _)| i)
}

fn check_selection(chains: &[MarkovChain], start: &[usize]) -> Result<()> {
    if chains.is_empty() {
        return Err(Error::invalid("chains", "must not be empty"));
    }
    if start.len() != chains.len() {
        return Err(Error::dim("start", chains.len(), start.len()));
    }
    for (i, (c, &s)) in chains.iter().zip(start).enumerate() {
        c.validate()
            .map_err(|e| Error::invalid(format!("chains[{i}]"), e.to_string()))?;
        if s >= c.len() {
            return Err(Error::invalid(
                format!("start[{i}]"),
                format!("state {s} out of range"),
            ));
        }
        if !is_acyclic(c) {
            return Err(Error::invalid(
                format!("chains[{i}]"),
                "exact selection values need acyclic chains",
            ));
        }
    }
    Ok(())
}

fn is_acyclic(c: &MarkovChain) -> bool {
    // Kahn's algorithm on the support graph of non-terminal states.
    let n = c.len();
    let mut indeg = vec![0usize; n];
    for s in 0..n {
        if c.terminal[s] {
            continue;
        }
        for t in 0..n {
            if c.transitions[s][t] > 0.0 && !c.terminal[t] {
                indeg[t] += 1;
            }
        }
    }
    let mut stack: Vec<usize> = (0..n)
        .filter(|&s| !c.terminal[s] && indeg[s] == 0)
        .collect();
    let mut seen = 0;
    while let Some(s) = stack.pop() {
        seen += 1;
        for t in 0..n {
            if c.transitions[s][t] > 0.0 && !c.terminal[t] {
                indeg[t] -= 1;
                if indeg[t] == 0 {
                    stack.push(t);
                }
            }
        }
    }
    seen == c.terminal.iter().filter(|t| !**t).count()
}

/// Optimal expected total reward of Markov chain selection from `start`, by brute-force dynamic
/// programming over the product state space: `W(s) = max_a r_a(s_a) + Σ p_a(s'|s_a) W(s with
/// s_a ← s')`, `W = 0` once any chain is terminal. Needs acyclic chains.
pub fn selection_optimum(chains: &[MarkovChain], start: &[usize]) -> Result<f64> {
    check_selection(chains, start)?;
    let mut memo = HashMap::new();
    Ok(product_value(chains, start.to_vec(), None, &mut memo))
}

/// Expected total reward of the Gittins index policy ([`index_policy_choice`]) from `start`.
/// Needs acyclic chains.
pub fn index_policy_value(chains: &[MarkovChain], start: &[usize]) -> Result<f64> {
    check_selection(chains, start)?;
    let idx = all_indices(chains)?;
    let mut memo = HashMap::new();
    Ok(product_value(chains, start.to_vec(), Some(&idx), &mut memo))
}

fn product_value(
    chains: &[MarkovChain],
    states: Vec<usize>,
    policy: Option<&[Vec<Option<f64>>]>,
    memo: &mut HashMap<Vec<usize>, f64>,
) -> f64 {
    if states.iter().zip(chains).any(|(&s, c)| c.terminal[s]) {
        return 0.0;
    }
    if let Some(v) = memo.get(&states) {
        return *v;
    }
    let arms: Vec<usize> = match policy {
        Some(idx) => index_policy_choice(idx, &states).into_iter().collect(),
        None => (0..chains.len()).collect(),
    };
    let mut best = f64::NEG_INFINITY;
    for a in arms {
        let c = &chains[a];
        let s = states[a];
        let mut q = c.rewards[s];
        for (t, &p) in c.transitions[s].iter().enumerate() {
            if p > 0.0 {
                let mut next = states.clone();
                next[a] = t;
                q += p * product_value(chains, next, policy, memo);
            }
        }
        best = best.max(q);
    }
    memo.insert(states, best);
    best
}
