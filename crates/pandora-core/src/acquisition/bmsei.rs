//! Budgeted multi-step expected improvement (B-MS-EI; Astudillo et al., NeurIPS 2021) with unknown
//! costs: the one-shot scenario tree.
//!
//! See `docs/lookahead.md` for the formulas, the settings and the fixes of the reference code's
//! bugs.

use crate::error::{Error, Result};

/// Largest number of look-ahead stages of a [`FantasyTree`].
pub const MAX_STAGES: usize = 4;

/// Largest number of fantasies per stage.
pub const MAX_FANTASIES: usize = 64;

/// Largest number of points (decision variables of `d` coordinates each) in a tree.
pub const MAX_TREE_POINTS: usize = 128;

/// The fantasies per look-ahead stage of a B-MS-EI tree, e.g. `[1, 1, 1]` (the path variant,
/// four decision stages) or `[4, 4, 2]`. The number of decision stages is `len + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FantasyTree {
    stages: [u8; MAX_STAGES],
    len: u8,
}

impl Default for FantasyTree {
    /// `[1, 1, 1]`, the reference code's default for the synthetic problems.
    fn default() -> Self {
        Self {
            stages: [1, 1, 1, 0],
            len: 3,
        }
    }
}

impl FantasyTree {
    /// A tree with `stages[k]` fantasies at look-ahead stage `k + 1`. Errors unless there are
    /// 1 to [`MAX_STAGES`] stages of 1 to [`MAX_FANTASIES`] fantasies each and at most
    /// [`MAX_TREE_POINTS`] points.
    pub fn new(stages: &[usize]) -> Result<Self> {
        if stages.is_empty() || stages.len() > MAX_STAGES {
            return Err(Error::invalid(
                "tree",
                format!(
                    "needs 1 to {MAX_STAGES} look-ahead stages, got {}",
                    stages.len()
                ),
            ));
        }
        if let Some(m) = stages.iter().find(|&&m| !(1..=MAX_FANTASIES).contains(&m)) {
            return Err(Error::invalid(
                "tree",
                format!("fantasies per stage must be 1 to {MAX_FANTASIES}, got {m}"),
            ));
        }
        let mut s = [0u8; MAX_STAGES];
        for (o, &m) in s.iter_mut().zip(stages) {
            *o = m as u8;
        }
        let t = Self {
            stages: s,
            len: stages.len() as u8,
        };
        if t.num_points() > MAX_TREE_POINTS {
            return Err(Error::invalid(
                "tree",
                format!(
                    "{stages:?} has {} points, more than {MAX_TREE_POINTS}",
                    t.num_points()
                ),
            ));
        }
        Ok(t)
    }

    /// Fantasies per look-ahead stage.
    pub fn stages(&self) -> Vec<usize> {
        self.stages[..self.len as usize]
            .iter()
            .map(|&m| m as usize)
            .collect()
    }

    /// Number of look-ahead stages `K` (the tree has `K + 1` decision stages).
    pub fn depth(&self) -> usize {
        self.len as usize
    }

    /// Number of tree points `1 + Σ_n Π_{k≤n} m_k` (4 for `[1,1,1]`, 53 for `[4,4,2]`).
    pub fn num_points(&self) -> usize {
        let mut total = 1;
        let mut width = 1;
        for m in self.stages() {
            width *= m;
            total += width;
        }
        total
    }

    /// Number of nodes at decision stage `n` (`0 ≤ n ≤ depth`).
    pub fn width(&self, n: usize) -> usize {
        self.stages().iter().take(n).product()
    }

    /// The label used in file names, e.g. `111` or `442`.
    pub fn label(&self) -> String {
        self.stages().iter().map(|m| m.to_string()).collect()
    }
}

impl serde::Serialize for FantasyTree {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.stages().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for FantasyTree {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Vec::<usize>::deserialize(d)?;
        Self::new(&v).map_err(serde::de::Error::custom)
    }
}

