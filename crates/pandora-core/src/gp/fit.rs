//! Hyperparameter fitting: maximum a posteriori (or maximum likelihood) estimates of the kernel
//! lengthscales, outputscale, noise and constant mean, by bounded L-BFGS-B on log-parameters with
//! analytic gradients, restarts in parallel and warm starts.
//!
//! The objective is `log p(y | X, θ) + Σ log p(θ_i)` with the priors evaluated on the natural
//! parameters (as GPyTorch does; no Jacobian term for the log transform). The constant mean is
//! profiled out in closed form, `c* = 1ᵀK⁻¹y / 1ᵀK⁻¹1` (it has no prior), which removes one
//! dimension from the search and is exact by the envelope theorem.
//!
//! [`fit`] runs L-BFGS-B from several starts (a warm start if given, the priors' modes, random
//! draws) and keeps the best; [`fit_warm`] runs it from the warm start alone and reports how far
//! the log posterior rose above it per observation, which a BO loop reads to decide whether the
//! single start sufficed (`crate::policy::Refit`). Each evaluation factorizes and inverts the
//! `n × n` kernel matrix (`O(n³)`); after the search one factorization gives the profiled mean and
//! the conditioned GP (a kept warm start reuses its evaluation's factor instead).
//!
//! ## Large n: cold starts screened on a subset
//!
//! From [`SCREEN_FROM_N`] observations (768: a cost-aware study gets there) one likelihood
//! evaluation costs a quarter of a second at n = 2000, and a multi-start search about 20 of them
//! per start. [`fit`] then runs its cold starts (the priors' modes, the random draws) on 384
//! observations spread evenly over the data, evaluates each of their optima and the warm start
//! once on all the data, and refines only the best of them on all the data. The cold starts
//! are there to find another basin than the warm start's; finding it on a subset costs a few
//! percent of a full run. Measured on the `bo_step_scaling` data and in whole runs past 768
//! observations, where the final regrets moved by at most 1.4e-3 either way (docs/bench.md).
//!
//! ## Keeping the warm start
//!
//! [`fit_warm_or_keep`] first evaluates the log posterior and its gradient at the warm start on
//! the new data (one evaluation). Its projected gradient `g` (the gradient with the components
//! that push against an active bound removed, as L-BFGS-B's stopping test reads it) says how far
//! the mode moved: near the mode `θ* − θ_warm ≈ H⁻¹ g`, with a Hessian `H` that grows like `n`,
//! so the movement is small when `‖g‖_∞ / n` is. When `‖g‖_∞ ≤ τ n` (`τ` the keep tolerance,
//! in nats per observation per unit of log-hyperparameter) the warm start is kept as it is, and
//! the fit costs one evaluation instead of a run; otherwise L-BFGS-B runs from it and stops as
//! soon as `‖g‖_∞ ≤ τ n` (or at the usual tolerances, whichever comes first), so the next step
//! starts from a point that passes the same test. With `τ = 0` the function is [`fit_warm`]
//! exactly (no extra evaluation, the usual tolerances). The first evaluation is handed to the
//! L-BFGS-B run rather than repeated, so a run costs what it did before.

use crate::error::{Error, Result};
use crate::gp::kernel::{Kernel, KernelKind};
use crate::gp::likelihood::{factor_for_likelihood, lml_profiled_with_factor, ml_mean};
use crate::gp::model::{ExactGp, GpParams};
use crate::linalg::Cholesky;
use crate::optim::lbfgsb::{self, LbfgsbOptions};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// A prior on a positive hyperparameter `v`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prior {
    /// No prior (maximum likelihood for this parameter).
    None,
    /// Gamma with shape `concentration` and `rate`: `log p(v) = (a − 1) log v − b v + const`.
    Gamma {
        /// Shape `a`.
        concentration: f64,
        /// Rate `b`.
        rate: f64,
    },
    /// Log-normal: `log v ~ N(loc, scale²)`.
    LogNormal {
        /// Mean of `log v`.
        loc: f64,
        /// Standard deviation of `log v`.
        scale: f64,
    },
}

impl Prior {
    /// `log p(v)` up to an additive constant, and its derivative with respect to `log v`.
    pub fn log_density_dlog(&self, v: f64) -> (f64, f64) {
        match *self {
            Prior::None => (0.0, 0.0),
            Prior::Gamma {
                concentration: a,
                rate: b,
            } => ((a - 1.0) * v.ln() - b * v, (a - 1.0) - b * v),
            Prior::LogNormal { loc, scale } => {
                let lv = v.ln();
                let z = (lv - loc) / scale;
                (-lv - 0.5 * z * z, -1.0 - z / scale)
            }
        }
    }

