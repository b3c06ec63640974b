//! The exact Gaussian-process posterior with fixed hyperparameters.
//!
//! Model: `f ~ GP(c, k)`, observations `y_i = f(x_i) + ε_i`, `ε_i ~ N(0, σ_n²)`. With
//! `K = k(X, X) + σ_n² I = L Lᵀ` and `α = K⁻¹ (y − c)`, the latent posterior at `x` is
//!
//! - mean `μ(x) = c + k(x, X) α`
//! - variance `σ²(x) = k(x, x) − ‖L⁻¹ k(X, x)‖²`
//!
//! and the predictive variance adds `σ_n²`. Posterior quantities for many points are computed in
//! blocks with matrix products (`L⁻¹` is formed once per model), so evaluating 1600 points costs a
//! few matrix multiplications rather than 1600 triangular solves.

use crate::error::{Error, Result};
use crate::gp::kernel::{Kernel, eval_r2_slice};
use crate::linalg::{Cholesky, JitterPolicy, gemm, padded_trmm, zero_upper};
use faer::Mat;
use multiversion::multiversion;
use std::sync::OnceLock;

/// Smallest posterior variance reported; below it the standard deviation and its gradient are
/// clamped (the posterior at an observed point with tiny noise).
pub const MIN_VARIANCE: f64 = 1e-300;

/// Queries are processed in blocks of this many points (keeps the `n × block` work matrices in cache).
const BLOCK: usize = 256;

/// Hyperparameters of an exact GP: kernel, constant prior mean and observation-noise variance.
#[derive(Debug, Clone, PartialEq)]
pub struct GpParams {
    /// Covariance kernel.
    pub kernel: Kernel,
    /// Constant prior mean `c`.
    pub mean: f64,
    /// Homoscedastic observation-noise variance `σ_n² ≥ 0`.
    pub noise: f64,
}

/// Posterior summaries at a batch of `m` points in `d` dimensions (row-major gradients).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PosteriorBatch {
    /// Latent posterior mean at each point.
    pub mean: Vec<f64>,
    /// Latent posterior variance at each point (clamped at [`MIN_VARIANCE`]).
    pub var: Vec<f64>,
    /// `∂μ/∂x`, row-major `m × d` (empty unless gradients were requested).
    pub mean_grad: Vec<f64>,
    /// `∂σ²/∂x`, row-major `m × d` (empty unless gradients were requested).
    pub var_grad: Vec<f64>,
}

impl PosteriorBatch {
    /// Latent posterior standard deviations.
    pub fn std(&self) -> Vec<f64> {
        self.var.iter().map(|v| v.sqrt()).collect()
    }

    /// `∂σ/∂x = (∂σ²/∂x) / (2σ)`, row-major `m × d`.
    pub fn std_grad(&self) -> Vec<f64> {
        let m = self.var.len();
        if m == 0 || self.var_grad.is_empty() {
            return Vec::new();
        }
        let d = self.var_grad.len() / m;
        let mut out = self.var_grad.clone();
        for (row, v) in out.chunks_exact_mut(d).zip(&self.var) {
            let s = v.sqrt();
            for g in row {
                *g /= 2.0 * s;
            }
        }
        out
    }
}

/// The latent posterior at `m` points and the covariances of selected pairs of them, with
/// gradients (from [`ExactGp::posterior_pairs`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairPosterior {
    /// Latent posterior mean at each point.
    pub mean: Vec<f64>,
    /// Latent posterior variance at each point (clamped at [`MIN_VARIANCE`]).
    pub var: Vec<f64>,
    /// `∂μ/∂x`, row-major `m × d` (empty unless gradients were requested).
    pub mean_grad: Vec<f64>,
    /// `∂σ²/∂x`, row-major `m × d` (0 where the variance is clamped; empty unless requested).
    pub var_grad: Vec<f64>,
    /// Posterior covariance `Σ(x_a, x_b)` of each pair `(a, b)`.
    pub cov: Vec<f64>,
    /// Per pair, `2d` entries: `∂Σ/∂x_a` then `∂Σ/∂x_b` (empty unless requested).
    pub cov_grad: Vec<f64>,
}

/// An exact GP conditioned on data, with fixed hyperparameters.
#[derive(Debug, Clone)]
pub struct ExactGp {
    d: usize,
    x: Vec<f64>,
    y: Vec<f64>,
    params: GpParams,
    chol: Cholesky,
    alpha: Vec<f64>,
    /// Training inputs scaled by the lengthscales, transposed (`d × n`, row k = x̃_·k).
    xt: Vec<f64>,
    linv: OnceLock<Mat<f64>>,
    /// Work matrices of finished posterior calls, for the next ones.
    pool: WorkspacePool,
}

/// Work matrices of one posterior call, reused across blocks (`n × block`).
struct Workspace {
    kq: Mat<f64>,
    gq: Mat<f64>,
    v: Mat<f64>,
    w: Mat<f64>,
    /// `X̃ᵀ A` and `X̃ᵀ B` of the block gradients (`d × block`).
    pa: Mat<f64>,
    pb: Mat<f64>,
    r2: Vec<f64>,
}

