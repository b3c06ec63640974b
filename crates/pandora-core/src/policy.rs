//! One Bayesian-optimization step: initial design → fit the objective GP (and a log-cost GP when
//! costs are unknown) → build the configured acquisition → maximize it → a proposal.
//!
//! Everything is on the unit cube `[0,1]^d` and maximizes; the study layer maps user parameters,
//! bounds and directions to and from it. The step is a pure function of the history, the
//! configuration, the run context and a seed, so a run is reproducible and can resume anywhere.

use crate::acquisition::analytic::CostConvention;
use crate::acquisition::bmsei::{
    BmseiCarry, BudgetedMultiStepEi, CostBelief, NodeState, ScaledGp, heuristic_tree,
    refilled_budget, suggested_budget, warm_start_candidates,
};
use crate::acquisition::kg::{
    DiscreteKnowledgeGradient, ONE_SHOT_KG_FANTASIES, OneShotKnowledgeGradient,
};
use crate::acquisition::mes::{
    CostWeightedMaxValueEntropy, DEFAULT_NUM_MAX_VALUES, MaxValueEntropy,
};
use crate::acquisition::{
    AcquisitionName, AcquisitionParams, CostModel, OnModel, ThompsonSample, UnknownCost,
    UpperConfidenceBound, build_pointwise, fit_log_cost_model,
};
use crate::error::{Error, Result};
use crate::gp::fit::FitOptions;
use crate::gp::{GpModel, GpParams, OutputScale, Posterior, Transforms};
use crate::optim::mixed::{MixedSpace, maximize_mixed};
use crate::optim::multistart::{MultiStartOptions, MultiStartResult, Objective, maximize};
use crate::optim::sobol::Sobol;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// MES draws its max values on `MES_CANDIDATES_PER_DIM · d` uniform points (the PBGI paper's
/// setting), plus the training inputs.
pub const MES_CANDIDATES_PER_DIM: usize = 1000;

/// Size of KG's Sobol discretization for dimension `d`: `min(200·d, 1000)` points (the maximizer
/// of the posterior mean is added to it).
pub fn kg_discretization_size(d: usize) -> usize {
    (200 * d).min(1000)
}

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
/// Returns the root, the tree value and the carry for the next step.
#[allow(clippy::too_many_arguments)]
pub fn bmsei_step(
    model: &GpModel,
    cost_model: Option<&GpModel>,
    cost: CostSetting<'_>,
    best_f: f64,
    params: &AcquisitionParams,
    ms: &MultiStartOptions,
    seed: u64,
    carry: Option<&BmseiCarry>,
    last_cost: Option<f64>,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64, BmseiCarry)> {
    let d = model.dim();
    let tree = params.tree.unwrap_or_default();
    let belief = match (cost, cost_model) {
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
        best: best_f,
        budget: remaining,
    };
    let (_, _, inner) = tree_search_sizes(ms, d);
    let refill = match (params.refill.unwrap_or(true), carry, last_cost) {
        (true, Some(c), Some(last)) => refilled_budget(c, last),
        _ => None,
    };
    let (suggested, lower_bound) = match refill {
        Some(r) => r,
        None => suggested_budget(&root, remaining, total, tree.depth() + 1, &inner, seed)?,
    };
    root.budget = suggested;
    let (x, value, trees) = optimize_tree(root, tree, ms, params, carry, seed, domain)?;
    let next = BmseiCarry {
        suggested_budget: suggested,
        lower_bound,
        trees,
    };
    Ok((x, value, next))
}

/// Maximizes the one-shot tree from `root` (B-MS-EI's step 2–3, also multi-step EI's): the
/// heuristic start tree as an extra start, and, with `params.warm_start` (default on) and the
/// carry's trees, raw trees perturbed from the previous step's. Returns the root, the tree value
/// and every restart's final tree. The root ranges over the `domain` (valid points away from the
/// pending ones); the look-ahead points are relaxed to the continuous cube.
fn optimize_tree(
    root: NodeState<'_>,
    tree: crate::acquisition::FantasyTree,
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
pub fn msei_step(
    model: &GpModel,
    best_f: f64,
    params: &AcquisitionParams,
    ms: &MultiStartOptions,
    seed: u64,
    carry: Option<&BmseiCarry>,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64, BmseiCarry)> {
    let root = NodeState {
        f: ScaledGp::from_model(model)?,
        cost: CostBelief::Uniform,
        best: best_f,
        budget: f64::INFINITY,
    };
    let tree = params.tree.unwrap_or_default();
    let (x, value, trees) = optimize_tree(root, tree, ms, params, carry, seed, domain)?;
    let next = BmseiCarry {
        suggested_budget: 0.0,
        lower_bound: 0.0,
        trees,
    };
    Ok((x, value, next))
}

/// The max-value entropy search of one step: `K = 10` max values drawn **once** from the Gumbel
/// approximation on `1000·d` seeded uniform points plus the training inputs `train_x`; every
/// restart of the step's maximization uses these same samples.
pub fn mes_for_step(
    model: &GpModel,
    train_x: &[f64],
    d: usize,
    seed: u64,
) -> Result<MaxValueEntropy> {
    mes_for_step_in(model, train_x, d, seed, None)
}

/// [`mes_for_step`] with the max values drawn on valid points of `space` (the uniform points
/// projected), so they are the maxima over the set a study can propose.
pub fn mes_for_step_in(
    model: &GpModel,
    train_x: &[f64],
    d: usize,
    seed: u64,
    space: Option<&MixedSpace>,
) -> Result<MaxValueEntropy> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6d65_735f_6361_6e64);
    let mut cand: Vec<f64> = (0..MES_CANDIDATES_PER_DIM * d)
        .map(|_| rng.random::<f64>())
        .collect();
    if let Some(s) = space.filter(|s| !s.is_continuous()) {
        s.project_rows(&mut cand);
    }
    MaxValueEntropy::from_model(
        model,
        &cand,
        train_x,
        DEFAULT_NUM_MAX_VALUES,
        seed ^ 0x6d65_735f_6d61_7876,
    )
}

