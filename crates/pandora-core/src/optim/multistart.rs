//! Multi-start maximization of an acquisition-like objective on a box (default `[0,1]^d`).
//!
//! The start selection is BoTorch's `optimize_acqf` heuristic: evaluate the objective at
//! `raw_samples` scrambled Sobol points, then pick `num_restarts` of them by Boltzmann sampling
//! without replacement with weights `exp(η·z)` of the standardized values `z`, always keeping the
//! best raw point. L-BFGS-B (on `−value`) is run from every start in parallel and the best result
//! wins; the best raw sample itself is also a candidate, so the answer is never worse than it.
//!
//! **Determinism.** For a given seed the result is bit-for-bit the same whatever the number of
//! rayon threads: all randomness (Sobol scrambling, Boltzmann sampling) happens before any
//! parallel work and is drawn from counter-based hashes rather than a shared RNG; batched
//! evaluations use chunks of a fixed size; restart results are collected in restart order and
//! reduced sequentially with ties going to the earlier candidate.

use rayon::prelude::*;

use super::lbfgsb::{LbfgsbOptions, LbfgsbWorkspace, minimize_with_workspace};
use super::lockstep::maximize_lockstep;
pub use super::objective::Objective;
use super::sobol::Sobol;
use crate::error::{Error, Result};

/// How many raw samples a [`MultiStartResult`] keeps ([`MultiStartResult::raw_top`]).
pub const RAW_KEPT: usize = 16;

/// The smallest Euclidean distance between two raw samples kept in
/// [`MultiStartResult::raw_top`] (the pending-point exclusion radius of `optim::domain`).
pub const RAW_KEPT_SEPARATION: f64 = 0.1;

/// Rows per batched `values` call. Fixed (not derived from the thread count) for determinism.
const EVAL_CHUNK: usize = 128;

/// [`Objective::value_grad`] from a fallible evaluation: the gradient is copied into `grad`; an
/// error or a non-finite value or gradient gives NaN (outside the usable domain) and a zero
/// gradient.
pub fn value_grad_or_nan(r: Result<(f64, Vec<f64>)>, grad: &mut [f64]) -> f64 {
    match r {
        Ok((v, g)) if v.is_finite() && g.len() == grad.len() && g.iter().all(|v| v.is_finite()) => {
            grad.copy_from_slice(&g);
            v
        }
        _ => {
            grad.fill(0.0);
            f64::NAN
        }
    }
}

/// Options of [`maximize`].
#[derive(Debug, Clone, PartialEq)]
pub struct MultiStartOptions {
    /// Number of Sobol points evaluated to choose the starts. Default `200·d`.
    pub raw_samples: Option<usize>,
    /// Number of L-BFGS-B restarts chosen among the raw samples. Default `10·d` (at most
    /// `raw_samples`).
    pub num_restarts: Option<usize>,
    /// Boltzmann temperature `η` of the start selection (weights `exp(η·z)`). Default 1.
    pub eta: f64,
    /// Options of every L-BFGS-B run.
    pub lbfgsb: LbfgsbOptions,
    /// Lower bounds (finite), default all 0.
    pub lower: Option<Vec<f64>>,
    /// Upper bounds (finite), default all 1.
    pub upper: Option<Vec<f64>>,
    /// User warm starts (each of length `d`, projected into the box), run after the chosen starts.
    pub extra_starts: Vec<Vec<f64>>,
    /// Raw candidates (row-major, `d` coordinates each, projected into the box) used instead of
    /// the Sobol raw samples; `raw_samples` is then ignored. The starts are chosen among them
    /// the same way (e.g. B-MS-EI's perturbed trees of the previous step).
    pub raw_points: Option<Vec<f64>>,
}

impl Default for MultiStartOptions {
    fn default() -> Self {
        Self {
            raw_samples: None,
            num_restarts: None,
            eta: 1.0,
            lbfgsb: LbfgsbOptions::default(),
            lower: None,
            upper: None,
            extra_starts: Vec::new(),
            raw_points: None,
        }
    }
}

/// Outcome of [`maximize`].
#[derive(Debug, Clone, PartialEq)]
pub struct MultiStartResult {
    /// The best point found.
    pub x: Vec<f64>,
    /// The objective value at `x`.
    pub value: f64,
    /// End point and value of each restart, in start order (chosen starts, then extra starts).
    /// A value is non-finite only if the objective was non-finite at that start.
    pub restarts: Vec<(Vec<f64>, f64)>,
    /// The best raw samples with a finite value, best first (ties to the earlier sample), each at
    /// least [`RAW_KEPT_SEPARATION`] from those before it (greedy), at most [`RAW_KEPT`]:
    /// alternatives next to the restarts' end points
    /// ([`crate::optim::domain::runners_up`]). Empty where the raw samples are not candidates
    /// (the relax-and-project and enumeration strategies of [`crate::optim::mixed`]).
    pub raw_top: Vec<(Vec<f64>, f64)>,
    /// Total number of objective evaluations (raw samples plus all L-BFGS-B evaluations).
    pub evaluations: usize,
}