impl Workspace {
    fn new(n: usize, d: usize, block: usize, grad: bool) -> Self {
        let gb = if grad { block } else { 0 };
        Self {
            kq: Mat::zeros(n, block),
            gq: Mat::zeros(n, gb),
            v: Mat::zeros(n, block),
            w: Mat::zeros(n, gb),
            pa: Mat::zeros(d, gb),
            pb: Mat::zeros(d, gb),
            r2: vec![0.0; n],
        }
    }
}

impl Workspace {
    /// Whether this workspace serves a call with blocks of `block` points.
    fn fits(&self, block: usize, grad: bool) -> bool {
        self.kq.ncols() >= block && (!grad || self.gq.ncols() >= block)
    }
}

/// Workspaces of finished posterior calls, handed to the next calls of the same model. The
/// restarts of a maximization evaluate the model thousands of times with blocks of the same
/// size: without the pool every call zeroes fresh `n × block` matrices, and the page faults and
/// `memset` of those allocations took about a tenth of a maximization at `n = 600`. At most one
/// workspace per concurrent caller is kept; a clone of the model starts with an empty pool.
#[derive(Default)]
struct WorkspacePool(std::sync::Mutex<Vec<Workspace>>);

impl WorkspacePool {
    /// A workspace for `n` training points in `d` dimensions and blocks of `block` points: a
    /// pooled one that fits, or a new one.
    fn take(&self, n: usize, d: usize, block: usize, grad: bool) -> Workspace {
        let mut pool = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match pool.iter().rposition(|w| w.fits(block, grad)) {
            Some(i) => pool.swap_remove(i),
            None => {
                drop(pool);
                Workspace::new(n, d, block, grad)
            }
        }
    }

    /// Returns a workspace to the pool.
    fn put(&self, ws: Workspace) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(ws);
    }
}

impl Clone for WorkspacePool {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for WorkspacePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkspacePool")
    }
}

/// From this many training points on, [`Posterior::prefers_blocks`](crate::gp::Posterior) is
/// true: a point's `O(n²)` matrix–vector products stream the factor from memory, and evaluating
/// restarts as blocks (matrix–matrix products) pays for the rounds of the lockstep. It was 256
/// while every lockstep run had a thread of its own; driven from one thread (reverse
/// communication) the rounds cost little, and the blocks win from about 50 points at d = 8
/// (restart phase 1.2–2× faster at n = 50–200, docs/bench.md); at d = 2 they lose up to 1 ms
/// (one chunk, one core), a small part of those steps.
pub const BLOCKS_FROM_N: usize = 64;

/// Batches up to this size use direct triangular matrix-vector products (faer's triangular
/// matrix product copies the triangle first, which dominates for a single point).
const SMALL_BATCH: usize = 4;

/// `out = L x` for lower-triangular `L` (column-major; only the lower triangle is read).
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn lower_matvec(l: faer::MatRef<'_, f64>, x: &[f64], out: &mut [f64]) {
    let n = x.len();
    out.fill(0.0);
    for j in 0..n {
        let xj = x[j];
        let col = &l
            .col(j)
            .try_as_col_major()
            .expect("contiguous column")
            .as_slice()[j..n];
        for (o, &c) in out[j..n].iter_mut().zip(col) {
            *o += c * xj;
        }
    }
}

/// `out = Lᵀ v` for lower-triangular `L`: `out_j = Σ_{i ≥ j} L_ij v_i`.
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn lower_t_matvec(l: faer::MatRef<'_, f64>, v: &[f64], out: &mut [f64]) {
    let n = v.len();
    for j in 0..n {
        let col = &l
            .col(j)
            .try_as_col_major()
            .expect("contiguous column")
            .as_slice()[j..n];
        out[j] = dot_inline(col, &v[j..n]);
    }
}

