//! The discrete knowledge gradient (Frazier, Powell & Dayanik, 2009).
//!
//! On a finite set `A = {x_1, …, x_M}`, observing `y = f(x) + ε` at `x` moves the posterior mean
//! on `A` to `μ_{n+1}(x_i) = μ_n(x_i) + σ̃_i(x) Z`, `Z ~ N(0, 1)`, with
//! `σ̃_i(x) = Σ_n(x_i, x) / √(σ_n²(x) + σ_noise²)`. The knowledge gradient is
//!
//! `KG(x) = E[max_i (a_i + b_i Z)] − max_i a_i`, `a = μ_n(A)`, `b = σ̃(x)`,
//!
//! computed exactly by [`expected_max_affine`]: sort the lines by slope, keep the upper envelope
//! (lines that are the maximum on some interval `[c_{k−1}, c_k]` of `Z`), and sum
//! `KG = Σ_k (b_{k+1} − b_k) h(−|c_k|)`, `h(z) = zΦ(z) + φ(z)`, where `c_k` is the breakpoint
//! between consecutive envelope lines. The partials are `∂E/∂a_k = Φ(c_k) − Φ(c_{k−1})` and
//! `∂E/∂b_k = φ(c_{k−1}) − φ(c_k)` on the envelope, 0 off it.
//!
//! [`DiscreteKnowledgeGradient`] evaluates it for an [`ExactGp`] (for a [`crate::gp::GpModel`],
//! use [`crate::gp::GpModel::inner`] with points in its internal, normalized coordinates — the
//! raw coordinates on `[0,1]^d` — and multiply values by the outcome standard deviation to get raw
//! units; the argmax is unchanged).
//!
//! **Step** ([`KgStep`], [`kg_step_in`]): `A` is a scrambled Sobol set of
//! [`kg_discretization_size`]`(d) = min(200·d, 1000)` points (projected onto the valid points of
//! a mixed space) plus the maximizer of the posterior mean; KG is evaluated exactly at every
//! point of `A` and the step proposes the argmax among the points away from the pending ones
//! (among all if none is). The value is reported in raw units. This is the discrete KG of
//! Frazier, Powell & Dayanik; BoTorch's one-shot continuous KG is [`super::one_shot_kg`]. KG
//! conditions the stationary GP directly and refuses a variable-amplitude model.

use super::acquirer::{Acquired, Acquirer, StepInputs};
use super::{OnModel, UpperConfidenceBound};
use crate::error::{Error, Result};
use crate::gp::{ExactGp, GpModel};
use crate::linalg::gemm;
use crate::math::{h, norm_cdf, norm_pdf};
use crate::optim::domain::{Domain, maximize_in, near_pending};
use crate::optim::multistart::MultiStartOptions;
use crate::optim::sobol::Sobol;
use faer::Mat;

/// `E[max_i (a_i + b_i Z)] − max_i a_i` for `Z ~ N(0,1)`, with its partials with respect to `a`
/// and `b`: returns `(value, ∂/∂a, ∂/∂b)`. Errors on mismatched lengths, an empty input or
/// non-finite values.
pub fn expected_max_affine(a: &[f64], b: &[f64]) -> Result<(f64, Vec<f64>, Vec<f64>)> {
    let m = a.len();
    if m == 0 {
        return Err(Error::invalid("a", "empty"));
    }
    if b.len() != m {
        return Err(Error::dim("b", m, b.len()));
    }
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return Err(Error::invalid("a, b", "non-finite value"));
    }
    // Lines sorted by slope, ties by intercept (the last of each slope group dominates).
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&i, &j| b[i].total_cmp(&b[j]).then(a[i].total_cmp(&a[j])));
    // Upper envelope: stack of (line, breakpoint where it starts to be the max).
    let mut env: Vec<usize> = Vec::with_capacity(m);
    let mut start: Vec<f64> = Vec::with_capacity(m);
    for (pos, &j) in idx.iter().enumerate() {
        if pos + 1 < m && b[idx[pos + 1]] == b[j] {
            continue; // dominated by the next line of equal slope
        }
        loop {
            let Some(&t) = env.last() else {
                env.push(j);
                start.push(f64::NEG_INFINITY);
                break;
            };
            // b[j] > b[t]: line j is above t for Z > c.
            let c = (a[t] - a[j]) / (b[j] - b[t]);
            if c <= *start.last().unwrap_or(&f64::NEG_INFINITY) {
                env.pop();
                start.pop();
            } else {
                env.push(j);
                start.push(c);
                break;
            }
        }
    }
    let k = env.len();
    let mut value = 0.0;
    for i in 1..k {
        value += (b[env[i]] - b[env[i - 1]]) * h(-start[i].abs());
    }
    let mut da = vec![0.0; m];
    let mut db = vec![0.0; m];
    for i in 0..k {
        let lo = start[i];
        let hi = if i + 1 < k {
            start[i + 1]
        } else {
            f64::INFINITY
        };
        da[env[i]] = norm_cdf(hi) - norm_cdf(lo);
        db[env[i]] = norm_pdf(lo) - norm_pdf(hi);
    }
    // Subtract ∂ max a / ∂a (the argmax of a, ties to the first index).
    let amax = (0..m).fold(0, |best, i| if a[i] > a[best] { i } else { best });
    da[amax] -= 1.0;
    Ok((value.max(0.0), da, db))
}