use super::analytic::ExpectedImprovementPerCost;
use super::budgeted::{BUDGET_CLAMP, budgeted_ei};
use super::cost::CostModel;
use super::cost::LogCostBatch;
use super::fantasy_path::{PathScalar, budgeted_ei_path, condition_path};
use super::{LogCost, OnModel, UnknownCost, UpperConfidenceBound};
use crate::gp::{ExactGp, GpModel, PairPosterior, Posterior, PosteriorBatch};
use crate::math::norm_ppf;
use crate::optim::multistart::{MultiStartOptions, Objective, maximize, value_grad_or_nan};
use crate::optim::sobol::Sobol;
use num_dual::DualDVec64;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A GP in raw units on raw inputs: the internal [`ExactGp`] of a [`GpModel`] with its input and
/// outcome transforms, which can be conditioned on fantasized observations (raw units) without
/// refitting.
#[derive(Debug, Clone)]
pub struct ScaledGp {
    gp: ExactGp,
    lower: Vec<f64>,
    range: Vec<f64>,
    y_mean: f64,
    y_std: f64,
}

impl ScaledGp {
    /// The model's posterior, with the same hyperparameters and transforms.
    pub fn from_model(model: &GpModel) -> Result<Self> {
        let d = model.dim();
        let t0 = model.to_internal(&vec![0.0; d])?;
        let t1 = model.to_internal(&vec![1.0; d])?;
        let range: Vec<f64> = t0.iter().zip(&t1).map(|(a, b)| 1.0 / (b - a)).collect();
        let lower: Vec<f64> = t0.iter().zip(&range).map(|(a, r)| -a * r).collect();
        let (y_mean, y_std) = model.outcome_scale();
        Ok(Self {
            gp: model.inner().clone(),
            lower,
            range,
            y_mean,
            y_std,
        })
    }

    fn internal(&self, x: &[f64]) -> Vec<f64> {
        let d = self.lower.len();
        x.iter()
            .enumerate()
            .map(|(i, v)| (v - self.lower[i % d]) / self.range[i % d])
            .collect()
    }

    /// Latent posterior mean and variance at one raw point.
    pub fn mean_var(&self, x: &[f64]) -> Result<(f64, f64)> {
        let p = self.gp.posterior(&self.internal(x), false)?;
        Ok((
            self.y_mean + self.y_std * p.mean[0],
            p.var[0] * self.y_std * self.y_std,
        ))
    }

    /// [`ExactGp::posterior_pairs`] in raw units on raw points.
    pub fn pairs(&self, xs: &[f64], pairs: &[(usize, usize)], grad: bool) -> Result<PairPosterior> {
        let d = self.lower.len();
        let mut p = self.gp.posterior_pairs(&self.internal(xs), pairs, grad)?;
        let s = self.y_std;
        for m in &mut p.mean {
            *m = self.y_mean + s * *m;
        }
        for v in p.var.iter_mut().chain(p.cov.iter_mut()) {
            *v *= s * s;
        }
        for (i, g) in p.mean_grad.iter_mut().enumerate() {
            *g *= s / self.range[i % d];
        }
        for (i, g) in p
            .var_grad
            .iter_mut()
            .chain(p.cov_grad.iter_mut())
            .enumerate()
        {
            *g *= s * s / self.range[i % d];
        }
        Ok(p)
    }

    /// Observation-noise variance in raw units.
    pub fn noise(&self) -> f64 {
        self.gp.params().noise * self.y_std * self.y_std
    }

    /// The posterior after also observing `y` (raw units) at the raw point `x`.
    pub fn condition(&self, x: &[f64], y: f64) -> Result<Self> {
        let z = (y - self.y_mean) / self.y_std;
        Ok(Self {
            gp: self.gp.condition_on(&self.internal(x), &[z])?,
            lower: self.lower.clone(),
            range: self.range.clone(),
            y_mean: self.y_mean,
            y_std: self.y_std,
        })
    }
}

