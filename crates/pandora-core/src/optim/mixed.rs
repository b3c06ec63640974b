//! Maximization over a mixed (continuous, discrete, categorical) unit cube.
//!
//! # The problem
//!
//! The study layer encodes every parameter on the unit cube `[0,1]^d`: a float takes one
//! continuous coordinate, an int or ordinal one coordinate that can only take the values of a
//! grid (cell centres, `i/(k − 1)`), and a categorical parameter with `k` choices a block of `k`
//! coordinates of which exactly one is 1 and the others 0 (one-hot). The optimizer's continuous
//! maximum usually lies *between* those points, e.g. at `(…, 0.95, 0.10)` inside a one-hot block.
//! Projecting it afterwards ("snapping") evaluates somewhere else than where the acquisition was
//! large, and a statistic maximized over the whole cube (a stopping rule's `max_x LogEIPC`) can
//! sit forever at a point no trial can have: the posterior variance there never shrinks.
//!
//! [`MixedSpace`] describes which points are valid (the one-hot blocks, the discrete coordinates
//! with their grids; everything else continuous) and [`MixedSpace::project`] maps any point of the
//! cube to the nearest valid point (Euclidean: the one-hot vertex of the largest coordinate,
//! the nearest grid value, the clamped continuous value). [`maximize_mixed`] maximizes an
//! [`Objective`] over the valid points only: every value it compares, and the value it returns,
//! is the objective at a valid point.
//!
//! # Strategies ([`MixedStrategy`])
//!
//! - [`MixedStrategy::Relax`]: maximize on the relaxed cube ([`maximize`]), project the best raw
//!   sample and every restart's end point, re-score them and keep the best (BoTorch's fallback
//!   when there are too many combinations to enumerate).
//! - [`MixedStrategy::LocalSearch`]: Optuna `GPSampler`'s scheme. Raw samples are projected
//!   Sobol points (valid, so the choices are uniform), the starts are chosen among them by the
//!   usual Boltzmann rule ([`boltzmann_select`]); from each start, rounds of (a) L-BFGS-B on the
//!   continuous coordinates with the discrete ones fixed and (b) an exhaustive sweep of each
//!   one-hot block's choices and each discrete coordinate's grid (one coordinate at a time,
//!   keeping a strict improvement), until a round changes nothing.
//! - [`MixedStrategy::Enumerate`] (the default): BoTorch's `optimize_acqf_mixed` for the
//!   categorical part and the local search for the rest. Every combination of choices (at most
//!   [`ENUMERATE_LIMIT`]) receives its best raw sample as a start in addition to the Boltzmann
//!   starts, so no choice is left unexplored because its raw samples happened to score low;
//!   with more combinations it is the plain local search.
//!
//! The default was chosen by measurement (the acquisition value reached at the valid returned
//! point on fitted GPs; see `docs/studies.md`, "Mixed spaces").
//!
//! Every strategy is deterministic for a seed (the starts are drawn before any parallel work,
//! restarts run in parallel and are reduced in order, ties to the earlier candidate). On an
//! all-continuous space [`maximize_mixed`] *is* [`maximize`] (same calls, same floating-point
//! operations).

use rayon::prelude::*;

use super::lbfgsb::{LbfgsbWorkspace, minimize_with_workspace};
use super::multistart::{
    MultiStartOptions, MultiStartResult, Objective, boltzmann_select, maximize,
};
use super::sobol::Sobol;
use crate::error::{Error, Result};

/// Largest number of categorical combinations that [`MixedStrategy::Enumerate`] enumerates.
pub const ENUMERATE_LIMIT: usize = 64;

/// Grids up to this size are swept exhaustively; larger ones on a window around the current
/// value plus evenly spaced values (see [`MixedSpace`]).
const SWEEP_ALL: usize = 128;

/// Rounds of the local search (continuous phase + sweeps) per start, at most.
const MAX_ROUNDS: usize = 20;

/// A one-hot block: coordinates `start .. start + len` of which exactly one is 1.
#[derive(Debug, Clone, PartialEq)]
pub struct OneHotBlock {
    /// First coordinate.
    pub start: usize,
    /// Number of choices (`≥ 1`).
    pub len: usize,
}

