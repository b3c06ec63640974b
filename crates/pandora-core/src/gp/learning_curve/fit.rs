//! Maximum a posteriori fitting of the learning-curve hyperparameters: bounded L-BFGS-B on the
//! log-parameters with the exact gradient of [`LcPosterior::lml_grad`], from a default start, an
//! optional warm start and random starts drawn from the priors, in parallel (as
//! [`crate::gp::fit::fit`] fits the plain GP).
//!
//! The fit works on standardized values `(y − c)/s` (`c`, `s`: mean and standard deviation of
//! all observed values) so that the priors below are scale-free; the model is exactly
//! equivariant under this map (`σ_f², σ_r², σ_n²` scale by `s²`, `m` maps to `s·m + c`), so
//! the fitted hyperparameters are mapped back and the returned model works in the user's units.

use crate::error::{Error, Result};
use crate::gp::fit::{Prior, best_of_starts};
use crate::gp::kernel::KernelKind;
use crate::gp::learning_curve::posterior::{
    CurvePrediction, LcParams, LcPosterior, Run, validate_runs,
};
use crate::optim::lbfgsb::{self, LbfgsbOptions};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// Priors of the learning-curve hyperparameters, on standardized values (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LcPriors {
    /// Each lengthscale of the asymptote kernel (inputs in the unit cube).
    pub lengthscale: Prior,
    /// Output scale `σ_f²` of the asymptote GP.
    pub asymptote_scale: Prior,
    /// Output scale `σ_r²` of the decaying part.
    pub decay_scale: Prior,
    /// Shape `α` of the decay-rate mixture.
    pub alpha: Prior,
    /// `β/τ`, the decay-rate mixture's rate relative to the step scale `τ` (the median over
    /// runs of each run's largest observed step, at least 1).
    pub beta: Prior,
    /// Noise variance `σ_n²`.
    pub noise: Prior,
    /// Mean of the Normal prior on the asymptote mean `m`.
    pub mean_loc: f64,
    /// Standard deviation of the Normal prior on `m`.
    pub mean_scale: f64,
}

impl Default for LcPriors {
    /// `ℓ ~ Gamma(3, 6)` (as the plain GP), `σ_f², σ_r² ~ LogNormal(0, 1.5)`,
    /// `α ~ LogNormal(0, 1)`, `β/τ ~ LogNormal(log 0.3, 1.5)`, `σ_n² ~ LogNormal(−6, 2)`,
    /// `m ~ N(0, 2²)`.
    fn default() -> Self {
        Self {
            lengthscale: Prior::Gamma {
                concentration: 3.0,
                rate: 6.0,
            },
            asymptote_scale: Prior::LogNormal {
                loc: 0.0,
                scale: 1.5,
            },
            decay_scale: Prior::LogNormal {
                loc: 0.0,
                scale: 1.5,
            },
            alpha: Prior::LogNormal {
                loc: 0.0,
                scale: 1.0,
            },
            beta: Prior::LogNormal {
                loc: 0.3f64.ln(),
                scale: 1.5,
            },
            noise: Prior::LogNormal {
                loc: -6.0,
                scale: 2.0,
            },
            mean_loc: 0.0,
            mean_scale: 2.0,
        }
    }
}

/// Settings of [`LearningCurveGp::fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct LcFitOptions {
    /// Shape of the asymptote kernel (Matérn 5/2 by default).
    pub kind: KernelKind,
    /// Hyperparameter priors.
    pub priors: LcPriors,
    /// Random starts in addition to the default and the warm start.
    pub restarts: usize,
    /// Optimizer settings.
    pub lbfgsb: LbfgsbOptions,
    /// Smallest noise variance, relative to the variance of all values.
    pub noise_floor: f64,
    /// Seed of the random starts.
    pub seed: u64,
}

impl Default for LcFitOptions {
    fn default() -> Self {
        Self {
            kind: KernelKind::Matern52,
            priors: LcPriors::default(),
            restarts: 3,
            lbfgsb: LbfgsbOptions::default(),
            noise_floor: 1e-8,
            seed: 0,
        }
    }
}

