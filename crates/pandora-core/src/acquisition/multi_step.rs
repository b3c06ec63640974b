//! The multi-step lookahead steps: budgeted multi-step EI (`b_ms_ei`) and multi-step EI
//! (`ms_ei`), both the maximization of a one-shot scenario tree.
//!
//! ## Definition
//!
//! A tree ([`FantasyTree`], default `[1, 1, 1]`) is the proposal and its look-ahead points,
//! optimized jointly as one vector ([`BudgetedMultiStepEi`], notes A5 in
//! docs/reference-code.md). B-MS-EI's stage value is the budgeted EI under a suggested budget
//! `B_s`; MSEI (the PBGI paper's baseline, after Jiang et al. 2020 and Astudillo et al. 2021) is
//! the same tree with every evaluation costing 1, no budget and EI at every stage.
//!
//! ## Algorithm
//!
//! [`bmsei_step`] ([`BmseiStep`], notes A5–A7):
//!
//! 1. the suggested budget: with `refill` (default on) and the previous step's carry, the refill
//!    rule ([`refilled_budget`]) with the cost of the last real evaluation; otherwise a rollout of
//!    `K + 1` EI-PUC-CC steps ([`suggested_budget`]). With `tree_budget = "recent_costs"`
//!    ([`TreeBudget::RecentCosts`], the PBGI repository's BMSEI) instead `min(B − C_t, sum of the
//!    last four observed costs)` at every step ([`recent_costs_budget`]; no rollout, no refill);
//! 2. the tree maximized with the multi-start optimizer: `200·d` raw trees and `10·d` restarts by
//!    default (not scaled by the tree size) plus the heuristic start tree; with `warm_start`
//!    (default on) and the carry's trees, the raw trees are perturbations of the previous step's
//!    ([`warm_start_candidates`]) instead of Sobol points;
//! 3. the root is the proposal; the carry (the budget, its lower bound and every restart's final
//!    tree) goes to the next step of the same run.
//!
//! [`msei_step`] ([`MseiStep`]) is step 2–3 on the uniform-cost root with an infinite budget (its
//! carry's budget fields are 0).
//!
//! ## Degenerate cases
//!
//! - B-MS-EI needs a budget (errors name `remaining_budget` and `budget`) and, with unknown
//!   costs, the log-cost model (error names `cost`); it refuses a variable-amplitude model.
//! - The root ranges over the step's domain (valid points away from the pending ones); the
//!   look-ahead points are relaxed to the continuous cube.
//!
//! Accuracy, timing and the reference comparisons are in docs/lookahead.md ("B-MS-EI").

use super::acquirer::AcquisitionParams;
use super::acquirer::{Acquired, Acquirer, StepInputs};
use super::bmsei::{
    BmseiCarry, BudgetedMultiStepEi, CostBelief, FantasyTree, NodeState, ScaledGp, TreeBudget,
    heuristic_tree, recent_costs_budget, refilled_budget, suggested_budget, warm_start_candidates,
};
use super::cost::CostSetting;
use crate::error::{Error, Result};
use crate::gp::Posterior;
use crate::optim::domain::{Domain, maximize_in};
use crate::optim::multistart::MultiStartOptions;

/// The B-MS-EI step (notes A5–A7).
///
/// 1. The suggested budget: with `params.refill` (default on) and the previous step's `carry`, the
///    refill rule ([`refilled_budget`]) with `last_cost`, the cost of the last real evaluation;
///    otherwise a rollout of `K + 1` EI-PUC-CC steps (with `min(50·d, raw)` raw samples and
///    `min(5·d, restarts)` restarts).
/// 2. The whole tree `params.tree` (default `[1, 1, 1]`) maximized with the multi-start optimizer
///    (`200·d` raw trees and `10·d` restarts by default, not scaled by the tree size, plus the
///    heuristic start tree). With `params.warm_start` (default on) and the carry's trees, the raw
///    trees are perturbations of the previous step's ([`warm_start_candidates`]) instead of Sobol
///    points.
///
/// Returns the root, the tree value and the carry for the next step. Errors name
/// `remaining_budget` or `budget` when the run has no budget.
pub fn bmsei_step(s: &StepInputs<'_>) -> Result<Acquired> {
    let (model, params, ms, seed) = (s.model()?, &s.params, s.ms, s.seed);
    let d = model.dim();
    let tree = params.tree.unwrap_or_default();
    let belief = match (s.cost, s.cost_model) {
        (CostSetting::Uniform, _) => CostBelief::Uniform,
        (CostSetting::Known(c), _) => CostBelief::Known(c),
        (CostSetting::Unknown, Some(m)) => CostBelief::Unknown(Box::new(ScaledGp::from_model(m)?)),
        (CostSetting::Unknown, None) => {
            return Err(Error::invalid(
                "cost",
                "unknown costs need a log-cost model",
            ));
        }
    };
    let remaining = params.remaining_budget.ok_or_else(|| {
        Error::invalid("remaining_budget", "required by 'b_ms_ei' (set a budget)")
    })?;
    let total = params
        .total_budget
        .ok_or_else(|| Error::invalid("budget", "required by 'b_ms_ei' (set a budget)"))?;
    let mut root = NodeState {
        f: ScaledGp::from_model(model)?,
        cost: belief,
        best: s.best_f,
        budget: remaining,
    };
    let (_, _, inner) = tree_search_sizes(ms, d);
    let refill = match (params.refill.unwrap_or(true), s.carry, s.last_cost) {
        (true, Some(c), Some(last)) => refilled_budget(c, last),
        _ => None,
    };
    let (suggested, lower_bound) = match (params.tree_budget.unwrap_or_default(), refill) {
        (TreeBudget::RecentCosts, _) => {
            recent_costs_budget(s.costs, remaining).ok_or_else(|| {
                Error::invalid(
                    "cost",
                    "tree_budget = \"recent_costs\" needs the observed costs of the run",
                )
            })?
        }
        (TreeBudget::Suggested, Some(r)) => r,
        (TreeBudget::Suggested, None) => {
            suggested_budget(&root, remaining, total, tree.depth() + 1, &inner, seed)?
        }
    };
    root.budget = suggested;
    let (x, value, trees) = optimize_tree(root, tree, ms, params, s.carry, seed, s.domain)?;
    let next = BmseiCarry {
        suggested_budget: suggested,
        lower_bound,
        trees,
    };
    Ok(Acquired {
        x,
        value,
        carry: Some(next),
        runners_up: Vec::new(),
    })
}