/// A coordinate that may only take the values of a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscreteCoord {
    /// The coordinate.
    pub index: usize,
    /// The allowed values in `[0,1]`, strictly increasing, at least one.
    pub values: Vec<f64>,
}

/// The valid points of a unit cube `[0,1]^d`: one-hot blocks, discrete coordinates, and every
/// other coordinate continuous (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct MixedSpace {
    dim: usize,
    one_hot: Vec<OneHotBlock>,
    discrete: Vec<DiscreteCoord>,
}

impl MixedSpace {
    /// The all-continuous cube of dimension `d`.
    pub fn continuous(d: usize) -> Self {
        Self {
            dim: d,
            one_hot: Vec::new(),
            discrete: Vec::new(),
        }
    }

    /// A space of dimension `d` with these one-hot blocks and discrete coordinates. Errors if a
    /// block is empty or a coordinate lies outside `0..d` or belongs to two structures, or if a
    /// grid is empty, not strictly increasing or not inside `[0,1]`.
    pub fn new(d: usize, one_hot: Vec<OneHotBlock>, discrete: Vec<DiscreteCoord>) -> Result<Self> {
        let mut owner = vec![false; d];
        let mut claim = |i: usize, what: &str| -> Result<()> {
            match owner.get_mut(i) {
                Some(o) if !*o => {
                    *o = true;
                    Ok(())
                }
                Some(_) => Err(Error::invalid(
                    what,
                    format!("coordinate {i} is used twice"),
                )),
                None => Err(Error::invalid(
                    what,
                    format!("coordinate {i} is outside 0..{d}"),
                )),
            }
        };
        for b in &one_hot {
            if b.len == 0 {
                return Err(Error::invalid("one_hot", "a block needs at least 1 choice"));
            }
            for i in b.start..b.start + b.len {
                claim(i, "one_hot")?;
            }
        }
        for c in &discrete {
            claim(c.index, "discrete")?;
            let ok = !c.values.is_empty()
                && c.values.iter().all(|v| (0.0..=1.0).contains(v))
                && c.values.windows(2).all(|w| w[0] < w[1]);
            if !ok {
                return Err(Error::invalid(
                    "discrete",
                    format!(
                        "coordinate {}: the grid must be non-empty, strictly increasing and \
                         inside [0, 1]",
                        c.index
                    ),
                ));
            }
        }
        Ok(Self {
            dim: d,
            one_hot,
            discrete,
        })
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The one-hot blocks.
    pub fn one_hot(&self) -> &[OneHotBlock] {
        &self.one_hot
    }

    /// The discrete coordinates.
    pub fn discrete(&self) -> &[DiscreteCoord] {
        &self.discrete
    }

    /// Whether every coordinate is continuous (no block, no grid).
    pub fn is_continuous(&self) -> bool {
        self.one_hot.is_empty() && self.discrete.is_empty()
    }

    /// The continuous coordinates, increasing.
    pub fn continuous_coords(&self) -> Vec<usize> {
        let mut free = vec![true; self.dim];
        for b in &self.one_hot {
            free[b.start..b.start + b.len].fill(false);
        }
        for c in &self.discrete {
            free[c.index] = false;
        }
        (0..self.dim).filter(|&i| free[i]).collect()
    }

    /// The coordinates that are not in a one-hot block (continuous and discrete), increasing.
    fn non_categorical_coords(&self) -> Vec<usize> {
        let mut free = vec![true; self.dim];
        for b in &self.one_hot {
            free[b.start..b.start + b.len].fill(false);
        }
        (0..self.dim).filter(|&i| free[i]).collect()
    }

    /// The same structure repeated on `copies` consecutive points of dimension `d` (a space of
    /// dimension `copies · d`), e.g. for a look-ahead tree whose every node is a proposal.
    pub fn repeated(&self, copies: usize) -> Self {
        let d = self.dim;
        let mut out = Self::continuous(copies * d);
        for k in 0..copies {
            out.one_hot.extend(self.one_hot.iter().map(|b| OneHotBlock {
                start: b.start + k * d,
                len: b.len,
            }));
            out.discrete
                .extend(self.discrete.iter().map(|c| DiscreteCoord {
                    index: c.index + k * d,
                    values: c.values.clone(),
                }));
        }
        out
    }

    /// The same structure on the first `self.dim()` coordinates of a cube of dimension
    /// `d ≥ self.dim()` (the others continuous).
    pub fn extended(&self, d: usize) -> Self {
        Self {
            dim: d.max(self.dim),
            ..self.clone()
        }
    }

    /// Projects `x` (length `d`) in place onto the nearest valid point: continuous coordinates
    /// clamped to `[0,1]` (NaN to 0), each one-hot block to the vertex of its largest coordinate
    /// (ties to the first), each discrete coordinate to the nearest grid value (ties to the
    /// lower).
    pub fn project_in_place(&self, x: &mut [f64]) {
        for v in x.iter_mut() {
            *v = if *v >= 1.0 {
                1.0
            } else if *v > 0.0 {
                *v
            } else {
                0.0
            };
        }
        for b in &self.one_hot {
            let block = &mut x[b.start..b.start + b.len];
            let best = (0..b.len).fold(0, |m, i| if block[i] > block[m] { i } else { m });
            block.fill(0.0);
            block[best] = 1.0;
        }
        for c in &self.discrete {
            x[c.index] = nearest(&c.values, x[c.index]);
        }
    }

    /// The nearest valid point to `x` (see [`MixedSpace::project_in_place`]).
    pub fn project(&self, x: &[f64]) -> Vec<f64> {
        let mut y = x.to_vec();
        self.project_in_place(&mut y);
        y
    }

    /// Projects every row of a row-major array of points of dimension `d`.
    pub fn project_rows(&self, xs: &mut [f64]) {
        if self.dim == 0 {
            return;
        }
        for row in xs.chunks_exact_mut(self.dim) {
            self.project_in_place(row);
        }
    }

    /// Whether `x` is valid (its projection is itself).
    pub fn is_valid(&self, x: &[f64]) -> bool {
        x.len() == self.dim && self.project(x) == x
    }

    /// The number of combinations of choices of the one-hot blocks (saturating; 1 without
    /// blocks).
    pub fn combinations(&self) -> usize {
        self.one_hot
            .iter()
            .fold(1usize, |n, b| n.saturating_mul(b.len))
    }

    /// Sets the one-hot blocks of `x` to combination `k` (`0 ≤ k < combinations()`, mixed radix
    /// with the first block varying fastest).
    pub fn set_combination(&self, mut k: usize, x: &mut [f64]) {
        for b in &self.one_hot {
            let block = &mut x[b.start..b.start + b.len];
            block.fill(0.0);
            block[k % b.len] = 1.0;
            k /= b.len;
        }
    }

    /// The combination number of the one-hot blocks of a valid `x` (inverse of
    /// [`MixedSpace::set_combination`]).
    pub fn combination_of(&self, x: &[f64]) -> usize {
        let mut k = 0;
        let mut radix = 1usize;
        for b in &self.one_hot {
            let block = &x[b.start..b.start + b.len];
            let i = (0..b.len).fold(0, |m, i| if block[i] > block[m] { i } else { m });
            k += i * radix;
            radix = radix.saturating_mul(b.len);
        }
        k
    }
}

/// The grid value nearest to `v` (ties to the lower).
fn nearest(grid: &[f64], v: f64) -> f64 {
    let j = grid.partition_point(|&g| g < v);
    if j == 0 {
        grid[0]
    } else if j < grid.len() && v - grid[j - 1] > grid[j] - v {
        grid[j]
    } else {
        grid[j - 1]
    }
}

/// How [`maximize_mixed_with`] searches a mixed space (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MixedStrategy {
    /// Relax, project, re-score.
    Relax,
    /// Optuna-style local search from projected raw samples.
    LocalSearch,
    /// Local search with every categorical combination given a start (the default).
    #[default]
    Seeded,
    /// BoTorch-style enumeration: a full multi-start maximization per combination.
    Enumerate,
}