/// Maximizes `obj` over the box of `opts` (default `[0,1]^d`) by multi-start L-BFGS-B.
///
/// Errors on invalid options (bounds of the wrong length, non-finite or crossed bounds, zero raw
/// samples or restarts, a non-finite or negative `eta`, warm starts of the wrong length or with
/// NaN), on `dim() == 0`, and with [`Error::Numerical`] if the objective is NaN at every raw
/// sample and restart.
pub fn maximize(
    obj: &dyn Objective,
    opts: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    let d = obj.dim();
    if d == 0 {
        return Err(Error::invalid("objective dimension", "must be at least 1"));
    }
    let lower = bound_or(&opts.lower, d, 0.0, "MultiStartOptions::lower")?;
    let upper = bound_or(&opts.upper, d, 1.0, "MultiStartOptions::upper")?;
    for i in 0..d {
        if lower[i] > upper[i] {
            return Err(Error::invalid(
                "MultiStartOptions bounds",
                format!("lower[{i}] = {} > upper[{i}] = {}", lower[i], upper[i]),
            ));
        }
    }
    let raw = opts.raw_samples.unwrap_or(200 * d);
    if raw == 0 {
        return Err(Error::invalid(
            "MultiStartOptions::raw_samples",
            "must be at least 1",
        ));
    }
    let restarts = opts.num_restarts.unwrap_or(10 * d);
    if restarts == 0 {
        return Err(Error::invalid(
            "MultiStartOptions::num_restarts",
            "must be at least 1",
        ));
    }
    if !(opts.eta.is_finite() && opts.eta >= 0.0) {
        return Err(Error::invalid(
            "MultiStartOptions::eta",
            "must be finite and >= 0",
        ));
    }
    for (k, s) in opts.extra_starts.iter().enumerate() {
        if s.len() != d {
            return Err(Error::dim(format!("extra_starts[{k}]"), d, s.len()));
        }
        if s.iter().any(|v| v.is_nan()) {
            return Err(Error::invalid(format!("extra_starts[{k}]"), "contains NaN"));
        }
    }
    opts.lbfgsb.validate()?;

    // 1. Raw samples: scrambled Sobol points scaled to the box, evaluated in fixed-size batches.
    // Every point is a function of its index alone, so generating chunks in parallel is exact.
    // Given raw points replace them.
    let (xs, raw) = match &opts.raw_points {
        Some(points) => {
            if points.is_empty() || !points.len().is_multiple_of(d) {
                return Err(Error::invalid(
                    "MultiStartOptions::raw_points",
                    format!(
                        "needs a positive multiple of {d} coordinates, got {}",
                        points.len()
                    ),
                ));
            }
            if points.iter().any(|v| v.is_nan()) {
                return Err(Error::invalid(
                    "MultiStartOptions::raw_points",
                    "contains NaN",
                ));
            }
            let mut xs = points.clone();
            for row in xs.chunks_exact_mut(d) {
                for i in 0..d {
                    row[i] = row[i].clamp(lower[i], upper[i]);
                }
            }
            (xs, points.len() / d)
        }
        None => {
            let sobol = Sobol::scrambled(d, seed)?;
            let len = raw
                .checked_mul(d)
                .ok_or_else(|| Error::invalid("MultiStartOptions::raw_samples", "too large"))?;
            let mut xs = vec![0.0; len];
            xs.par_chunks_mut(EVAL_CHUNK * d).enumerate().try_for_each(
                |(c, chunk)| -> Result<()> {
                    sobol.fill((c * EVAL_CHUNK) as u64, chunk.len() / d, chunk)?;
                    for row in chunk.chunks_exact_mut(d) {
                        for i in 0..d {
                            row[i] = (lower[i] + (upper[i] - lower[i]) * row[i])
                                .clamp(lower[i], upper[i]);
                        }
                    }
                    Ok(())
                },
            )?;
            (xs, raw)
        }
    };
    let vals = eval_batched(obj, &xs, d);

    // 2. Start selection (sequential, seeded).
    let chosen = boltzmann_select(&vals, restarts.min(raw), opts.eta, seed)?;
    let mut starts: Vec<Vec<f64>> = chosen
        .iter()
        .map(|&i| xs[i * d..(i + 1) * d].to_vec())
        .collect();
    for s in &opts.extra_starts {
        starts.push(
            s.iter()
                .zip(lower.iter().zip(&upper))
                .map(|(&v, (&l, &u))| v.clamp(l, u))
                .collect(),
        );
    }

    // 3. Parallel L-BFGS-B from every start; results collected in start order. Objectives that
    // evaluate blocks much faster than points run the starts in lockstep, one block per round.
    if obj.prefers_blocks() && starts.len() > 1 {
        let runs = maximize_lockstep(obj, starts, &lower, &upper, &opts.lbfgsb);
        return reduce(&xs, &vals, d, raw, runs);
    }
    let runs: Vec<Result<(Vec<f64>, f64, usize)>> = starts
        .into_par_iter()
        .map(|mut x| {
            let mut ws = LbfgsbWorkspace::new(d, opts.lbfgsb.memory);
            let r = minimize_with_workspace(
                |x, g| {
                    let v = obj.value_grad(x, g);
                    for gi in g.iter_mut() {
                        *gi = -*gi;
                    }
                    -v
                },
                &mut x,
                &lower,
                &upper,
                &opts.lbfgsb,
                &mut ws,
            )?;
            Ok((x, -r.f, r.evaluations))
        })
        .collect();

    // 4. Sequential reduction.
    reduce(&xs, &vals, d, raw, runs)
}