/// The knowledge-gradient step: KG on the set `A` = a scrambled Sobol set of
/// [`kg_discretization_size`]`(d)` points (seeded by `seed`) plus the maximizer of the posterior
/// mean (found with `ms`), evaluated exactly at every point of `A`; returns the argmax and its
/// KG in raw (unstandardized) units. This is the discrete KG of Frazier, Powell & Dayanik, not
/// BoTorch's one-shot continuous KG.
pub fn kg_step(
    model: &GpModel,
    d: usize,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<(Vec<f64>, f64)> {
    kg_step_in(model, d, ms, seed, Domain::default())
}

/// [`kg_step`] on a [`Domain`]: the Sobol set projected onto the valid points, the posterior
/// mean maximized over them, and the argmax taken among the points away from the pending ones
/// (among all if none is).
pub fn kg_step_in(
    model: &GpModel,
    d: usize,
    ms: &MultiStartOptions,
    seed: u64,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64)> {
    let m = kg_discretization_size(d);
    let sobol = Sobol::scrambled(d, seed ^ 0x6b67)?;
    let mut set = vec![0.0; (m + 1) * d];
    for (i, row) in set.chunks_exact_mut(d).take(m).enumerate() {
        sobol.point(i as u64, row)?;
    }
    if let Some(s) = domain.mixed() {
        s.project_rows(&mut set[..m * d]);
    }
    let mean = OnModel::new(model, UpperConfidenceBound { beta: 0.0 });
    let best = maximize_in(
        &mean,
        d,
        Domain {
            pending: &[],
            ..domain
        },
        ms,
        seed ^ 0x6d75,
    )?;
    set[m * d..].copy_from_slice(&best.x);
    let internal = model.to_internal(&set)?;
    let kg = DiscreteKnowledgeGradient::new(model.inner(), &internal)?;
    let values = kg.values_on_set()?;
    let allowed: Vec<bool> = set
        .chunks_exact(d)
        .map(|x| !near_pending(x, domain.pending))
        .collect();
    let any = allowed.iter().any(|&a| a);
    let i = (0..values.len()).fold(0, |b, i| {
        let ok = |j: usize| !any || allowed[j];
        if ok(i) && (!ok(b) || values[i] > values[b]) {
            i
        } else {
            b
        }
    });
    let (_, y_std) = model.outcome_scale();
    Ok((set[i * d..(i + 1) * d].to_vec(), values[i] * y_std))
}

/// The one-shot KG step (the PBGI paper's KG: BoTorch `qKnowledgeGradient` with its default 64
/// fantasies, optimized one-shot with the step's multi-start options). The current value is the
/// maximum of the posterior mean (found with the step's options), so the reported value is the
/// KG in raw units. Start trees: `raw` raw candidates whose `x` is a scrambled Sobol point and
/// whose fantasy points start at the best, under that fantasy, of `x` and the distinct local
/// maxima of the posterior mean (the end points of its restarts, at most 10 points); the restarts
/// are chosen among them by the Boltzmann rule. BoTorch's `gen_one_shot_kg_initial_conditions`
/// instead samples the fantasy points from the posterior mean's maximizers and leaves 10 % of
/// them uniformly random; on a 1-D test those random fantasy points stayed at poor local maxima
/// and the one-shot value fell 20 % short of the brute-force KG.
pub fn one_shot_kg_step(
    model: &GpModel,
    d: usize,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<(Vec<f64>, f64)> {
    one_shot_kg_step_in(model, d, ms, seed, Domain::default())
}

/// [`one_shot_kg_step`] on a [`Domain`]: the posterior mean's maximizers (the anchors) and the
/// proposal range over the valid points, the proposal away from the pending ones; the fantasy
/// points are relaxed to the continuous cube.
pub fn one_shot_kg_step_in(
    model: &GpModel,
    d: usize,
    ms: &MultiStartOptions,
    seed: u64,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64)> {
    let gp = ScaledGp::from_model(model)?;
    let mean = OnModel::new(model, UpperConfidenceBound { beta: 0.0 });
    let pm = maximize_in(
        &mean,
        d,
        Domain {
            pending: &[],
            ..domain
        },
        ms,
        seed ^ 0x6d75,
    )?;
    let mut kg = OneShotKnowledgeGradient::new(&gp, ONE_SHOT_KG_FANTASIES, seed ^ 0x716b)?;
    kg.current = pm.value;
    let raw = ms.raw_samples.unwrap_or(200 * d).max(1);
    let restarts = ms.num_restarts.unwrap_or(10 * d).max(1);
    // Anchors: the distinct local maxima of the posterior mean (the end points of its restarts),
    // best first, at most 10.
    let mut ends: Vec<&(Vec<f64>, f64)> = pm.restarts.iter().filter(|r| r.1.is_finite()).collect();
    ends.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut anchors: Vec<f64> = pm.x.clone();
    for (e, _) in ends {
        let far = anchors
            .chunks_exact(d)
            .all(|a| a.iter().zip(e).map(|(u, v)| (u - v) * (u - v)).sum::<f64>() > 1e-6);
        if far && anchors.len() < 10 * d {
            anchors.extend_from_slice(e);
        }
    }
    let sobol = Sobol::scrambled(d, seed ^ 0x7261)?;
    let mut candidates = Vec::with_capacity(raw * (ONE_SHOT_KG_FANTASIES + 1) * d);
    let mut pts = vec![0.0; d];
    pts.extend_from_slice(&anchors);
    let na = anchors.len() / d;
    let pairs: Vec<(usize, usize)> = (0..=na).map(|j| (0, j)).collect();
    for r in 0..raw {
        sobol.point(r as u64, &mut pts[..d])?;
        if let Some(s) = domain.mixed() {
            s.project_in_place(&mut pts[..d]);
        }
        let x = &pts[..d];
        candidates.extend_from_slice(x);
        // Each fantasy's point starts at the anchor (or x itself) with the highest fantasized
        // mean μ(a) + z Σ(x, a)/√(σ²(x) + noise).
        let p = gp.pairs(&pts, &pairs, false)?;
        let s = (p.var[0] + gp.noise()).sqrt();
        for &z in kg.base_samples() {
            let mut best = (0, f64::NEG_INFINITY);
            for j in 0..=na {
                let cov = if j == 0 { p.var[0] } else { p.cov[j] };
                let v = p.mean[j] + z * cov / s;
                if v > best.1 {
                    best = (j, v);
                }
            }
            candidates.extend_from_slice(&pts[best.0 * d..(best.0 + 1) * d]);
        }
    }
    let opts = MultiStartOptions {
        raw_points: Some(candidates),
        num_restarts: Some(restarts),
        extra_starts: Vec::new(),
        lower: None,
        upper: None,
        ..ms.clone()
    };
    let r = maximize_in(&kg, d, domain, &opts, seed)?;
    Ok((r.x[..d].to_vec(), r.value))
}

/// How evaluation costs are known to the policy.
#[derive(Clone, Copy)]
pub enum CostSetting<'a> {
    /// Every evaluation costs the same.
    Uniform,
    /// A known cost function of the (unit-cube) point.
    Known(&'a dyn CostModel),
    /// Unknown: learned from the observed costs by a GP on log cost.
    Unknown,
}

/// Settings of a step that do not change during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// Which acquisition to maximize.
    pub acquisition: AcquisitionName,
    /// Its fixed parameters (β, α, convention, λ for fixed-λ PBGI); the incumbent, schedule
    /// indices, budgets and PBGI-D's λ come from the [`StepContext`].
    pub params: AcquisitionParams,
    /// Objective-model fit.
    pub fit: FitOptions,
    /// Log-cost-model fit (unknown costs).
    pub cost_fit: FitOptions,
    /// Acquisition maximization.
    pub multistart: MultiStartOptions,
    /// Standardize the objective values before fitting (the papers do, except for Bayesian regret).
    pub standardize: bool,
    /// Size of the initial scrambled-Sobol design (default `2(d + 1)`).
    pub initial_design: Option<usize>,
    /// Random Fourier features of Thompson-sampling paths.
    pub ts_features: usize,
    /// Seed of the initial design (the k-th observation gets point k of one scrambled Sobol
    /// sequence) and of random search.
    pub design_seed: u64,
    /// A known input-dependent amplitude of the objective's prior (the PBGI paper's
    /// variable-amplitude kernel; see [`OutputScale`]). Supported by the acquisitions that read
    /// the posterior mean and variance; Thompson sampling, KG and B-MS-EI refuse it.
    pub output_scale: Option<OutputScale>,
    /// The valid points of the cube (one-hot blocks of categorical parameters, grids of int and
    /// ordinal ones; see [`MixedSpace`]): every acquisition is maximized over them only and the
    /// pending-point exclusion holds between valid points. `None` (the default) or an
    /// all-continuous space: the whole cube, with exactly the continuous code path.
    pub space: Option<MixedSpace>,
    /// How the objective model's hyperparameters are fitted given the previous step's (see
    /// [`Refit`]; studies and experiments carry them through [`crate::run::driver::Run`]).
    pub refit: Refit,
}

/// How a model step fits the objective model's hyperparameters when the previous step's are
/// known (the driver's warm start, [`StepContext::warm_fit`]).
///
/// A full fit runs L-BFGS-B from the previous hyperparameters, the priors' modes and
/// [`FitOptions::restarts`] random starts (each evaluation an `O(n³)` factorization and inverse)
/// and keeps the best. One new observation rarely moves the posterior mode far, so a single
/// start from the previous hyperparameters, stopped by the same tolerances, lands on the same
/// mode in a fraction of the evaluations (d = 16, n = 600: 11 evaluations instead of 49, the
/// same log posterior to 2e-9; docs/bench.md). [`Refit::Warm`] fits so, and falls back to the
/// full fit
///
/// - when the warm start improved the log posterior by more than `max_gain` nats per
///   observation: the data moved the model, and another mode may now be better;
/// - on a schedule growing with the run: at trial `s_0 = 0` and `s_{i+1} = s_i + max(1,
///   ⌊growth · s_i⌋)` (every trial while `growth · s < 1`, then whenever the run grew by the
///   factor `1 + growth`), so a mode the single start cannot leave is abandoned, and the full
///   fits' `O(n³)` cost spread over the `growth · n` steps between them stays `O(n²)` per step.
///
/// Both rules read only the history, the warm start and the index of the trial handed out, so a
/// resumed run decides exactly as an uninterrupted one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refit {
    /// A full multi-start fit at every step (the previous hyperparameters one more start).
    Always,
    /// A single-start fit from the previous step's hyperparameters, with a full refit when due.
    Warm {
        /// Relative growth of the number of trials between scheduled full refits (> 0; 0.05:
        /// every trial up to trial 40, then every 5 %).
        growth: f64,
        /// A full refit when the warm fit's log-posterior gain per observation exceeds this.
        max_gain: f64,
    },
}

