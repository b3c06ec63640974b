//! A run whose final value is predicted by a Gaussian model, as a discrete chain: the bridge
//! from a learning-curve GP ([`crate::gp::learning_curve`]) to the exact index.
//!
//! If a run's values are jointly Gaussian (as under the learning-curve GP with fixed
//! hyperparameters), the posterior mean `μ_t` of its final value after `t` more steps is a
//! Gaussian martingale: `μ_{t+1} | μ_t ~ N(μ_t, s_t²)`, where `s_t² = Var_t(y_T) − Var_{t+1}(y_T)`
//! is the variance of the final value that observing step `t + 1` removes. Those variances depend
//! only on *where* the run will be observed, not on the values seen, so they are known in
//! advance. The state `(t, μ_t)` is therefore an exact Markov summary of the run for the purpose
//! of its final value, however long its curve: at the last step, `μ_T` is the value kept.
//!
//! [`CurveRun::gaussian`] discretizes that martingale: after `k` steps `μ` lives on `points`
//! equally spaced values covering `±4.5` standard deviations of its marginal `N(μ₀, V_k)`,
//! `V_k = Σ_{j<k} s_j²`; a step moves a grid value `a` to the cells of the next grid with the
//! probabilities of `N(a, s_k²)` (cell boundaries at midpoints, the tails lumped into the end
//! cells). A step that removes no variance keeps `μ` (nearest grid point). The chain is a layered
//! acyclic graph with `1 + T·points` states, so its indices come from the exact backward pass.
//!
//! Accuracy: the discretization error of an index shrinks with the grid spacing (`9σ/points`);
//! with one informative step it is the Pandora's box index `σ h((μ − g)/σ) = c` of PBGI, to
//! about `10⁻³ σ` with 201 points (tested). Degenerate cases: no steps (a complete run, index
//! `μ₀`); no variance at all (index `μ₀ − Σ c`).

use super::curve::{CurveNode, CurveRun, MAX_RUN_NODES};
use crate::error::{Error, Result};
use crate::math::norm_cdf;

/// Half-width of a grid in standard deviations of its marginal.
const GRID_HALF_WIDTH: f64 = 4.5;

impl CurveRun {
    /// The discretized Gaussian martingale of a run's predicted final value (see the module
    /// doc): `mean` is the current prediction `μ₀`, `variance_drops[t]` the variance of the final
    /// value removed by step `t + 1`, `step_costs[t]` its cost; `points` grid values per step
    /// (odd, 3 to 1001). `started` says whether the run has been observed already (its action
    /// is then "continue", else "start"). The state values are predictions of the final value,
    /// not the curve's own values.
    pub fn gaussian(
        mean: f64,
        variance_drops: &[f64],
        step_costs: &[f64],
        points: usize,
        started: bool,
    ) -> Result<Self> {
        check_gaussian(mean, variance_drops, step_costs, points)?;
        let steps = step_costs.len();
        let mut nodes = vec![CurveNode {
            value: (started || steps == 0).then_some(mean),
            cost: step_costs.first().copied().unwrap_or(0.0),
            next: Vec::new(),
        }];
        let mut grid = vec![mean];
        let mut first = 0;
        let mut cumulative = 0.0;
        for (t, &drop) in variance_drops.iter().enumerate() {
            cumulative += drop;
            let next_grid = grid_at(mean, cumulative, points);
            let base = first + grid.len();
            let s = drop.sqrt();
            for (i, &a) in grid.iter().enumerate() {
                nodes[first + i].next = transitions(a, s, &next_grid)
                    .into_iter()
                    .map(|(j, p)| (base + j, p))
                    .collect();
            }
            let cost = step_costs.get(t + 1).copied().unwrap_or(0.0);
            nodes.extend(next_grid.iter().map(|&v| CurveNode {
                value: Some(v),
                cost,
                next: Vec::new(),
            }));
            first = base;
            grid = next_grid;
        }
        CurveRun::new(nodes, 0)
    }
}

fn check_gaussian(mean: f64, drops: &[f64], costs: &[f64], points: usize) -> Result<()> {
    if !mean.is_finite() {
        return Err(Error::invalid("mean", "must be finite"));
    }
    if drops.len() != costs.len() {
        return Err(Error::dim("variance_drops", costs.len(), drops.len()));
    }
    if let Some(t) = drops.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(Error::invalid(
            format!("variance_drops[{t}]"),
            "must be finite and ≥ 0",
        ));
    }
    if let Some(t) = costs.iter().position(|c| !(c.is_finite() && *c >= 0.0)) {
        return Err(Error::invalid(
            format!("step_costs[{t}]"),
            "must be finite and ≥ 0",
        ));
    }
    check_grid("points", costs.len(), points)
}

/// Checks a grid of `points` values per step for a chain of `steps` steps (odd, 3 to 1001, at
/// most [`MAX_RUN_NODES`] states in all); errors name the field `what`.
pub fn check_grid(what: &str, steps: usize, points: usize) -> Result<()> {
    if !(3..=1001).contains(&points) || points.is_multiple_of(2) {
        return Err(Error::invalid(
            what,
            format!("must be odd, from 3 to 1001, got {points}"),
        ));
    }
    if 1 + steps.saturating_mul(points) > MAX_RUN_NODES {
        return Err(Error::invalid(
            what,
            format!("{steps} steps × {points} points is more than {MAX_RUN_NODES} states"),
        ));
    }
    Ok(())
}

/// The grid of `μ` after the steps whose variance drops add up to `variance`.
fn grid_at(mean: f64, variance: f64, points: usize) -> Vec<f64> {
    if variance <= 0.0 {
        return vec![mean];
    }
    let sd = variance.sqrt();
    let h = 2.0 * GRID_HALF_WIDTH / (points - 1) as f64;
    (0..points)
        .map(|i| mean + sd * (-GRID_HALF_WIDTH + h * i as f64))
        .collect()
}

/// `(cell, probability)` of `N(a, s²)` over the cells of `grid` (boundaries at midpoints).
fn transitions(a: f64, s: f64, grid: &[f64]) -> Vec<(usize, f64)> {
    if grid.len() == 1 {
        return vec![(0, 1.0)];
    }
    if s <= 0.0 {
        let nearest = (0..grid.len())
            .min_by(|&i, &j| (grid[i] - a).abs().total_cmp(&(grid[j] - a).abs()))
            .expect("non-empty grid");
        return vec![(nearest, 1.0)];
    }
    let mut out = Vec::with_capacity(grid.len());
    let mut below = 0.0;
    for j in 0..grid.len() {
        let upper = if j + 1 < grid.len() {
            norm_cdf((0.5 * (grid[j] + grid[j + 1]) - a) / s)
        } else {
            1.0
        };
        let p = (upper - below).max(0.0);
        if p > 0.0 {
            out.push((j, p));
        }
        below = upper;
    }
    let total: f64 = out.iter().map(|(_, p)| p).sum();
    out.iter_mut().for_each(|(_, p)| *p /= total);
    out
}
