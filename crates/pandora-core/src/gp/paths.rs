//! Pathwise Gaussian-process samples: whole functions drawn from the prior or the posterior that
//! can be evaluated and differentiated at any point (for Thompson sampling and for benchmark
//! objectives drawn from GP priors).
//!
//! # Prior paths: random Fourier features
//!
//! A stationary kernel `k(x, z) = σ² κ(r²)` is, by Bochner's theorem, `σ² E_ω[cos(ω·(x − z))]`
//! for frequencies `ω` drawn from its normalized spectral density. With `F` features (`F` even) made
//! of `F/2` frequencies `ω_j`, each used with a cosine and a sine,
//!
//! ```text
//! f(x) = sqrt(σ² · 2/F) · Σ_{j=1}^{F/2} [ w_j cos(ω_j·x) + w'_j sin(ω_j·x) ],   w, w' ~ N(0, 1)
//! ```
//!
//! has variance exactly `σ²` at every `x`, and covariance `σ² (2/F) Σ_j cos(ω_j·(x − z))`, which
//! equals `k(x, z)` in expectation over the frequencies. Frequencies (ARD lengthscales `ℓ`,
//! elementwise division):
//!
//! - RBF: `ω = z / ℓ`, `z ~ N(0, I_d)`;
//! - Matérn-ν: `ω = z / sqrt(u) / ℓ` with `z ~ N(0, I_d)` and `u ~ Gamma(shape ν, rate ν)`, i.e. a
//!   multivariate Student-t with `2ν` degrees of freedom and scale `1/ℓ`. Its density is
//!   `∝ (2ν/ℓ² + |ω|²)^{−(ν + d/2)}`, the spectral density of `κ(r)` written with `sqrt(2ν)·r`
//!   (as in [`KernelKind`](crate::gp::KernelKind)), with `r` the lengthscale-scaled distance.
//!
//! This follows BoTorch 0.9 (`botorch.sampling.pathwise`).
//!
//! # Posterior paths: Matheron's rule
//!
//! Given data `(X, y)` with constant mean `c`, noise variance `σ_n²` and a prior path `f_prior`,
//! the path (Wilson et al. 2020, "Efficiently sampling functions from Gaussian process posteriors")
//!
//! ```text
//! f_post(x) = c + f_prior(x) + k(x, X) v,   v = (K + σ_n² I)⁻¹ (y − c − f_prior(X) − ε),
//! ε ~ N(0, σ_n² I)
//! ```
//!
//! is distributed as the GP posterior (exactly in its first two moments when averaged over the
//! frequencies, up to the Fourier-feature approximation of the prior for a single frequency draw).
//! Here `K + σ_n² I` is the matrix the [`ExactGp`] factorized, including any jitter it had to add;
//! `ε` is drawn with the same variance (noise plus jitter) so that path moments match
//! [`ExactGp::posterior`].
//!
//! All paths keep copies of what they need, so they are self-contained, `Clone`, `Send + Sync`,
//! and cost `O(F·d + n·d)` per evaluation.

use crate::error::{Error, Result};
use crate::gp::kernel::Kernel;
use crate::gp::model::ExactGp;
use rand::RngExt;
use rand_distr::{Gamma, StandardNormal};
use std::sync::Arc;

/// Default number of random Fourier features (`F`, i.e. `F/2` frequencies), as in BoTorch.
pub const DEFAULT_NUM_FEATURES: usize = 1024;

/// A sample path from a zero-mean GP prior with a stationary kernel, approximated by random Fourier
/// features:
///
/// `f(x) = sqrt(σ² · 2/F) · Σ_{j=1}^{F/2} [w_j cos(ω_j·x) + w'_j sin(ω_j·x)]`.
///
/// See the [module documentation](self) for how the frequencies `ω_j` are drawn. Cloning is cheap
/// for the frequencies (they are shared behind an [`Arc`]).
#[derive(Debug, Clone)]
pub struct PriorPath {
    dim: usize,
    num_features: usize,
    /// The kernel the frequencies were drawn for (its outputscale scales the weights).
    kernel: Kernel,
    /// `F/2 × d` frequencies, row-major, already divided by the lengthscales.
    freqs: Arc<[f64]>,
    /// `sqrt(σ² · 2/F) · w_j` (cosine weights), length `F/2`.
    w_cos: Vec<f64>,
    /// `sqrt(σ² · 2/F) · w'_j` (sine weights), length `F/2`.
    w_sin: Vec<f64>,
}