impl Refit {
    /// The default: [`Refit::Warm`] with a full refit at every 5 % of growth and above a gain of
    /// 0.01 nats per observation.
    pub const DEFAULT: Refit = Refit::Warm {
        growth: 0.05,
        max_gain: 0.01,
    };

    /// Whether a full refit is due on the schedule at the step that hands out trial `trial`
    /// (0-based). Integer steps and one IEEE product per scheduled refit: the same on every
    /// platform.
    pub fn scheduled(&self, trial: usize) -> bool {
        let Refit::Warm { growth, .. } = *self else {
            return true;
        };
        if !(growth.is_finite() && growth > 0.0) {
            return true;
        }
        let mut s = 0usize;
        while s < trial {
            s += ((growth * s as f64) as usize).max(1);
        }
        s == trial
    }
}

impl Default for StepConfig {
    /// PBGI with λ = 1e-3 on the papers' model (Matérn-5/2 ARD, Gamma priors, noise 1e-4,
    /// standardized outcomes), 200·d raw samples and 10·d restarts.
    fn default() -> Self {
        Self {
            acquisition: AcquisitionName::Pbgi,
            params: AcquisitionParams {
                lambda: Some(1e-3),
                ..AcquisitionParams::default()
            },
            fit: FitOptions::default(),
            cost_fit: FitOptions::default(),
            multistart: MultiStartOptions::default(),
            standardize: true,
            initial_design: None,
            ts_features: 1024,
            design_seed: 0,
            output_scale: None,
            space: None,
            refit: Refit::DEFAULT,
        }
    }
}

/// What a step needs to know about the run so far beyond the observations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepContext {
    /// Cumulative cost of the BO phase so far (UCB schedule: `t = cost + 1`).
    pub cumulative_cost: f64,
    /// Remaining budget (cost cooling).
    pub remaining_budget: Option<f64>,
    /// Total budget (cost cooling).
    pub total_budget: Option<f64>,
    /// PBGI-D's current λ (overrides the configured λ).
    pub lambda: Option<f64>,
    /// B-MS-EI: the previous step's [`Proposal::bmsei`] in the same run (refill rule and warm
    /// start); `None` recomputes the suggested budget and starts cold.
    pub bmsei: Option<BmseiCarry>,
    /// The warm start may be used alone ([`Refit::Warm`] and no full refit scheduled at this
    /// step; set by the driver). Otherwise, and without a warm start, the step fits in full.
    pub warm_fit: bool,
}

/// Euclidean radius (on the unit cube) around each pending point inside which a model step does
/// not propose. The fantasies already make the model expect the pending outcome there, but an
/// index such as PBGI's stays near the posterior mean at a fantasized point and can remain the
/// largest (seen at a cheap corner), so a second worker would receive the same point.
pub const PENDING_EXCLUSION_RADIUS: f64 = 0.1;

/// An objective restricted to points at least `radius` away from every pending point: inside a
/// ball its value is `-∞`, which the multi-start optimizer treats as outside the domain.
/// Only the first `d` coordinates (the proposal; the rest of a look-ahead tree is free) count.
struct AwayFromPending<'a> {
    inner: &'a dyn Objective,
    pending: &'a [f64],
    radius: f64,
    d: usize,
}

impl AwayFromPending<'_> {
    fn excluded(&self, x: &[f64]) -> bool {
        let r2 = self.radius * self.radius;
        self.pending
            .chunks_exact(self.d)
            .any(|p| p.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() < r2)
    }
}

/// Whether `x` lies within [`PENDING_EXCLUSION_RADIUS`] of a pending point.
fn near_pending(x: &[f64], pending: &[f64]) -> bool {
    let r2 = PENDING_EXCLUSION_RADIUS * PENDING_EXCLUSION_RADIUS;
    pending
        .chunks_exact(x.len())
        .any(|p| p.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() < r2)
}

/// Where a step may propose: the valid points of `space` (the whole cube if `None`), away from
/// the `pending` points (row-major, `d` coordinates each).
#[derive(Debug, Clone, Copy, Default)]
pub struct Domain<'a> {
    /// The valid points.
    pub space: Option<&'a MixedSpace>,
    /// Points handed out but not evaluated yet.
    pub pending: &'a [f64],
}

impl<'a> Domain<'a> {
    /// The space if it is not all-continuous.
    fn mixed(&self) -> Option<&'a MixedSpace> {
        self.space.filter(|s| !s.is_continuous())
    }
}

impl Objective for AwayFromPending<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if self.excluded(x) {
            grad.fill(0.0);
            return f64::NEG_INFINITY;
        }
        self.inner.value_grad(x, grad)
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        self.inner.values(xs, out);
        let d = self.dim();
        for (x, o) in xs.chunks_exact(d).zip(out.iter_mut()) {
            if self.excluded(x) {
                *o = f64::NEG_INFINITY;
            }
        }
    }
}

/// Maximizes `obj`, whose first `d` coordinates are the proposal, over the `domain`: the valid
/// points of its space ([`maximize_mixed`], the first `d` coordinates constrained, the others
/// continuous) away from the pending points (see [`PENDING_EXCLUSION_RADIUS`]). Every point the
/// mixed search scores is valid, so the exclusion holds between projected points. If every
/// candidate lies inside the excluded balls, maximizes without the restriction. With no pending
/// point and no (or an all-continuous) space this is [`maximize`].
fn maximize_in(
    obj: &dyn Objective,
    d: usize,
    domain: Domain<'_>,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    let lifted = domain.mixed().map(|s| s.extended(obj.dim()));
    let run = |o: &dyn Objective| match &lifted {
        Some(s) => maximize_mixed(o, s, ms, seed),
        None => maximize(o, ms, seed),
    };
    if domain.pending.is_empty() {
        return run(obj);
    }
    let away = AwayFromPending {
        inner: obj,
        pending: domain.pending,
        radius: PENDING_EXCLUSION_RADIUS,
        d,
    };
    match run(&away) {
        Ok(r) if r.value.is_finite() => Ok(r),
        _ => run(obj),
    }
}

/// Observations so far on the unit cube: `x` row-major `n × d`, `y` maximized, `cost` > 0.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    /// Points, row-major.
    pub x: &'a [f64],
    /// Objective values (maximization).
    pub y: &'a [f64],
    /// Observed costs (used when costs are unknown).
    pub cost: &'a [f64],
    /// Points handed out but not yet evaluated (row-major): the model is conditioned on its own
    /// posterior mean there, so parallel workers do not pile onto one point.
    pub pending: &'a [f64],
}

/// How the proposal was made (recorded as `"initial"`, `"random"` or `"model"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// A point of the initial design.
    #[serde(rename = "initial")]
    InitialDesign,
    /// A uniformly random point (`random` acquisition).
    Random,
    /// The maximizer of the acquisition on the fitted model.
    Model,
}

impl Phase {
    /// The name recorded with decisions: `"initial"`, `"random"` or `"model"`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::InitialDesign => "initial",
            Phase::Random => "random",
            Phase::Model => "model",
        }
    }
}