impl Posterior for ScaledGp {
    fn dim(&self) -> usize {
        self.lower.len()
    }
    fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        let d = self.lower.len();
        let mut p = self.gp.posterior(&self.internal(xs), grad)?;
        let s = self.y_std;
        for m in &mut p.mean {
            *m = self.y_mean + s * *m;
        }
        for v in &mut p.var {
            *v *= s * s;
        }
        for (i, g) in p.mean_grad.iter_mut().enumerate() {
            *g *= s / self.range[i % d];
        }
        for (i, g) in p.var_grad.iter_mut().enumerate() {
            *g *= s * s / self.range[i % d];
        }
        Ok(p)
    }
}

/// `((μ, σ²), (m, v))` at one point: the objective's and the log cost's latent posteriors.
type Prediction = ((f64, f64), (f64, f64));

/// How the cost of a fantasized evaluation is known.
#[derive(Clone)]
pub enum CostBelief<'a> {
    /// Unknown: a GP on log cost (conditioned on fantasized log costs along a path).
    Unknown(Box<ScaledGp>),
    /// A known cost function.
    Known(&'a dyn CostModel),
    /// Every evaluation costs 1.
    Uniform,
}

impl CostBelief<'_> {
    /// `(mean, variance)` of the latent log cost at `x`.
    fn log_cost(&self, x: &[f64]) -> Result<(f64, f64)> {
        match self {
            Self::Unknown(g) => g.mean_var(x),
            Self::Known(c) => {
                let lc = c.log_cost(x, x.len(), false)?;
                Ok((lc.mean[0], 0.0))
            }
            Self::Uniform => Ok((0.0, 0.0)),
        }
    }
}

/// The state of a node of the scenario tree: the (fantasy-conditioned) models, the incumbent and
/// the remaining suggested budget on the path to it.
#[derive(Clone)]
pub struct NodeState<'a> {
    /// The objective model.
    pub f: ScaledGp,
    /// The cost belief.
    pub cost: CostBelief<'a>,
    /// The best objective value, real or fantasized, on the path.
    pub best: f64,
    /// The remaining budget on the path (suggested budget minus fantasized costs).
    pub budget: f64,
}

impl<'a> NodeState<'a> {
    /// The stage value `BEI(x; best, budget) = EI · Φ((ln b − m)/√v)` (Proposition 1).
    pub fn stage_value(&self, x: &[f64]) -> Result<f64> {
        if self.budget.is_nan() || self.budget <= BUDGET_CLAMP {
            return Ok(0.0);
        }
        Ok(self.stage_value_from(self.predict(x)?))
    }

    /// `((μ, σ²), (m, v))`: the objective's and the log cost's latent posteriors at `x`.
    fn predict(&self, x: &[f64]) -> Result<Prediction> {
        Ok((self.f.mean_var(x)?, self.cost.log_cost(x)?))
    }

    /// The stage value from the posteriors at the node's point (0 once the budget is exhausted).
    fn stage_value_from(&self, ((mu, var), (m, v)): Prediction) -> f64 {
        if self.budget.is_nan() || self.budget <= BUDGET_CLAMP {
            return 0.0;
        }
        let sigma = var.max(1e-12).sqrt();
        budgeted_ei(
            mu,
            sigma,
            LogCost { mean: m, var: v },
            self.best,
            self.budget,
        )
        .value
    }

    /// The state after evaluating `x` and observing the fantasy with standard-normal base
    /// samples `(z_f, z_c)` of the predictive distributions (observation noise included):
    /// `ŷ = μ + z_f √(σ² + noise)`, `ln ĉ = m + z_c √(v + noise_c)`. The budget drops by
    /// `ĉ = exp(ln ĉ)` (once: the reference code's double subtraction, A10.3, is not copied).
    pub fn child(&self, x: &[f64], z: (f64, f64)) -> Result<NodeState<'a>> {
        self.child_from(x, z, self.predict(x)?)
    }

    /// [`NodeState::child`] with the posteriors at `x` already computed.
    fn child_from(
        &self,
        x: &[f64],
        z: (f64, f64),
        ((mu, var), (m, v)): Prediction,
    ) -> Result<NodeState<'a>> {
        let y = mu + z.0 * (var + self.f.noise()).sqrt();
        let (cost, c_hat) = match &self.cost {
            CostBelief::Unknown(g) => {
                let lc = m + z.1 * (v + g.noise()).sqrt();
                (CostBelief::Unknown(Box::new(g.condition(x, lc)?)), lc.exp())
            }
            other => (other.clone(), m.exp()),
        };
        Ok(NodeState {
            f: self.f.condition(x, y)?,
            cost,
            best: self.best.max(y),
            budget: self.budget - c_hat,
        })
    }
}