    /// The mode of the prior, if it has one (used as the default starting point).
    pub fn mode(&self) -> Option<f64> {
        match *self {
            Prior::None => None,
            Prior::Gamma {
                concentration: a,
                rate: b,
            } => (a > 1.0).then(|| (a - 1.0) / b),
            Prior::LogNormal { loc, scale } => Some((loc - scale * scale).exp()),
        }
    }

    /// Draws a value of `log v` for a random restart (from the prior, or around `fallback`).
    pub(crate) fn sample_log(&self, rng: &mut Xoshiro256PlusPlus, fallback: f64) -> f64 {
        match *self {
            Prior::None => fallback.ln() + rng.random_range(-1.5..1.5),
            Prior::Gamma {
                concentration: a,
                rate: b,
            } => {
                let g = rand_distr::Gamma::new(a, 1.0 / b).expect("valid gamma prior");
                g.sample(rng).max(1e-6).ln()
            }
            Prior::LogNormal { loc, scale } => {
                let z: f64 = StandardNormal.sample(rng);
                loc + scale * z
            }
        }
    }
}

/// Priors on the kernel and noise hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priors {
    /// Prior on each lengthscale.
    pub lengthscale: Prior,
    /// Prior on the outputscale.
    pub outputscale: Prior,
    /// Prior on the noise variance (used only when the noise is learned).
    pub noise: Prior,
}

impl Priors {
    /// The papers' (BoTorch 0.9) defaults: Gamma(3, 6) on lengthscales, Gamma(2, 0.15) on the
    /// outputscale, Gamma(1.1, 0.05) on a learned noise.
    pub fn papers() -> Self {
        Self {
            lengthscale: Prior::Gamma {
                concentration: 3.0,
                rate: 6.0,
            },
            outputscale: Prior::Gamma {
                concentration: 2.0,
                rate: 0.15,
            },
            noise: Prior::Gamma {
                concentration: 1.1,
                rate: 0.05,
            },
        }
    }

    /// The current BoTorch default for `d` inputs: LogNormal(√2 + ½ log d, √3) on lengthscales,
    /// LogNormal(−4, 1) on the noise, no prior on the outputscale.
    pub fn botorch(d: usize) -> Self {
        Self {
            lengthscale: Prior::LogNormal {
                loc: std::f64::consts::SQRT_2 + 0.5 * (d.max(1) as f64).ln(),
                scale: 3f64.sqrt(),
            },
            outputscale: Prior::None,
            noise: Prior::LogNormal {
                loc: -4.0,
                scale: 1.0,
            },
        }
    }

    /// No priors: maximum likelihood.
    pub fn none() -> Self {
        Self {
            lengthscale: Prior::None,
            outputscale: Prior::None,
            noise: Prior::None,
        }
    }
}

/// Observation noise: fixed, or learned above a floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseSpec {
    /// A fixed noise variance (the papers use 1e-4 or 1e-6).
    Fixed(f64),
    /// Learned by the fit, never below `floor` (BoTorch: 1e-4).
    Learned {
        /// Smallest allowed noise variance.
        floor: f64,
    },
}

/// Settings of [`fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Kernel shape.
    pub kind: KernelKind,
    /// One lengthscale per dimension (ARD) or a single shared one.
    pub ard: bool,
    /// Hyperparameter priors ([`Priors::none`] for maximum likelihood).
    pub priors: Priors,
    /// Observation noise.
    pub noise: NoiseSpec,
    /// Whether the constant mean is fitted (profiled); otherwise it is `fixed_mean`.
    pub fit_mean: bool,
    /// The mean used when `fit_mean` is false.
    pub fixed_mean: f64,
    /// Random restarts in addition to the default start and the warm start.
    pub restarts: usize,
    /// Optimizer settings.
    pub lbfgsb: LbfgsbOptions,
    /// Bounds on every lengthscale.
    pub lengthscale_bounds: (f64, f64),
    /// Bounds on the outputscale.
    pub outputscale_bounds: (f64, f64),
    /// Hold the outputscale at this value instead of fitting it (BoTorch's current default model
    /// has no outputscale: σ² = 1 on standardized outcomes).
    pub fixed_outputscale: Option<f64>,
    /// Upper bound on a learned noise variance (at most the floor holds the noise at the floor).
    pub max_noise: f64,
    /// Seed of the random restarts.
    pub seed: u64,
}