/// The learning-curve model with MAP hyperparameters, conditioned on its runs.
#[derive(Debug, Clone)]
pub struct LearningCurveGp {
    posterior: LcPosterior,
    log_posterior: f64,
    evaluations: usize,
    best_start: usize,
}

/// The affine map to standardized values and the step scale `τ`.
#[derive(Debug, Clone, Copy)]
struct Scales {
    center: f64,
    scale: f64,
    tau: f64,
}

impl Scales {
    fn of(runs: &[Run]) -> Self {
        let all = || runs.iter().flat_map(|r| r.values.iter().copied());
        let m = all().count().max(1) as f64;
        let center = all().sum::<f64>() / m;
        let var = all().map(|v| (v - center).powi(2)).sum::<f64>() / m;
        let scale = if var > 0.0 { var.sqrt() } else { 1.0 };
        let mut last: Vec<f64> = runs
            .iter()
            .map(|r| r.steps.iter().copied().fold(0.0, f64::max))
            .collect();
        last.sort_by(f64::total_cmp);
        let tau = last.get(last.len() / 2).copied().unwrap_or(1.0).max(1.0);
        Self { center, scale, tau }
    }

    /// Maps standardized parameters to the user's units (`to_user = true`) or back.
    fn map(&self, p: &LcParams, to_user: bool) -> LcParams {
        let (s2, mean) = if to_user {
            (self.scale * self.scale, self.scale * p.mean + self.center)
        } else {
            (
                1.0 / (self.scale * self.scale),
                (p.mean - self.center) / self.scale,
            )
        };
        let mut out = p.clone();
        out.asymptote.outputscale *= s2;
        out.decay.outputscale *= s2;
        out.noise *= s2;
        out.mean = mean;
        out
    }
}

/// Negative log posterior and its gradient at the search vector `theta`.
fn objective(theta: &[f64], grad: &mut [f64], runs: &[Run], opts: &LcFitOptions, tau: f64) -> f64 {
    let Ok(params) = LcParams::from_theta(opts.kind, theta) else {
        return f64::INFINITY;
    };
    let Ok(post) = LcPosterior::new(runs.to_vec(), params) else {
        return f64::INFINITY;
    };
    let mut value = post.log_marginal_likelihood();
    grad.copy_from_slice(&post.lml_grad());
    let d = theta.len() - 6;
    let pr = &opts.priors;
    let terms = (0..d).map(|p| (p, pr.lengthscale, theta[p].exp())).chain([
        (d, pr.asymptote_scale, theta[d].exp()),
        (d + 1, pr.decay_scale, theta[d + 1].exp()),
        (d + 2, pr.alpha, theta[d + 2].exp()),
        (d + 3, pr.beta, theta[d + 3].exp() / tau),
        (d + 4, pr.noise, theta[d + 4].exp()),
    ]);
    for (i, prior, v) in terms {
        let (lp, dlp) = prior.log_density_dlog(v);
        value += lp;
        grad[i] += dlp;
    }
    let z = (theta[d + 5] - pr.mean_loc) / pr.mean_scale;
    value -= 0.5 * z * z;
    grad[d + 5] -= z / pr.mean_scale;
    if !value.is_finite() || grad.iter().any(|g| !g.is_finite()) {
        return f64::INFINITY;
    }
    for g in grad.iter_mut() {
        *g = -*g;
    }
    -value
}

/// Lower and upper bounds of the search vector (standardized units).
fn bounds(d: usize, tau: f64, noise_floor: f64) -> (Vec<f64>, Vec<f64>) {
    let mut lo = vec![1e-3f64.ln(); d];
    let mut hi = vec![1e4f64.ln(); d];
    let rest = [
        (1e-6, 1e4),
        (1e-6, 1e4),
        (1e-2, 1e2),
        (tau * 1e-4, tau * 1e4),
        (noise_floor.max(1e-12), 10.0),
    ];
    for (a, b) in rest {
        lo.push(f64::ln(a));
        hi.push(f64::ln(b));
    }
    lo.push(-100.0);
    hi.push(100.0);
    (lo, hi)
}