/// Checks `num_features` (even, ≥ 2).
fn check_num_features(num_features: usize) -> Result<()> {
    if num_features < 2 || !num_features.is_multiple_of(2) {
        return Err(Error::invalid(
            "num_features",
            format!("must be even and at least 2, got {num_features}"),
        ));
    }
    Ok(())
}

/// Validates a kernel whose fields may have been set directly (they are public).
fn check_kernel(kernel: &Kernel) -> Result<()> {
    Kernel::new(kernel.kind, kernel.lengthscales.clone(), kernel.outputscale).map(|_| ())
}

/// Checks that `xs` holds whole rows of length `d` and that `out` has one slot per row; returns the
/// number of rows.
fn check_batch(xs: &[f64], out: &[f64], d: usize) -> Result<usize> {
    if !xs.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "points",
            format!("length {} is not a multiple of the dimension {d}", xs.len()),
        ));
    }
    let m = xs.len() / d;
    if out.len() != m {
        return Err(Error::dim("output values", m, out.len()));
    }
    Ok(m)
}

/// Draws `F/2 × d` frequencies for `kernel` (row-major, divided by the lengthscales).
fn sample_frequencies<R: rand::Rng + ?Sized>(
    kernel: &Kernel,
    half: usize,
    rng: &mut R,
) -> Result<Vec<f64>> {
    let d = kernel.dim();
    let inv_l: Vec<f64> = kernel.lengthscales.iter().map(|l| 1.0 / l).collect();
    // Gamma(shape ν, rate ν) has scale 1/ν.
    let gamma = match kernel.kind.nu() {
        Some(nu) => Some(
            Gamma::new(nu, 1.0 / nu)
                .map_err(|e| Error::Numerical(format!("Gamma({nu}, 1/{nu}): {e}")))?,
        ),
        None => None,
    };
    let mut freqs = vec![0.0; half * d];
    for row in freqs.chunks_exact_mut(d) {
        for (w, s) in row.iter_mut().zip(&inv_l) {
            let z: f64 = rng.sample(StandardNormal);
            *w = z * s;
        }
        if let Some(g) = &gamma {
            // Guard against u underflowing to 0 (possible for ν = 1/2 only with vanishing
            // probability): a huge but finite frequency is harmless.
            let u: f64 = rng.sample(g).max(f64::MIN_POSITIVE);
            let s = 1.0 / u.sqrt();
            for w in row.iter_mut() {
                *w *= s;
            }
        }
    }
    if freqs.iter().any(|w| !w.is_finite()) {
        return Err(Error::Numerical(
            "non-finite random Fourier frequency".into(),
        ));
    }
    Ok(freqs)
}

/// Draws the `F/2` cosine and `F/2` sine weights, premultiplied by `sqrt(σ² · 2/F)`.
fn sample_weights<R: rand::Rng + ?Sized>(
    outputscale: f64,
    half: usize,
    rng: &mut R,
) -> (Vec<f64>, Vec<f64>) {
    let scale = (outputscale / half as f64).sqrt(); // sqrt(σ² · 2/F) with F = 2·half
    let w_cos = (0..half)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect();
    let w_sin = (0..half)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect();
    (w_cos, w_sin)
}

impl PriorPath {
    /// Draws a prior path for `kernel` with `num_features` random Fourier features (`F`, even and
    /// `≥ 2`; [`DEFAULT_NUM_FEATURES`] = 1024 is a good default): `F/2` frequencies `ω_j`, then the
    /// `F/2` cosine weights `w_j ~ N(0, 1)`, then the `F/2` sine weights `w'_j ~ N(0, 1)`, all from
    /// `rng`. The path is
    /// `f(x) = sqrt(σ² · 2/F) · Σ_j [w_j cos(ω_j·x) + w'_j sin(ω_j·x)]`.
    ///
    /// Errors if `num_features` is odd or `< 2`, or if the kernel's hyperparameters are invalid.
    pub fn sample<R: rand::Rng + ?Sized>(
        kernel: &Kernel,
        num_features: usize,
        rng: &mut R,
    ) -> Result<Self> {
        check_num_features(num_features)?;
        check_kernel(kernel)?;
        let half = num_features / 2;
        let freqs = sample_frequencies(kernel, half, rng)?;
        let (w_cos, w_sin) = sample_weights(kernel.outputscale, half, rng);
        Ok(Self {
            dim: kernel.dim(),
            num_features,
            kernel: kernel.clone(),
            freqs: freqs.into(),
            w_cos,
            w_sin,
        })
    }