/// Maximizes `obj` over the valid points of `space` with the default strategy; on an
/// all-continuous space this is [`maximize`]. `opts`' bounds, if set, apply to the continuous
/// coordinates only.
pub fn maximize_mixed(
    obj: &dyn Objective,
    space: &MixedSpace,
    opts: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    maximize_mixed_with(obj, space, opts, seed, MixedStrategy::default())
}

/// [`maximize_mixed`] with an explicit strategy (used to measure them).
pub fn maximize_mixed_with(
    obj: &dyn Objective,
    space: &MixedSpace,
    opts: &MultiStartOptions,
    seed: u64,
    strategy: MixedStrategy,
) -> Result<MultiStartResult> {
    if space.is_continuous() {
        return maximize(obj, opts, seed);
    }
    let d = obj.dim();
    if d != space.dim() {
        return Err(Error::dim("mixed space", d, space.dim()));
    }
    match strategy {
        MixedStrategy::Relax => relax_project(obj, space, opts, seed),
        MixedStrategy::LocalSearch => local_search_all(obj, space, opts, seed, false),
        MixedStrategy::Seeded => local_search_all(
            obj,
            space,
            opts,
            seed,
            space.combinations() <= ENUMERATE_LIMIT,
        ),
        MixedStrategy::Enumerate if space.combinations() <= ENUMERATE_LIMIT => {
            enumerate(obj, space, opts, seed)
        }
        MixedStrategy::Enumerate => local_search_all(obj, space, opts, seed, false),
    }
}