impl Default for FitOptions {
    /// The papers' model: Matérn-5/2 ARD, Gamma priors, fixed noise 1e-4, fitted constant mean,
    /// one random restart.
    fn default() -> Self {
        Self {
            kind: KernelKind::Matern52,
            ard: true,
            priors: Priors::papers(),
            noise: NoiseSpec::Fixed(1e-4),
            fit_mean: true,
            fixed_mean: 0.0,
            restarts: 1,
            lbfgsb: LbfgsbOptions {
                max_iter: 200,
                ..LbfgsbOptions::default()
            },
            lengthscale_bounds: (1e-3, 1e4),
            outputscale_bounds: (1e-6, 1e6),
            fixed_outputscale: None,
            max_noise: 1e2,
            seed: 0,
        }
    }
}

impl FitOptions {
    /// BoTorch's current default `SingleTaskGP` for `d` inputs: RBF with ARD lengthscales under
    /// LogNormal(√2 + ½ log d, √3), no outputscale (fixed at 1), noise learned above 1e-4 under
    /// LogNormal(−4, 1). Meant for standardized outcomes.
    pub fn botorch(d: usize) -> Self {
        Self {
            kind: KernelKind::Rbf,
            priors: Priors::botorch(d),
            noise: NoiseSpec::Learned { floor: 1e-4 },
            fixed_outputscale: Some(1.0),
            ..Self::default()
        }
    }
}

/// The outcome of [`fit`].
#[derive(Debug, Clone)]
pub struct FitResult {
    /// The fitted hyperparameters.
    pub params: GpParams,
    /// The GP conditioned on the data with those hyperparameters.
    pub gp: ExactGp,
    /// Log marginal likelihood at the optimum.
    pub log_marginal_likelihood: f64,
    /// Log marginal likelihood plus log priors at the optimum.
    pub log_posterior: f64,
    /// Objective evaluations over all restarts.
    pub evaluations: usize,
    /// Index of the winning start (0 = warm start if given, then the default, then random).
    pub best_start: usize,
}

/// Parameter layout of the search vector.
struct Layout {
    d: usize,
    nl: usize,
    learn_noise: bool,
}

impl Layout {
    fn len(&self) -> usize {
        self.nl + 1 + usize::from(self.learn_noise)
    }
}

/// The negative log posterior (profiled over the mean) and its gradient for one search vector.
fn objective(
    theta: &[f64],
    grad: &mut [f64],
    layout: &Layout,
    opts: &FitOptions,
    x: &[f64],
    y: &[f64],
) -> f64 {
    objective_with_factor(theta, grad, layout, opts, x, y).0
}

/// [`objective`], and the factor of `K + σ_n² I` it evaluated (none when it failed).
fn objective_with_factor(
    theta: &[f64],
    grad: &mut [f64],
    layout: &Layout,
    opts: &FitOptions,
    x: &[f64],
    y: &[f64],
) -> (f64, Option<Cholesky>) {
    let (kernel, noise) = unpack(theta, layout, opts);
    let mean = (!opts.fit_mean).then_some(opts.fixed_mean);
    let Ok((l, _, chol)) = lml_profiled_with_factor(&kernel, noise, mean, x, y) else {
        return (f64::INFINITY, None);
    };
    let d = layout.d;
    let mut value = l.value;
    grad.fill(0.0);
    for p in 0..d {
        let gi = if layout.nl == 1 { 0 } else { p };
        grad[gi] += l.grad[p];
    }
    for i in 0..layout.nl {
        let (lp, dlp) = opts.priors.lengthscale.log_density_dlog(theta[i].exp());
        // A shared lengthscale carries one prior term.
        value += lp;
        grad[i] += dlp;
    }
    let (lp, dlp) = opts.priors.outputscale.log_density_dlog(kernel.outputscale);
    value += lp;
    grad[layout.nl] = l.grad[d] + dlp;
    if layout.learn_noise {
        let (lp, dlp) = opts.priors.noise.log_density_dlog(noise);
        value += lp;
        grad[layout.nl + 1] = l.grad[d + 1] + dlp;
    }
    for g in grad.iter_mut() {
        *g = -*g;
    }
    (-value, Some(chol))
}