/// Dot product with four independent accumulators (inlined into vectorized callers).
#[inline(always)]
fn dot_inline(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let ca = a.chunks_exact(4);
    let cb = b.chunks_exact(4);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for t in 0..4 {
            acc[t] += x[t] * y[t];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// `r2_i += (q − x_i)²`.
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn add_squared_diff(r2: &mut [f64], x: &[f64], q: f64) {
    for (r, &v) in r2.iter_mut().zip(x) {
        let t = q - v;
        *r += t * t;
    }
}

#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    dot_inline(a, b)
}

/// `Σ a_i (q − x_i)` with independent accumulators (vectorizes).
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn dot_shifted(a: &[f64], x: &[f64], q: f64) -> f64 {
    let mut sa = [0.0; 4];
    let n4 = x.len() / 4 * 4;
    for i in (0..n4).step_by(4) {
        for t in 0..4 {
            sa[t] += a[i + t] * (q - x[i + t]);
        }
    }
    let mut r = (sa[0] + sa[1]) + (sa[2] + sa[3]);
    for i in n4..x.len() {
        r += a[i] * (q - x[i]);
    }
    r
}

/// `w_i ← w_i g_i`, then `g_i ← α_i g_i`; returns `(Σ α_i g_i, Σ w_i g_i)` (the new sums).
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn scale_columns(g: &mut [f64], w: &mut [f64], alpha: &[f64]) -> (f64, f64) {
    let (mut sa, mut sb) = (0.0, 0.0);
    for ((gi, wi), &ai) in g.iter_mut().zip(w.iter_mut()).zip(alpha) {
        *wi *= *gi;
        *gi *= ai;
        sa += *gi;
        sb += *wi;
    }
    (sa, sb)
}

/// `(Σ a_i (q − x_i), Σ b_i (q − x_i))` with independent accumulators (vectorizes).
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn dot2_shifted(a: &[f64], b: &[f64], x: &[f64], q: f64) -> (f64, f64) {
    let mut sa = [0.0; 4];
    let mut sb = [0.0; 4];
    let n4 = x.len() / 4 * 4;
    for i in (0..n4).step_by(4) {
        for t in 0..4 {
            let u = q - x[i + t];
            sa[t] += a[i + t] * u;
            sb[t] += b[i + t] * u;
        }
    }
    let mut ra = (sa[0] + sa[1]) + (sa[2] + sa[3]);
    let mut rb = (sb[0] + sb[1]) + (sb[2] + sb[3]);
    for i in n4..x.len() {
        let u = q - x[i];
        ra += a[i] * u;
        rb += b[i] * u;
    }
    (ra, rb)
}

pub(crate) fn scaled_transpose(kernel: &Kernel, x: &[f64]) -> Vec<f64> {
    let d = kernel.dim();
    let n = x.len() / d;
    let mut xt = vec![0.0; n * d];
    for i in 0..n {
        for k in 0..d {
            xt[k * n + i] = x[i * d + k] / kernel.lengthscales[k];
        }
    }
    xt
}

fn validate_points(what: &str, xs: &[f64], d: usize) -> Result<usize> {
    if d == 0 {
        return Err(Error::invalid(what, "dimension must be at least 1"));
    }
    if !xs.len().is_multiple_of(d) {
        return Err(Error::invalid(
            what,
            format!("length {} is not a multiple of the dimension {d}", xs.len()),
        ));
    }
    if let Some(i) = xs.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(
            what,
            format!("non-finite coordinate in point {}", i / d),
        ));
    }
    Ok(xs.len() / d)
}

impl ExactGp {
    /// Conditions a GP with hyperparameters `params` on the points `x` (row-major `n × d`, `d` =
    /// the kernel's dimension) and targets `y`. `n = 0` gives the prior.
    pub fn new(x: Vec<f64>, y: Vec<f64>, params: GpParams) -> Result<Self> {
        Self::with_jitter(x, y, params, JitterPolicy::default())
    }

    /// As [`ExactGp::new`] with an explicit jitter policy for the Cholesky factorization.
    pub fn with_jitter(
        x: Vec<f64>,
        y: Vec<f64>,
        params: GpParams,
        policy: JitterPolicy,
    ) -> Result<Self> {
        Self::check(&x, &y, &params)?;
        let k = kernel_matrix_lower(&params.kernel, &x, params.noise, false).0;
        let chol = Cholesky::factor(k.as_ref(), policy)?;
        Ok(Self::assemble(x, y, params, chol))
    }

    /// The GP conditioned with `chol`, the factor of `K(x, x) + σ_n² I` under `params` computed
    /// by the caller (a fit's last likelihood evaluation), instead of factorizing it again: the
    /// same GP as [`ExactGp::new`] when `chol` is the factor of the same matrix (the
    /// likelihood's is, to the bit). Errors like [`ExactGp::new`] on invalid inputs, and if
    /// `chol`'s order is not the number of points.
    pub(crate) fn from_factor(
        x: Vec<f64>,
        y: Vec<f64>,
        params: GpParams,
        chol: Cholesky,
    ) -> Result<Self> {
        Self::check(&x, &y, &params)?;
        if chol.n() != y.len() {
            return Err(Error::dim("ExactGp: factor order", y.len(), chol.n()));
        }
        Ok(Self::assemble(x, y, params, chol))
    }

    /// The GP of checked inputs and the factor `chol` of their kernel matrix.
    fn assemble(x: Vec<f64>, y: Vec<f64>, params: GpParams, chol: Cholesky) -> Self {
        let d = params.kernel.dim();
        let r: Vec<f64> = y.iter().map(|v| v - params.mean).collect();
        let alpha = chol.solve_vec(&r);
        let xt = scaled_transpose(&params.kernel, &x);
        Self {
            d,
            x,
            y,
            params,
            chol,
            alpha,
            xt,
            linv: OnceLock::new(),
            pool: WorkspacePool::default(),
        }
    }

