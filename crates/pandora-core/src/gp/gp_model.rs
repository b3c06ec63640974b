//! [`GpModel`]: a fitted exact GP behind its transforms, with the posterior in raw units.
//!
//! The model normalizes inputs, standardizes targets and applies a known output scale as
//! [`Transforms`] says (the maps and their derivatives are written out in [`super::transform`]),
//! fits the hyperparameters of the [`ExactGp`] underneath ([`super::fit`]), and answers posterior,
//! predictive and fantasy queries in the caller's units. Every model-based acquisition, stopping
//! rule and report reads the run's data through it.

use crate::error::{Error, Result};
use crate::gp::Posterior;
use crate::gp::fit::{FitOptions, FitResult, WarmFit, fit, fit_warm_or_keep};
use crate::gp::model::{ExactGp, GpParams, PosteriorBatch};
use crate::gp::transform::{OutputScale, Transforms};

/// A fitted GP with input and outcome transforms; the posterior is in raw units.
#[derive(Debug, Clone)]
pub struct GpModel {
    gp: ExactGp,
    lower: Vec<f64>,
    range: Vec<f64>,
    y_mean: f64,
    y_std: f64,
    scale: Option<OutputScale>,
    fit: Option<FitSummary>,
}

/// What a warm fit ([`GpModel::fit_warm_or_keep`]) reported besides the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmOutcome {
    /// [`WarmFit::gain_per_point`].
    pub gain_per_point: f64,
    /// [`WarmFit::kept`].
    pub kept: bool,
}

/// What the fit reported, kept with the model.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSummary {
    /// Log marginal likelihood at the optimum (internal units).
    pub log_marginal_likelihood: f64,
    /// Log marginal likelihood plus log priors at the optimum.
    pub log_posterior: f64,
    /// Objective evaluations used.
    pub evaluations: usize,
}

impl GpModel {
    /// Fits the hyperparameters on the transformed data and returns the model. `warm` are the
    /// internal-space parameters of a previous fit (see [`GpModel::params`]).
    pub fn fit(
        x: &[f64],
        y: &[f64],
        d: usize,
        transforms: &Transforms,
        opts: &FitOptions,
        warm: Option<&GpParams>,
    ) -> Result<Self> {
        Self::fit_by(x, y, d, transforms, |u, z| fit(u, z, d, opts, warm))
    }

    /// A single-start fit from `warm` ([`crate::gp::fit::fit_warm`]): the model and the
    /// per-observation gain of the log posterior over the warm start
    /// ([`WarmFit::gain_per_point`]).
    pub fn fit_warm(
        x: &[f64],
        y: &[f64],
        d: usize,
        transforms: &Transforms,
        opts: &FitOptions,
        warm: &GpParams,
    ) -> Result<(Self, f64)> {
        let (model, w) = Self::fit_warm_or_keep(x, y, d, transforms, opts, warm, 0.0)?;
        Ok((model, w.gain_per_point))
    }

    /// A single-start fit from `warm` that keeps it when its projected gradient per observation
    /// is at most `keep_tol` ([`fit_warm_or_keep`]): the model and what the fit reported (its
    /// [`WarmFit::result`] is the model's fit, without the conditioned GP's copy).
    pub fn fit_warm_or_keep(
        x: &[f64],
        y: &[f64],
        d: usize,
        transforms: &Transforms,
        opts: &FitOptions,
        warm: &GpParams,
        keep_tol: f64,
    ) -> Result<(Self, WarmOutcome)> {
        let mut outcome = WarmOutcome {
            gain_per_point: f64::INFINITY,
            kept: false,
        };
        let model = Self::fit_by(x, y, d, transforms, |u, z| {
            let w: WarmFit = fit_warm_or_keep(u, z, d, opts, warm, keep_tol)?;
            outcome = WarmOutcome {
                gain_per_point: w.gain_per_point,
                kept: w.kept,
            };
            Ok(w.result)
        })?;
        Ok((model, outcome))
    }

    /// The model `fitter` fits on the transformed inputs and targets.
    fn fit_by(
        x: &[f64],
        y: &[f64],
        d: usize,
        transforms: &Transforms,
        fitter: impl FnOnce(&[f64], &[f64]) -> Result<FitResult>,
    ) -> Result<Self> {
        let (lower, range, y_mean, y_std) = Self::transform_params(x, y, d, transforms)?;
        let u = Self::apply_inputs(x, &lower, &range);
        let z = Self::internal_targets(x, y, d, y_mean, y_std, transforms)?;
        let FitResult {
            gp,
            log_marginal_likelihood,
            log_posterior,
            evaluations,
            ..
        } = fitter(&u, &z)?;
        Ok(Self {
            gp,
            lower,
            range,
            y_mean,
            y_std,
            scale: transforms.output_scale.clone(),
            fit: Some(FitSummary {
                log_marginal_likelihood,
                log_posterior,
                evaluations,
            }),
        })
    }