/// Standard-normal base samples `(z_f, z_c)` of `m` fantasies: `(0, 0)` (the posterior-mean
/// fantasy of the reference code) for `m = 1`, otherwise `Φ⁻¹` of `m` two-dimensional
/// scrambled-Sobol points with a scramble seeded by the stage (the same at every node of a stage,
/// as the reference's `collapse_fantasy_base_samples` with its `SobolQMCNormalSampler`), centred so
/// that their mean is exactly 0.
pub fn fantasy_base_samples(m: usize, stage: usize) -> Result<Vec<(f64, f64)>> {
    if m == 0 {
        return Err(Error::invalid("fantasies", "must be at least 1"));
    }
    if m == 1 {
        return Ok(vec![(0.0, 0.0)]);
    }
    let u = Sobol::scrambled(2, 0x626d_7365_6900 + stage as u64)?.points(m)?;
    let z_of = |p: f64| norm_ppf(p.clamp(1e-12, 1.0 - 1e-12));
    let mut z: Vec<(f64, f64)> = u
        .chunks_exact(2)
        .map(|p| (z_of(p[0]), z_of(p[1])))
        .collect();
    let (a, b) = z.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
    for p in &mut z {
        p.0 -= a / m as f64;
        p.1 -= b / m as f64;
    }
    Ok(z)
}

/// The one-shot B-MS-EI tree value as an [`Objective`] over the whole tree (row-major
/// `num_points × d`, stage-major: the root, then the stage-1 nodes, …; the children of node `j`
/// of stage `n` are nodes `j·m_{n+1} … j·m_{n+1} + m_{n+1} − 1` of stage `n + 1`).
///
/// `Q(tree) = Σ_n (1/width_n) Σ_{nodes j of stage n} BEI_j(x_j)`, each node's value computed on
/// the models conditioned on the fantasies of its path, with its path's incumbent and remaining
/// budget. Each node's posterior comes in closed form from the root posterior at its path (see
/// `fantasy_path`), so no conditioned GP is built; the gradient is exact (analytic root
/// gradients, forward-mode automatic differentiation through each node's path).
pub struct BudgetedMultiStepEi<'a> {
    root: NodeState<'a>,
    tree: FantasyTree,
    d: usize,
    /// Per tree point (global row): the rows of its path from the root, itself last.
    paths: Vec<Vec<usize>>,
    /// Per tree point: the base samples `(z_f, z_c)` of its ancestors' fantasies on its path.
    zs: Vec<Vec<(f64, f64)>>,
    /// The (ancestor, node) pairs whose root covariances the tree needs, node by node.
    pairs: Vec<(usize, usize)>,
    /// Per tree point: the index in `pairs` of `(path[0], row)`; `(path[i], row)` follows at `+ i`.
    pair_start: Vec<usize>,
    /// Per tree point: the weight `1/width` of its stage.
    weights: Vec<f64>,
}

/// Row `q` of a row-major `· × d` gradient matrix, or nothing without gradients.
fn grad_row(v: &[f64], q: usize, d: usize, grad: bool) -> &[f64] {
    if grad { &v[q * d..(q + 1) * d] } else { &[] }
}

/// The root quantities of the log-cost belief at the tree points.
enum CostAtPoints {
    Gp(PairPosterior, f64),
    Known(LogCostBatch),
    Uniform,
}