/// The discrete knowledge gradient of an exact GP on a fixed finite set `A`.
pub struct DiscreteKnowledgeGradient<'a> {
    gp: &'a ExactGp,
    set: Vec<f64>,
    mean: Vec<f64>,
    /// `L⁻¹ k(X, A)`, `n × M`.
    va: Mat<f64>,
}

impl<'a> DiscreteKnowledgeGradient<'a> {
    /// Prepares KG over the rows of `set` (row-major `M × d`) for `gp`.
    pub fn new(gp: &'a ExactGp, set: &[f64]) -> Result<Self> {
        let d = gp.dim();
        if set.is_empty() || !set.len().is_multiple_of(d) {
            return Err(Error::invalid(
                "set",
                "empty or length is not a multiple of the dimension",
            ));
        }
        if set.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("set", "non-finite coordinate"));
        }
        let m = set.len() / d;
        let n = gp.n();
        let mean = gp.posterior(set, false)?.mean;
        let kern = &gp.params().kernel;
        let x = gp.train_x();
        let mut va = Mat::<f64>::from_fn(n, m, |i, j| {
            kern.eval(&x[i * d..(i + 1) * d], &set[j * d..(j + 1) * d])
        });
        if n > 0 {
            gp.cholesky().solve_lower_in_place(va.as_mut());
        }
        Ok(Self {
            gp,
            set: set.to_vec(),
            mean,
            va,
        })
    }

    /// Number of points in the set.
    pub fn len(&self) -> usize {
        self.mean.len()
    }

    /// Whether the set is empty (never: construction rejects it).
    pub fn is_empty(&self) -> bool {
        self.mean.is_empty()
    }

    /// `KG(x)` for an arbitrary point `x` (length `d`): the value of observing at `x` for the
    /// maximum of the posterior mean over the set.
    pub fn value_at(&self, x: &[f64]) -> Result<f64> {
        let d = self.gp.dim();
        if x.len() != d {
            return Err(Error::dim("x", d, x.len()));
        }
        let kern = &self.gp.params().kernel;
        let n = self.gp.n();
        let m = self.len();
        let tx = self.gp.train_x();
        let mut vx = Mat::<f64>::from_fn(n, 1, |i, _| kern.eval(&tx[i * d..(i + 1) * d], x));
        if n > 0 {
            self.gp.cholesky().solve_lower_in_place(vx.as_mut());
        }
        let vxc = vx.col_as_slice(0);
        let var = (kern.eval(x, x) - vxc.iter().map(|v| v * v).sum::<f64>()).max(0.0);
        let denom = (var + self.gp.params().noise).sqrt();
        if denom <= 0.0 {
            return Ok(0.0);
        }
        let b: Vec<f64> = (0..m)
            .map(|j| {
                let c = kern.eval(&self.set[j * d..(j + 1) * d], x)
                    - self
                        .va
                        .col_as_slice(j)
                        .iter()
                        .zip(vxc)
                        .map(|(p, q)| p * q)
                        .sum::<f64>();
                c / denom
            })
            .collect();
        Ok(expected_max_affine(&self.mean, &b)?.0)
    }

    /// `KG(x_i)` for every point of the set (the discrete KG policy takes the argmax), in
    /// `O(M² n + M² log M)` via the joint posterior covariance of the set.
    pub fn values_on_set(&self) -> Result<Vec<f64>> {
        let d = self.gp.dim();
        let m = self.len();
        let kern = &self.gp.params().kernel;
        let set = &self.set;
        let mut cov = Mat::<f64>::from_fn(m, m, |p, q| {
            kern.eval(&set[p * d..(p + 1) * d], &set[q * d..(q + 1) * d])
        });
        if self.gp.n() > 0 {
            gemm(
                cov.as_mut(),
                true,
                self.va.transpose(),
                self.va.as_ref(),
                -1.0,
            );
        }
        let noise = self.gp.params().noise;
        let mut out = vec![0.0; m];
        let mut b = vec![0.0; m];
        for (i, o) in out.iter_mut().enumerate() {
            let denom = (cov[(i, i)].max(0.0) + noise).sqrt();
            if denom <= 0.0 {
                continue;
            }
            for (j, bj) in b.iter_mut().enumerate() {
                *bj = cov[(j, i)] / denom;
            }
            *o = expected_max_affine(&self.mean, &b)?.0;
        }
        Ok(out)
    }
}

/// Size of KG's Sobol discretization for dimension `d`: `min(200·d, 1000)` points (the maximizer
/// of the posterior mean is added to it).
pub fn kg_discretization_size(d: usize) -> usize {
    (200 * d).min(1000)
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
    let best = maximize_in(&mean, d, domain.without_pending(), ms, seed ^ 0x6d75)?;
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

/// The `kg` acquisition's step (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct KgStep;

impl Acquirer for KgStep {
    fn supports_output_scale(&self) -> bool {
        false
    }

    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        let (x, v) = kg_step_in(s.model()?, s.d, s.ms, s.seed, s.domain)?;
        Ok(Acquired::point(x, v))
    }
}