/// The result of a multi-start run: the best of the raw samples (`xs`, row-major `· × d`, with
/// their values `vals`; `raw` evaluations) and of the restarts' final points (`runs`, each with its
/// evaluation count), in that order: the best raw sample first, then the restarts in start
/// order, a later one winning only if strictly better; NaN never wins.
pub(crate) fn reduce(
    xs: &[f64],
    vals: &[f64],
    d: usize,
    raw: usize,
    runs: Vec<Result<(Vec<f64>, f64, usize)>>,
) -> Result<MultiStartResult> {
    let mut evaluations = raw;
    let mut best: Option<(Vec<f64>, f64)> =
        argmax(vals).map(|i| (xs[i * d..(i + 1) * d].to_vec(), vals[i]));
    let mut results = Vec::with_capacity(runs.len());
    for run in runs {
        let (x, v, evals) = run?;
        evaluations += evals;
        if !v.is_nan() && best.as_ref().is_none_or(|(_, bv)| v > *bv) {
            best = Some((x.clone(), v));
        }
        results.push((x, v));
    }
    match best {
        Some((x, value)) => Ok(MultiStartResult {
            x,
            value,
            restarts: results,
            raw_top: best_raw(xs, vals, d),
            evaluations,
        }),
        None => Err(Error::Numerical(
            "objective is NaN at every raw sample and restart".into(),
        )),
    }
}

/// The best raw samples of `xs` (row-major `· × d`) with finite values `vals`, best first (ties
/// to the lower index), each at least [`RAW_KEPT_SEPARATION`] from those kept before it; at most
/// [`RAW_KEPT`]. One sort and at most `RAW_KEPT` distances per sample.
fn best_raw(xs: &[f64], vals: &[f64], d: usize) -> Vec<(Vec<f64>, f64)> {
    let mut idx: Vec<usize> = (0..vals.len()).filter(|&i| vals[i].is_finite()).collect();
    idx.sort_by(|a, b| vals[*b].total_cmp(&vals[*a]).then(a.cmp(b)));
    let r2 = RAW_KEPT_SEPARATION * RAW_KEPT_SEPARATION;
    let mut kept: Vec<(Vec<f64>, f64)> = Vec::new();
    for i in idx {
        if kept.len() == RAW_KEPT {
            break;
        }
        let x = &xs[i * d..(i + 1) * d];
        let apart = |k: &(Vec<f64>, f64)| {
            k.0.iter()
                .zip(x)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                >= r2
        };
        if kept.iter().all(apart) {
            kept.push((x.to_vec(), vals[i]));
        }
    }
    kept
}

/// Exact maximization over a finite candidate set (rows of `candidates`, row-major `m × d`):
/// index and value of the best, ties to the lowest index; NaN values never win.
///
/// Errors if `candidates` is empty or not a multiple of `d` long, if `d == 0`, or
/// ([`Error::Numerical`]) if every value is NaN.
pub fn maximize_discrete(obj: &dyn Objective, candidates: &[f64]) -> Result<(usize, f64)> {
    let d = obj.dim();
    if d == 0 {
        return Err(Error::invalid("objective dimension", "must be at least 1"));
    }
    if candidates.is_empty() {
        return Err(Error::invalid("candidates", "empty candidate set"));
    }
    if !candidates.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "candidates",
            format!(
                "length {} is not a multiple of the dimension {d}",
                candidates.len()
            ),
        ));
    }
    let vals = eval_batched(obj, candidates, d);
    let i = argmax(&vals)
        .ok_or_else(|| Error::Numerical("objective is NaN at every candidate".into()))?;
    Ok((i, vals[i]))
}