    /// Checks the points, targets and hyperparameters of a GP to condition.
    fn check(x: &[f64], y: &[f64], params: &GpParams) -> Result<()> {
        let d = params.kernel.dim();
        let n = validate_points("train_x", x, d)?;
        if y.len() != n {
            return Err(Error::dim("train_y", n, y.len()));
        }
        if let Some(i) = y.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "train_y",
                format!("non-finite value at {i}"),
            ));
        }
        if !(params.noise.is_finite() && params.noise >= 0.0) {
            return Err(Error::invalid(
                "noise",
                format!("must be finite and >= 0, got {}", params.noise),
            ));
        }
        if !params.mean.is_finite() {
            return Err(Error::invalid("mean", "must be finite"));
        }
        Ok(())
    }

    /// Input dimension.
    pub fn dim(&self) -> usize {
        self.d
    }

    /// Number of training points.
    pub fn n(&self) -> usize {
        self.y.len()
    }

    /// Training inputs, row-major `n × d`.
    pub fn train_x(&self) -> &[f64] {
        &self.x
    }

    /// Training targets.
    pub fn train_y(&self) -> &[f64] {
        &self.y
    }

    /// Hyperparameters.
    pub fn params(&self) -> &GpParams {
        &self.params
    }

    /// The Cholesky factor of `k(X, X) + σ_n² I`.
    pub fn cholesky(&self) -> &Cholesky {
        &self.chol
    }

    /// `α = (K + σ_n² I)⁻¹ (y − c)`.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Computes now what the first batched posterior would otherwise compute inside the
    /// optimizer's parallel loop: the inverse factor `L⁻¹` (`n³/3` flops), on all cores when
    /// `n ≥ 512` and called from outside rayon's pool (the BO step calls it after its fit). It
    /// changes no result.
    pub fn prepare(&self) {
        let _ = self.linv();
    }

    fn linv(&self) -> &Mat<f64> {
        self.linv.get_or_init(|| {
            let n = self.n();
            let mut m = Mat::<f64>::identity(n, n);
            self.chol.solve_lower_in_place(m.as_mut());
            // Exact zeros above the diagonal: the products with L⁻¹ skip them by blocks.
            zero_upper(m.as_mut());
            m
        })
    }

    /// Log marginal likelihood `log p(y | X, θ) = −½ (y−c)ᵀ α − ½ log det K − (n/2) log 2π`.
    pub fn log_marginal_likelihood(&self) -> f64 {
        let n = self.n() as f64;
        let fit: f64 = self
            .y
            .iter()
            .zip(&self.alpha)
            .map(|(y, a)| (y - self.params.mean) * a)
            .sum();
        -0.5 * fit - 0.5 * self.chol.log_det() - 0.5 * n * (2.0 * std::f64::consts::PI).ln()
    }

    /// Latent posterior mean and variance (and, if `grad`, their gradients with respect to the
    /// query coordinates) at the rows of `xs` (row-major `m × d`).
    pub fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        let m = validate_points("points", xs, self.d)?;
        let d = self.d;
        let mut out = PosteriorBatch {
            mean: vec![0.0; m],
            var: vec![0.0; m],
            mean_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
            var_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
        };
        let mut ws = self.pool.take(self.n(), d, BLOCK.min(m), grad);
        let mut start = 0;
        while start < m {
            let b = BLOCK.min(m - start);
            self.posterior_block(
                &xs[start * d..(start + b) * d],
                grad,
                start,
                &mut out,
                &mut ws,
            );
            start += b;
        }
        self.pool.put(ws);
        Ok(out)
    }

    fn posterior_block(
        &self,
        xs: &[f64],
        grad: bool,
        offset: usize,
        out: &mut PosteriorBatch,
        ws: &mut Workspace,
    ) {
        let d = self.d;
        let n = self.n();
        let m = xs.len() / d;
        let kern = &self.params.kernel;
        let s2 = kern.outputscale;
        if n == 0 {
            for j in 0..m {
                out.mean[offset + j] = self.params.mean;
                out.var[offset + j] = s2;
            }
            return;
        }
        let inv_l: Vec<f64> = kern.lengthscales.iter().map(|l| 1.0 / l).collect();
        let xt = &self.xt;
        // Cross-covariance Kq (n × m) and, for gradients, G = σ² κ'(r²) (n × m). The loops run
        // over training points in the inner dimension, on contiguous scaled coordinates.
        let Workspace {
            kq, gq, v, w, r2, ..
        } = ws;
        let mut qs = vec![0.0; d];
        for j in 0..m {
            for k in 0..d {
                qs[k] = xs[j * d + k] * inv_l[k];
            }
            r2.fill(0.0);
            for (k, &qk) in qs.iter().enumerate() {
                add_squared_diff(r2, &xt[k * n..(k + 1) * n], qk);
            }
            let kcol = kq.col_as_slice_mut(j);
            if grad {
                eval_r2_slice(kern.kind, s2, r2, kcol, gq.col_as_slice_mut(j));
            } else {
                eval_r2_slice(kern.kind, s2, r2, kcol, &mut []);
            }
            out.mean[offset + j] = self.params.mean + dot(kcol, &self.alpha);
        }
        // Variance: V = L⁻¹ Kq, σ² = k(x,x) − ‖V_j‖².
        let linv = self.linv();
        if m <= SMALL_BATCH {
            for j in 0..m {
                lower_matvec(linv.as_ref(), kq.col_as_slice(j), v.col_as_slice_mut(j));
            }
        } else {
            padded_trmm(
                v.as_mut().subcols_mut(0, m),
                linv.as_ref(),
                false,
                kq.as_ref().subcols(0, m),
            );
        }
        for j in 0..m {
            let col = v.col_as_slice(j);
            out.var[offset + j] = (s2 - dot(col, col)).max(MIN_VARIANCE);
        }
        if !grad {
            return;
        }
        // W = K⁻¹ Kq = L⁻ᵀ V. With scaled coordinates q̃ = q/ℓ, x̃ = x/ℓ:
        //   ∂μ/∂x_k  =  (2/ℓ_k) Σ_i α_i G_ij (q̃_k − x̃_ik)
        //   ∂σ²/∂x_k = −(4/ℓ_k) Σ_i W_ij G_ij (q̃_k − x̃_ik)
        if m <= SMALL_BATCH {
            for j in 0..m {
                lower_t_matvec(linv.as_ref(), v.col_as_slice(j), w.col_as_slice_mut(j));
            }
        } else {
            padded_trmm(
                w.as_mut().subcols_mut(0, m),
                linv.as_ref(),
                true,
                v.as_ref().subcols(0, m),
            );
        }
        if m <= SMALL_BATCH {
            self.gradients_by_point(xs, &inv_l, offset, out, gq, w);
        } else {
            self.gradients_by_block(xs, &inv_l, offset, out, ws);
        }
    }

    /// The gradient sums of [`Self::posterior_block`] point by point:
    /// `Σ_i a_i (q̃_k − x̃_ik)` with `a = α ∘ G_j` and `b = W_j ∘ G_j`, `O(n d)` per point.
    fn gradients_by_point(
        &self,
        xs: &[f64],
        inv_l: &[f64],
        offset: usize,
        out: &mut PosteriorBatch,
        gq: &Mat<f64>,
        w: &Mat<f64>,
    ) {
        let (d, n) = (self.d, self.n());
        let m = xs.len() / d;
        let mut a = vec![0.0; n];
        let mut b = vec![0.0; n];
        for j in 0..m {
            let g = gq.col_as_slice(j);
            let wc = w.col_as_slice(j);
            for i in 0..n {
                a[i] = self.alpha[i] * g[i];
                b[i] = wc[i] * g[i];
            }
            let row = offset + j;
            let clamp = out.var[row] <= MIN_VARIANCE;
            for k in 0..d {
                let qk = xs[j * d + k] * inv_l[k];
                let col = &self.xt[k * n..(k + 1) * n];
                let (sa, sb) = dot2_shifted(&a, &b, col, qk);
                out.mean_grad[row * d + k] = 2.0 * inv_l[k] * sa;
                out.var_grad[row * d + k] = if clamp { 0.0 } else { -4.0 * inv_l[k] * sb };
            }
        }
    }

    /// The same sums for a block, as two matrix products: with `A = α ∘ G` and `B = W ∘ G`
    /// (`n × m`, formed in place of `G` and `W`),
    /// `Σ_i A_ij (q̃_jk − x̃_ik) = q̃_jk Σ_i A_ij − (X̃ᵀ A)_kj`, and likewise for `B`. The products
    /// `X̃ᵀ A`, `X̃ᵀ B` (`d × m`) run at matrix-multiplication speed; the point-by-point sums
    /// stream `A`, `B` and `X̃` once per coordinate. The subtraction loses at most the digits of
    /// `|q̃| / |q̃ − x̃_i|` on the few training points near the query, where the kernel's
    /// derivative is not negligible (about 1e-14 relative for lengthscales ≥ 0.01).
    fn gradients_by_block(
        &self,
        xs: &[f64],
        inv_l: &[f64],
        offset: usize,
        out: &mut PosteriorBatch,
        ws: &mut Workspace,
    ) {
        let (d, n) = (self.d, self.n());
        let m = xs.len() / d;
        let Workspace { gq, w, pa, pb, .. } = ws;
        let mut sums = vec![(0.0, 0.0); m];
        for (j, s) in sums.iter_mut().enumerate() {
            let g = gq.col_as_slice_mut(j);
            let wc = w.col_as_slice_mut(j);
            *s = scale_columns(g, wc, &self.alpha);
        }
        let xt = faer::MatRef::from_column_major_slice(&self.xt, n, d);
        gemm(
            pa.as_mut().subcols_mut(0, m),
            false,
            xt.transpose(),
            gq.as_ref().subcols(0, m),
            1.0,
        );
        gemm(
            pb.as_mut().subcols_mut(0, m),
            false,
            xt.transpose(),
            w.as_ref().subcols(0, m),
            1.0,
        );
        for (j, &(sa, sb)) in sums.iter().enumerate() {
            let row = offset + j;
            let clamp = out.var[row] <= MIN_VARIANCE;
            for k in 0..d {
                let qk = xs[j * d + k] * inv_l[k];
                out.mean_grad[row * d + k] = 2.0 * inv_l[k] * (qk * sa - pa[(k, j)]);
                out.var_grad[row * d + k] = if clamp {
                    0.0
                } else {
                    -4.0 * inv_l[k] * (qk * sb - pb[(k, j)])
                };
            }
        }
    }

    /// Predictive mean and variance of a new *observation* at the rows of `xs`: the latent
    /// posterior plus the observation noise, `σ²(x) + σ_n²`.
    pub fn predict(&self, xs: &[f64]) -> Result<(Vec<f64>, Vec<f64>)> {
        let p = self.posterior(xs, false)?;
        let noise = self.params.noise;
        Ok((p.mean, p.var.into_iter().map(|v| v + noise).collect()))
    }

    /// Joint latent posterior covariance matrix of the rows of `xs` (`m × m`, row-major).
    pub fn posterior_covariance(&self, xs: &[f64]) -> Result<Vec<f64>> {
        let m = validate_points("points", xs, self.d)?;
        let d = self.d;
        let n = self.n();
        let kern = &self.params.kernel;
        let mut kq = Mat::<f64>::zeros(n, m);
        for j in 0..m {
            for i in 0..n {
                kq[(i, j)] = kern.eval(&xs[j * d..(j + 1) * d], &self.x[i * d..(i + 1) * d]);
            }
        }
        self.chol.solve_lower_in_place(kq.as_mut());
        let mut cov = Mat::<f64>::from_fn(m, m, |a, b| {
            kern.eval(&xs[a * d..(a + 1) * d], &xs[b * d..(b + 1) * d])
        });
        gemm(cov.as_mut(), true, kq.transpose(), kq.as_ref(), -1.0);
        let mut out = vec![0.0; m * m];
        for a in 0..m {
            for b in 0..m {
                // Symmetrize to remove rounding asymmetry.
                out[a * m + b] = 0.5 * (cov[(a, b)] + cov[(b, a)]);
            }
        }
        Ok(out)
    }

    /// The latent posterior at the rows of `xs` (`m × d`) together with the posterior
    /// covariances of the listed `pairs` of rows, and, if `grad`, all their gradients with
    /// respect to the points' coordinates. This is what a fantasy tree needs: the posterior of a
    /// node conditioned on its ancestors follows from these root quantities alone (see
    /// `acquisition::bmsei`). Costs `O(m n² + |pairs| n d)`.
    ///
    /// With `G_i(x) = ∂k(x_i, x)/∂x` and `w_b = K⁻¹ k(X, x_b)`, the covariance
    /// `Σ(a, b) = k(a, b) − k(a, X) K⁻¹ k(X, b)` has `∂Σ/∂x_a = ∂k(a, b)/∂x_a − Σ_i w_b,i G_i(x_a)`.
    pub fn posterior_pairs(
        &self,
        xs: &[f64],
        pairs: &[(usize, usize)],
        grad: bool,
    ) -> Result<PairPosterior> {
        let m = validate_points("points", xs, self.d)?;
        if let Some(&(a, b)) = pairs.iter().find(|&&(a, b)| a >= m || b >= m) {
            return Err(Error::invalid(
                "pairs",
                format!("pair ({a}, {b}) is out of range for {m} points"),
            ));
        }
        let d = self.d;
        let n = self.n();
        let kern = &self.params.kernel;
        let s2 = kern.outputscale;
        let inv_l: Vec<f64> = kern.lengthscales.iter().map(|l| 1.0 / l).collect();
        let gd = if grad { d } else { 0 };
        let mut out = PairPosterior {
            mean: vec![0.0; m],
            var: vec![0.0; m],
            mean_grad: vec![0.0; m * gd],
            var_grad: vec![0.0; m * gd],
            cov: vec![0.0; pairs.len()],
            cov_grad: vec![0.0; pairs.len() * 2 * gd],
        };
        // Prior cross-covariance k(a, b) and its gradient with respect to x_a.
        let prior_pair = |a: usize, b: usize, g: &mut [f64]| -> f64 {
            let xa = &xs[a * d..(a + 1) * d];
            let xb = &xs[b * d..(b + 1) * d];
            if g.is_empty() {
                kern.eval(xa, xb)
            } else {
                kern.eval_grad_x(xa, xb, g)
            }
        };
        if n == 0 {
            out.mean.fill(self.params.mean);
            out.var.fill(s2);
            for (p, &(a, b)) in pairs.iter().enumerate() {
                let g = &mut out.cov_grad[p * 2 * gd..(p + 1) * 2 * gd];
                let (ga, gb) = g.split_at_mut(gd);
                out.cov[p] = prior_pair(a, b, ga);
                prior_pair(b, a, gb);
            }
            return Ok(out);
        }
        // Kq = k(X, xs) (n × m) and G = σ² κ'(r²) (n × m).
        let mut kq = Mat::<f64>::zeros(n, m);
        let mut gq = Mat::<f64>::zeros(n, if grad { m } else { 0 });
        let mut r2 = vec![0.0; n];
        for j in 0..m {
            r2.fill(0.0);
            for k in 0..d {
                add_squared_diff(
                    &mut r2,
                    &self.xt[k * n..(k + 1) * n],
                    xs[j * d + k] * inv_l[k],
                );
            }
            if grad {
                eval_r2_slice(
                    kern.kind,
                    s2,
                    &r2,
                    kq.col_as_slice_mut(j),
                    gq.col_as_slice_mut(j),
                );
            } else {
                eval_r2_slice(kern.kind, s2, &r2, kq.col_as_slice_mut(j), &mut []);
            }
            out.mean[j] = self.params.mean + dot(kq.col_as_slice(j), &self.alpha);
        }
        // V = L⁻¹ Kq, W = L⁻ᵀ V = K⁻¹ Kq.
        let linv = self.linv();
        let mut v = Mat::<f64>::zeros(n, m);
        padded_trmm(v.as_mut(), linv.as_ref(), false, kq.as_ref());
        for j in 0..m {
            let c = v.col_as_slice(j);
            out.var[j] = (s2 - dot(c, c)).max(MIN_VARIANCE);
        }
        for (p, &(a, b)) in pairs.iter().enumerate() {
            out.cov[p] = kern.eval(&xs[a * d..(a + 1) * d], &xs[b * d..(b + 1) * d])
                - dot(v.col_as_slice(a), v.col_as_slice(b));
        }
        if !grad {
            return Ok(out);
        }
        let mut w = Mat::<f64>::zeros(n, m);
        padded_trmm(w.as_mut(), linv.as_ref(), true, v.as_ref());
        // Σ_i c_i ∂k(x_i, x_j)/∂x_jk = (2/ℓ_k) Σ_i c_i G_ij (x̃_jk − x̃_ik), for one vector `c`
        // (into `g1`) or two at once (`c2` into `g2`, sharing the pass over the training points).
        let mut t1 = vec![0.0; n];
        let mut t2 = vec![0.0; n];
        let mut contract =
            |c1: &[f64], c2: Option<&[f64]>, j: usize, g1: &mut [f64], g2: &mut [f64]| {
                let gj = gq.col_as_slice(j);
                for ((t, a), b) in t1.iter_mut().zip(c1).zip(gj) {
                    *t = a * b;
                }
                if let Some(c2) = c2 {
                    for ((t, a), b) in t2.iter_mut().zip(c2).zip(gj) {
                        *t = a * b;
                    }
                }
                for k in 0..d {
                    let col = &self.xt[k * n..(k + 1) * n];
                    let q = xs[j * d + k] * inv_l[k];
                    if c2.is_some() {
                        let (s1, s2) = dot2_shifted(&t1, &t2, col, q);
                        g1[k] = 2.0 * inv_l[k] * s1;
                        g2[k] = 2.0 * inv_l[k] * s2;
                    } else {
                        g1[k] = 2.0 * inv_l[k] * dot_shifted(&t1, col, q);
                    }
                }
            };
        let mut tmp = vec![0.0; d];
        for j in 0..m {
            let clamp = out.var[j] <= MIN_VARIANCE;
            let (mg, vg) = (
                &mut out.mean_grad[j * d..(j + 1) * d],
                &mut out.var_grad[j * d..(j + 1) * d],
            );
            contract(&self.alpha, Some(w.col_as_slice(j)), j, mg, vg);
            for v in vg.iter_mut() {
                *v = if clamp { 0.0 } else { -2.0 * *v };
            }
        }
        for (p, &(a, b)) in pairs.iter().enumerate() {
            let g = &mut out.cov_grad[p * 2 * d..(p + 1) * 2 * d];
            let (ga, gb) = g.split_at_mut(d);
            prior_pair(a, b, ga);
            contract(w.col_as_slice(b), None, a, &mut tmp, &mut []);
            for (o, t) in ga.iter_mut().zip(&tmp) {
                *o -= t;
            }
            prior_pair(b, a, gb);
            contract(w.col_as_slice(a), None, b, &mut tmp, &mut []);
            for (o, t) in gb.iter_mut().zip(&tmp) {
                *o -= t;
            }
        }
        Ok(out)
    }

    /// The posterior after also observing `y_new` at the rows of `x_new`, with the same
    /// hyperparameters, in `O(n² m)` by appending to the Cholesky factor (no refit, no
    /// refactorization). Used for incremental BO and for fantasies.
    pub fn condition_on(&self, x_new: &[f64], y_new: &[f64]) -> Result<Self> {
        let m = validate_points("x_new", x_new, self.d)?;
        if y_new.len() != m {
            return Err(Error::dim("y_new", m, y_new.len()));
        }
        if let Some(i) = y_new.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid("y_new", format!("non-finite value at {i}")));
        }
        let d = self.d;
        let n = self.n();
        let kern = &self.params.kernel;
        let cross = Mat::<f64>::from_fn(n, m, |i, j| {
            kern.eval(&self.x[i * d..(i + 1) * d], &x_new[j * d..(j + 1) * d])
        });
        let block = Mat::<f64>::from_fn(m, m, |a, b| {
            kern.eval(&x_new[a * d..(a + 1) * d], &x_new[b * d..(b + 1) * d])
                + if a == b { self.params.noise } else { 0.0 }
        });
        let chol = self.chol.appended(cross.as_ref(), block.as_ref())?;
        // If L⁻¹ is already known, the new one follows in O(n²m) from the block form
        // [[L, 0], [B, C]]⁻¹ = [[L⁻¹, 0], [−C⁻¹ B L⁻¹, C⁻¹]] instead of O((n+m)³) on first use.
        let linv = OnceLock::new();
        if let Some(old) = self.linv.get() {
            let lf = chol.l();
            let b = lf.submatrix(n, 0, m, n);
            let c = lf.submatrix(n, n, m, m);
            let mut t = Mat::<f64>::zeros(m, n);
            gemm(t.as_mut(), false, b, old.as_ref(), -1.0);
            let mut cinv = Mat::<f64>::identity(m, m);
            crate::linalg::solve_lower(c, t.as_mut());
            crate::linalg::solve_lower(c, cinv.as_mut());
            let mut li = Mat::<f64>::zeros(n + m, n + m);
            li.as_mut()
                .submatrix_mut(0, 0, n, n)
                .copy_from(old.as_ref());
            li.as_mut().submatrix_mut(n, 0, m, n).copy_from(t.as_ref());
            li.as_mut()
                .submatrix_mut(n, n, m, m)
                .copy_from(cinv.as_ref());
            zero_upper(li.as_mut());
            let _ = linv.set(li);
        }
        let mut x = self.x.clone();
        x.extend_from_slice(x_new);
        let mut y = self.y.clone();
        y.extend_from_slice(y_new);
        let r: Vec<f64> = y.iter().map(|v| v - self.params.mean).collect();
        let alpha = chol.solve_vec(&r);
        let xt = scaled_transpose(&self.params.kernel, &x);
        Ok(Self {
            d,
            x,
            y,
            params: self.params.clone(),
            chol,
            alpha,
            xt,
            linv,
            pool: WorkspacePool::default(),
        })
    }
}