/// The outcome of a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The point to evaluate next, in `[0,1]^d`.
    pub x: Vec<f64>,
    /// How it was chosen.
    pub phase: Phase,
    /// The acquisition value at `x` (NaN outside the model phase).
    pub acquisition_value: f64,
    /// Objective-model hyperparameters (internal, standardized space).
    pub params: Option<GpParams>,
    /// Log-cost-model hyperparameters (unknown costs).
    pub cost_params: Option<GpParams>,
    /// λ used (PBGI, PBGI-D).
    pub lambda: Option<f64>,
    /// The expected cost `E[c(x)]` of the proposal under the cost setting (model phase only):
    /// 1 for uniform costs, `c(x)` for known costs, `exp(m + v/2)` under the log-cost GP.
    pub predicted_cost: Option<f64>,
    /// B-MS-EI: what the next step of the same run needs (pass it as [`StepContext::bmsei`]).
    pub bmsei: Option<BmseiCarry>,
}

impl Proposal {
    /// A point chosen without a model (initial design or random search): no acquisition value,
    /// no model data.
    pub fn without_model(x: Vec<f64>, phase: Phase) -> Self {
        Self {
            x,
            phase,
            acquisition_value: f64::NAN,
            params: None,
            cost_params: None,
            lambda: None,
            predicted_cost: None,
            bmsei: None,
        }
    }
}

/// Point `index` of the initial design: one scrambled Sobol sequence per `seed`.
pub fn design_point(d: usize, index: u64, seed: u64) -> Result<Vec<f64>> {
    let mut x = vec![0.0; d];
    Sobol::scrambled(d, seed)?.point(index, &mut x)?;
    Ok(x)
}

/// The models a model step fitted, returned with its proposal so that nothing is refitted to
/// report on the step or to check a stopping rule.
#[derive(Debug, Clone)]
pub struct StepModels {
    /// The objective posterior on the history (without the pending points' fantasies).
    pub model: GpModel,
    /// The log-cost posterior (unknown costs only; `None` for Thompson sampling, which ignores
    /// costs).
    pub cost_model: Option<GpModel>,
}

/// Proposes the next point. `warm` is the previous step's [`Proposal::params`] (a warm start for
/// the fit). Deterministic for a given history, configuration, context and `seed`. The same step
/// as [`propose_fitted`], without its models.
pub fn propose(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    cost: CostSetting<'_>,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<Proposal> {
    propose_fitted(d, history, config, ctx, cost, seed, warm).map(|(p, _)| p)
}

/// Proposes the next point and returns the models the step fitted (`None` for the initial
/// design and random search). See [`propose`].
pub fn propose_fitted(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    cost: CostSetting<'_>,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<(Proposal, Option<StepModels>)> {
    let n = history.y.len();
    if d == 0 || history.x.len() != n * d {
        return Err(Error::dim("history.x", n * d, history.x.len()));
    }
    if matches!(cost, CostSetting::Unknown) && history.cost.len() != n {
        return Err(Error::dim("history.cost", n, history.cost.len()));
    }
    let n_init = config.initial_design.unwrap_or(2 * (d + 1)).max(1);
    let simple = |phase| -> Result<(Proposal, Option<StepModels>)> {
        // The initial design is one seeded Sobol sequence, point k for the k-th trial handed
        // out (observed or pending), so parallel workers get distinct points; random search
        // continues the same sequence.
        let k = (n + history.pending.len() / d) as u64;
        let x = design_point(d, k, config.design_seed)?;
        Ok((Proposal::without_model(x, phase), None))
    };
    if n < n_init {
        return simple(Phase::InitialDesign);
    }
    if config.acquisition == AcquisitionName::Random {
        return simple(Phase::Random);
    }
    // Checked before the (costlier) fit.
    if config.output_scale.is_some()
        && matches!(
            config.acquisition,
            AcquisitionName::Ts | AcquisitionName::Kg | AcquisitionName::BMsEi
        )
    {
        return Err(Error::invalid(
            "output_scale",
            format!(
                "{} samples or conditions the stationary GP directly and does not support a \
                 variable-amplitude model",
                config.acquisition.as_str()
            ),
        ));
    }
    let transforms = Transforms {
        normalize_inputs: None,
        standardize_outcomes: config.standardize,
        output_scale: config.output_scale.clone(),
    };
    let fit_opts = FitOptions {
        seed,
        ..config.fit.clone()
    };
    let fitted = fit_objective(history, d, &transforms, &fit_opts, config.refit, ctx, warm)?;
    if !history.pending.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "history.pending",
            "length is not a multiple of d",
        ));
    }
    let model = fitted.with_fantasies(history.pending)?;
    let ms = &config.multistart;
    let domain = Domain {
        space: config.space.as_ref(),
        pending: history.pending,
    };
    if config.acquisition == AcquisitionName::Ts {
        let ts = ThompsonSample::draw(model.inner(), config.ts_features, seed ^ 0x7473)?;
        let r = maximize_in(&ts, d, domain, ms, seed)?;
        let proposal = Proposal {
            x: r.x,
            phase: Phase::Model,
            acquisition_value: r.value,
            params: Some(fitted.params().clone()),
            cost_params: None,
            lambda: None,
            predicted_cost: None,
            bmsei: None,
        };
        let models = StepModels {
            model: fitted,
            cost_model: None,
        };
        return Ok((proposal, Some(models)));
    }
    let cost_model = match cost {
        CostSetting::Unknown => {
            let cost_opts = FitOptions {
                seed: seed ^ 0x636f_7374,
                ..config.cost_fit.clone()
            };
            Some(fit_log_cost_model(history.x, history.cost, d, &cost_opts)?)
        }
        _ => None,
    };
    let unknown = cost_model.as_ref().map(UnknownCost);
    let cost_ref: Option<&dyn CostModel> = match cost {
        CostSetting::Uniform => None,
        CostSetting::Known(c) => Some(c),
        CostSetting::Unknown => unknown.as_ref().map(|u| u as &dyn CostModel),
    };
    let best_f = history.y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lambda = ctx.lambda.or(config.params.lambda);
    let (x, value, bmsei) = maximize_step(
        &StepInputs {
            model: &model,
            cost_model: cost_model.as_ref(),
            cost,
            cost_ref,
            history,
            config,
            ctx,
            best_f,
            lambda,
            seed,
        },
        d,
        domain,
    )?;
    let predicted_cost = match cost_ref {
        Some(c) => {
            let lc = c.log_cost(&x, d, false)?;
            Some((lc.mean[0] + 0.5 * lc.var[0]).exp())
        }
        None => Some(1.0),
    };
    let uses_lambda = matches!(
        config.acquisition,
        AcquisitionName::Pbgi | AcquisitionName::PbgiD
    );
    let proposal = Proposal {
        x,
        phase: Phase::Model,
        acquisition_value: value,
        params: Some(fitted.params().clone()),
        cost_params: cost_model.as_ref().map(|m| m.params().clone()),
        lambda: if uses_lambda { lambda } else { None },
        predicted_cost,
        bmsei,
    };
    let models = StepModels {
        model: fitted,
        cost_model,
    };
    Ok((proposal, Some(models)))
}

/// The objective model of a step: the warm fit alone when [`Refit::Warm`] allows it and its gain
/// stays below the threshold, the full fit otherwise.
fn fit_objective(
    history: History<'_>,
    d: usize,
    transforms: &Transforms,
    opts: &FitOptions,
    refit: Refit,
    ctx: &StepContext,
    warm: Option<&GpParams>,
) -> Result<GpModel> {
    if let (Refit::Warm { max_gain, .. }, true, Some(w)) = (refit, ctx.warm_fit, warm)
        && w.kernel.dim() == d
        // A warm start that cannot be evaluated falls back to the full fit.
        && let Ok((model, gain)) = GpModel::fit_warm(history.x, history.y, d, transforms, opts, w)
        && gain <= max_gain
    {
        return Ok(model);
    }
    GpModel::fit(history.x, history.y, d, transforms, opts, warm)
}