/// Relax, project, re-score.
fn relax_project(
    obj: &dyn Objective,
    space: &MixedSpace,
    opts: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    let r = maximize(obj, opts, seed)?;
    let mut pts: Vec<f64> = r.x.clone();
    for (x, _) in &r.restarts {
        pts.extend_from_slice(x);
    }
    space.project_rows(&mut pts);
    let mut vals = vec![f64::NAN; pts.len() / space.dim()];
    obj.values(&pts, &mut vals);
    let d = space.dim();
    let best = argmax(&vals)
        .ok_or_else(|| Error::Numerical("objective is NaN at every projected candidate".into()))?;
    let restarts = pts[d..]
        .chunks_exact(d)
        .zip(&vals[1..])
        .map(|(x, &v)| (x.to_vec(), v))
        .collect();
    Ok(MultiStartResult {
        x: pts[best * d..(best + 1) * d].to_vec(),
        value: vals[best],
        restarts,
        raw_top: Vec::new(),
        evaluations: r.evaluations + vals.len(),
    })
}

/// BoTorch's `optimize_acqf_mixed`: for every combination of choices, multi-start maximization
/// of the other coordinates (discrete ones relaxed) with that combination fixed, then projection
/// and one sweep of the discrete coordinates; the best over the combinations.
fn enumerate(
    obj: &dyn Objective,
    space: &MixedSpace,
    opts: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    let d = space.dim();
    let free = space.non_categorical_coords();
    let mut best: Option<(Vec<f64>, f64)> = None;
    let mut restarts = Vec::new();
    let mut evaluations = 0;
    for k in 0..space.combinations() {
        let mut base = vec![0.0; d];
        space.set_combination(k, &mut base);
        let (mut x, mut v) = if free.is_empty() {
            let mut v = [f64::NAN];
            obj.values(&base, &mut v);
            evaluations += 1;
            (base, v[0])
        } else {
            let sub = Fixed {
                inner: obj,
                base: base.clone(),
                free: &free,
            };
            let sub_opts = MultiStartOptions {
                lower: None,
                upper: None,
                raw_points: None,
                extra_starts: Vec::new(),
                ..opts.clone()
            };
            let r = maximize(&sub, &sub_opts, seed ^ (k as u64).wrapping_mul(0x9e37))?;
            evaluations += r.evaluations;
            let mut x = base;
            for (j, &i) in free.iter().enumerate() {
                x[i] = r.x[j];
            }
            space.project_in_place(&mut x);
            let mut v = [f64::NAN];
            obj.values(&x, &mut v);
            (x, v[0])
        };
        if v.is_finite() {
            evaluations += sweep(obj, space, &mut x, &mut v, d);
        }
        if !v.is_nan() && best.as_ref().is_none_or(|(_, bv)| v > *bv) {
            best = Some((x.clone(), v));
        }
        restarts.push((x, v));
    }
    let (x, value) =
        best.ok_or_else(|| Error::Numerical("objective is NaN at every combination".into()))?;
    Ok(MultiStartResult {
        x,
        value,
        restarts,
        raw_top: Vec::new(),
        evaluations,
    })
}