/// BoTorch-style Boltzmann selection of `n` distinct indices of `values` (maximization).
///
/// Finite values are standardized to `z = (v − mean)/std` and sampled without replacement with
/// weights `exp(η·z)`; if those weights overflow or vanish, `η` is halved until they do not. All
/// equal values give uniform weights. Non-finite values have weight 0 (`+∞` is never sampled but
/// still counts as the maximum). The index of the largest value (lowest index among ties) is
/// always included. Returns fewer than `n` indices only if fewer values are non-NaN. The draw is
/// a deterministic function of `seed`.
///
/// Errors on a negative or non-finite `eta`, or ([`Error::Numerical`]) if every value is NaN.
pub fn boltzmann_select(values: &[f64], n: usize, eta: f64, seed: u64) -> Result<Vec<usize>> {
    if !(eta.is_finite() && eta >= 0.0) {
        return Err(Error::invalid("eta", "must be finite and >= 0"));
    }
    let best = argmax(values).ok_or_else(|| Error::Numerical("every value is NaN".into()))?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let finite: Vec<usize> = (0..values.len())
        .filter(|&i| values[i].is_finite())
        .collect();
    let mut chosen: Vec<usize>;
    if finite.len() <= n {
        chosen = finite;
    } else {
        let m = finite.len() as f64;
        let mean = finite.iter().map(|&i| values[i]).sum::<f64>() / m;
        let var = finite
            .iter()
            .map(|&i| (values[i] - mean).powi(2))
            .sum::<f64>()
            / (m - 1.0);
        let std = var.sqrt();
        let z: Vec<f64> = finite
            .iter()
            .map(|&i| {
                if std > 0.0 {
                    (values[i] - mean) / std
                } else {
                    0.0
                }
            })
            .collect();
        // Weights exp(η z); halve η while they overflow or all underflow.
        let mut eta = eta;
        let mut weights: Vec<f64> = Vec::new();
        for _ in 0..64 {
            weights = z.iter().map(|&zi| (eta * zi).exp()).collect();
            let sum: f64 = weights.iter().sum();
            if sum.is_finite() && sum > 0.0 && weights.iter().all(|w| w.is_finite()) {
                break;
            }
            eta *= 0.5;
            weights.clear();
        }
        if weights.is_empty() || !weights.iter().any(|&w| w > 0.0) {
            weights = vec![1.0; z.len()];
        }
        // Efraimidis–Spirakis: sampling without replacement with probabilities proportional to
        // the weights equals taking the n largest keys ln(U)/w. U comes from a counter-based hash.
        let key_seed = splitmix(seed ^ 0xb017_2a11_5e1e_c7ed);
        let mut keyed: Vec<(f64, usize)> = finite
            .iter()
            .zip(&weights)
            .map(|(&i, &w)| {
                let u = ((splitmix(key_seed.wrapping_add(i as u64)) >> 11) as f64 + 0.5)
                    * (1.0 / 9_007_199_254_740_992.0);
                let key = if w > 0.0 {
                    u.ln() / w
                } else {
                    f64::NEG_INFINITY
                };
                (key, i)
            })
            .collect();
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        chosen = keyed.iter().take(n).map(|&(_, i)| i).collect();
    }
    if !chosen.contains(&best) {
        if chosen.len() < n {
            chosen.push(best);
        } else if let Some(last) = chosen.last_mut() {
            *last = best;
        }
    }
    Ok(chosen)
}

/// Index of the largest non-NaN value, lowest index among ties; `None` if all are NaN.
fn argmax(values: &[f64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in values.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|b| v > values[b]) {
            best = Some(i);
        }
    }
    best
}

fn eval_batched(obj: &dyn Objective, xs: &[f64], d: usize) -> Vec<f64> {
    let m = xs.len() / d;
    let mut out = vec![f64::NAN; m];
    out.par_chunks_mut(EVAL_CHUNK)
        .zip(xs.par_chunks(EVAL_CHUNK * d))
        .for_each(|(o, x)| obj.values(x, o));
    out
}

fn bound_or(b: &Option<Vec<f64>>, d: usize, default: f64, what: &str) -> Result<Vec<f64>> {
    match b {
        None => Ok(vec![default; d]),
        Some(v) => {
            if v.len() != d {
                return Err(Error::dim(what, d, v.len()));
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(Error::invalid(what, format!("bound {i} is not finite")));
            }
            Ok(v.clone())
        }
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