    /// Conditions a GP with given internal-space hyperparameters on transformed data (no fitting).
    pub fn with_params(
        x: &[f64],
        y: &[f64],
        d: usize,
        transforms: &Transforms,
        params: GpParams,
    ) -> Result<Self> {
        let (lower, range, y_mean, y_std) = Self::transform_params(x, y, d, transforms)?;
        let u = Self::apply_inputs(x, &lower, &range);
        let z = Self::internal_targets(x, y, d, y_mean, y_std, transforms)?;
        Ok(Self {
            gp: ExactGp::new(u, z, params)?,
            lower,
            range,
            y_mean,
            y_std,
            scale: transforms.output_scale.clone(),
            fit: None,
        })
    }

    fn transform_params(
        x: &[f64],
        y: &[f64],
        d: usize,
        t: &Transforms,
    ) -> Result<(Vec<f64>, Vec<f64>, f64, f64)> {
        let n = y.len();
        if d == 0 || x.len() != n * d {
            return Err(Error::dim("train_x length", n * d, x.len()));
        }
        let (lower, range) = match &t.normalize_inputs {
            None => (vec![0.0; d], vec![1.0; d]),
            Some(Some((lo, hi))) => {
                if lo.len() != d || hi.len() != d {
                    return Err(Error::dim("input bounds", d, lo.len().min(hi.len())));
                }
                let mut range = Vec::with_capacity(d);
                for k in 0..d {
                    let r = hi[k] - lo[k];
                    if !(r.is_finite() && r > 0.0) {
                        return Err(Error::invalid(
                            "input bounds",
                            format!("upper must exceed lower in dimension {k}"),
                        ));
                    }
                    range.push(r);
                }
                (lo.clone(), range)
            }
            Some(None) => {
                let mut lo = vec![f64::INFINITY; d];
                let mut hi = vec![f64::NEG_INFINITY; d];
                for row in x.chunks_exact(d) {
                    for k in 0..d {
                        lo[k] = lo[k].min(row[k]);
                        hi[k] = hi[k].max(row[k]);
                    }
                }
                let range = (0..d)
                    .map(|k| {
                        let r = hi[k] - lo[k];
                        if r.is_finite() && r > 0.0 { r } else { 1.0 }
                    })
                    .collect();
                let lo = lo
                    .into_iter()
                    .map(|v| if v.is_finite() { v } else { 0.0 })
                    .collect();
                (lo, range)
            }
        };
        let (y_mean, y_std) = if t.standardize_outcomes && n > 0 {
            let m = y.iter().sum::<f64>() / n as f64;
            let s = if n > 1 {
                (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            } else {
                1.0
            };
            // A constant target has no scale: keep unit scale (as BoTorch does).
            (
                m,
                if s.is_finite() && s > 1e-12 * m.abs().max(1.0) {
                    s
                } else {
                    1.0
                },
            )
        } else {
            (0.0, 1.0)
        };
        Ok((lower, range, y_mean, y_std))
    }

    /// `z_i = (y_i − m_y) / (s_y s(x_i))` (`s ≡ 1` without an output scale).
    fn internal_targets(
        x: &[f64],
        y: &[f64],
        d: usize,
        y_mean: f64,
        y_std: f64,
        t: &Transforms,
    ) -> Result<Vec<f64>> {
        let mut grad = vec![0.0; d];
        y.iter()
            .zip(x.chunks_exact(d))
            .map(|(v, xi)| {
                let s = match &t.output_scale {
                    Some(sc) => sc.eval(xi, &mut grad)?,
                    None => 1.0,
                };
                Ok((v - y_mean) / (y_std * s))
            })
            .collect()
    }

    fn apply_inputs(x: &[f64], lower: &[f64], range: &[f64]) -> Vec<f64> {
        let d = lower.len();
        let mut u = x.to_vec();
        for row in u.chunks_exact_mut(d) {
            for k in 0..d {
                row[k] = (row[k] - lower[k]) / range[k];
            }
        }
        u
    }

    /// The known amplitude of the prior, if any.
    pub fn output_scale(&self) -> Option<&OutputScale> {
        self.scale.as_ref()
    }

    /// The GP in internal (transformed) coordinates: of `g`, the targets divided by the output
    /// scale, when there is one (callers that sample or condition it directly must check
    /// [`GpModel::output_scale`]).
    pub fn inner(&self) -> &ExactGp {
        &self.gp
    }

    /// Internal-space hyperparameters (use as a warm start for the next fit).
    pub fn params(&self) -> &GpParams {
        self.gp.params()
    }

    /// What the fit reported (None if built by [`GpModel::with_params`]).
    pub fn fit_summary(&self) -> Option<&FitSummary> {
        self.fit.as_ref()
    }

    /// `(mean, std)` of the outcome standardization.
    pub fn outcome_scale(&self) -> (f64, f64) {
        (self.y_mean, self.y_std)
    }

    /// Raw points `xs` (row-major `m × d`) mapped to the model's internal input coordinates (the
    /// coordinates of [`GpModel::inner`]).
    pub fn to_internal(&self, xs: &[f64]) -> Result<Vec<f64>> {
        if !xs.len().is_multiple_of(self.lower.len()) {
            return Err(Error::invalid(
                "points",
                "length is not a multiple of the dimension",
            ));
        }
        Ok(Self::apply_inputs(xs, &self.lower, &self.range))
    }

    /// Latent posterior in raw units at raw points `xs` (row-major `m × d`).
    pub fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        let d = self.lower.len();
        if !xs.len().is_multiple_of(d) {
            return Err(Error::invalid(
                "points",
                "length is not a multiple of the dimension",
            ));
        }
        let u = Self::apply_inputs(xs, &self.lower, &self.range);
        let mut p = self.gp.posterior(&u, grad)?;
        let s = self.y_std;
        for (i, g) in p.mean_grad.iter_mut().enumerate() {
            *g *= s / self.range[i % d];
        }
        for (i, g) in p.var_grad.iter_mut().enumerate() {
            *g *= s * s / self.range[i % d];
        }
        if let Some(sc) = &self.scale {
            // μ = m + s_y a μ_g, σ² = s_y² a² σ_g²: product rule with ∂a/∂x.
            let mut da = vec![0.0; d];
            for j in 0..p.mean.len() {
                let a = sc.eval(&xs[j * d..(j + 1) * d], &mut da)?;
                let (mz, vz) = (p.mean[j], p.var[j]);
                if grad {
                    let rows = (j * d)..((j + 1) * d);
                    let gms = &mut p.mean_grad[rows.clone()];
                    let gvs = &mut p.var_grad[rows];
                    for ((gm, gv), dak) in gms.iter_mut().zip(gvs.iter_mut()).zip(&da) {
                        *gm = a * *gm + s * mz * dak;
                        *gv = a * a * *gv + 2.0 * a * dak * s * s * vz;
                    }
                }
                p.mean[j] = mz * a;
                p.var[j] = vz * a * a;
            }
        }
        for m in &mut p.mean {
            *m = self.y_mean + s * *m;
        }
        for v in &mut p.var {
            *v *= s * s;
        }
        Ok(p)
    }
}