/// The projected raw samples: `opts.raw_points` or `raw_samples` (default `200·d`) scrambled
/// Sobol points, then projected.
fn raw_candidates(space: &MixedSpace, opts: &MultiStartOptions, seed: u64) -> Result<Vec<f64>> {
    let d = space.dim();
    let mut xs = match &opts.raw_points {
        Some(p) if !p.is_empty() && p.len().is_multiple_of(d) => p.clone(),
        Some(_) => {
            return Err(Error::invalid(
                "MultiStartOptions::raw_points",
                format!("needs a positive multiple of {d} coordinates"),
            ));
        }
        None => {
            let raw = opts.raw_samples.unwrap_or(200 * d).max(1);
            let mut xs = vec![0.0; raw * d];
            Sobol::scrambled(d, seed)?.fill(0, raw, &mut xs)?;
            xs
        }
    };
    space.project_rows(&mut xs);
    Ok(xs)
}

/// The local search (Optuna's scheme) from Boltzmann-selected projected raw samples, plus with
/// `per_combination` the best raw sample of every categorical combination.
fn local_search_all(
    obj: &dyn Objective,
    space: &MixedSpace,
    opts: &MultiStartOptions,
    seed: u64,
    per_combination: bool,
) -> Result<MultiStartResult> {
    let d = space.dim();
    let xs = raw_candidates(space, opts, seed)?;
    let m = xs.len() / d;
    let mut vals = vec![f64::NAN; m];
    xs.par_chunks(128 * d)
        .zip(vals.par_chunks_mut(128))
        .for_each(|(x, o)| obj.values(x, o));
    let restarts = opts.num_restarts.unwrap_or(10 * d).max(1);
    let mut chosen = boltzmann_select(&vals, restarts.min(m), opts.eta, seed)?;
    if per_combination {
        let mut best_of = vec![None::<usize>; space.combinations()];
        for i in 0..m {
            if !vals[i].is_finite() {
                continue;
            }
            let k = space.combination_of(&xs[i * d..(i + 1) * d]);
            if best_of[k].is_none_or(|b| vals[i] > vals[b]) {
                best_of[k] = Some(i);
            }
        }
        for i in best_of.into_iter().flatten() {
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
    }
    let mut starts: Vec<Vec<f64>> = chosen
        .iter()
        .map(|&i| xs[i * d..(i + 1) * d].to_vec())
        .collect();
    for s in &opts.extra_starts {
        if s.len() != d {
            return Err(Error::dim("extra_starts", d, s.len()));
        }
        starts.push(space.project(s));
    }
    let (lower, upper) = continuous_bounds(space, opts)?;
    let runs: Vec<Result<(Vec<f64>, f64, usize)>> = starts
        .into_par_iter()
        .map(|x| local_search(obj, space, x, opts, &lower, &upper))
        .collect();
    crate::optim::multistart::reduce(&xs, &vals, d, m, runs)
}

/// The bounds of the continuous coordinates (from `opts`, default `[0,1]`).
fn continuous_bounds(space: &MixedSpace, opts: &MultiStartOptions) -> Result<(Vec<f64>, Vec<f64>)> {
    let free = space.continuous_coords();
    let pick = |b: &Option<Vec<f64>>, default: f64| -> Result<Vec<f64>> {
        match b {
            None => Ok(vec![default; free.len()]),
            Some(v) if v.len() == space.dim() => Ok(free.iter().map(|&i| v[i]).collect()),
            Some(v) => Err(Error::dim("MultiStartOptions bounds", space.dim(), v.len())),
        }
    };
    Ok((pick(&opts.lower, 0.0)?, pick(&opts.upper, 1.0)?))
}

/// One start's local search: rounds of L-BFGS-B on the continuous coordinates and exhaustive
/// sweeps of each block and grid, until a round changes nothing. Returns the end point, its
/// value and the number of evaluations.
fn local_search(
    obj: &dyn Objective,
    space: &MixedSpace,
    mut x: Vec<f64>,
    opts: &MultiStartOptions,
    lower: &[f64],
    upper: &[f64],
) -> Result<(Vec<f64>, f64, usize)> {
    let d = space.dim();
    let mut v = [f64::NAN];
    obj.values(&x, &mut v);
    let mut v = v[0];
    let mut evals = 1;
    if !v.is_finite() {
        return Ok((x, v, evals));
    }
    let free = space.continuous_coords();
    let mut ws = LbfgsbWorkspace::new(free.len().max(1), opts.lbfgsb.memory);
    for _ in 0..MAX_ROUNDS {
        let before = v;
        if !free.is_empty() {
            let sub = Fixed {
                inner: obj,
                base: x.clone(),
                free: &free,
            };
            let mut z: Vec<f64> = free
                .iter()
                .enumerate()
                .map(|(k, &i)| x[i].clamp(lower[k], upper[k]))
                .collect();
            let r = minimize_with_workspace(
                |z, g| {
                    let val = sub.value_grad(z, g);
                    g.iter_mut().for_each(|gi| *gi = -*gi);
                    -val
                },
                &mut z,
                lower,
                upper,
                &opts.lbfgsb,
                &mut ws,
            )?;
            evals += r.evaluations;
            if -r.f > v {
                v = -r.f;
                for (k, &i) in free.iter().enumerate() {
                    x[i] = z[k];
                }
            }
        }
        evals += sweep(obj, space, &mut x, &mut v, d);
        if v <= before {
            break;
        }
    }
    Ok((x, v, evals))
}

/// One sweep over the one-hot blocks and the discrete coordinates of `x` (value `v`), one at a
/// time, keeping strict improvements. Returns the number of evaluations.
fn sweep(obj: &dyn Objective, space: &MixedSpace, x: &mut [f64], v: &mut f64, d: usize) -> usize {
    let mut evals = 0;
    let mut try_rows = |x: &mut [f64], v: &mut f64, rows: Vec<f64>| {
        let mut out = vec![f64::NAN; rows.len() / d];
        obj.values(&rows, &mut out);
        evals += out.len();
        if let Some(i) = argmax(&out)
            && out[i] > *v
        {
            *v = out[i];
            x.copy_from_slice(&rows[i * d..(i + 1) * d]);
        }
    };
    for b in space.one_hot() {
        let mut rows = Vec::with_capacity(b.len * d);
        for c in 0..b.len {
            rows.extend_from_slice(x);
            let n = rows.len();
            let block = &mut rows[n - d + b.start..n - d + b.start + b.len];
            block.fill(0.0);
            block[c] = 1.0;
        }
        try_rows(x, v, rows);
    }
    for c in space.discrete() {
        let grid = &c.values;
        let here = grid.partition_point(|&g| g < x[c.index]);
        let idx: Vec<usize> = if grid.len() <= SWEEP_ALL {
            (0..grid.len()).collect()
        } else {
            let step = grid.len().div_ceil(64);
            let lo = here.saturating_sub(16);
            let hi = (here + 17).min(grid.len());
            let mut idx: Vec<usize> = (lo..hi).chain((0..grid.len()).step_by(step)).collect();
            idx.sort_unstable();
            idx.dedup();
            idx
        };
        let mut rows = Vec::with_capacity(idx.len() * d);
        for &j in &idx {
            rows.extend_from_slice(x);
            let n = rows.len();
            rows[n - d + c.index] = grid[j];
        }
        try_rows(x, v, rows);
    }
    evals
}

/// `obj` as a function of the coordinates `free` only, the others fixed at `base`.
struct Fixed<'a> {
    inner: &'a dyn Objective,
    base: Vec<f64>,
    free: &'a [usize],
}