fn unpack(theta: &[f64], layout: &Layout, opts: &FitOptions) -> (Kernel, f64) {
    let ls: Vec<f64> = if layout.nl == 1 {
        vec![theta[0].exp(); layout.d]
    } else {
        theta[..layout.d].iter().map(|t| t.exp()).collect()
    };
    let kernel = Kernel {
        kind: opts.kind,
        lengthscales: ls,
        outputscale: theta[layout.nl].exp(),
    };
    let noise = match opts.noise {
        NoiseSpec::Fixed(v) => v,
        NoiseSpec::Learned { .. } => theta[layout.nl + 1].exp(),
    };
    (kernel, noise)
}

/// The search space of a fit: the layout of the search vector and its bounds (log scale).
struct Search {
    layout: Layout,
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl Search {
    /// Checks the data and options and builds the bounds.
    fn new(x: &[f64], y: &[f64], d: usize, opts: &FitOptions) -> Result<Self> {
        let n = y.len();
        if d == 0 || x.len() != n * d {
            return Err(Error::dim("fit: train_x length", n * d, x.len()));
        }
        if n == 0 {
            return Err(Error::invalid(
                "train_y",
                "at least one observation is needed to fit",
            ));
        }
        if x.iter().chain(y).any(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "training data",
                "contains NaN or infinite values",
            ));
        }
        if let NoiseSpec::Fixed(v) = opts.noise
            && !(v.is_finite() && v >= 0.0)
        {
            return Err(Error::invalid(
                "noise",
                "fixed noise must be finite and >= 0",
            ));
        }
        let layout = Layout {
            d,
            nl: if opts.ard { d } else { 1 },
            learn_noise: matches!(opts.noise, NoiseSpec::Learned { .. }),
        };
        let dim = layout.len();
        let mut lower = vec![opts.lengthscale_bounds.0.ln(); dim];
        let mut upper = vec![opts.lengthscale_bounds.1.ln(); dim];
        lower[layout.nl] = opts.outputscale_bounds.0.ln();
        upper[layout.nl] = opts.outputscale_bounds.1.ln();
        if let Some(v) = opts.fixed_outputscale {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    "fixed_outputscale",
                    "must be finite and > 0",
                ));
            }
            // Equal bounds fix the coordinate; L-BFGS-B never moves it.
            lower[layout.nl] = v.ln();
            upper[layout.nl] = v.ln();
        }
        if let NoiseSpec::Learned { floor } = opts.noise {
            lower[layout.nl + 1] = floor.max(1e-12).ln();
            upper[layout.nl + 1] = opts.max_noise.max(floor).ln();
        }
        Ok(Self {
            layout,
            lower,
            upper,
        })
    }

    /// The search vector of lengthscales `ls`, outputscale `os` and noise `noise` (a shared
    /// lengthscale is their geometric mean), not yet clamped to the bounds.
    fn pack(&self, ls: &[f64], os: f64, noise: f64) -> Vec<f64> {
        let layout = &self.layout;
        let mut t = Vec::with_capacity(layout.len());
        if layout.nl == 1 {
            let g = ls.iter().map(|l| l.ln()).sum::<f64>() / ls.len() as f64;
            t.push(g);
        } else {
            t.extend(ls.iter().map(|l| l.ln()));
        }
        t.push(os.ln());
        if layout.learn_noise {
            t.push(noise.ln());
        }
        t
    }

    fn clamp(&self, t: &mut [f64]) {
        for ((v, lo), hi) in t.iter_mut().zip(&self.lower).zip(&self.upper) {
            *v = v.clamp(*lo, *hi);
        }
    }

    /// One L-BFGS-B run from `t`: the final vector, its objective, the number of evaluations
    /// and the objective at the start (infinite where the factorization failed).
    fn run(&self, t: Vec<f64>, opts: &FitOptions, x: &[f64], y: &[f64]) -> (StartResult, f64) {
        self.run_seeded(t, None, opts, x, y)
    }

    /// [`Search::run`] given the objective and gradient at `t` already (`first`, what the first
    /// evaluation would return: it is handed to L-BFGS-B instead of being recomputed, and still
    /// counted as an evaluation).
    fn run_seeded(
        &self,
        mut t: Vec<f64>,
        mut first: Option<(f64, Vec<f64>)>,
        opts: &FitOptions,
        x: &[f64],
        y: &[f64],
    ) -> (StartResult, f64) {
        let mut evals = 0usize;
        let mut f_start = f64::NAN;
        let res = lbfgsb::minimize(
            |th: &[f64], g: &mut [f64]| {
                evals += 1;
                let f = match first.take() {
                    // L-BFGS-B evaluates the (already clamped) start first.
                    Some((f, g0)) if evals == 1 => {
                        g.copy_from_slice(&g0);
                        f
                    }
                    _ => objective(th, g, &self.layout, opts, x, y),
                };
                if evals == 1 {
                    f_start = f;
                }
                f
            },
            &mut t,
            &self.lower,
            &self.upper,
            &opts.lbfgsb,
        );
        let f = match res {
            Ok(r) => r.f,
            Err(_) => f64::INFINITY,
        };
        ((t, f, evals), f_start)
    }

    /// The infinity norm of the projected gradient `g` at `t` (L-BFGS-B's stopping statistic:
    /// a component pushing against an active bound counts only up to the distance to it).
    fn projected_gradient(&self, t: &[f64], g: &[f64]) -> f64 {
        let mut norm: f64 = 0.0;
        for (((ti, gi), lo), hi) in t.iter().zip(g).zip(&self.lower).zip(&self.upper) {
            let pg = if *gi < 0.0 {
                (ti - hi).max(*gi)
            } else {
                (ti - lo).min(*gi)
            };
            norm = norm.max(pg.abs());
        }
        norm
    }

    /// The fit of the winning start `best` (position `best_start`, after `evaluations`): its
    /// hyperparameters, the mean the search profiled out and the GP conditioned on them, from
    /// `factor` when the caller has the factor of `K + σ_n² I` at `best` already (the
    /// likelihood's), else from one factorization (the same bits: the likelihood factorizes the
    /// same matrix).
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        best: &StartResult,
        best_start: usize,
        evaluations: usize,
        opts: &FitOptions,
        x: &[f64],
        y: &[f64],
        factor: Option<Cholesky>,
    ) -> Result<FitResult> {
        let (kernel, noise) = unpack(&best.0, &self.layout, opts);
        let chol = match factor {
            Some(c) => c,
            None => factor_for_likelihood(&kernel, noise, x)?,
        };
        let mean = if opts.fit_mean {
            ml_mean(&chol, y)
        } else {
            opts.fixed_mean
        };
        let params = GpParams {
            kernel,
            mean,
            noise,
        };
        let gp = ExactGp::from_factor(x.to_vec(), y.to_vec(), params.clone(), chol)?;
        let lml = gp.log_marginal_likelihood();
        Ok(FitResult {
            params,
            gp,
            log_marginal_likelihood: lml,
            log_posterior: -best.1,
            evaluations,
            best_start,
        })
    }
}

