//! Choosing λ from a budget (Theorem 1 of the stopping paper).
//!
//! **Theorem 1.** For a random objective with constant prior mean `μ` on a compact space, BO that
//! starts at a point of cost `C`, acquires with PBGI or LogEIPC and stops with the PBGI/LogEIPC
//! rule satisfies `E[Σ_{t ≤ τ} c(x_t)] ≤ C + U` with `U = E[max_x f(x)] − μ` (maximization; the
//! paper writes `μ − E[min f]`). The proof bounds the expected total improvement over the first
//! value, whose expectation is `μ`, by `U`. With costs scaled by λ the BO-phase spend is bounded by
//! `U/λ`, so for an expected budget `B` (of which `C` is already spent)
//!
//! ```text
//! λ = U / (B − C)                                         (lambda_from_budget)
//! ```
//!
//! keeps the expected total cost within `B`. With an initial design of several points the bound
//! still holds with `C` = the design's cost: the best initial value has expectation `≥ μ`.
//!
//! # Estimating U
//!
//! [`estimate_u`] estimates `U` by Monte Carlo over sample paths of the *fitted* model:
//!
//! - [`UReference::Prior`] (Theorem 1's `U`): paths of the prior with the fitted kernel,
//!   `U = E[max_x f(x)] − μ`, from random-Fourier-feature prior paths ([`PriorPath`]) maximized
//!   by multi-start L-BFGS-B on `[0,1]^d`, or, for an exclusive candidate set, from exact
//!   multivariate-normal draws of the prior on the set (no feature approximation).
//! - [`UReference::Posterior`] (the same bound conditioned on the data so far, for a λ chosen
//!   mid-run): `U_t = E[max_x f(x) | D_t] − y*_t`, from posterior paths ([`PosteriorPath`]).
//!
//! Each path is maximized over exactly the points the study can propose: exclusive candidates
//! only, or the unit cube restricted to the valid points of the study's [`MixedSpace`] (one-hot
//! blocks of categorical parameters, grids of ints and ordinals; [`crate::optim::maximize_mixed`]).
//! The maximum over the relaxed cube would be larger (a path peaks between the one-hot vertices
//! as readily as at them), so `U` and with it λ would be too large, and the expected spend of
//! Theorem 1 would not be the one the bound is about. Values are in raw objective units (the
//! model's outcome standardization is undone). The estimate comes with its Monte-Carlo standard
//! error. A maximization can only under-estimate each path's maximum, so use enough restarts
//! (the defaults are `100·d` Sobol points and 2 restarts per path).

use super::optimizer::OptimizerConfig;
use super::search::{PathDomain, path_maximum};
use super::{Candidates, check_positive};
use crate::acquisition::ThompsonSample;
use crate::error::{Error, Result};
use crate::gp::model::kernel_matrix;
use crate::gp::paths::{PosteriorPath, PriorPath};
use crate::gp::{GpModel, Kernel};
use crate::linalg::{Cholesky, JitterPolicy};
use crate::optim::MixedSpace;
use crate::optim::multistart::Objective;
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// `λ = U / (B − C)`: the cost scale whose expected spend (Theorem 1) fits the remaining budget.
/// Errors unless `U > 0`, and `budget > spent ≥ 0`, all finite.
pub fn lambda_from_budget(u: f64, budget: f64, spent: f64) -> Result<f64> {
    check_positive("U", u)?;
    if !(budget.is_finite() && spent.is_finite() && spent >= 0.0) {
        return Err(Error::invalid(
            "budget",
            "budget and spent must be finite, spent >= 0",
        ));
    }
    if budget <= spent {
        return Err(Error::invalid(
            "budget",
            format!("the budget {budget} is already spent ({spent})"),
        ));
    }
    Ok(u / (budget - spent))
}

/// Which expected maximum [`estimate_u`] estimates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum UReference {
    /// `E[max f] − μ` under the prior with the fitted hyperparameters (Theorem 1).
    Prior,
    /// `E[max f | D] − y*` under the posterior, with incumbent value `y*`.
    Posterior {
        /// The incumbent value `y*`.
        best: f64,
    },
}

/// Settings of [`estimate_u`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UEstimatorOptions {
    /// Monte-Carlo samples (default 256).
    pub samples: usize,
    /// Random Fourier features per path (default 1024).
    pub num_features: usize,
    /// Maximization of each path (defaults `100·d` raw points, 2 restarts).
    pub optimizer: OptimizerConfig,
    /// Seed.
    pub seed: u64,
}