/// The default start (prior modes; `m` at the mean last value) and `restarts` draws from the
/// priors (`m` again at the mean last value).
fn starts(runs: &[Run], d: usize, tau: f64, opts: &LcFitOptions) -> Vec<Vec<f64>> {
    let pr = &opts.priors;
    let last_mean =
        runs.iter().filter_map(|r| r.values.last()).sum::<f64>() / runs.len().max(1) as f64;
    let mode = |p: Prior, fallback: f64| p.mode().unwrap_or(fallback).ln();
    let mut default = vec![mode(pr.lengthscale, 0.5); d];
    default.extend([
        mode(pr.asymptote_scale, 0.5),
        mode(pr.decay_scale, 0.5),
        mode(pr.alpha, 1.0),
        mode(pr.beta, 0.3) + tau.ln(),
        mode(pr.noise, 1e-3),
        last_mean,
    ]);
    let mut out = vec![default.clone()];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ 0x5eed_1c9b);
    for _ in 0..opts.restarts {
        let mut t: Vec<f64> = (0..d)
            .map(|p| pr.lengthscale.sample_log(&mut rng, default[p].exp()))
            .collect();
        t.push(pr.asymptote_scale.sample_log(&mut rng, 0.5));
        t.push(pr.decay_scale.sample_log(&mut rng, 0.5));
        t.push(pr.alpha.sample_log(&mut rng, 1.0));
        t.push(pr.beta.sample_log(&mut rng, 0.3) + tau.ln());
        t.push(pr.noise.sample_log(&mut rng, 1e-3));
        // `m` is a quadratic given the rest: one start value suffices, and keeping it at the
        // mean last value makes the fit of `−y` the exact mirror of the fit of `y`.
        t.push(last_mean);
        out.push(t);
    }
    out
}

impl LearningCurveGp {
    /// Fits the hyperparameters to `data` (at least one run, each with at least one step; every
    /// `x` of the same dimension, in the unit cube) by MAP and conditions the model on it.
    /// `warm` (e.g. the previous fit, in the user's units) is tried as an extra start. Starts
    /// run in parallel; the result is deterministic for a seed.
    pub fn fit(data: Vec<Run>, opts: &LcFitOptions, warm: Option<&LcParams>) -> Result<Self> {
        let d = data
            .first()
            .map(|r| r.x.len())
            .ok_or_else(|| Error::invalid("runs", "at least one run is needed to fit"))?;
        if d == 0 {
            return Err(Error::invalid("runs[0].x", "must not be empty"));
        }
        validate_runs(&data, d)?;
        let sc = Scales::of(&data);
        let std_runs: Vec<Run> = data
            .iter()
            .map(|r| Run {
                x: r.x.clone(),
                steps: r.steps.clone(),
                values: r
                    .values
                    .iter()
                    .map(|v| (v - sc.center) / sc.scale)
                    .collect(),
            })
            .collect();
        let (lo, hi) = bounds(d, sc.tau, opts.noise_floor);
        let mut all = Vec::new();
        if let Some(w) = warm.filter(|w| w.asymptote.dim() == d) {
            all.push(sc.map(w, false).to_theta());
        }
        all.extend(starts(&std_runs, d, sc.tau, opts));
        for t in &mut all {
            for ((v, l), h) in t.iter_mut().zip(&lo).zip(&hi) {
                *v = if v.is_finite() { v.clamp(*l, *h) } else { *l };
            }
        }
        let results: Vec<(Vec<f64>, f64, usize)> = all
            .into_par_iter()
            .map(|mut t| {
                let mut evals = 0usize;
                let f = |th: &[f64], g: &mut [f64]| {
                    evals += 1;
                    objective(th, g, &std_runs, opts, sc.tau)
                };
                let r = lbfgsb::minimize(f, &mut t, &lo, &hi, &opts.lbfgsb);
                let v = r.map(|r| r.f).unwrap_or(f64::INFINITY);
                (t, v, evals)
            })
            .collect();
        let evaluations = results.iter().map(|r| r.2).sum();
        let (best_start, best) = best_of_starts(&results, "learning-curve fit")?;
        let params = sc.map(&LcParams::from_theta(opts.kind, &best.0)?, true);
        let posterior = LcPosterior::new(data, params)?;
        // The standardized log posterior differs from the user's units by M·log s.
        let m_total: usize = posterior.runs().iter().map(|r| r.steps.len()).sum();
        Ok(Self {
            log_posterior: -best.1 - m_total as f64 * sc.scale.ln(),
            posterior,
            evaluations,
            best_start,
        })
    }