impl GpModel {
    /// The model after also "observing" its own posterior mean at the raw points `xs` (kriging
    /// believer fantasies): the mean is unchanged there and the variance collapses to the noise,
    /// so a pending evaluation is not proposed again. `O(n² m)` by a Cholesky append.
    pub fn with_fantasies(&self, xs: &[f64]) -> Result<Self> {
        if xs.is_empty() {
            return Ok(self.clone());
        }
        let u = Self::apply_inputs(xs, &self.lower, &self.range);
        let z = self.gp.posterior(&u, false)?.mean;
        Ok(Self {
            gp: self.gp.condition_on(&u, &z)?,
            ..self.clone()
        })
    }

    /// Predictive mean and variance of a new observation in raw units (latent variance plus the
    /// observation noise, rescaled by the outcome transform).
    pub fn predict(&self, xs: &[f64]) -> Result<(Vec<f64>, Vec<f64>)> {
        let p = self.posterior(xs, false)?;
        let noise = self.gp.params().noise * self.y_std * self.y_std;
        let d = self.lower.len();
        let mut grad = vec![0.0; d];
        let mut var = p.var;
        for (j, v) in var.iter_mut().enumerate() {
            let a = match &self.scale {
                Some(sc) => sc.eval(&xs[j * d..(j + 1) * d], &mut grad)?,
                None => 1.0,
            };
            *v += noise * a * a;
        }
        Ok((p.mean, var))
    }
}