/// Maximizes the one-shot tree from `root` (B-MS-EI's step 2–3, also multi-step EI's): the
/// heuristic start tree as an extra start, and, with `params.warm_start` (default on) and the
/// carry's trees, raw trees perturbed from the previous step's. Returns the root, the tree value
/// and every restart's final tree. The root ranges over the `domain` (valid points away from the
/// pending ones); the look-ahead points are relaxed to the continuous cube.
fn optimize_tree(
    root: NodeState<'_>,
    tree: FantasyTree,
    ms: &MultiStartOptions,
    params: &AcquisitionParams,
    carry: Option<&BmseiCarry>,
    seed: u64,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64, Vec<Vec<f64>>)> {
    let d = root.f.dim();
    let (raw, restarts, inner) = tree_search_sizes(ms, d);
    let b = BudgetedMultiStepEi::new(root, tree)?;
    let start = heuristic_tree(&b, &inner, seed)?;
    let warm = match carry {
        Some(c) if params.warm_start.unwrap_or(true) => {
            Some(warm_start_candidates(&c.trees, tree, d, raw, seed)).filter(|v| !v.is_empty())
        }
        _ => None,
    };
    let tree_ms = MultiStartOptions {
        raw_samples: Some(raw),
        num_restarts: Some(restarts),
        extra_starts: vec![start],
        raw_points: warm,
        lower: None,
        upper: None,
        ..ms.clone()
    };
    let r = maximize_in(&b, d, domain, &tree_ms, seed)?;
    let trees = r.restarts.into_iter().map(|(t, _)| t).collect();
    Ok((r.x[..d].to_vec(), r.value, trees))
}

/// The tree search's raw samples and restarts (`200·d` and `10·d` by default, not scaled by the
/// tree size), and the smaller options of its inner searches (rollout, heuristic start):
/// `min(50·d, raw)` raw samples and `min(5·d, restarts)` restarts.
fn tree_search_sizes(ms: &MultiStartOptions, d: usize) -> (usize, usize, MultiStartOptions) {
    let raw = ms.raw_samples.unwrap_or(200 * d).max(1);
    let restarts = ms.num_restarts.unwrap_or(10 * d).max(1);
    let inner = MultiStartOptions {
        raw_samples: Some(raw.min(50 * d)),
        num_restarts: Some(restarts.min(5 * d)),
        extra_starts: Vec::new(),
        raw_points: None,
        ..ms.clone()
    };
    (raw, restarts, inner)
}

/// Multi-step lookahead EI for uniform costs (the PBGI paper's MSEI, after Jiang et al. 2020 and
/// Astudillo et al. 2021): the one-shot tree `params.tree` (default `[1, 1, 1]`: the current step
/// and three look-ahead steps, posterior-mean fantasies) with EI as every stage's value, i.e. the
/// B-MS-EI tree with every evaluation costing 1 and no budget. Maximized as B-MS-EI's tree (warm
/// start from the carry's trees; the carry's budget fields are 0).
pub fn msei_step(s: &StepInputs<'_>) -> Result<Acquired> {
    let (model, params) = (s.model()?, &s.params);
    let root = NodeState {
        f: ScaledGp::from_model(model)?,
        cost: CostBelief::Uniform,
        best: s.best_f,
        budget: f64::INFINITY,
    };
    let tree = params.tree.unwrap_or_default();
    let (x, value, trees) = optimize_tree(root, tree, s.ms, params, s.carry, s.seed, s.domain)?;
    let next = BmseiCarry {
        suggested_budget: 0.0,
        lower_bound: 0.0,
        trees,
    };
    Ok(Acquired {
        x,
        value,
        carry: Some(next),
        runners_up: Vec::new(),
    })
}

/// The `b_ms_ei` acquisition's step (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct BmseiStep;

impl Acquirer for BmseiStep {
    fn supports_output_scale(&self) -> bool {
        false
    }

    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        bmsei_step(s)
    }
}

/// The `ms_ei` acquisition's step (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct MseiStep;

impl Acquirer for MseiStep {
    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        msei_step(s)
    }
}