    /// The model conditioned on `data` with these hyperparameters (no refit): `O(N³ + Σ T_n³)`.
    pub fn condition(&self, data: Vec<Run>) -> Result<Self> {
        Ok(Self {
            posterior: LcPosterior::new(data, self.posterior.params().clone())?,
            ..self.clone()
        })
    }

    /// The fitted hyperparameters, in the user's units.
    pub fn params(&self) -> &LcParams {
        self.posterior.params()
    }

    /// The conditioned posterior.
    pub fn posterior(&self) -> &LcPosterior {
        &self.posterior
    }

    /// Log marginal likelihood plus log priors at the optimum, in the user's units (priors on
    /// standardized parameters).
    pub fn log_posterior(&self) -> f64 {
        self.log_posterior
    }

    /// Objective evaluations over all starts.
    pub fn evaluations(&self) -> usize {
        self.evaluations
    }

    /// Index of the winning start (the warm start first if given, then the default, then the
    /// random ones).
    pub fn best_start(&self) -> usize {
        self.best_start
    }

    /// See [`LcPosterior::predict`].
    pub fn predict(
        &self,
        x: &[f64],
        observed: Option<(&[f64], &[f64])>,
        future_steps: &[f64],
    ) -> Result<CurvePrediction> {
        self.posterior.predict(x, observed, future_steps)
    }

    /// See [`LcPosterior::predict_run`].
    pub fn predict_run(&self, run: usize, future_steps: &[f64]) -> Result<CurvePrediction> {
        self.posterior.predict_run(run, future_steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objective_gradient_with_priors_matches_finite_differences() {
        let runs: Vec<Run> = (0..5)
            .map(|i| {
                let x = vec![0.1 + 0.2 * i as f64, 0.9 - 0.15 * i as f64];
                let steps: Vec<f64> = (1..=3 + i).map(|s| s as f64).collect();
                let values = steps.iter().map(|s| x[0] - 0.3 + 1.5 / s).collect();
                Run { x, steps, values }
            })
            .collect();
        let opts = LcFitOptions::default();
        let tau = Scales::of(&runs).tau;
        let theta = [0.3f64.ln(), 0.5f64.ln(), 0.0, -0.5, 0.2, 1.0, -5.0, 0.3];
        let mut g = vec![0.0; theta.len()];
        objective(&theta, &mut g, &runs, &opts, tau);
        let mut scratch = g.clone();
        for p in 0..theta.len() {
            let h = 1e-5;
            let mut tp = theta;
            let mut tm = theta;
            tp[p] += h;
            tm[p] -= h;
            let fd = (objective(&tp, &mut scratch, &runs, &opts, tau)
                - objective(&tm, &mut scratch, &runs, &opts, tau))
                / (2.0 * h);
            assert!(
                (fd - g[p]).abs() < 1e-6 * (1.0 + fd.abs()),
                "param {p}: fd {fd} vs analytic {}",
                g[p]
            );
        }
    }

    #[test]
    fn a_single_one_step_run_fits_without_error_or_panic() {
        let run = Run {
            x: vec![0.5],
            steps: vec![1.0],
            values: vec![0.7],
        };
        let fit = LearningCurveGp::fit(vec![run], &LcFitOptions::default(), None).unwrap();
        let p = fit.predict_run(0, &[1.0, 10.0]).unwrap();
        assert!(p.mean.iter().chain(&p.cov).all(|v| v.is_finite()));
        // Warm start from its own fit, and conditioning on more data with the same parameters.
        let warm = fit.params().clone();
        let runs = vec![
            Run {
                x: vec![0.5],
                steps: vec![1.0, 2.0],
                values: vec![0.7, 0.5],
            },
            Run {
                x: vec![0.2],
                steps: vec![1.0],
                values: vec![0.9],
            },
        ];
        let refit = LearningCurveGp::fit(runs.clone(), &LcFitOptions::default(), Some(&warm));
        assert!(refit.is_ok());
        let cond = fit.condition(runs).unwrap();
        assert_eq!(cond.params(), fit.params());
        assert_eq!(cond.posterior().runs().len(), 2);
    }
}