/// Fits the GP hyperparameters to the data `(x, y)` (row-major `x`, `n × d`, `n ≥ 1`) and returns
/// the conditioned model. `warm` (e.g. the previous fit in a BO loop) is used as an extra start.
/// Starts run in parallel; the result is deterministic for a seed regardless of thread count.
pub fn fit(
    x: &[f64],
    y: &[f64],
    d: usize,
    opts: &FitOptions,
    warm: Option<&GpParams>,
) -> Result<FitResult> {
    let search = Search::new(x, y, d, opts)?;
    let layout = &search.layout;
    let n = y.len();

    // Starting points.
    let ymean = y.iter().sum::<f64>() / n as f64;
    let yvar = (y.iter().map(|v| (v - ymean).powi(2)).sum::<f64>() / n as f64).max(1e-12);
    let default_ls = opts.priors.lengthscale.mode().unwrap_or(0.5);
    let default_os = opts
        .fixed_outputscale
        .or(opts.priors.outputscale.mode())
        .unwrap_or(yvar);
    let default_noise = match opts.noise {
        NoiseSpec::Fixed(v) => v,
        NoiseSpec::Learned { floor } => opts.priors.noise.mode().unwrap_or(1e-3 * yvar).max(floor),
    };
    let mut starts: Vec<Vec<f64>> = Vec::new();
    if let Some(w) = warm
        && w.kernel.dim() == d
    {
        starts.push(search.pack(&w.kernel.lengthscales, w.kernel.outputscale, w.noise));
    }
    starts.push(search.pack(&vec![default_ls; d], default_os, default_noise));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ 0x9e37_79b9_7f4a_7c15);
    for _ in 0..opts.restarts {
        let mut t = Vec::with_capacity(layout.len());
        for _ in 0..layout.nl {
            t.push(opts.priors.lengthscale.sample_log(&mut rng, default_ls));
        }
        t.push(opts.priors.outputscale.sample_log(&mut rng, default_os));
        if layout.learn_noise {
            t.push(opts.priors.noise.sample_log(&mut rng, default_noise));
        }
        starts.push(t);
    }
    for s in &mut starts {
        search.clamp(s);
    }
    let warm_starts = usize::from(starts.len() > 1 + opts.restarts);
    if n >= SCREEN_FROM_N {
        return fit_screened(&search, starts, warm_starts, opts, x, y);
    }

    let results: Vec<StartResult> = starts
        .into_par_iter()
        .map(|t| search.run(t, opts, x, y).0)
        .collect();
    let evaluations = results.iter().map(|r| r.2).sum();
    let (best_start, best) = best_of_starts(&results, "hyperparameter")?;
    search.finish(best, best_start, evaluations, opts, x, y, None)
}