    /// A new path with the same frequencies `ω_j` and fresh weights `w, w' ~ N(0, 1)` drawn from
    /// `rng` (`F/2` cosine weights, then `F/2` sine weights).
    ///
    /// Paths sharing frequencies are jointly Gaussian with covariance
    /// [`PriorPath::feature_covariance`] (a fixed Fourier-feature approximation of `k`), rather than
    /// independent draws whose covariance is `k` on average over frequencies. Cheaper when many
    /// paths are needed.
    pub fn resample_weights<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Self {
        let (w_cos, w_sin) = sample_weights(self.kernel.outputscale, self.num_features / 2, rng);
        Self {
            dim: self.dim,
            num_features: self.num_features,
            kernel: self.kernel.clone(),
            freqs: Arc::clone(&self.freqs),
            w_cos,
            w_sin,
        }
    }

    /// Input dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The kernel this path was drawn for.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Number of features `F` (twice the number of frequencies).
    pub fn num_features(&self) -> usize {
        self.num_features
    }

    /// The frequencies `ω_j` (already divided by the lengthscales), row-major `F/2 × d`.
    pub fn frequencies(&self) -> &[f64] {
        &self.freqs
    }

    /// The cosine weights, already scaled: `sqrt(σ² · 2/F) · w_j`, length `F/2` (with
    /// [`PriorPath::frequencies`] and [`PriorPath::sin_weights`], everything needed to evaluate the
    /// path elsewhere, e.g. to run another library on the same instance).
    pub fn cos_weights(&self) -> &[f64] {
        &self.w_cos
    }

    /// The sine weights, already scaled: `sqrt(σ² · 2/F) · w'_j`, length `F/2`.
    pub fn sin_weights(&self) -> &[f64] {
        &self.w_sin
    }

    /// The covariance that paths with these frequencies have over the weights:
    /// `k̂(x, z) = σ² (2/F) Σ_j cos(ω_j·(x − z))`, an unbiased Monte Carlo estimate of `k(x, z)`.
    /// Returns NaN if `x` or `z` does not have length `d`.
    pub fn feature_covariance(&self, x: &[f64], z: &[f64]) -> f64 {
        if x.len() != self.dim || z.len() != self.dim {
            return f64::NAN;
        }
        let half = self.w_cos.len();
        let mut s = 0.0;
        for w in self.freqs.chunks_exact(self.dim) {
            let mut t = 0.0;
            for ((wk, a), b) in w.iter().zip(x).zip(z) {
                t += wk * (a - b);
            }
            s += t.cos();
        }
        self.kernel.outputscale * s / half as f64
    }

    /// `f(x) = sqrt(σ² · 2/F) · Σ_j [w_j cos(ω_j·x) + w'_j sin(ω_j·x)]`.
    /// Returns NaN if `x` does not have length `d`.
    pub fn value(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        let mut f = 0.0;
        for ((w, a), b) in self
            .freqs
            .chunks_exact(self.dim)
            .zip(&self.w_cos)
            .zip(&self.w_sin)
        {
            let (s, c) = dot(w, x).sin_cos();
            f += a * c + b * s;
        }
        f
    }

