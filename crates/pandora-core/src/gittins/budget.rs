//! The expected-budget constraint (Theorem 2 of the PBGI paper).
//!
//! Maximize `E[max reward collected]` over adaptive policies subject to `E[total cost] ≤ B`. For a
//! multiplier `λ > 0`, Weitzman's policy with costs `λ·cᵢ` maximizes the Lagrangian
//! `E[reward] − λ·E[cost]`; its expected cost `C(λ)` is non-increasing in `λ`. At the `λ*` where
//! `C` crosses `B`, the two limiting policies (`λ*⁻`, spending `C⁻ ≥ B`, and `λ*⁺`, spending
//! `C⁺ ≤ B`) are both Lagrangian-optimal, and following the first with probability
//! `q = (B − C⁺)/(C⁻ − C⁺)` — the randomized tie-breaking — spends exactly `B`. By weak duality
//! every policy with `E[cost] ≤ B` has `E[reward] ≤ L(λ*) + λ*B`, which the mixture attains, so it
//! is optimal.

use super::pandora::{Problem, WeitzmanPolicy};
use crate::error::{Error, Result};

/// The solution of the expected-budget problem.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetSolution {
    /// The multiplier `λ*` (upper end of the final bracket).
    pub lambda: f64,
    /// Weitzman's policy at `λ*⁻` (costs `λ·c` on the original instance), spending `≥ B`.
    pub expensive: WeitzmanPolicy,
    /// Weitzman's policy at `λ*⁺`, spending `≤ B`.
    pub cheap: WeitzmanPolicy,
    /// Probability `q` of following `expensive` (decided once, before the first box).
    pub mix: f64,
    /// `E[total cost]` of the mixture in the original costs (`= B` when the budget binds).
    pub expected_cost: f64,
    /// `E[max reward collected]` of the mixture: the optimal value under the budget.
    pub expected_reward: f64,
    /// `false` when even `λ = λ_min` spends less than `B` (the budget does not bind).
    pub binding: bool,
}

/// Smallest multiplier tried; below it the budget is reported as not binding.
pub const LAMBDA_MIN: f64 = 1e-9;
/// Largest multiplier tried; if even it spends more than `B` the budget is infeasible.
pub const LAMBDA_MAX: f64 = 1e12;

/// `(policy, E[cost] in original units)` of Weitzman's policy with costs `λ·c`.
fn at(problem: &Problem, lambda: f64) -> Result<(WeitzmanPolicy, f64)> {
    let pol = problem.with_scaled_costs(lambda).weitzman()?;
    let cost = pol
        .open_probs
        .iter()
        .zip(&problem.boxes)
        .map(|(p, b)| p * b.cost.mean())
        .sum();
    Ok((pol, cost))
}

/// Solve the expected-budget problem by bisection on `log λ` in `[LAMBDA_MIN, LAMBDA_MAX]` down
/// to relative width `1e-15`, then mix the two bracketing policies to spend exactly `budget`.
pub fn solve_budget(problem: &Problem, budget: f64) -> Result<BudgetSolution> {
    problem.validate()?;
    if !(budget.is_finite() && budget >= 0.0) {
        return Err(Error::invalid(
            "budget",
            format!("must be finite and non-negative, got {budget}"),
        ));
    }
    let (pol_lo, c_lo) = at(problem, LAMBDA_MIN)?;
    if c_lo <= budget {
        return Ok(BudgetSolution {
            lambda: LAMBDA_MIN,
            expensive: pol_lo.clone(),
            expected_reward: pol_lo.expected_reward,
            cheap: pol_lo,
            mix: 0.0,
            expected_cost: c_lo,
            binding: false,
        });
    }
    let (pol_hi, c_hi) = at(problem, LAMBDA_MAX)?;
    if c_hi > budget {
        return Err(Error::invalid(
            "budget",
            format!("infeasible: the cheapest index policy spends {c_hi} > {budget}"),
        ));
    }
    let (mut lo, mut hi) = (LAMBDA_MIN, LAMBDA_MAX);
    let (mut lo_state, mut hi_state) = ((pol_lo, c_lo), (pol_hi, c_hi));
    for _ in 0..400 {
        let mid = (lo * hi).sqrt();
        if !(mid > lo && mid < hi) || hi - lo <= 1e-15 * hi {
            break;
        }
        let st = at(problem, mid)?;
        if st.1 > budget {
            lo = mid;
            lo_state = st;
        } else {
            hi = mid;
            hi_state = st;
        }
    }
    let ((expensive, c_e), (cheap, c_c)) = (lo_state, hi_state);
    let mix = if c_e > c_c {
        ((budget - c_c) / (c_e - c_c)).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Ok(BudgetSolution {
        lambda: hi,
        expected_cost: mix * c_e + (1.0 - mix) * c_c,
        expected_reward: mix * expensive.expected_reward + (1.0 - mix) * cheap.expected_reward,
        expensive,
        cheap,
        mix,
        binding: true,
    })
}