impl Posterior for GpModel {
    fn dim(&self) -> usize {
        self.lower.len()
    }
    fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        GpModel::posterior(self, xs, grad)
    }
    fn prefers_blocks(&self) -> bool {
        self.gp.prefers_blocks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fantasies_keep_the_mean_and_shrink_the_variance() {
        let x = vec![0.1, 0.5, 0.9];
        let y = vec![1.0, 3.0, 2.0];
        let params = GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.3], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-4,
        };
        let t = Transforms {
            normalize_inputs: None,
            standardize_outcomes: true,
            ..Transforms::default()
        };
        let m = GpModel::with_params(&x, &y, 1, &t, params).unwrap();
        let f = m.with_fantasies(&[0.7]).unwrap();
        let a = m.posterior(&[0.7], false).unwrap();
        let b = f.posterior(&[0.7], false).unwrap();
        assert!((a.mean[0] - b.mean[0]).abs() < 1e-9);
        assert!(b.var[0] < 1e-3 * a.var[0]);
    }
    use crate::gp::kernel::{Kernel, KernelKind};

    #[test]
    fn transformed_posterior_equals_manual_transform() {
        let d = 2;
        let x = vec![1.0, 10.0, 3.0, 30.0, 2.0, 15.0, 4.0, 20.0];
        let y = vec![100.0, 140.0, 120.0, 90.0];
        let params = GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.4, 0.6], 1.1).unwrap(),
            mean: 0.1,
            noise: 1e-3,
        };
        let t = Transforms {
            normalize_inputs: Some(Some((vec![0.0, 0.0], vec![5.0, 50.0]))),
            standardize_outcomes: true,
            ..Transforms::default()
        };
        let model = GpModel::with_params(&x, &y, d, &t, params.clone()).unwrap();
        let (m, s) = model.outcome_scale();
        assert!((m - 112.5).abs() < 1e-12);
        let u: Vec<f64> = x
            .chunks(2)
            .flat_map(|r| [r[0] / 5.0, r[1] / 50.0])
            .collect();
        let z: Vec<f64> = y.iter().map(|v| (v - m) / s).collect();
        let gp = ExactGp::new(u, z, params).unwrap();
        let q = [2.5, 25.0];
        let a = model.posterior(&q, true).unwrap();
        let b = gp.posterior(&[0.5, 0.5], true).unwrap();
        assert!((a.mean[0] - (m + s * b.mean[0])).abs() < 1e-10);
        assert!((a.var[0] - s * s * b.var[0]).abs() < 1e-10);
        // Gradients by finite differences in raw units.
        for k in 0..2 {
            let h = 1e-5 * [5.0, 50.0][k];
            let mut qp = q;
            let mut qm = q;
            qp[k] += h;
            qm[k] -= h;
            let fp = model.posterior(&qp, false).unwrap();
            let fm = model.posterior(&qm, false).unwrap();
            let fd = (fp.mean[0] - fm.mean[0]) / (2.0 * h);
            assert!((fd - a.mean_grad[k]).abs() < 1e-6 * (1.0 + fd.abs()));
            let fdv = (fp.var[0] - fm.var[0]) / (2.0 * h);
            assert!((fdv - a.var_grad[k]).abs() < 1e-6 * (1.0 + fdv.abs()));
        }
    }

    /// Solves `A x = b` (small dense, partial pivoting) for the brute-force reference below.
    fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
        let n = b.len();
        for c in 0..n {
            let p = (c..n)
                .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
                .unwrap();
            a.swap(c, p);
            b.swap(c, p);
            for r in c + 1..n {
                let f = a[r][c] / a[c][c];
                let pivot_row = a[c].clone();
                for (ark, ack) in a[r][c..].iter_mut().zip(&pivot_row[c..]) {
                    *ark -= f * ack;
                }
                b[r] -= f * b[c];
            }
        }
        let mut x = vec![0.0; n];
        for r in (0..n).rev() {
            let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
            x[r] = (b[r] - s) / a[r][r];
        }
        x
    }

    /// The output-scaled model is the GP with kernel `s_y² s(x) s(x') k(x, x')` and noise
    /// `s_y² s(x)² σ_n²`, computed here by brute force; its gradients match finite differences.
    #[test]
    fn output_scaled_posterior_equals_the_nonstationary_kernel() {
        let d = 2;
        let amp =
            |x: &[f64]| (1.0 + 3.0 * (-(x[0] - 0.4).powi(2) / 0.02).exp()) * (1.0 + 0.5 * x[1]);
        let scale = OutputScale::new(move |x: &[f64], g: &mut [f64]| {
            let e = (-(x[0] - 0.4).powi(2) / 0.02).exp();
            let a0 = 1.0 + 3.0 * e;
            let a1 = 1.0 + 0.5 * x[1];
            g[0] = 3.0 * e * (-2.0 * (x[0] - 0.4) / 0.02) * a1;
            g[1] = a0 * 0.5;
            a0 * a1
        });
        let x = vec![0.1, 0.2, 0.45, 0.7, 0.8, 0.1, 0.3, 0.9, 0.6, 0.5];
        let y = vec![0.3, 2.0, -0.4, 0.9, 1.5];
        let n = y.len();
        let kernel = Kernel::new(KernelKind::Matern52, vec![0.3, 0.5], 0.8).unwrap();
        let params = GpParams {
            kernel: kernel.clone(),
            mean: 0.2,
            noise: 1e-3,
        };
        for standardize in [false, true] {
            let t = Transforms {
                normalize_inputs: None,
                standardize_outcomes: standardize,
                output_scale: Some(scale.clone()),
            };
            let model = GpModel::with_params(&x, &y, d, &t, params.clone()).unwrap();
            let (ym, ys) = model.outcome_scale();
            // Brute force in raw units: prior mean m_y + s_y s(x) c, kernel and noise as above.
            let xi = |i: usize| &x[i * d..(i + 1) * d];
            let kf = |a: &[f64], b: &[f64]| ys * ys * amp(a) * amp(b) * kernel.eval(a, b);
            let kmat: Vec<Vec<f64>> = (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| {
                            let noise = if i == j {
                                ys * ys * amp(xi(i)).powi(2) * params.noise
                            } else {
                                0.0
                            };
                            kf(xi(i), xi(j)) + noise
                        })
                        .collect()
                })
                .collect();
            let r: Vec<f64> = (0..n)
                .map(|i| y[i] - ym - ys * amp(xi(i)) * params.mean)
                .collect();
            let alpha = solve(kmat.clone(), r);
            for q in [[0.42, 0.3], [0.05, 0.95], [0.6, 0.55]] {
                let kq: Vec<f64> = (0..n).map(|i| kf(&q, xi(i))).collect();
                let mean = ym
                    + ys * amp(&q) * params.mean
                    + kq.iter().zip(&alpha).map(|(a, b)| a * b).sum::<f64>();
                let w = solve(kmat.clone(), kq.clone());
                let var = kf(&q, &q) - kq.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
                let p = model.posterior(&q, true).unwrap();
                assert!(
                    (p.mean[0] - mean).abs() < 1e-9 * (1.0 + mean.abs()),
                    "{} {mean}",
                    p.mean[0]
                );
                assert!(
                    (p.var[0] - var).abs() < 1e-9 * (1.0 + var),
                    "{} {var}",
                    p.var[0]
                );
                for k in 0..d {
                    let h = 1e-6;
                    let (mut qp, mut qm) = (q, q);
                    qp[k] += h;
                    qm[k] -= h;
                    let fp = model.posterior(&qp, false).unwrap();
                    let fm = model.posterior(&qm, false).unwrap();
                    let fd = (fp.mean[0] - fm.mean[0]) / (2.0 * h);
                    assert!(
                        (fd - p.mean_grad[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                        "{fd} {}",
                        p.mean_grad[k]
                    );
                    let fdv = (fp.var[0] - fm.var[0]) / (2.0 * h);
                    assert!(
                        (fdv - p.var_grad[k]).abs() < 1e-5 * (1.0 + fdv.abs()),
                        "{fdv} {}",
                        p.var_grad[k]
                    );
                }
                // The predictive variance adds the scaled noise.
                let (_, pv) = model.predict(&q).unwrap();
                let noise = ys * ys * amp(&q).powi(2) * params.noise;
                assert!((pv[0] - (var + noise)).abs() < 1e-9 * (1.0 + var));
            }
        }
    }

    #[test]
    fn a_non_positive_output_scale_is_an_error() {
        let t = Transforms {
            output_scale: Some(OutputScale::new(|x: &[f64], _g: &mut [f64]| x[0] - 0.5)),
            ..Transforms::default()
        };
        let params = GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.3], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-4,
        };
        let e = GpModel::with_params(&[0.2], &[1.0], 1, &t, params).unwrap_err();
        assert!(e.to_string().contains("output_scale"), "{e}");
    }
}
