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

use super::bmsei::ScaledGp;
use crate::error::{Error, Result};
use crate::gp::{ExactGp, Posterior};
use crate::linalg::gemm;
use crate::math::{h, norm_cdf, norm_pdf, norm_ppf};
use crate::optim::multistart::{Objective, value_grad_or_nan};
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

/// BoTorch's default number of fantasies of `qKnowledgeGradient` (the PBGI paper's KG).
pub const ONE_SHOT_KG_FANTASIES: usize = 64;

/// The one-shot knowledge gradient (BoTorch's `qKnowledgeGradient` with `q = 1`): the decision
/// variables are the point `x` and one point `x'_i` per fantasy, optimized jointly,
///
/// `KG(x, x'_1 … x'_K) = (1/K) Σ_i μ_{n+1}^{(i)}(x'_i) − current`,
///
/// where model `i` is conditioned on the fantasy `ŷ_i = μ(x) + z_i √(σ²(x) + σ_noise²)`, so that
/// `μ_{n+1}^{(i)}(x') = μ(x') + z_i Σ(x, x')/√(σ²(x) + σ_noise²)` in closed form. Its maximum over
/// the `x'_i` is a lower bound that converges to `E[max μ_{n+1}] − current` as `K` grows. The base
/// samples `z_i` are quasi-random: `Φ⁻¹` of a seeded scrambled Sobol sequence (BoTorch's
/// `SobolQMCNormalSampler`). The gradient is analytic, from
/// [`crate::gp::ExactGp::posterior_pairs`]. Points are in the raw coordinates of the model.
pub struct OneShotKnowledgeGradient<'a> {
    gp: &'a ScaledGp,
    z: Vec<f64>,
    pairs: Vec<(usize, usize)>,
    /// Subtracted from the value: the current maximum of the posterior mean, so that the
    /// value is the knowledge gradient (0 by default).
    pub current: f64,
}

impl<'a> OneShotKnowledgeGradient<'a> {
    /// `num_fantasies` fantasies with base samples from `seed`. Errors if `num_fantasies` is 0.
    pub fn new(gp: &'a ScaledGp, num_fantasies: usize, seed: u64) -> Result<Self> {
        if num_fantasies == 0 {
            return Err(Error::invalid("num_fantasies", "must be at least 1"));
        }
        let u = Sobol::scrambled(1, seed)?.points(num_fantasies)?;
        let z = u
            .iter()
            .map(|&p| norm_ppf(p.clamp(1e-12, 1.0 - 1e-12)))
            .collect();
        Ok(Self {
            gp,
            z,
            pairs: (1..=num_fantasies).map(|i| (0, i)).collect(),
            current: 0.0,
        })
    }

    /// The base samples `z_i`.
    pub fn base_samples(&self) -> &[f64] {
        &self.z
    }

    /// Value and, if `grad`, gradient at `pts` = `[x, x'_1, …, x'_K]` (row-major, `(K+1)·d`).
    pub fn evaluate(&self, pts: &[f64], grad: bool) -> Result<(f64, Vec<f64>)> {
        let d = self.gp.dim();
        let k = self.z.len();
        if pts.len() != (k + 1) * d {
            return Err(Error::dim("one-shot KG points", (k + 1) * d, pts.len()));
        }
        let p = self.gp.pairs(pts, &self.pairs, grad)?;
        let s2 = p.var[0] + self.gp.noise();
        let s = s2.sqrt();
        let kf = k as f64;
        let mut value = 0.0;
        for (i, &z) in self.z.iter().enumerate() {
            value += p.mean[i + 1] + z * p.cov[i] / s;
        }
        value = value / kf - self.current;
        if !grad {
            return Ok((value, Vec::new()));
        }
        let mut g = vec![0.0; pts.len()];
        for (i, &z) in self.z.iter().enumerate() {
            let cg = &p.cov_grad[i * 2 * d..(i + 1) * 2 * d];
            let row = (i + 1) * d;
            for c in 0..d {
                g[row + c] = (p.mean_grad[row + c] + z * cg[d + c] / s) / kf;
                g[c] += z * (cg[c] / s - p.cov[i] * p.var_grad[c] / (2.0 * s2 * s)) / kf;
            }
        }
        Ok((value, g))
    }
}

impl Objective for OneShotKnowledgeGradient<'_> {
    fn dim(&self) -> usize {
        (self.z.len() + 1) * self.gp.dim()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        value_grad_or_nan(self.evaluate(x, true), grad)
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        let n = self.dim();
        for (x, o) in xs.chunks_exact(n).zip(out.iter_mut()) {
            *o = self.evaluate(x, false).map_or(f64::NAN, |r| r.0);
        }
    }
}