    /// `f(x)` and its gradient
    /// `∇f(x) = sqrt(σ² · 2/F) · Σ_j [−w_j sin(ω_j·x) + w'_j cos(ω_j·x)] ω_j`, written into `grad`.
    /// Returns NaN (and fills `grad` with NaN) if `x` or `grad` does not have length `d`.
    pub fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if x.len() != self.dim || grad.len() != self.dim {
            grad.fill(f64::NAN);
            return f64::NAN;
        }
        grad.fill(0.0);
        let mut f = 0.0;
        for ((w, a), b) in self
            .freqs
            .chunks_exact(self.dim)
            .zip(&self.w_cos)
            .zip(&self.w_sin)
        {
            let (s, c) = dot(w, x).sin_cos();
            f += a * c + b * s;
            let g = b * c - a * s;
            for (gk, wk) in grad.iter_mut().zip(w) {
                *gk += g * wk;
            }
        }
        f
    }

    /// Evaluates the path at the rows of `xs` (row-major `m × d`) into `out` (length `m`).
    /// Errors if `xs.len()` is not a multiple of `d` or `out.len() != m`.
    pub fn values(&self, xs: &[f64], out: &mut [f64]) -> Result<()> {
        check_batch(xs, out, self.dim)?;
        for (o, x) in out.iter_mut().zip(xs.chunks_exact(self.dim)) {
            *o = self.value(x);
        }
        Ok(())
    }
}

#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| u * v).sum()
}