/// From this many observations on, [`fit`] screens its cold starts on a subset
/// (`fit_screened`).
pub const SCREEN_FROM_N: usize = 768;

/// The number of observations the cold starts of a screened fit run on.
const SCREEN_SUBSET: usize = 384;

/// [`fit`] for `n ≥ SCREEN_FROM_N` observations, where every likelihood evaluation is a
/// factorization and an inverse of order `n` (a quarter of a second at n = 2000 on one core) and
/// a multi-start search costs about 20 of them per start. The cold starts (the priors' modes,
/// the random draws) only have to find the basin: they run on `SCREEN_SUBSET` observations
/// spread evenly over the data (every `n / SCREEN_SUBSET`-th, in order), at a few percent of the
/// cost. Each of their optima, and the warm start, is then evaluated once on all the data, and
/// L-BFGS-B runs on all the data from the best of them only. The result is deterministic (the
/// subset is a function of `n`); it can differ from the full multi-start search when a cold
/// start's basin on the subset is not the one it would reach on all the data, and it is never
/// worse than a single warm run from the best candidate. `evaluations` counts the subset's
/// evaluations too.
fn fit_screened(
    search: &Search,
    starts: Vec<Vec<f64>>,
    warm_starts: usize,
    opts: &FitOptions,
    x: &[f64],
    y: &[f64],
) -> Result<FitResult> {
    let n = y.len();
    let d = search.layout.d;
    let m = SCREEN_SUBSET.min(n);
    let (mut xs, mut ys) = (Vec::with_capacity(m * d), Vec::with_capacity(m));
    for k in 0..m {
        let i = k * n / m;
        xs.extend_from_slice(&x[i * d..(i + 1) * d]);
        ys.push(y[i]);
    }
    // The cold starts on the subset, in parallel; the warm start as it is.
    let screened: Vec<(Vec<f64>, usize)> = starts
        .into_par_iter()
        .enumerate()
        .map(|(k, t)| {
            if k < warm_starts {
                (t, 0)
            } else {
                let ((t, _, e), _) = search.run(t, opts, &xs, &ys);
                (t, e)
            }
        })
        .collect();
    let mut evaluations: usize = screened.iter().map(|c| c.1).sum();
    // Every candidate once on all the data.
    let mut values: Vec<(f64, Vec<f64>)> = screened
        .par_iter()
        .map(|(t, _)| {
            let mut g = vec![0.0; t.len()];
            (objective(t, &mut g, &search.layout, opts, x, y), g)
        })
        .collect();
    let candidates: Vec<StartResult> = screened
        .iter()
        .zip(&values)
        .map(|((t, _), (v, _))| (t.clone(), *v, 1))
        .collect();
    let (best_start, _) = best_of_starts(&candidates, "hyperparameter")?;
    // The run from the best candidate reuses its evaluation (counted once, as L-BFGS-B's first).
    evaluations += values.len() - 1;
    let first = std::mem::take(&mut values[best_start]);
    let t = screened[best_start].0.clone();
    let (best, _) = search.run_seeded(t, Some(first), opts, x, y);
    if !best.1.is_finite() {
        return Err(Error::Numerical(
            "the screened hyperparameter start failed".into(),
        ));
    }
    evaluations += best.2;
    search.finish(&best, best_start, evaluations, opts, x, y, None)
}