/// What [`maximize_step`] maximizes on.
struct StepInputs<'a> {
    /// The objective posterior, with the pending points' fantasies.
    model: &'a GpModel,
    /// The fitted log-cost model (unknown costs).
    cost_model: Option<&'a GpModel>,
    cost: CostSetting<'a>,
    /// The cost model the acquisitions divide by (`None`: uniform costs).
    cost_ref: Option<&'a dyn CostModel>,
    history: History<'a>,
    config: &'a StepConfig,
    ctx: &'a StepContext,
    best_f: f64,
    lambda: Option<f64>,
    seed: u64,
}

/// The model step's maximization for every acquisition but Thompson sampling and random search:
/// the maximizer, its acquisition value and B-MS-EI's (or MSEI's) carry.
fn maximize_step(
    s: &StepInputs<'_>,
    d: usize,
    domain: Domain<'_>,
) -> Result<(Vec<f64>, f64, Option<BmseiCarry>)> {
    let (model, config, seed) = (s.model, s.config, s.seed);
    let ms = &config.multistart;
    let params = AcquisitionParams {
        best_f: Some(s.best_f),
        t: config
            .params
            .t
            .or(Some(s.ctx.cumulative_cost.max(0.0) + 1.0)),
        remaining_budget: s.ctx.remaining_budget.or(config.params.remaining_budget),
        total_budget: s.ctx.total_budget.or(config.params.total_budget),
        lambda: s.lambda,
        ..config.params
    };
    match config.acquisition {
        AcquisitionName::Mes | AcquisitionName::MesCost => {
            let mes = mes_for_step_in(model, s.history.x, d, seed, domain.space)?;
            let r = if config.acquisition == AcquisitionName::Mes {
                maximize_in(&OnModel::new(model, mes), d, domain, ms, seed)?
            } else {
                let acq = CostWeightedMaxValueEntropy {
                    mes,
                    convention: config.params.convention.unwrap_or(CostConvention::Expected),
                };
                match s.cost_ref {
                    Some(c) => {
                        maximize_in(&OnModel::with_cost(model, acq, c), d, domain, ms, seed)?
                    }
                    None => maximize_in(&OnModel::new(model, acq), d, domain, ms, seed)?,
                }
            };
            Ok((r.x, r.value, None))
        }
        AcquisitionName::Kg => {
            let (x, v) = kg_step_in(model, d, ms, seed, domain)?;
            Ok((x, v, None))
        }
        AcquisitionName::OneShotKg => {
            let (x, v) = one_shot_kg_step_in(model, d, ms, seed, domain)?;
            Ok((x, v, None))
        }
        AcquisitionName::BMsEi => {
            let (x, v, carry) = bmsei_step(
                model,
                s.cost_model,
                s.cost,
                s.best_f,
                &params,
                ms,
                seed,
                s.ctx.bmsei.as_ref(),
                s.history.cost.last().copied(),
                domain,
            )?;
            Ok((x, v, Some(carry)))
        }
        AcquisitionName::MsEi => {
            let (x, v, carry) = msei_step(
                model,
                s.best_f,
                &params,
                ms,
                seed,
                s.ctx.bmsei.as_ref(),
                domain,
            )?;
            Ok((x, v, Some(carry)))
        }
        _ => {
            let acq = build_pointwise(config.acquisition, &params, d)?;
            let obj = match s.cost_ref {
                Some(c) => OnModel::with_cost(model, acq, c),
                None => OnModel::new(model, acq),
            };
            let r = maximize_in(&obj, d, domain, ms, seed)?;
            Ok((r.x, r.value, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::{LinearMeanCost, PbgiDecay};

    /// A smooth 2-D test function with its maximum 0 at (0.3, 0.7).
    fn f(x: &[f64]) -> f64 {
        -((x[0] - 0.3).powi(2) + (x[1] - 0.7).powi(2))
    }

    fn small_config(acq: AcquisitionName) -> StepConfig {
        StepConfig {
            acquisition: acq,
            params: AcquisitionParams {
                lambda: Some(1e-4),
                beta: Some(2.0),
                ..AcquisitionParams::default()
            },
            multistart: MultiStartOptions {
                raw_samples: Some(200),
                num_restarts: Some(6),
                ..MultiStartOptions::default()
            },
            ..StepConfig::default()
        }
    }

    fn run(acq: AcquisitionName, steps: usize, cost: CostSetting<'_>, seed: u64) -> Vec<Proposal> {
        let d = 2;
        let config = small_config(acq);
        let mut x = Vec::new();
        let mut y = Vec::new();
        let mut c = Vec::new();
        let mut out = Vec::new();
        let mut warm = None;
        let mut decay = PbgiDecay::default();
        for k in 0..steps {
            let lambda = (acq == AcquisitionName::PbgiD).then(|| decay.begin_iteration());
            let ctx = StepContext {
                cumulative_cost: c.iter().sum(),
                lambda,
                ..StepContext::default()
            };
            let hist = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &[],
            };
            let p = propose(d, hist, &config, &ctx, cost, seed + k as u64, warm.as_ref()).unwrap();
            assert!(p.x.iter().all(|v| (0.0..=1.0).contains(v)));
            let v = f(&p.x);
            x.extend_from_slice(&p.x);
            y.push(v);
            c.push(1.0 + 20.0 * (p.x[0] + p.x[1]) / 2.0);
            if p.phase == Phase::Model {
                let best = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                decay.end_iteration(p.acquisition_value, best);
            }
            warm = p.params.clone();
            out.push(p);
        }
        out
    }

    /// With a known amplitude, posterior-based acquisitions use it (the proposal differs from
    /// the stationary model's), and the acquisitions that sample the stationary GP refuse it.
    #[test]
    fn the_refit_schedule_grows_with_the_run() {
        let due = |r: Refit, upto: usize| -> Vec<usize> {
            (0..upto).filter(|&k| r.scheduled(k)).collect()
        };
        assert_eq!(due(Refit::Always, 5), vec![0, 1, 2, 3, 4]);
        let half = Refit::Warm {
            growth: 0.5,
            max_gain: 0.01,
        };
        assert_eq!(due(half, 30), vec![0, 1, 2, 3, 4, 6, 9, 13, 19, 28]);
        // The default: every trial up to 40, then every 5 %: 31 trials apart near trial 626.
        let d = due(Refit::DEFAULT, 2001);
        assert_eq!(d[..41], (0..41).collect::<Vec<_>>()[..]);
        assert_eq!(d[41..44], [42, 44, 46]);
        let near = d.windows(2).find(|w| w[0] >= 600).unwrap();
        assert_eq!(near[1] - near[0], near[0] / 20);
        assert!(d.len() < 130, "{}", d.len());
        // A growth that is not positive means a full fit at every step.
        let never = Refit::Warm {
            growth: 0.0,
            max_gain: 0.01,
        };
        assert_eq!(due(never, 5), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn an_output_scale_changes_the_step_and_is_refused_by_path_based_acquisitions() {
        let d = 2;
        let x: Vec<f64> = (0..8)
            .flat_map(|i| {
                let t = i as f64 / 8.0;
                [t, (0.37 + 0.61 * t) % 1.0]
            })
            .collect();
        let y: Vec<f64> = x.chunks(2).map(|r| (3.0 * r[0]).sin() + r[1]).collect();
        let hist = History {
            x: &x,
            y: &y,
            cost: &[],
            pending: &[],
        };
        // A large amplitude near (0.9, 0.9) pulls the step there.
        let scale = OutputScale::new(|x: &[f64], g: &mut [f64]| {
            let r2 = (x[0] - 0.9).powi(2) + (x[1] - 0.9).powi(2);
            let e = 20.0 * (-r2 / 0.02).exp();
            g[0] = e * (-2.0 * (x[0] - 0.9) / 0.02);
            g[1] = e * (-2.0 * (x[1] - 0.9) / 0.02);
            1.0 + e
        });
        let ctx = StepContext::default();
        let plain = small_config(AcquisitionName::LogEi);
        let scaled = StepConfig {
            output_scale: Some(scale.clone()),
            ..plain.clone()
        };
        let a = propose(d, hist, &plain, &ctx, CostSetting::Uniform, 1, None).unwrap();
        let b = propose(d, hist, &scaled, &ctx, CostSetting::Uniform, 1, None).unwrap();
        let dist = |p: &[f64]| ((p[0] - 0.9).powi(2) + (p[1] - 0.9).powi(2)).sqrt();
        assert!(dist(&b.x) < 0.15, "{:?}", b.x);
        assert!(dist(&a.x) > dist(&b.x), "{:?} {:?}", a.x, b.x);
        for acq in [
            AcquisitionName::Ts,
            AcquisitionName::Kg,
            AcquisitionName::BMsEi,
        ] {
            let cfg = StepConfig {
                output_scale: Some(scale.clone()),
                ..small_config(acq)
            };
            let e = propose(d, hist, &cfg, &ctx, CostSetting::Uniform, 1, None).unwrap_err();
            assert!(e.to_string().contains("variable-amplitude"), "{e}");
        }
    }

    #[test]
    fn every_acquisition_finds_the_optimum_of_a_smooth_function() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        for (acq, cost) in [
            (AcquisitionName::LogEi, CostSetting::Uniform),
            (AcquisitionName::Pbgi, CostSetting::Known(&linear)),
            (AcquisitionName::PbgiD, CostSetting::Unknown),
            (AcquisitionName::LogEipc, CostSetting::Unknown),
            (AcquisitionName::Ucb, CostSetting::Uniform),
            (AcquisitionName::Ts, CostSetting::Uniform),
        ] {
            let props = run(acq, 20, cost, 11);
            assert_eq!(props[0].phase, Phase::InitialDesign);
            assert_eq!(props[6].phase, Phase::Model);
            let best = props
                .iter()
                .map(|p| f(&p.x))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(best > -2e-3, "{}: best {best}", acq.as_str());
        }
    }

    #[test]
    fn predicted_costs_follow_the_cost_setting() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let truth = |x: &[f64]| 1.0 + 20.0 * (x[0] + x[1]) / 2.0;
        for cost in [CostSetting::Known(&linear), CostSetting::Unknown] {
            let props = run(AcquisitionName::Pbgi, 16, cost, 2);
            let model: Vec<&Proposal> = props.iter().filter(|p| p.phase == Phase::Model).collect();
            for (k, p) in model.iter().enumerate() {
                let pc = p.predicted_cost.unwrap();
                assert!(pc.is_finite() && pc > 0.0);
                match cost {
                    CostSetting::Known(_) => assert!((pc - truth(&p.x)).abs() < 1e-12),
                    // Once the log-cost GP has ten or more observations its E[c] is within 5 %
                    // (early extrapolations to corners are inflated by the variance term).
                    _ if k + 5 >= model.len() => {
                        let t = truth(&p.x);
                        assert!((pc / t - 1.0).abs() < 0.05, "{pc} vs {t}");
                    }
                    _ => {}
                }
            }
        }
        let uniform = run(AcquisitionName::LogEi, 8, CostSetting::Uniform, 2);
        assert_eq!(uniform[7].predicted_cost, Some(1.0));
        assert_eq!(uniform[0].predicted_cost, None);
    }

    #[test]
    fn pending_points_are_not_proposed_again() {
        let d = 2;
        let config = small_config(AcquisitionName::LogEi);
        let x: Vec<f64> = (0..8)
            .flat_map(|i| [i as f64 / 8.0 + 0.05, (i * 3 % 8) as f64 / 8.0])
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        let first = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &[],
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let second = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &first.x,
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let dist = ((first.x[0] - second.x[0]).powi(2) + (first.x[1] - second.x[1]).powi(2)).sqrt();
        assert!(
            dist > 1e-3,
            "the pending point {:?} was proposed again",
            first.x
        );
    }

    /// With a cheap corner (c(x) = 1 + 20·mean(x)), PBGI's index at a fantasized pending point
    /// stays about its posterior mean and used to remain the maximum: a second worker received
    /// the same point. Every model acquisition must now keep `PENDING_EXCLUSION_RADIUS` away.
    #[test]
    fn model_steps_keep_away_from_pending_points() {
        let d = 2;
        let cost = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let x: Vec<f64> = (0..8)
            .flat_map(|i| [i as f64 / 8.0 + 0.05, (i * 3 % 8) as f64 / 8.0])
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        for acq in [
            AcquisitionName::Pbgi,
            AcquisitionName::PbgiD,
            AcquisitionName::LogEi,
            AcquisitionName::LogEipc,
            AcquisitionName::Ucb,
            AcquisitionName::Ts,
        ] {
            let config = small_config(acq);
            let mut pending: Vec<f64> = Vec::new();
            for _ in 0..3 {
                let p = propose(
                    d,
                    History {
                        x: &x,
                        y: &y,
                        cost: &[],
                        pending: &pending,
                    },
                    &config,
                    &StepContext::default(),
                    CostSetting::Known(&cost),
                    5,
                    None,
                )
                .unwrap();
                for q in pending.chunks(d) {
                    let dist = ((q[0] - p.x[0]).powi(2) + (q[1] - p.x[1]).powi(2)).sqrt();
                    assert!(
                        dist >= PENDING_EXCLUSION_RADIUS * (1.0 - 1e-12),
                        "{acq:?}: proposed {:?} at distance {dist} of pending {q:?}",
                        p.x
                    );
                }
                pending.extend_from_slice(&p.x);
            }
        }
    }

    /// When the pending balls cover the whole cube, the step still proposes (without the
    /// restriction) instead of failing.
    #[test]
    fn pending_points_covering_the_cube_do_not_block_a_step() {
        let d = 1;
        let config = small_config(AcquisitionName::LogEi);
        let x = [0.1, 0.4, 0.6, 0.9];
        let y: Vec<f64> = x.iter().map(|v| -(v - 0.3f64).powi(2)).collect();
        let pending: Vec<f64> = (0..=10).map(|i| i as f64 / 10.0).collect();
        let p = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &pending,
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            1,
            None,
        )
        .unwrap();
        assert!(p.x[0].is_finite() && (0.0..=1.0).contains(&p.x[0]));
        assert!(p.acquisition_value.is_finite());
    }

    /// One continuous coordinate and a categorical parameter with 3 choices (one-hot, d = 4).
    fn cat3_space() -> MixedSpace {
        use crate::optim::mixed::OneHotBlock;
        MixedSpace::new(4, vec![OneHotBlock { start: 1, len: 3 }], Vec::new()).unwrap()
    }

    /// Observations at valid points only (one-hot vertices): the posterior variance is largest
    /// inside the block, where no trial can be.
    fn cat3_history(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let x0 = (i as f64 * 0.37 + 0.05) % 1.0;
            let mut p = [x0, 0.0, 0.0, 0.0];
            p[1 + i % 3] = 1.0;
            y.push(-(x0 - 0.3f64).powi(2) + [0.0, 0.1, -0.2][i % 3]);
            x.extend_from_slice(&p);
        }
        (x, y)
    }

    /// Issue 20.1: UCB's maximum over the relaxed cube lies inside the one-hot block (not a
    /// valid point); with the space the proposal is valid, and its acquisition value (the value
    /// at that valid point) is at least the best valid value found by brute force on a grid.
    #[test]
    fn mixed_proposals_are_valid_and_reach_the_brute_force_valid_maximum() {
        let d = 4;
        let space = cat3_space();
        let (x, y) = cat3_history(12);
        let hist = History {
            x: &x,
            y: &y,
            cost: &[],
            pending: &[],
        };
        let ctx = StepContext::default();
        let relaxed_config = small_config(AcquisitionName::Ucb);
        let relaxed = propose(
            d,
            hist,
            &relaxed_config,
            &ctx,
            CostSetting::Uniform,
            2,
            None,
        )
        .unwrap();
        assert!(!space.is_valid(&relaxed.x), "premise: {:?}", relaxed.x);
        let config = StepConfig {
            space: Some(space.clone()),
            ..relaxed_config
        };
        let p = propose(d, hist, &config, &ctx, CostSetting::Uniform, 2, None).unwrap();
        assert!(space.is_valid(&p.x), "{:?}", p.x);
        let t = Transforms {
            normalize_inputs: None,
            standardize_outcomes: true,
            output_scale: None,
        };
        let model = GpModel::with_params(&x, &y, d, &t, p.params.clone().unwrap()).unwrap();
        let ucb = OnModel::new(&model, UpperConfidenceBound { beta: 2.0 });
        let mut grid = Vec::new();
        for k in 0..3 {
            for i in 0..=1000 {
                let mut q = [i as f64 / 1000.0, 0.0, 0.0, 0.0];
                q[1 + k] = 1.0;
                grid.extend_from_slice(&q);
            }
        }
        let mut vals = vec![0.0; grid.len() / d];
        ucb.values(&grid, &mut vals);
        let brute = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut at = [0.0];
        ucb.values(&p.x, &mut at);
        assert!((at[0] - p.acquisition_value).abs() <= 1e-9 * at[0].abs().max(1.0));
        assert!(
            p.acquisition_value >= brute - 1e-6 * brute.abs().max(1.0),
            "{} < brute force {brute}",
            p.acquisition_value
        );
        // The relaxed value was larger: it was scored at a point no trial can have.
        assert!(relaxed.acquisition_value > p.acquisition_value);
    }

    /// Issue 21.4: with pending trials on a categorical space, every acquisition keeps its
    /// proposal (a valid point) at least `PENDING_EXCLUSION_RADIUS` away from every pending
    /// point in the space the study proposes from.
    #[test]
    fn pending_exclusion_holds_between_projected_points() {
        let d = 4;
        let space = cat3_space();
        let (x, y) = cat3_history(12);
        let c: Vec<f64> = x.chunks(d).map(|p| 1.0 + p[0]).collect();
        let ctx = StepContext {
            remaining_budget: Some(50.0),
            total_budget: Some(60.0),
            ..StepContext::default()
        };
        for acq in [
            AcquisitionName::Pbgi,
            AcquisitionName::LogEi,
            AcquisitionName::Ucb,
            AcquisitionName::Ts,
            AcquisitionName::Mes,
            AcquisitionName::Kg,
            AcquisitionName::OneShotKg,
            AcquisitionName::MsEi,
            AcquisitionName::BMsEi,
        ] {
            let mut config = small_config(acq);
            config.space = Some(space.clone());
            if matches!(
                acq,
                AcquisitionName::OneShotKg | AcquisitionName::MsEi | AcquisitionName::BMsEi
            ) {
                config.multistart.raw_samples = Some(32);
                config.multistart.num_restarts = Some(2);
            }
            let steps = if config.multistart.raw_samples == Some(32) {
                3
            } else {
                6
            };
            let mut pending: Vec<f64> = Vec::new();
            for k in 0..steps {
                let hist = History {
                    x: &x,
                    y: &y,
                    cost: &c,
                    pending: &pending,
                };
                let cost = if acq == AcquisitionName::BMsEi {
                    CostSetting::Unknown
                } else {
                    CostSetting::Uniform
                };
                let p = propose(d, hist, &config, &ctx, cost, 5 + k, None).unwrap();
                assert!(space.is_valid(&p.x), "{acq:?}: {:?}", p.x);
                for q in pending.chunks(d) {
                    let dist = q
                        .iter()
                        .zip(&p.x)
                        .map(|(a, b)| (a - b).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    assert!(
                        dist >= PENDING_EXCLUSION_RADIUS,
                        "{acq:?}: proposed {:?} at distance {dist} of pending {q:?}",
                        p.x
                    );
                }
                pending.extend_from_slice(&p.x);
            }
        }
    }

    /// Measures the mixed strategies (docs/studies.md, "Mixed spaces"): on GPs fitted to random
    /// valid points of four mixed spaces, the acquisition value each strategy reaches at its
    /// (valid) point, relative to the best of them, and its evaluations and time. Run with
    /// `cargo test -p pandora-core --lib measure_mixed_strategies -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn measure_mixed_strategies() {
        use crate::optim::mixed::{DiscreteCoord, MixedStrategy, OneHotBlock, maximize_mixed_with};
        let block = |start, len| OneHotBlock { start, len };
        let int8 = |index| DiscreteCoord {
            index,
            values: (0..8).map(|i| (i as f64 + 0.5) / 8.0).collect(),
        };
        let spaces = [
            (
                "float+cat3",
                MixedSpace::new(4, vec![block(1, 3)], vec![]).unwrap(),
            ),
            (
                "2float+cat3+int8",
                MixedSpace::new(6, vec![block(2, 3)], vec![int8(5)]).unwrap(),
            ),
            (
                "float+3cat3",
                MixedSpace::new(10, vec![block(1, 3), block(4, 3), block(7, 3)], vec![]).unwrap(),
            ),
            (
                "2float+cat5+cat4+cat4+int8",
                MixedSpace::new(
                    16,
                    vec![block(2, 5), block(7, 4), block(11, 4)],
                    vec![int8(15)],
                )
                .unwrap(),
            ),
        ];
        let strategies = [
            MixedStrategy::Relax,
            MixedStrategy::LocalSearch,
            MixedStrategy::Seeded,
            MixedStrategy::Enumerate,
        ];
        for (name, space) in &spaces {
            let d = space.dim();
            let mut gap = [0.0f64; 4];
            let mut worst = [0.0f64; 4];
            let mut wins = [0usize; 4];
            let mut evals = [0usize; 4];
            let mut secs = [0.0f64; 4];
            let cases = 12;
            for case in 0..cases {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(case as u64);
                let n = 3 * d;
                let mut x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
                space.project_rows(&mut x);
                let w: Vec<f64> = (0..d).map(|_| rng.random::<f64>() * 4.0 - 2.0).collect();
                let y: Vec<f64> = x
                    .chunks(d)
                    .map(|p| p.iter().zip(&w).map(|(a, b)| (3.0 * a * b).sin()).sum())
                    .collect();
                let t = Transforms {
                    normalize_inputs: None,
                    standardize_outcomes: true,
                    output_scale: None,
                };
                let fit = FitOptions {
                    seed: case as u64,
                    ..FitOptions::default()
                };
                let model = GpModel::fit(&x, &y, d, &t, &fit, None).unwrap();
                let best_f = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let acq_name = if case % 2 == 0 {
                    AcquisitionName::LogEi
                } else {
                    AcquisitionName::Ucb
                };
                let params = AcquisitionParams {
                    best_f: Some(best_f),
                    beta: Some(2.0),
                    ..AcquisitionParams::default()
                };
                let obj = OnModel::new(&model, build_pointwise(acq_name, &params, d).unwrap());
                let ms = MultiStartOptions::default();
                let mut vals = [0.0; 4];
                for (k, &st) in strategies.iter().enumerate() {
                    let t0 = std::time::Instant::now();
                    let r = maximize_mixed_with(&obj, space, &ms, case as u64, st).unwrap();
                    secs[k] += t0.elapsed().as_secs_f64();
                    assert!(space.is_valid(&r.x));
                    vals[k] = r.value;
                    evals[k] += r.evaluations;
                }
                let top = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for k in 0..4 {
                    let g = (top - vals[k]) / top.abs().max(1e-12);
                    gap[k] += g / cases as f64;
                    worst[k] = worst[k].max(g);
                    if vals[k] >= top - 1e-9 * top.abs().max(1.0) {
                        wins[k] += 1;
                    }
                }
            }
            for (k, st) in strategies.iter().enumerate() {
                println!(
                    "{name:28} {st:12?} best-in-{wins:2}/{cases} mean-rel-gap {:.2e} worst {:.2e} \
                     evals/case {:8} ms/case {:7.1}",
                    gap[k],
                    worst[k],
                    evals[k] / cases,
                    1e3 * secs[k] / cases as f64,
                    wins = wins[k],
                );
            }
        }
    }

    #[test]
    fn steps_are_deterministic_and_the_initial_design_is_one_sobol_sequence() {
        let key = |ps: Vec<Proposal>| -> Vec<(Vec<f64>, u64, Option<GpParams>)> {
            ps.into_iter()
                .map(|p| (p.x, p.acquisition_value.to_bits(), p.params))
                .collect()
        };
        let a = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        let b = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        assert_eq!(a, b);
        // Random search proposes distinct points and no model.
        let r = run(AcquisitionName::Random, 8, CostSetting::Uniform, 1);
        assert!(
            r.iter()
                .skip(6)
                .all(|p| p.phase == Phase::Random && p.params.is_none())
        );
        let bad = propose(
            2,
            History {
                x: &[0.1],
                y: &[1.0],
                cost: &[],
                pending: &[],
            },
            &StepConfig::default(),
            &StepContext::default(),
            CostSetting::Uniform,
            0,
            None,
        );
        assert!(bad.is_err());
    }

    fn lookahead_history() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let x: Vec<f64> = (0..10)
            .flat_map(|i| {
                [
                    (i as f64 * 0.37 + 0.05) % 1.0,
                    (i as f64 * 0.61 + 0.1) % 1.0,
                ]
            })
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        let c: Vec<f64> = x.chunks(2).map(|p| 1.0 + 3.0 * p[0]).collect();
        (x, y, c)
    }

    #[test]
    fn bmsei_carry_drives_the_refill_rule_and_the_warm_start() {
        let (x, y, c) = lookahead_history();
        let config = small_config(AcquisitionName::BMsEi);
        let ctx = StepContext {
            remaining_budget: Some(15.0),
            total_budget: Some(20.0),
            ..StepContext::default()
        };
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let first = propose(2, hist, &config, &ctx, CostSetting::Unknown, 3, None).unwrap();
        let carry = first.bmsei.clone().unwrap();
        // A fresh rollout of K + 1 = 4 steps: B_s ≥ 4 × its cheapest fantasized cost.
        assert!(carry.suggested_budget >= 4.0 * carry.lower_bound * (1.0 - 1e-12));
        assert!(carry.lower_bound > 0.0);
        // One tree per restart plus the heuristic start, each of 4 points × d = 2.
        assert_eq!(carry.trees.len(), 6 + 1);
        assert!(carry.trees.iter().all(|t| t.len() == 8));
        assert!(carry.trees.iter().any(|t| t[..2] == first.x[..]));

        // The next step with the carry: B_s drops by the last real cost while it stays above the
        // lower bound, and no rollout is done.
        let mut x2 = x.clone();
        x2.extend_from_slice(&first.x);
        let mut y2 = y.clone();
        y2.push(f(&first.x));
        let last = carry.lower_bound * 0.5;
        let mut c2 = c.clone();
        c2.push(last);
        let hist2 = History {
            x: &x2,
            y: &y2,
            cost: &c2,
            pending: &[],
        };
        let ctx2 = StepContext {
            remaining_budget: Some(15.0 - last),
            bmsei: Some(carry.clone()),
            ..ctx.clone()
        };
        let second = propose(2, hist2, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        let next = second.bmsei.clone().unwrap();
        assert_eq!(next.suggested_budget, carry.suggested_budget - last);
        assert_eq!(next.lower_bound, carry.lower_bound);
        // Warm-started and deterministic.
        let again = propose(2, hist2, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_eq!(second, again);
        // Without the refill rule (or when the leftover falls to the lower bound) a rollout runs.
        let mut no_refill = config.clone();
        no_refill.params.refill = Some(false);
        let fresh = propose(2, hist2, &no_refill, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_ne!(fresh.bmsei.unwrap().suggested_budget, next.suggested_budget);
        let mut spent = c.clone();
        spent.push(carry.suggested_budget - carry.lower_bound);
        let hist3 = History {
            cost: &spent,
            ..hist2
        };
        let rolled = propose(2, hist3, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_ne!(
            rolled.bmsei.unwrap().suggested_budget,
            carry.suggested_budget - (carry.suggested_budget - carry.lower_bound)
        );
        // The warm start changes the maximization's raw candidates; turning it off does too.
        let mut cold = config.clone();
        cold.params.warm_start = Some(false);
        let c3 = propose(2, hist2, &cold, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_eq!(c3.bmsei.unwrap().suggested_budget, next.suggested_budget);
    }

    #[test]
    fn lookahead_and_entropy_acquisitions_propose_in_bounds_and_deterministically() {
        let (x, y, c) = lookahead_history();
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 3.0,
        };
        let ctx = StepContext {
            remaining_budget: Some(5.0),
            total_budget: Some(20.0),
            ..StepContext::default()
        };
        for (acq, cost) in [
            (AcquisitionName::BudgetedEi, CostSetting::Unknown),
            (AcquisitionName::BudgetedEi, CostSetting::Known(&linear)),
            (AcquisitionName::Mes, CostSetting::Uniform),
            (AcquisitionName::MesCost, CostSetting::Unknown),
            (AcquisitionName::MesCost, CostSetting::Known(&linear)),
            (AcquisitionName::Kg, CostSetting::Uniform),
            (AcquisitionName::OneShotKg, CostSetting::Uniform),
            (AcquisitionName::BMsEi, CostSetting::Unknown),
            (AcquisitionName::BMsEi, CostSetting::Known(&linear)),
            (AcquisitionName::MsEi, CostSetting::Uniform),
        ] {
            let config = small_config(acq);
            let hist = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &[],
            };
            let a = propose(2, hist, &config, &ctx, cost, 7, None).unwrap();
            let b = propose(2, hist, &config, &ctx, cost, 7, None).unwrap();
            assert_eq!(a.phase, Phase::Model);
            assert!(a.x.iter().all(|v| (0.0..=1.0).contains(v)), "{acq}");
            assert!(
                a.acquisition_value.is_finite() && a.acquisition_value > 0.0,
                "{acq}: {}",
                a.acquisition_value
            );
            assert!(a.predicted_cost.unwrap() > 0.0);
            assert_eq!(a, b, "{acq} is not deterministic");
        }
        // BEI needs a remaining budget.
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let config = small_config(AcquisitionName::BudgetedEi);
        let e = propose(
            2,
            hist,
            &config,
            &StepContext::default(),
            CostSetting::Unknown,
            7,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("remaining_budget"), "{e}");
    }

    #[test]
    fn mes_max_values_are_drawn_once_per_step_and_shared_by_the_restarts() {
        let (x, y, c) = lookahead_history();
        let config = small_config(AcquisitionName::Mes);
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let seed = 13;
        let p = propose(
            2,
            hist,
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            seed,
            None,
        )
        .unwrap();
        // Rebuild the step's model and its one set of max values.
        let fit_opts = FitOptions {
            seed,
            ..config.fit.clone()
        };
        let t = Transforms {
            normalize_inputs: None,
            standardize_outcomes: true,
            output_scale: None,
        };
        let model = GpModel::fit(&x, &y, 2, &t, &fit_opts, None).unwrap();
        let mes = mes_for_step(&model, &x, 2, seed).unwrap();
        assert_eq!(mes.max_values.len(), 10);
        let again = mes_for_step(&model, &x, 2, seed).unwrap();
        assert_eq!(mes, again);
        let other = mes_for_step(&model, &x, 2, seed + 1).unwrap();
        assert_ne!(mes, other);
        // Every restart's end value is the value of that same MES at its end point.
        let obj = OnModel::new(&model, mes.clone());
        let r = maximize(&obj, &config.multistart, seed).unwrap();
        assert_eq!(r.x, p.x);
        assert_eq!(r.value.to_bits(), p.acquisition_value.to_bits());
        for (xr, vr) in &r.restarts {
            let (v, _) = obj.evaluate(xr, false).unwrap();
            assert_eq!(v[0].to_bits(), vr.to_bits());
        }
    }
}