impl Default for UEstimatorOptions {
    fn default() -> Self {
        Self {
            samples: 256,
            num_features: 1024,
            optimizer: OptimizerConfig::default(),
            seed: 0,
        }
    }
}

/// A Monte-Carlo estimate of `U`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UEstimate {
    /// The estimate (mean over samples).
    pub u: f64,
    /// Its standard error.
    pub std_error: f64,
    /// Number of samples.
    pub samples: usize,
}

fn mean_se(v: &[f64]) -> UEstimate {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let se = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
    } else {
        f64::NAN
    };
    UEstimate {
        u: m,
        std_error: se,
        samples: v.len(),
    }
}

/// `E[max_i f(z_i)]` for `f ~ GP(0, kernel)` on the rows of `points` (`m × d`), times `scale`,
/// by exact multivariate-normal sampling (Cholesky of the kernel matrix, with jitter if needed).
pub fn expected_max_on_set(
    kernel: &Kernel,
    points: &[f64],
    scale: f64,
    samples: usize,
    seed: u64,
) -> Result<UEstimate> {
    let d = kernel.dim();
    if samples == 0 || points.is_empty() || !points.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "expected max",
            "needs samples >= 1 and a non-empty m x d point set",
        ));
    }
    let m = points.len() / d;
    let k = kernel_matrix(kernel, points, 0.0);
    let chol = Cholesky::factor(k.as_ref(), JitterPolicy::default())?;
    let l = chol.l();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut z = vec![0.0; m];
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        for v in z.iter_mut() {
            *v = rng.sample(StandardNormal);
        }
        let mut best = f64::NEG_INFINITY;
        for i in 0..m {
            let mut f = 0.0;
            for (j, zj) in z.iter().enumerate().take(i + 1) {
                f += l[(i, j)] * zj;
            }
            best = best.max(f);
        }
        out.push(scale * best);
    }
    Ok(mean_se(&out))
}

/// A prior path as an [`Objective`].
struct PriorObjective(PriorPath);

impl Objective for PriorObjective {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.0.value_grad(x, grad)
    }
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        if self.0.values(xs, out).is_err() {
            out.fill(f64::NAN);
        }
    }
}

/// Estimates `U` for the fitted `model` over the points a study can propose (see the
/// [module documentation](self)): with exclusive `candidates` their set only (and, for the prior,
/// exactly); otherwise the unit cube, restricted to the valid points of `space` when it has
/// categorical or discrete parameters, plus any extra candidates.
pub fn estimate_u(
    model: &GpModel,
    reference: UReference,
    candidates: Option<Candidates<'_>>,
    space: Option<&MixedSpace>,
    opts: &UEstimatorOptions,
) -> Result<UEstimate> {
    if opts.samples < 2 {
        return Err(Error::invalid("U samples", "need at least 2"));
    }
    let d = model.inner().dim();
    let (y_mean, y_std) = model.outcome_scale();
    let kernel = &model.params().kernel;
    let cand = match candidates {
        Some(c) => {
            if c.points.is_empty() || !c.points.len().is_multiple_of(d) {
                return Err(Error::invalid(
                    "candidates",
                    "must be a non-empty m x d array",
                ));
            }
            Some((model.to_internal(c.points)?, c.exclusive))
        }
        None => None,
    };
    if let (UReference::Prior, Some((pts, true))) = (reference, &cand) {
        return expected_max_on_set(kernel, pts, y_std, opts.samples, opts.seed);
    }
    let domain = PathDomain {
        candidates: cand,
        space,
        multistart: opts.optimizer.multistart_or(d, 100 * d, 2),
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed);
    let mut out = Vec::with_capacity(opts.samples);
    for s in 0..opts.samples {
        let obj: Box<dyn Objective> = match reference {
            UReference::Prior => Box::new(PriorObjective(PriorPath::sample(
                kernel,
                opts.num_features,
                &mut rng,
            )?)),
            UReference::Posterior { .. } => Box::new(ThompsonSample {
                path: PosteriorPath::sample(model.inner(), opts.num_features, &mut rng)?,
            }),
        };
        let max = path_maximum(
            obj.as_ref(),
            model,
            &domain,
            opts.seed.wrapping_add(s as u64),
        )?;
        out.push(match reference {
            UReference::Prior => y_std * max,
            UReference::Posterior { best } => y_mean + y_std * max - best,
        });
    }
    Ok(mean_se(&out))
}