/// The outcome of [`fit_warm`] and [`fit_warm_or_keep`].
#[derive(Debug, Clone)]
pub struct WarmFit {
    /// The fit (`best_start` 0).
    pub result: FitResult,
    /// How much the single start improved the log posterior, per observation:
    /// `(log p(θ_end | D) − log p(θ_warm | D)) / n` (infinite if the warm start could not be
    /// evaluated, e.g. a failed factorization). Small when the warm start was (nearly) optimal
    /// on the new data; large when the data moved the model. 0 when the warm start was kept.
    pub gain_per_point: f64,
    /// The warm start was kept as it is ([`fit_warm_or_keep`]: its projected gradient was
    /// within the tolerance), without an L-BFGS-B run.
    pub kept: bool,
}

/// A single-start fit from `warm` (the previous BO step's hyperparameters): the search of
/// [`fit`] with one start and no restarts, so the result depends on the warm start, and the
/// gain of the log posterior over it ([`WarmFit::gain_per_point`]), which tells the caller
/// whether a full multi-start refit is due. `warm` must have `d` lengthscales.
pub fn fit_warm(
    x: &[f64],
    y: &[f64],
    d: usize,
    opts: &FitOptions,
    warm: &GpParams,
) -> Result<WarmFit> {
    fit_warm_or_keep(x, y, d, opts, warm, 0.0)
}

/// [`fit_warm`] that keeps the warm start when its projected gradient on the data is at most
/// `keep_tol · n` in the infinity norm, and otherwise stops the run at that gradient (see the
/// module documentation, "Keeping the warm start"). `keep_tol ≤ 0` (or NaN) is [`fit_warm`].
pub fn fit_warm_or_keep(
    x: &[f64],
    y: &[f64],
    d: usize,
    opts: &FitOptions,
    warm: &GpParams,
    keep_tol: f64,
) -> Result<WarmFit> {
    if warm.kernel.dim() != d {
        return Err(Error::dim(
            "fit_warm: warm lengthscales",
            d,
            warm.kernel.dim(),
        ));
    }
    let search = Search::new(x, y, d, opts)?;
    let mut t = search.pack(
        &warm.kernel.lengthscales,
        warm.kernel.outputscale,
        warm.noise,
    );
    search.clamp(&mut t);
    let n = y.len() as f64;
    let mut first_eval = None;
    let mut run_opts = std::borrow::Cow::Borrowed(opts);
    if keep_tol > 0.0 {
        let mut g = vec![0.0; t.len()];
        let (f0, factor) = objective_with_factor(&t, &mut g, &search.layout, opts, x, y);
        if f0.is_finite() {
            let tol = keep_tol * n;
            if search.projected_gradient(&t, &g) <= tol {
                // Kept: the GP is conditioned on the factor this evaluation computed.
                let result = search.finish(&(t, f0, 1), 0, 1, opts, x, y, factor)?;
                return Ok(WarmFit {
                    result,
                    gain_per_point: 0.0,
                    kept: true,
                });
            }
            let mut o = opts.clone();
            o.lbfgsb.pgtol = o.lbfgsb.pgtol.max(tol);
            run_opts = std::borrow::Cow::Owned(o);
        }
        first_eval = Some((f0, g));
    }
    let (start, first) = search.run_seeded(t, first_eval, &run_opts, x, y);
    if !start.1.is_finite() {
        return Err(Error::Numerical(
            "the warm hyperparameter start failed".into(),
        ));
    }
    let gain_per_point = if first.is_finite() {
        ((first - start.1) / n).max(0.0)
    } else {
        f64::INFINITY
    };
    let result = search.finish(&start, 0, start.2, opts, x, y, None)?;
    Ok(WarmFit {
        result,
        gain_per_point,
        kept: false,
    })
}

/// One start of a multi-start fit: the final parameters, objective and number of evaluations.
pub(crate) type StartResult = (Vec<f64>, f64, usize);

/// The start with the smallest finite objective among multi-start results, and its position; an
/// error naming `what` when every start failed.
pub(crate) fn best_of_starts<'a>(
    results: &'a [StartResult],
    what: &str,
) -> Result<(usize, &'a StartResult)> {
    results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.1.is_finite())
        .min_by(|a, b| a.1.1.total_cmp(&b.1.1))
        .ok_or_else(|| Error::Numerical(format!("every {what} start failed")))
}