impl<'a> BudgetedMultiStepEi<'a> {
    /// The tree acquisition from the root state (real data, incumbent, suggested budget).
    pub fn new(root: NodeState<'a>, tree: FantasyTree) -> Result<Self> {
        let d = root.f.dim();
        let base = tree
            .stages()
            .iter()
            .enumerate()
            .map(|(k, &m)| fantasy_base_samples(m, k))
            .collect::<Result<Vec<_>>>()?;
        let mut paths = vec![vec![0]];
        let mut zs = vec![Vec::new()];
        let mut weights = vec![1.0];
        let mut parent_start = 0;
        for (n, samples) in base.iter().enumerate() {
            let m = samples.len();
            let width = tree.width(n + 1);
            let start = paths.len();
            for j in 0..width {
                let parent = parent_start + j / m;
                let mut path = paths[parent].clone();
                path.push(start + j);
                let mut z = zs[parent].clone();
                z.push(samples[j % m]);
                paths.push(path);
                zs.push(z);
                weights.push(1.0 / width as f64);
            }
            parent_start = start;
        }
        let mut pairs = Vec::new();
        let mut pair_start = Vec::with_capacity(paths.len());
        for (r, path) in paths.iter().enumerate() {
            pair_start.push(pairs.len());
            pairs.extend(path[..path.len() - 1].iter().map(|&a| (a, r)));
        }
        Ok(Self {
            root,
            tree,
            d,
            paths,
            zs,
            pairs,
            pair_start,
            weights,
        })
    }

    /// The tree.
    pub fn tree(&self) -> FantasyTree {
        self.tree
    }

    /// The tree value `Q` at `pts`.
    pub fn value(&self, pts: &[f64]) -> Result<f64> {
        Ok(self.evaluate::<f64>(pts, false)?.0)
    }

    /// Value and exact gradient (row-major like `pts`).
    pub fn value_and_gradient(&self, pts: &[f64]) -> Result<(f64, Vec<f64>)> {
        self.evaluate::<DualDVec64>(pts, true)
    }