/// `k(X, X) + noise·I` for row-major points `x` (`n × d`).
pub fn kernel_matrix(kernel: &Kernel, x: &[f64], noise: f64) -> Mat<f64> {
    kernel_matrix_and_derivative(kernel, x, noise, false).0
}

/// `k(X, X) + noise·I` and, if `derivative`, the matrix `G_ij = σ² κ'(r²_ij)` (only the strictly
/// lower triangle of `G` is filled). Columns are computed with vectorized kernel evaluation.
pub fn kernel_matrix_and_derivative(
    kernel: &Kernel,
    x: &[f64],
    noise: f64,
    derivative: bool,
) -> (Mat<f64>, Mat<f64>) {
    let (mut k, g) = kernel_matrix_lower(kernel, x, noise, derivative);
    let n = k.nrows();
    for j in 0..n {
        for i in (j + 1)..n {
            k[(j, i)] = k[(i, j)];
        }
    }
    (k, g)
}

/// As [`kernel_matrix_and_derivative`], but only the lower triangle and the diagonal of the
/// kernel matrix are filled (the strict upper triangle is zero): what a Cholesky factorization
/// and the likelihood gradient read.
pub(crate) fn kernel_matrix_lower(
    kernel: &Kernel,
    x: &[f64],
    noise: f64,
    derivative: bool,
) -> (Mat<f64>, Mat<f64>) {
    let d = kernel.dim();
    let n = x.len() / d;
    let s2 = kernel.outputscale;
    let xt = scaled_transpose(kernel, x);
    let mut k = Mat::<f64>::zeros(n, n);
    let mut g = Mat::<f64>::zeros(if derivative { n } else { 0 }, n);
    let mut r2 = vec![0.0; n];
    for j in 0..n {
        let len = n - j - 1;
        let r = &mut r2[..len];
        r.fill(0.0);
        for t in 0..d {
            let col = &xt[t * n..(t + 1) * n];
            add_squared_diff(r, &col[j + 1..], col[j]);
        }
        let kcol = &mut k.col_as_slice_mut(j)[j + 1..];
        if derivative {
            eval_r2_slice(
                kernel.kind,
                s2,
                r,
                kcol,
                &mut g.col_as_slice_mut(j)[j + 1..],
            );
        } else {
            eval_r2_slice(kernel.kind, s2, r, kcol, &mut []);
        }
        k[(j, j)] = s2 + noise;
    }
    (k, g)
}