/// A dot product with eight independent accumulators (vectorizable; a different rounding than
/// [`dot`]).
#[inline(always)]
fn dot8(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// A sample path from a GP posterior by pathwise conditioning (Matheron's rule):
///
/// `f_post(x) = c + f_prior(x) + k(x, X) v`, `v = (K + σ_n² I)⁻¹ (y − c − f_prior(X) − ε)`,
/// `ε ~ N(0, σ_n² I)`,
///
/// with `f_prior` a [`PriorPath`]. It holds copies of the training inputs, `v` and the kernel, so it
/// does not borrow the model.
#[derive(Debug, Clone)]
pub struct PosteriorPath {
    /// The prior path; its kernel is the model's.
    prior: PriorPath,
    mean: f64,
    /// `1/ℓ_k²`, length `d`.
    inv_l2: Vec<f64>,
    /// Training inputs, row-major `n × d`.
    train_x: Vec<f64>,
    /// `v = (K + σ_n² I)⁻¹ (y − c − f_prior(X) − ε)`, length `n`.
    v: Vec<f64>,
}

impl PosteriorPath {
    /// Draws a posterior path of `gp` with `num_features` random Fourier features for the prior
    /// part. The random draws are, in order: the prior path (as in [`PriorPath::sample`]), then
    /// one `ε_i ~ N(0, σ_n² + jitter)` per training point, where `jitter` is the diagonal jitter
    /// [`ExactGp::cholesky`] added (usually 0). Then
    /// `v = (K + σ_n² I)⁻¹ (y − c − f_prior(X) − ε)` is solved with the model's Cholesky factor.
    ///
    /// Errors if `num_features` is odd or `< 2`, or the model's hyperparameters are invalid.
    pub fn sample<R: rand::Rng + ?Sized>(
        gp: &ExactGp,
        num_features: usize,
        rng: &mut R,
    ) -> Result<Self> {
        let prior = PriorPath::sample(&gp.params().kernel, num_features, rng)?;
        Self::from_prior(gp, prior, rng)
    }

    /// Draws `count` posterior paths of `gp` whose prior parts share one set of frequencies (see
    /// [`PriorPath::resample_weights`]); each path gets its own weights and noise draws. Cheaper
    /// than `count` calls to [`PosteriorPath::sample`], at the price of correlation between the
    /// paths through the shared frequencies.
    pub fn sample_batch<R: rand::Rng + ?Sized>(
        gp: &ExactGp,
        num_features: usize,
        count: usize,
        rng: &mut R,
    ) -> Result<Vec<Self>> {
        let first = PriorPath::sample(&gp.params().kernel, num_features, rng)?;
        // The training points' Fourier features are shared by every path: compute them once
        // (the per-path prior values below sum in the same order as `PriorPath::value`, so the
        // paths are bit-for-bit those of `from_prior`).
        let d = gp.dim();
        let half = first.w_cos.len();
        let mut feats = Vec::with_capacity(gp.train_x().len() / d.max(1) * 2 * half);
        for x in gp.train_x().chunks_exact(d) {
            for w in first.freqs.chunks_exact(d) {
                let (s, c) = dot(w, x).sin_cos();
                feats.push(c);
                feats.push(s);
            }
        }
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let prior = if i == 0 {
                first.clone()
            } else {
                first.resample_weights(rng)
            };
            let at_train: Vec<f64> = feats
                .chunks_exact(2 * half)
                .map(|f| {
                    let mut v = 0.0;
                    for ((cs, a), b) in f.chunks_exact(2).zip(&prior.w_cos).zip(&prior.w_sin) {
                        v += a * cs[0] + b * cs[1];
                    }
                    v
                })
                .collect();
            out.push(Self::from_prior_values(gp, prior, &at_train, rng)?);
        }
        Ok(out)
    }

    /// Evaluates `paths` at the rows of `xs` (row-major `m × d`); returns `paths.len() × m`
    /// values, path-major. When the paths share their frequencies, kernel, constant mean and
    /// training inputs (as [`PosteriorPath::sample_batch`] draws them), each point's Fourier
    /// features and kernel column are computed once for all paths, which makes many paths on many
    /// points (e.g. an exhaustive grid) far cheaper; the sums are then accumulated in a different
    /// order than [`PosteriorPath::value`] (agreement to rounding). Otherwise path by path.
    pub fn values_many(paths: &[PosteriorPath], xs: &[f64]) -> Result<Vec<f64>> {
        let Some(p0) = paths.first() else {
            return Ok(Vec::new());
        };
        let d = p0.dim();
        if !xs.len().is_multiple_of(d) {
            return Err(Error::dim("points", xs.len().div_ceil(d) * d, xs.len()));
        }
        let m = xs.len() / d;
        let shared = paths.iter().all(|p| {
            Arc::ptr_eq(&p.prior.freqs, &p0.prior.freqs)
                && p.prior.kernel == p0.prior.kernel
                && p.mean == p0.mean
                && p.train_x == p0.train_x
        });
        let mut out = vec![0.0; paths.len() * m];
        if !shared {
            for (p, o) in paths.iter().zip(out.chunks_exact_mut(m.max(1))) {
                p.values(xs, o)?;
            }
            return Ok(out);
        }
        let half = p0.prior.w_cos.len();
        let n = p0.v.len();
        let kind = p0.prior.kernel.kind;
        let s2 = p0.prior.kernel.outputscale;
        // Points in blocks: the block's features (cos, sin, kernel column per point) stay in
        // cache while every path's weights are streamed over them once per block.
        const BLOCK: usize = 16;
        let width = 2 * half + n;
        let mut feats = vec![0.0; BLOCK * width];
        for (b, block) in xs.chunks(BLOCK * d).enumerate() {
            let rows = block.len() / d;
            for (x, row) in block.chunks_exact(d).zip(feats.chunks_exact_mut(width)) {
                let (trig, kv) = row.split_at_mut(2 * half);
                let (cs, sn) = trig.split_at_mut(half);
                for ((w, c), s) in p0.prior.freqs.chunks_exact(d).zip(cs).zip(sn) {
                    let (si, co) = dot(w, x).sin_cos();
                    *c = co;
                    *s = si;
                }
                for (k, xi) in kv.iter_mut().zip(p0.train_x.chunks_exact(d)) {
                    *k = s2 * kind.value_r2(p0.r2(x, xi));
                }
            }
            for (i, p) in paths.iter().enumerate() {
                let dst = &mut out[i * m + b * BLOCK..i * m + b * BLOCK + rows];
                for (o, row) in dst.iter_mut().zip(feats.chunks_exact(width)) {
                    *o = p0.mean
                        + dot8(&p.prior.w_cos, &row[..half])
                        + dot8(&p.prior.w_sin, &row[half..2 * half])
                        + dot8(&p.v, &row[2 * half..]);
                }
            }
        }
        Ok(out)
    }

    /// Conditions a given prior path on the data of `gp` (Matheron's rule), drawing the noise `ε`
    /// from `rng` as in [`PosteriorPath::sample`]. Errors if the path was drawn for a kernel other
    /// than the model's (different kind, lengthscales or outputscale, or another dimension).
    pub fn from_prior<R: rand::Rng + ?Sized>(
        gp: &ExactGp,
        prior: PriorPath,
        rng: &mut R,
    ) -> Result<Self> {
        let d = gp.dim();
        let at_train: Vec<f64> = if prior.dim() == d {
            gp.train_x()
                .chunks_exact(d)
                .map(|x| prior.value(x))
                .collect()
        } else {
            Vec::new()
        };
        Self::from_prior_values(gp, prior, &at_train, rng)
    }

    /// [`PosteriorPath::from_prior`] with the prior path's values at the training inputs given.
    fn from_prior_values<R: rand::Rng + ?Sized>(
        gp: &ExactGp,
        prior: PriorPath,
        at_train: &[f64],
        rng: &mut R,
    ) -> Result<Self> {
        let params = gp.params();
        let d = gp.dim();
        if prior.dim() != d {
            return Err(Error::dim("prior path dimension", d, prior.dim()));
        }
        check_kernel(&params.kernel)?;
        if prior.kernel != params.kernel {
            return Err(Error::invalid(
                "prior path",
                "was drawn for a different kernel than the model's",
            ));
        }
        let eps_var = params.noise + gp.cholesky().jitter();
        if !(eps_var.is_finite() && eps_var >= 0.0) {
            return Err(Error::invalid(
                "noise",
                format!("must be finite and >= 0, got {eps_var}"),
            ));
        }
        let eps_sd = eps_var.sqrt();
        let train_x = gp.train_x().to_vec();
        let resid: Vec<f64> = at_train
            .iter()
            .zip(gp.train_y())
            .map(|(f, y)| {
                let e: f64 = rng.sample(StandardNormal);
                y - params.mean - f - eps_sd * e
            })
            .collect();
        let v = if resid.is_empty() {
            Vec::new()
        } else {
            gp.cholesky().solve_vec(&resid)
        };
        if v.iter().any(|t| !t.is_finite()) {
            return Err(Error::Numerical(
                "non-finite pathwise update weights".into(),
            ));
        }
        let inv_l2 = params
            .kernel
            .lengthscales
            .iter()
            .map(|l| 1.0 / (l * l))
            .collect();
        Ok(Self {
            prior,
            mean: params.mean,
            inv_l2,
            train_x,
            v,
        })
    }

    /// Input dimension `d`.
    pub fn dim(&self) -> usize {
        self.prior.dim
    }

    /// The prior path `f_prior` this path was conditioned from.
    pub fn prior(&self) -> &PriorPath {
        &self.prior
    }

    /// The update weights `v = (K + σ_n² I)⁻¹ (y − c − f_prior(X) − ε)`.
    pub fn update_weights(&self) -> &[f64] {
        &self.v
    }

    /// `f_post(x) = c + f_prior(x) + Σ_i v_i k(x, x_i)`. Returns NaN if `x` does not have length `d`.
    pub fn value(&self, x: &[f64]) -> f64 {
        let d = self.dim();
        if x.len() != d {
            return f64::NAN;
        }
        let kind = self.prior.kernel.kind;
        let mut upd = 0.0;
        for (xi, vi) in self.train_x.chunks_exact(d).zip(&self.v) {
            upd += vi * kind.value_r2(self.r2(x, xi));
        }
        self.mean + self.prior.value(x) + self.prior.kernel.outputscale * upd
    }

    /// `f_post(x)` and its gradient
    /// `∇f_post(x) = ∇f_prior(x) + Σ_i v_i ∇_x k(x, x_i)` with
    /// `∇_x k(x, z) = σ² κ'(r²) · 2 (x − z) / ℓ²` (the formula of [`Kernel::eval_grad_x`], so the
    /// Matérn-1/2 update term takes the subgradient 0 exactly at a training point).
    /// Returns NaN (and fills `grad` with NaN) if `x` or `grad` does not have length `d`.
    pub fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.dim();
        if x.len() != d || grad.len() != d {
            grad.fill(f64::NAN);
            return f64::NAN;
        }
        let f_prior = self.prior.value_grad(x, grad);
        let kind = self.prior.kernel.kind;
        let s2 = self.prior.kernel.outputscale;
        let mut upd = 0.0;
        for (xi, vi) in self.train_x.chunks_exact(d).zip(&self.v) {
            let (k, dk) = kind.eval_r2(self.r2(x, xi));
            upd += vi * k;
            let c = 2.0 * s2 * vi * dk;
            for (((g, a), b), il2) in grad.iter_mut().zip(x).zip(xi).zip(&self.inv_l2) {
                *g += c * (a - b) * il2;
            }
        }
        self.mean + f_prior + s2 * upd
    }

    /// Evaluates the path at the rows of `xs` (row-major `m × d`) into `out` (length `m`).
    /// Errors if `xs.len()` is not a multiple of `d` or `out.len() != m`.
    pub fn values(&self, xs: &[f64], out: &mut [f64]) -> Result<()> {
        let d = self.dim();
        check_batch(xs, out, d)?;
        for (o, x) in out.iter_mut().zip(xs.chunks_exact(d)) {
            *o = self.value(x);
        }
        Ok(())
    }

    #[inline(always)]
    fn r2(&self, x: &[f64], z: &[f64]) -> f64 {
        let mut s = 0.0;
        for ((a, b), il2) in x.iter().zip(z).zip(&self.inv_l2) {
            let t = a - b;
            s += t * t * il2;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::kernel::KernelKind;
    use crate::gp::model::GpParams;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn kernel() -> Kernel {
        Kernel::new(KernelKind::Matern52, vec![0.4, 0.9], 1.3).unwrap()
    }

    #[test]
    fn rejects_bad_feature_counts_and_kernels() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for f in [0, 1, 3, 1023] {
            assert!(PriorPath::sample(&kernel(), f, &mut rng).is_err());
        }
        let mut bad = kernel();
        bad.lengthscales[1] = 0.0;
        assert!(PriorPath::sample(&bad, 16, &mut rng).is_err());
        let mut bad = kernel();
        bad.outputscale = f64::NAN;
        assert!(PriorPath::sample(&bad, 16, &mut rng).is_err());
        assert!(PriorPath::sample(&kernel(), 2, &mut rng).is_ok());
    }

    #[test]
    fn variance_is_exact_for_any_frequencies() {
        // Over the weights, Var f(x) = σ² (2/F) Σ_j (cos² + sin²) = σ² exactly.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let p = PriorPath::sample(&kernel(), 64, &mut rng).unwrap();
        let x = [0.3, -0.2];
        assert!((p.feature_covariance(&x, &x) - 1.3).abs() < 1e-12);
        assert!(p.feature_covariance(&x, &[0.0]).is_nan());
    }

    #[test]
    fn wrong_lengths_give_nan_or_err() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let p = PriorPath::sample(&kernel(), 16, &mut rng).unwrap();
        assert!(p.value(&[0.1]).is_nan());
        let mut g = [0.0; 3];
        assert!(p.value_grad(&[0.1, 0.2], &mut g).is_nan());
        assert!(g.iter().all(|v| v.is_nan()));
        let mut out = [0.0; 2];
        assert!(p.values(&[0.1, 0.2, 0.3], &mut out).is_err());
        assert!(p.values(&[0.1, 0.2, 0.3, 0.4], &mut out[..1]).is_err());
        assert!(p.values(&[0.1, 0.2, 0.3, 0.4], &mut out).is_ok());

        let params = GpParams {
            kernel: kernel(),
            mean: 0.5,
            noise: 1e-3,
        };
        let gp = ExactGp::new(vec![0.1, 0.2, 0.5, 0.5], vec![1.0, -1.0], params).unwrap();
        assert!(PosteriorPath::sample(&gp, 7, &mut rng).is_err());
        let q = PosteriorPath::sample(&gp, 16, &mut rng).unwrap();
        assert!(q.value(&[0.1, 0.2, 0.3]).is_nan());
        assert!(q.values(&[0.1, 0.2, 0.3], &mut out).is_err());
        let k3 = Kernel::new(KernelKind::Rbf, vec![1.0; 3], 1.0).unwrap();
        let p3 = PriorPath::sample(&k3, 16, &mut rng).unwrap();
        assert!(PosteriorPath::from_prior(&gp, p3, &mut rng).is_err());
    }

    #[test]
    fn paths_are_send_sync_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<PriorPath>();
        check::<PosteriorPath>();
    }
}