    fn check(&self, pts: &[f64]) -> Result<()> {
        let n = self.tree.num_points() * self.d;
        if pts.len() != n {
            return Err(Error::dim("tree points", n, pts.len()));
        }
        if pts.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("tree points", "non-finite coordinate"));
        }
        Ok(())
    }

    fn evaluate<T: PathScalar>(&self, pts: &[f64], grad: bool) -> Result<(f64, Vec<f64>)> {
        self.check(pts)?;
        let mut value = 0.0;
        let mut gradient = vec![0.0; if grad { pts.len() } else { 0 }];
        if self.root.budget.is_nan() || self.root.budget <= BUDGET_CLAMP {
            return Ok((0.0, gradient));
        }
        let f = self.root.f.pairs(pts, &self.pairs, grad)?;
        let cost = match &self.root.cost {
            CostBelief::Unknown(g) => CostAtPoints::Gp(g.pairs(pts, &self.pairs, grad)?, g.noise()),
            CostBelief::Known(c) => CostAtPoints::Known(c.log_cost(pts, self.d, grad)?),
            CostBelief::Uniform => CostAtPoints::Uniform,
        };
        let d = self.d;
        for r in 0..self.paths.len() {
            let v: T = self.node(r, &f, &cost, grad);
            let w = self.weights[r];
            value += w * v.re();
            if let Some(p) = v.partials() {
                for (i, &q) in self.paths[r].iter().enumerate() {
                    for (g, pk) in gradient[q * d..(q + 1) * d].iter_mut().zip(&p[i * d..]) {
                        *g += w * pk;
                    }
                }
            }
        }
        Ok((value, gradient))
    }

    /// The means and covariance matrix (noise on the ancestors' diagonal) of `r`'s path.
    fn path_inputs<T: PathScalar>(
        &self,
        r: usize,
        pp: &PairPosterior,
        noise: f64,
        grad: bool,
    ) -> (Vec<T>, Vec<T>) {
        let d = self.d;
        let path = &self.paths[r];
        let k = path.len();
        let dirs = if grad { k * d } else { 0 };
        let row = |v, q| grad_row(v, q, d, grad);
        let mu = path
            .iter()
            .enumerate()
            .map(|(i, &q)| T::input(pp.mean[q], dirs, &[(i, row(&pp.mean_grad, q))]))
            .collect();
        let mut cov = vec![T::constant(0.0); k * k];
        for (j, &qj) in path.iter().enumerate() {
            let nz = if j + 1 < k { noise } else { 0.0 };
            cov[j * k + j] = T::input(pp.var[qj] + nz, dirs, &[(j, row(&pp.var_grad, qj))]);
            for i in 0..j {
                let p = self.pair_start[qj] + i;
                let (ga, gb) = if grad {
                    pp.cov_grad[p * 2 * d..(p + 1) * 2 * d].split_at(d)
                } else {
                    (&[][..], &[][..])
                };
                let c = T::input(pp.cov[p], dirs, &[(i, ga), (j, gb)]);
                cov[i * k + j] = c.clone();
                cov[j * k + i] = c;
            }
        }
        (mu, cov)
    }

    /// The stage value of tree point `r` on its path's fantasies.
    fn node<T: PathScalar>(
        &self,
        r: usize,
        f: &PairPosterior,
        cost: &CostAtPoints,
        grad: bool,
    ) -> T {
        let d = self.d;
        let path = &self.paths[r];
        let n = path.len() - 1;
        let dirs = if grad { path.len() * d } else { 0 };
        let z_f: Vec<f64> = self.zs[r].iter().map(|z| z.0).collect();
        let (mu_path, cov_path) = self.path_inputs::<T>(r, f, self.root.f.noise(), grad);
        let (ys, mu, var) = condition_path(&mu_path, &cov_path, &z_f);
        let (costs, m, v): (Vec<T>, T, T) = match cost {
            CostAtPoints::Gp(pp, noise) => {
                let z_c: Vec<f64> = self.zs[r].iter().map(|z| z.1).collect();
                let (mc, cc) = self.path_inputs::<T>(r, pp, *noise, grad);
                let (lcs, m, v) = condition_path(&mc, &cc, &z_c);
                let v = if v.re() > 0.0 { v } else { T::constant(0.0) };
                (lcs.into_iter().map(|l| l.exp()).collect(), m, v)
            }
            CostAtPoints::Known(lc) => {
                let at = |i: usize, q: usize| {
                    T::input(
                        lc.mean[q],
                        dirs,
                        &[(i, grad_row(&lc.mean_grad, q, d, grad))],
                    )
                };
                let costs = path[..n].iter().enumerate().map(|(i, &q)| at(i, q).exp());
                (costs.collect(), at(n, r), T::constant(0.0))
            }
            CostAtPoints::Uniform => (
                vec![T::constant(1.0); n],
                T::constant(0.0),
                T::constant(0.0),
            ),
        };
        let mut budget = T::constant(self.root.budget);
        for c in costs {
            budget -= c;
        }
        let b = budget.re();
        if b.is_nan() || b <= BUDGET_CLAMP {
            return T::constant(0.0);
        }
        let mut best = T::constant(self.root.best);
        for y in ys {
            if y.re() > best.re() {
                best = y;
            }
        }
        let sigma = if var.re() > 1e-12 {
            var.sqrt()
        } else {
            T::constant(1e-6)
        };
        budgeted_ei_path(mu, sigma, m, v, best, budget)
    }
}

impl Objective for BudgetedMultiStepEi<'_> {
    fn dim(&self) -> usize {
        self.tree.num_points() * self.d
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        value_grad_or_nan(self.value_and_gradient(x), grad)
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        let n = self.dim();
        for (x, o) in xs.chunks_exact(n).zip(out.iter_mut()) {
            *o = self.value(x).unwrap_or(f64::NAN);
        }
    }
}

/// What B-MS-EI carries from one step to the next (notes A6, A7): the suggested budget and its
/// lower bound for the refill rule, and the previous maximization's final trees for the warm
/// start. A step's carry is part of its output; passing it to the next step of the same run keeps
/// the run a pure function of its recorded steps (experiments store it in the trace).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BmseiCarry {
    /// The suggested budget `B_s` the step used.
    pub suggested_budget: f64,
    /// The cheapest fantasized cost of the rollout that set `B_s` (the refill rule's lower bound).
    pub lower_bound: f64,
    /// The final tree of every restart of the step's maximization (row-major, the tree's layout).
    pub trees: Vec<Vec<f64>>,
}

