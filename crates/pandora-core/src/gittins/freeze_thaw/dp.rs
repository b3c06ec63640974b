//! Brute-force dynamic programming over the joint state of all runs: the optimum over every
//! adaptive policy, and the exact value of the index policy, for small instances (the
//! references the index policy is verified against).

use super::{Action, FreezeThaw};
use crate::error::{Error, Result};
use std::collections::HashMap;

/// Most joint states [`FreezeThaw::dp_optimum`] explores (the product over runs of the states
/// reachable from each run's current one).
pub const DP_MAX_STATES: u64 = 2_000_000;

impl FreezeThaw {
    /// The optimal expected net utility over **all** adaptive policies, by dynamic programming
    /// over the joint state `(state of run 1, …, state of run K)`:
    ///
    /// `W(s) = max( y₀, max_{k: s_k complete} v(s_k), max_{k: s_k not complete} −c(s_k) +
    /// Σ p(s'|s_k) W(s with s_k ← s') )`,
    ///
    /// where `y₀` (stop and keep the fallback) is only there when the instance has a fallback.
    /// Exponential in the number of runs; refuses more than [`DP_MAX_STATES`] joint states.
    pub fn dp_optimum(&self) -> Result<f64> {
        let mut dp = Joint::new(self, None)?;
        Ok(dp.value(&self.start_states()))
    }

    /// The exact expected net utility of the index policy ([`FreezeThaw::action_at`] in every
    /// joint state), by the same recursion as [`FreezeThaw::dp_optimum`] with the policy's
    /// action in place of the maximum.
    pub fn dp_policy_value(&self, indices: &[Vec<f64>]) -> Result<f64> {
        let mut dp = Joint::new(self, Some(indices))?;
        Ok(dp.value(&self.start_states()))
    }

    fn start_states(&self) -> Vec<usize> {
        self.runs.iter().map(|r| r.at).collect()
    }
}

struct Joint<'a> {
    ft: &'a FreezeThaw,
    policy: Option<&'a [Vec<f64>]>,
    strides: Vec<u64>,
    memo: HashMap<u64, f64>,
}

impl<'a> Joint<'a> {
    fn new(ft: &'a FreezeThaw, policy: Option<&'a [Vec<f64>]>) -> Result<Self> {
        let mut reachable: u64 = 1;
        let mut strides = Vec::with_capacity(ft.runs.len());
        let mut stride: u64 = 1;
        for run in &ft.runs {
            let n = run.nodes.len() as u64;
            let r = (run.at..run.nodes.len()).count() as u64;
            reachable = reachable.saturating_mul(r);
            strides.push(stride);
            stride = stride.saturating_mul(n);
        }
        if reachable > DP_MAX_STATES || stride == u64::MAX {
            return Err(Error::invalid(
                "runs",
                format!(
                    "dynamic programming needs at most {DP_MAX_STATES} joint states, got \
                     {reachable}"
                ),
            ));
        }
        Ok(Joint {
            ft,
            policy,
            strides,
            memo: HashMap::new(),
        })
    }

    fn key(&self, states: &[usize]) -> u64 {
        states
            .iter()
            .zip(&self.strides)
            .map(|(&s, &m)| s as u64 * m)
            .sum()
    }

    fn value(&mut self, states: &[usize]) -> f64 {
        let key = self.key(states);
        if let Some(&v) = self.memo.get(&key) {
            return v;
        }
        let v = match self.policy {
            Some(indices) => {
                let action = self.ft.action_at(indices, states);
                self.action_value(states, action)
            }
            None => self.best(states),
        };
        self.memo.insert(key, v);
        v
    }

    fn best(&mut self, states: &[usize]) -> f64 {
        let mut best = self.ft.fallback.unwrap_or(f64::NEG_INFINITY);
        for k in 0..states.len() {
            let q = self.step_value(states, k);
            best = best.max(q);
        }
        best
    }

    fn action_value(&mut self, states: &[usize], action: Action) -> f64 {
        match action {
            Action::Stop { value } => value,
            Action::Select { run, .. } | Action::Start { run } | Action::Continue { run } => {
                self.step_value(states, run)
            }
        }
    }

    /// Select run `k` if it is complete, else step it on.
    fn step_value(&mut self, states: &[usize], k: usize) -> f64 {
        let node = &self.ft.runs[k].nodes[states[k]];
        if node.is_complete() {
            return node.value.expect("complete");
        }
        let mut q = -node.cost;
        let mut next = states.to_vec();
        for &(v, p) in &node.next {
            if p > 0.0 {
                next[k] = v;
                q += p * self.value(&next);
            }
        }
        q
    }
}
