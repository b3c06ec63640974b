//! Brute-force dynamic programming for small discrete Pandora's Box instances.
//!
//! The state is `(S, y)`: the set `S` of opened boxes and the best reward `y` seen so far (the
//! fallback `y₀` before anything is opened, or "nothing" when there is no fallback). Bellman:
//!
//! `V(S, y) = max( y, max_{i ∉ S} −E[Cᵢ] + Σⱼ pᵢⱼ V(S ∪ {i}, max(y, vᵢⱼ)) )`,
//!
//! where stopping (`y`) is only allowed once `y` is a real reward. Exponential in the number of
//! boxes: meant to verify [`Problem::weitzman`](super::Problem::weitzman).

use super::pandora::{Problem, Reward};
use crate::error::{Error, Result};
use std::collections::HashMap;

/// Largest number of boxes [`dp_optimum`] accepts.
pub const DP_MAX_BOXES: usize = 16;

/// The optimal expected net utility over **all** adaptive policies, by DP over
/// `(opened set, best reward)`. Needs discrete rewards and at most [`DP_MAX_BOXES`] boxes.
pub fn dp_optimum(problem: &Problem) -> Result<f64> {
    problem.validate()?;
    if problem.boxes.len() > DP_MAX_BOXES {
        return Err(Error::invalid(
            "boxes",
            format!("dynamic programming needs at most {DP_MAX_BOXES} boxes"),
        ));
    }
    let mut supp = Vec::with_capacity(problem.boxes.len());
    for (i, b) in problem.boxes.iter().enumerate() {
        match &b.reward {
            Reward::Discrete { values, probs } => supp.push((values.clone(), probs.clone())),
            Reward::Normal { mean, std } if *std == 0.0 => supp.push((vec![*mean], vec![1.0])),
            Reward::Normal { .. } => {
                return Err(Error::invalid(
                    format!("boxes[{i}].normal"),
                    "dynamic programming needs discrete rewards",
                ));
            }
        }
    }
    let costs: Vec<f64> = problem.boxes.iter().map(|b| b.cost.mean()).collect();
    let mut dp = Dp {
        supp,
        costs,
        memo: HashMap::new(),
    };
    let y0 = problem.fallback.unwrap_or(f64::NEG_INFINITY);
    Ok(dp.value(0, y0))
}

struct Dp {
    supp: Vec<(Vec<f64>, Vec<f64>)>,
    costs: Vec<f64>,
    memo: HashMap<(u32, u64), f64>,
}

impl Dp {
    fn value(&mut self, mask: u32, y: f64) -> f64 {
        if let Some(v) = self.memo.get(&(mask, y.to_bits())) {
            return *v;
        }
        let mut best = y; // −∞ when stopping is not allowed
        for i in 0..self.supp.len() {
            if mask & (1 << i) != 0 {
                continue;
            }
            let (vals, probs) = self.supp[i].clone();
            let mut q = -self.costs[i];
            for (v, p) in vals.iter().zip(&probs) {
                if *p > 0.0 {
                    q += p * self.value(mask | (1 << i), y.max(*v));
                }
            }
            best = best.max(q);
        }
        self.memo.insert((mask, y.to_bits()), best);
        best
    }
}