/// The budget a B-MS-EI step's tree plans for (`tree_budget` in a policy spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeBudget {
    /// The B-MS-EI paper's code (notes A6): a rollout of `K + 1` EI-per-unit-cost steps with
    /// cost cooling suggests the budget, kept across steps by the refill rule ([`refilled_budget`]).
    #[default]
    Suggested,
    /// The PBGI repository's BMSEI (reference notes §2): `min(B − C_t, sum of the last
    /// [`RECENT_COSTS`] observed costs)`, recomputed at every step.
    RecentCosts,
}

/// How many of the last observed costs [`TreeBudget::RecentCosts`] adds up.
pub const RECENT_COSTS: usize = 4;

/// [`TreeBudget::RecentCosts`]'s budget and lower bound: `min(remaining, Σ of the last
/// [`RECENT_COSTS`] of `costs`)` and the cheapest of those costs; `None` without an observed cost.
pub fn recent_costs_budget(costs: &[f64], remaining: f64) -> Option<(f64, f64)> {
    let recent = &costs[costs.len().saturating_sub(RECENT_COSTS)..];
    if recent.is_empty() {
        return None;
    }
    let sum: f64 = recent.iter().sum();
    let cheapest = recent.iter().copied().fold(f64::INFINITY, f64::min);
    Some((sum.min(remaining), cheapest))
}

/// The refill rule (notes A6): with the previous step's carry and the cost `c_last` of the last
/// real evaluation, `B_s ← B_s,prev − c_last` (and the lower bound is kept) if that stays above
/// the lower bound; otherwise `None`, meaning a fresh rollout.
pub fn refilled_budget(prev: &BmseiCarry, last_cost: f64) -> Option<(f64, f64)> {
    let b = prev.suggested_budget - last_cost;
    (b > prev.lower_bound).then_some((b, prev.lower_bound))
}

/// Raw candidate trees for the warm start (notes A7 step 1, BoTorch's `warmstart_multistep`):
/// `⌈raw/P⌉` rounds over the `P` previous trees. In round `r` of `R`, every point of decision
/// stage `s` of a tree (of `S` stages) moves to `(1 − η_s) x + η_s Z` with `Z ~ Beta(1, 3)` per
/// coordinate, `η_s = 0.1 + 0.9 s/(S − 1)`, and then the whole tree to `(1 − α_r) T + α_r U` with
/// `U` uniform, `α_r = 0.75 r/(R − 1)`. Trees of another size are skipped; returns the
/// candidates row-major (`num_points·d` per tree), empty if none fits. Seeded.
pub fn warm_start_candidates(
    prev: &[Vec<f64>],
    tree: FantasyTree,
    d: usize,
    raw_samples: usize,
    seed: u64,
) -> Vec<f64> {
    let n = tree.num_points() * d;
    let fit: Vec<&Vec<f64>> = prev.iter().filter(|t| t.len() == n).collect();
    if fit.is_empty() {
        return Vec::new();
    }
    let rounds = raw_samples.div_ceil(fit.len()).max(1);
    let stages = tree.depth() + 1;
    let mut stage_of = Vec::with_capacity(tree.num_points());
    for s in 0..stages {
        stage_of.extend(std::iter::repeat_n(s, tree.width(s)));
    }
    let eta = |s: usize| {
        if stages == 1 {
            0.1
        } else {
            0.1 + 0.9 * s as f64 / (stages - 1) as f64
        }
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7761_726d);
    let mut out = Vec::with_capacity(rounds * fit.len() * n);
    for r in 0..rounds {
        let alpha = if rounds == 1 {
            0.0
        } else {
            0.75 * r as f64 / (rounds - 1) as f64
        };
        for t in &fit {
            for (i, &v) in t.iter().enumerate() {
                let e = eta(stage_of[i / d]);
                // Beta(1, 3) by inversion: F(z) = 1 − (1 − z)³.
                let u: f64 = rng.random();
                let z = 1.0 - (1.0 - u).cbrt();
                let x = (1.0 - e) * v.clamp(0.0, 1.0) + e * z;
                let w: f64 = rng.random();
                out.push((1.0 - alpha) * x + alpha * w);
            }
        }
    }
    out
}