impl Objective for Fixed<'_> {
    fn dim(&self) -> usize {
        self.free.len()
    }

    fn value_grad(&self, z: &[f64], grad: &mut [f64]) -> f64 {
        let mut x = self.base.clone();
        for (k, &i) in self.free.iter().enumerate() {
            x[i] = z[k];
        }
        let mut g = vec![0.0; x.len()];
        let v = self.inner.value_grad(&x, &mut g);
        for (k, &i) in self.free.iter().enumerate() {
            grad[k] = g[i];
        }
        v
    }

    fn values(&self, zs: &[f64], out: &mut [f64]) {
        let n = self.free.len();
        let d = self.base.len();
        let mut xs = Vec::with_capacity(zs.len() / n * d);
        for z in zs.chunks_exact(n) {
            xs.extend_from_slice(&self.base);
            let m = xs.len();
            for (k, &i) in self.free.iter().enumerate() {
                xs[m - d + i] = z[k];
            }
        }
        self.inner.values(&xs, out);
    }
}

/// Index of the largest non-NaN value, lowest index among ties.
fn argmax(values: &[f64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in values.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|b| v > values[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One continuous coordinate and a categorical block of 3 choices (d = 4).
    fn cat3() -> MixedSpace {
        MixedSpace::new(4, vec![OneHotBlock { start: 1, len: 3 }], Vec::new()).unwrap()
    }

    /// A smooth objective whose maximum on the cube is at `(0.3, 0.55, 0.55, 0)`, inside the
    /// one-hot block; over valid points it is largest at choice 0 or 1 (by symmetry, ties to 0)
    /// with `x0 = 0.3`, and choice 2 is bad.
    struct Bump;

    impl Objective for Bump {
        fn dim(&self) -> usize {
            4
        }
        fn value_grad(&self, x: &[f64], g: &mut [f64]) -> f64 {
            let c = [0.3, 0.55, 0.55, 0.0];
            let w = [1.0, 1.0, 1.0, 1.0];
            let mut v = 0.0;
            for i in 0..4 {
                v -= w[i] * (x[i] - c[i]).powi(2);
                g[i] = -2.0 * w[i] * (x[i] - c[i]);
            }
            v
        }
    }

    /// The best valid value on a fine grid of the continuous coordinate.
    fn brute_force(obj: &dyn Objective, space: &MixedSpace) -> f64 {
        let mut best = f64::NEG_INFINITY;
        let mut x = vec![0.0; space.dim()];
        let mut g = vec![0.0; space.dim()];
        for k in 0..space.combinations() {
            space.set_combination(k, &mut x);
            for i in 0..=2000 {
                x[0] = i as f64 / 2000.0;
                best = best.max(obj.value_grad(&x, &mut g));
            }
        }
        best
    }

    #[test]
    fn projection_is_the_nearest_valid_point() {
        let s = MixedSpace::new(
            5,
            vec![OneHotBlock { start: 1, len: 3 }],
            vec![DiscreteCoord {
                index: 4,
                values: vec![0.1, 0.5, 0.9],
            }],
        )
        .unwrap();
        assert_eq!(
            s.project(&[1.2, 0.95, 0.1, 0.96, 0.31]),
            vec![1.0, 0.0, 0.0, 1.0, 0.5]
        );
        // Ties: first choice, lower grid value; NaN clamps to 0.
        assert_eq!(
            s.project(&[f64::NAN, 0.5, 0.5, 0.2, 0.3]),
            vec![0.0, 1.0, 0.0, 0.0, 0.1]
        );
        assert!(s.is_valid(&[0.25, 0.0, 1.0, 0.0, 0.9]));
        assert!(!s.is_valid(&[0.25, 0.0, 0.9, 0.0, 0.9]));
        assert_eq!(s.continuous_coords(), vec![0]);
        assert_eq!(s.combinations(), 3);
        let mut x = vec![0.0; 5];
        for k in 0..3 {
            s.set_combination(k, &mut x);
            assert_eq!(s.combination_of(&x), k);
        }
        let r = s.repeated(2);
        assert_eq!(r.dim(), 10);
        assert_eq!(r.one_hot()[1].start, 6);
        assert_eq!(r.discrete()[1].index, 9);
        // Overlaps, bad grids and out-of-range blocks are refused.
        assert!(MixedSpace::new(3, vec![OneHotBlock { start: 1, len: 3 }], vec![]).is_err());
        let grid = |values: Vec<f64>| DiscreteCoord { index: 0, values };
        assert!(MixedSpace::new(2, vec![], vec![grid(vec![0.5, 0.2])]).is_err());
        assert!(MixedSpace::new(2, vec![], vec![grid(vec![])]).is_err());
        assert!(MixedSpace::new(2, vec![], vec![grid(vec![1.5])]).is_err());
        assert!(
            MixedSpace::new(
                2,
                vec![OneHotBlock { start: 0, len: 2 }],
                vec![grid(vec![0.5])]
            )
            .is_err()
        );
    }

    /// Every strategy returns a valid point whose value is the objective there and at least the
    /// brute-force valid maximum (minus a tolerance); relaxing alone lands on the invalid
    /// interior maximum.
    #[test]
    fn every_strategy_reaches_the_best_valid_point() {
        let s = cat3();
        let opts = MultiStartOptions {
            raw_samples: Some(64),
            num_restarts: Some(4),
            ..MultiStartOptions::default()
        };
        let relaxed = maximize(&Bump, &opts, 1).unwrap();
        assert!(!s.is_valid(&relaxed.x), "{:?}", relaxed.x);
        let best = brute_force(&Bump, &s);
        for strategy in [
            MixedStrategy::Relax,
            MixedStrategy::LocalSearch,
            MixedStrategy::Seeded,
            MixedStrategy::Enumerate,
        ] {
            let r = maximize_mixed_with(&Bump, &s, &opts, 1, strategy).unwrap();
            assert!(s.is_valid(&r.x), "{strategy:?}: {:?}", r.x);
            let mut g = [0.0; 4];
            assert_eq!(r.value, Bump.value_grad(&r.x, &mut g), "{strategy:?}");
            assert!(r.value >= best - 1e-9, "{strategy:?}: {} < {best}", r.value);
            let again = maximize_mixed_with(&Bump, &s, &opts, 1, strategy).unwrap();
            assert_eq!(r, again, "{strategy:?} is not deterministic");
        }
        // On an all-continuous space the mixed maximization is the plain one.
        let plain = maximize_mixed(&Bump, &MixedSpace::continuous(4), &opts, 1).unwrap();
        assert_eq!(plain, relaxed);
    }

    /// Discrete coordinates: the sweep finds the best grid value even when the relaxed optimum
    /// rounds to a worse one.
    #[test]
    fn discrete_grids_are_swept() {
        // f = -(x0 - 0.3)^2 - (x1 - 0.62)^2 - 0.2 (x1 - 0.62)^2 [...] on a grid {0, 0.5, 1}.
        struct Skew;
        impl Objective for Skew {
            fn dim(&self) -> usize {
                2
            }
            fn value_grad(&self, x: &[f64], g: &mut [f64]) -> f64 {
                // Asymmetric in x1: steep below 0.74, flat above, so 1.0 beats 0.5 though 0.5 is
                // nearer to the relaxed maximum.
                let t = x[1] - 0.74;
                let (v1, g1) = if t < 0.0 {
                    (-10.0 * t * t, -20.0 * t)
                } else {
                    (-0.1 * t * t, -0.2 * t)
                };
                g[0] = -2.0 * (x[0] - 0.3);
                g[1] = g1;
                -(x[0] - 0.3).powi(2) + v1
            }
        }
        let s = MixedSpace::new(
            2,
            vec![],
            vec![DiscreteCoord {
                index: 1,
                values: vec![0.0, 0.5, 1.0],
            }],
        )
        .unwrap();
        let opts = MultiStartOptions {
            raw_samples: Some(16),
            num_restarts: Some(2),
            ..MultiStartOptions::default()
        };
        let r = maximize_mixed(&Skew, &s, &opts, 3).unwrap();
        assert_eq!(r.x[1], 1.0);
        assert!((r.x[0] - 0.3).abs() < 1e-4, "{:?}", r.x);
        // Relax-then-project rounds to 0.5.
        let relaxed = maximize_mixed_with(&Skew, &s, &opts, 3, MixedStrategy::Relax).unwrap();
        assert!(relaxed.value < r.value);
    }
}