/// The suggested budget of B-MS-EI (notes A6): a rollout of `steps` EI-PUC-CC steps on copies of
/// the models. At each step `ν = b_left / total_budget` (clamped to `[0, 1]`), the EI-PUC-CC
/// maximizer `x` is found with `ms`, one seeded random joint predictive sample `(ŷ, ln ĉ)` is
/// drawn there and conditioned on, and `b_left` drops by `ĉ`. Returns
/// `(min(Σ ĉ, remaining), min ĉ)`. Deterministic for a seed (the reference rollout draws
/// unseeded samples).
pub fn suggested_budget(
    root: &NodeState<'_>,
    remaining: f64,
    total_budget: f64,
    steps: usize,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<(f64, f64)> {
    if !(remaining.is_finite() && total_budget.is_finite() && total_budget > 0.0) {
        return Err(Error::invalid(
            "budget",
            format!(
                "b_ms_ei needs a finite remaining and total budget, got {remaining} and \
                 {total_budget}"
            ),
        ));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x726f_6c6c);
    let mut st = root.clone();
    st.budget = remaining;
    let mut costs = Vec::with_capacity(steps);
    for s in 0..steps {
        let nu = (st.budget / total_budget).clamp(0.0, 1.0);
        let acq = ExpectedImprovementPerCost {
            best_f: st.best,
            alpha: nu,
        };
        let r = match &st.cost {
            CostBelief::Unknown(g) => {
                let c = UnknownCost(g.as_ref());
                maximize(&OnModel::with_cost(&st.f, acq, &c), ms, seed ^ s as u64)?
            }
            CostBelief::Known(c) => maximize(&OnModel::with_cost(&st.f, acq, *c), ms, seed)?,
            CostBelief::Uniform => maximize(&OnModel::new(&st.f, acq), ms, seed ^ s as u64)?,
        };
        let z: (f64, f64) = (
            StandardNormal.sample(&mut rng),
            StandardNormal.sample(&mut rng),
        );
        let next = st.child(&r.x, z)?;
        costs.push(st.budget - next.budget);
        st = next;
    }
    let sum: f64 = costs.iter().sum();
    let low = costs.iter().copied().fold(f64::INFINITY, f64::min);
    Ok((sum.min(remaining), low))
}

/// A heuristic start tree (notes A7, step 2, without the double subtraction of A10.3): the root at
/// the maximizer of the posterior mean, every deeper node at the maximizer of BEI on the model
/// conditioned on the root's posterior-mean fantasy, with the budget reduced once by that
/// fantasy's cost.
pub fn heuristic_tree(
    b: &BudgetedMultiStepEi<'_>,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<Vec<f64>> {
    let root = &b.root;
    let mean = OnModel::new(&root.f, UpperConfidenceBound { beta: 0.0 });
    let x0 = maximize(&mean, ms, seed ^ 0x6875)?.x;
    let child = root.child(&x0, (0.0, 0.0))?;
    let bei = NodeObjective { st: &child };
    let x1 = maximize(&bei, ms, seed ^ 0x6876)?.x;
    let mut out = x0;
    for _ in 1..b.tree.num_points() {
        out.extend_from_slice(&x1);
    }
    Ok(out)
}

/// The stage value of one node as an objective (finite-difference gradient).
struct NodeObjective<'s, 'a> {
    st: &'s NodeState<'a>,
}

impl Objective for NodeObjective<'_, '_> {
    fn dim(&self) -> usize {
        self.st.f.dim()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let Ok(v) = self.st.stage_value(x) else {
            grad.fill(0.0);
            return f64::NAN;
        };
        let mut w = x.to_vec();
        for k in 0..x.len() {
            let h = 1e-6;
            w[k] = x[k] + h;
            let up = self.st.stage_value(&w).unwrap_or(f64::NAN);
            w[k] = x[k] - h;
            let down = self.st.stage_value(&w).unwrap_or(f64::NAN);
            w[k] = x[k];
            grad[k] = (up - down) / (2.0 * h);
        }
        v
    }
}
