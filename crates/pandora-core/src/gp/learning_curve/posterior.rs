//! The exact posterior of the learning-curve model by the structured solve of the module doc:
//! one Cholesky factor per run (`T_n × T_n`) and one `N × N` factor of
//! `A = I + S K_x S`, never the `M × M` joint covariance (`M = Σ T_n`).

use crate::error::{Error, Result};
use crate::gp::Posterior;
use crate::gp::kernel::{Kernel, KernelKind};
use crate::gp::learning_curve::decay::DecayKernel;
use crate::gp::model::{MIN_VARIANCE, PosteriorBatch};
use crate::linalg::{Cholesky, JitterPolicy};
use faer::Mat;

/// One training run: a configuration `x` (in the unit cube) and the values observed at some of
/// its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The configuration, `d` coordinates.
    pub x: Vec<f64>,
    /// Steps at which the run was observed (finite, `≥ 0`; typically epochs `1, 2, …`). They need
    /// not be sorted or distinct.
    pub steps: Vec<f64>,
    /// The observed values, one per step.
    pub values: Vec<f64>,
}

/// Hyperparameters of the learning-curve model
/// `y_n(t) = m + f(x_n) + r_n(t) + ε`, `f ~ GP(0, k_x)`, `r_n ~ GP(0, k_t)`, `ε ~ N(0, σ_n²)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LcParams {
    /// Kernel `k_x` of the asymptote GP over configurations (Matérn 5/2 ARD by default).
    pub asymptote: Kernel,
    /// Kernel `k_t` of each run's decaying part.
    pub decay: DecayKernel,
    /// Observation noise variance `σ_n² ≥ 0`.
    pub noise: f64,
    /// Prior mean `m` of the asymptote.
    pub mean: f64,
}

impl LcParams {
    /// Length of the log-parameter vector for `d` inputs: `d + 6`.
    pub fn num_params(d: usize) -> usize {
        d + 6
    }

    /// The search vector `(log ℓ_1, …, log ℓ_d, log σ_f², log σ_r², log α, log β, log σ_n², m)`.
    pub fn to_theta(&self) -> Vec<f64> {
        let mut t = self.asymptote.log_hyper();
        t.extend([
            self.decay.outputscale.ln(),
            self.decay.alpha.ln(),
            self.decay.beta.ln(),
            self.noise.ln(),
            self.mean,
        ]);
        t
    }

    /// Inverse of [`LcParams::to_theta`] for an asymptote kernel of shape `kind`.
    pub fn from_theta(kind: KernelKind, theta: &[f64]) -> Result<Self> {
        if theta.len() < 7 {
            return Err(Error::dim("learning-curve theta", 7, theta.len()));
        }
        let d = theta.len() - 6;
        let asymptote = Kernel::new(
            kind,
            theta[..d].iter().map(|v| v.exp()).collect(),
            theta[d].exp(),
        )?;
        let decay = DecayKernel::new(theta[d + 1].exp(), theta[d + 2].exp(), theta[d + 3].exp())?;
        let params = Self {
            asymptote,
            decay,
            noise: theta[d + 4].exp(),
            mean: theta[d + 5],
        };
        params.validate()?;
        Ok(params)
    }

    fn validate(&self) -> Result<()> {
        if !(self.noise.is_finite() && self.noise >= 0.0) {
            return Err(Error::invalid(
                "noise",
                format!("must be finite and >= 0, got {}", self.noise),
            ));
        }
        if !self.mean.is_finite() {
            return Err(Error::invalid("mean", "must be finite"));
        }
        Ok(())
    }
}

/// A curve prediction at `k` steps of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePrediction {
    /// Posterior mean of the latent curve (no observation noise) at each requested step.
    pub mean: Vec<f64>,
    /// Posterior covariance between the requested steps, row-major `k × k`. Add the noise
    /// variance to the diagonal for the distribution of a new noisy observation.
    pub cov: Vec<f64>,
    /// Posterior mean of the run's asymptote `m + f(x)`.
    pub asymptote_mean: f64,
    /// Posterior variance of the asymptote.
    pub asymptote_var: f64,
}

/// Per-run factorization: `L Lᵀ = K_n = k_t(t_n, t_n) + σ_n² I`, `p = L⁻¹1`, `e = L⁻¹(y_n − m)`.
#[derive(Debug, Clone)]
struct RunFactor {
    chol: Cholesky,
    p: Vec<f64>,
    e: Vec<f64>,
    /// `γ = 1ᵀK_n⁻¹1`.
    gamma: f64,
    /// `b = 1ᵀK_n⁻¹(y_n − m)`.
    b: f64,
}

fn lower_solve(chol: &Cholesky, v: &[f64]) -> Vec<f64> {
    let mut m = Mat::from_fn(v.len(), 1, |i, _| v[i]);
    chol.solve_lower_in_place(m.as_mut());
    (0..v.len()).map(|i| m[(i, 0)]).collect()
}

fn upper_solve(chol: &Cholesky, v: &[f64]) -> Vec<f64> {
    let mut m = Mat::from_fn(v.len(), 1, |i, _| v[i]);
    chol.solve_upper_in_place(m.as_mut());
    (0..v.len()).map(|i| m[(i, 0)]).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| u * v).sum()
}

impl RunFactor {
    fn new(params: &LcParams, steps: &[f64], values: &[f64]) -> Result<Self> {
        let t = steps.len();
        let k = Mat::from_fn(t, t, |i, j| {
            params.decay.eval(steps[i], steps[j]) + if i == j { params.noise } else { 0.0 }
        });
        let chol = Cholesky::factor(k.as_ref(), JitterPolicy::default())?;
        let p = lower_solve(&chol, &vec![1.0; t]);
        let r: Vec<f64> = values.iter().map(|v| v - params.mean).collect();
        let e = lower_solve(&chol, &r);
        Ok(Self {
            gamma: dot(&p, &p),
            b: dot(&p, &e),
            chol,
            p,
            e,
        })
    }
}

fn check_steps(what: &str, steps: &[f64]) -> Result<()> {
    if let Some(t) = steps.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
        return Err(Error::invalid(
            what,
            format!("steps must be finite and >= 0, got {t}"),
        ));
    }
    Ok(())
}

fn check_point(what: &str, x: &[f64], d: usize) -> Result<()> {
    if x.len() != d {
        return Err(Error::dim(what, d, x.len()));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::invalid(what, "non-finite coordinate"));
    }
    Ok(())
}

fn check_observed(what: &str, steps: &[f64], values: &[f64]) -> Result<()> {
    if steps.is_empty() {
        return Err(Error::invalid(
            what,
            "a run needs at least one observed step",
        ));
    }
    if values.len() != steps.len() {
        return Err(Error::dim(
            format!("{what}.values"),
            steps.len(),
            values.len(),
        ));
    }
    check_steps(&format!("{what}.steps"), steps)?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(
            format!("{what}.values"),
            format!("non-finite value at {i}"),
        ));
    }
    Ok(())
}

/// Checks a data set of runs against the input dimension `d`; errors name the run and field.
pub fn validate_runs(runs: &[Run], d: usize) -> Result<()> {
    for (i, r) in runs.iter().enumerate() {
        check_point(&format!("runs[{i}].x"), &r.x, d)?;
        check_observed(&format!("runs[{i}]"), &r.steps, &r.values)?;
    }
    Ok(())
}

/// The learning-curve model conditioned on a set of runs, with fixed hyperparameters.
#[derive(Debug, Clone)]
pub struct LcPosterior {
    params: LcParams,
    runs: Vec<Run>,
    factors: Vec<RunFactor>,
    /// `s_n = √γ_n`.
    s: Vec<f64>,
    /// Factor of `A = I + S K_x S` (`None` without runs).
    chol_a: Option<Cholesky>,
    /// `w = Oᵀ Σ⁻¹ (y − m)`, the per-run sums of the joint representer weights.
    w: Vec<f64>,
    /// Posterior means (without `m`) and variances of `f(x_n)`.
    mu_f: Vec<f64>,
    var_f: Vec<f64>,
    lml: f64,
    jitter: f64,
}

impl LcPosterior {
    /// Conditions the model with hyperparameters `params` on `runs` (each with at least one step;
    /// no runs gives the prior). Cost `O(N³ + Σ T_n³)`.
    pub fn new(runs: Vec<Run>, params: LcParams) -> Result<Self> {
        params.validate()?;
        let d = params.asymptote.dim();
        validate_runs(&runs, d)?;
        let factors = runs
            .iter()
            .map(|r| RunFactor::new(&params, &r.steps, &r.values))
            .collect::<Result<Vec<_>>>()?;
        let n = runs.len();
        let kx = Mat::from_fn(n, n, |i, j| params.asymptote.eval(&runs[i].x, &runs[j].x));
        let s: Vec<f64> = factors.iter().map(|f| f.gamma.sqrt()).collect();
        let mut jitter = factors.iter().map(|f| f.chol.jitter()).fold(0.0, f64::max);
        let (chol_a, w, mu_f, var_f, logdet_a) = if n == 0 {
            (None, vec![], vec![], vec![], 0.0)
        } else {
            let a = Mat::from_fn(n, n, |i, j| {
                f64::from(u8::from(i == j)) + s[i] * s[j] * kx[(i, j)]
            });
            let chol = Cholesky::factor(a.as_ref(), JitterPolicy::default())?;
            jitter = jitter.max(chol.jitter());
            let bs: Vec<f64> = factors.iter().zip(&s).map(|(f, si)| f.b / si).collect();
            let w: Vec<f64> = chol
                .solve_vec(&bs)
                .iter()
                .zip(&s)
                .map(|(z, si)| z * si)
                .collect();
            let mu_f: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| kx[(i, j)] * w[j]).sum())
                .collect();
            // V = L_A⁻¹ S K_x; var f(x_n) = K_x,nn − ‖V[:, n]‖².
            let mut v = Mat::from_fn(n, n, |i, j| s[i] * kx[(i, j)]);
            chol.solve_lower_in_place(v.as_mut());
            let var_f: Vec<f64> = (0..n)
                .map(|j| (kx[(j, j)] - (0..n).map(|i| v[(i, j)].powi(2)).sum::<f64>()).max(0.0))
                .collect();
            let ld = chol.log_det();
            (Some(chol), w, mu_f, var_f, ld)
        };
        // (y − m)ᵀ Σ⁻¹ (y − m) = Σ_n ‖e_n − μ_n p_n‖² + wᵀ K_x w: two non-negative terms.
        let mut quad: f64 = dot(&w, &mu_f);
        let mut logdet = logdet_a;
        let mut m_total = 0usize;
        for (i, f) in factors.iter().enumerate() {
            quad +=
                f.e.iter()
                    .zip(&f.p)
                    .map(|(e, p)| (e - mu_f[i] * p).powi(2))
                    .sum::<f64>();
            logdet += f.chol.log_det();
            m_total += f.p.len();
        }
        let lml =
            -0.5 * quad - 0.5 * logdet - 0.5 * m_total as f64 * (2.0 * std::f64::consts::PI).ln();
        Ok(Self {
            params,
            runs,
            factors,
            s,
            chol_a,
            w,
            mu_f,
            var_f,
            lml,
            jitter,
        })
    }

    /// The hyperparameters.
    pub fn params(&self) -> &LcParams {
        &self.params
    }

    /// The runs conditioned on.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// `log p(y | θ)` of all observations.
    pub fn log_marginal_likelihood(&self) -> f64 {
        self.lml
    }

    /// The largest diagonal jitter any factorization needed (0 if none).
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Gradient of [`LcPosterior::log_marginal_likelihood`] with respect to the search vector of
    /// [`LcParams::to_theta`]. Cost `O(N² d + N³ + Σ T_n³)`.
    pub fn lml_grad(&self) -> Vec<f64> {
        let d = self.params.asymptote.dim();
        let mut g = vec![0.0; LcParams::num_params(d)];
        self.grad_asymptote(&mut g[..=d]);
        for (n, f) in self.factors.iter().enumerate() {
            self.grad_run(n, f, &mut g[d + 1..d + 5]);
        }
        g[d + 5] = self.w.iter().sum();
        g
    }

    /// `½ tr(W_x ∂K_x)` with `W_x = w wᵀ − S A⁻¹ S` (`= Oᵀ(ααᵀ − Σ⁻¹)O`).
    fn grad_asymptote(&self, g: &mut [f64]) {
        let Some(chol) = &self.chol_a else { return };
        let ainv = chol.inverse_lower();
        let mut gk = vec![0.0; g.len()];
        for i in 0..self.runs.len() {
            for j in 0..=i {
                let wx = self.w[i] * self.w[j] - self.s[i] * self.s[j] * ainv[(i, j)];
                let mult = if i == j { 0.5 } else { 1.0 };
                self.params
                    .asymptote
                    .eval_grad_hyper(&self.runs[i].x, &self.runs[j].x, &mut gk);
                for (gp, k) in g.iter_mut().zip(&gk) {
                    *gp += mult * wx * k;
                }
            }
        }
    }

    /// `½ tr(W_n ∂K_n)` with `W_n = α_n α_nᵀ − K_n⁻¹ + var f(x_n) q_n q_nᵀ`, the run's diagonal
    /// block of `ααᵀ − Σ⁻¹` (`q_n = K_n⁻¹1`, `α_n = K_n⁻¹(y_n − m) − μ_n q_n`).
    fn grad_run(&self, n: usize, f: &RunFactor, g: &mut [f64]) {
        let steps = &self.runs[n].steps;
        let kinv = f.chol.inverse_lower();
        let q = upper_solve(&f.chol, &f.p);
        let u = upper_solve(&f.chol, &f.e);
        let alpha: Vec<f64> = u
            .iter()
            .zip(&q)
            .map(|(u, q)| u - self.mu_f[n] * q)
            .collect();
        let v = self.var_f[n];
        for i in 0..steps.len() {
            for j in 0..=i {
                let wn = alpha[i] * alpha[j] - kinv[(i, j)] + v * q[i] * q[j];
                let mult = if i == j { 0.5 } else { 1.0 };
                let (_, dk) = self.params.decay.eval_grad(steps[i], steps[j]);
                for (gp, k) in g.iter_mut().zip(&dk) {
                    *gp += mult * wn * k;
                }
                if i == j {
                    g[3] += 0.5 * wn * self.params.noise;
                }
            }
        }
    }

    /// Posterior mean (without `m`) and variance of `f(x)` given all runs.
    fn latent_asymptote(&self, x: &[f64]) -> (f64, f64) {
        let prior = self.params.asymptote.outputscale;
        let Some(chol) = &self.chol_a else {
            return (0.0, prior);
        };
        let ks: Vec<f64> = self
            .runs
            .iter()
            .map(|r| self.params.asymptote.eval(x, &r.x))
            .collect();
        let mu = dot(&ks, &self.w);
        let sk: Vec<f64> = ks.iter().zip(&self.s).map(|(k, s)| k * s).collect();
        let v = lower_solve(chol, &sk);
        (mu, (prior - dot(&v, &v)).max(0.0))
    }

    /// Posterior of the asymptote `m + f(x)` of a configuration `x`, given all runs (not the
    /// observations of a run at `x` that is not among them).
    pub fn asymptote(&self, x: &[f64]) -> Result<(f64, f64)> {
        check_point("x", x, self.params.asymptote.dim())?;
        let (mu, v) = self.latent_asymptote(x);
        Ok((self.params.mean + mu, v))
    }

    /// Posterior of the fitted run `run` (an index into [`LcPosterior::runs`]) at `future_steps`.
    pub fn predict_run(&self, run: usize, future_steps: &[f64]) -> Result<CurvePrediction> {
        let f = self.factors.get(run).ok_or_else(|| {
            Error::invalid(
                "run",
                format!("index {run} out of range ({} runs)", self.runs.len()),
            )
        })?;
        check_steps("future_steps", future_steps)?;
        Ok(self.curve(
            Some((f, &self.runs[run].steps)),
            self.mu_f[run],
            self.var_f[run],
            future_steps,
        ))
    }

    /// Posterior of the curve of configuration `x` at `future_steps`. With `observed =
    /// Some((steps, values))` the curve is also conditioned on those observations of `x`, taken
    /// as a run that is not among the conditioned runs (for a run that is, use
    /// [`LcPosterior::predict_run`]); with `None` it is the prior curve of a new run, whose
    /// asymptote comes from the GP over configurations.
    pub fn predict(
        &self,
        x: &[f64],
        observed: Option<(&[f64], &[f64])>,
        future_steps: &[f64],
    ) -> Result<CurvePrediction> {
        check_point("x", x, self.params.asymptote.dim())?;
        check_steps("future_steps", future_steps)?;
        let (mu0, v0) = self.latent_asymptote(x);
        let Some((steps, values)) = observed else {
            return Ok(self.curve(None, mu0, v0, future_steps));
        };
        check_observed("observed", steps, values)?;
        let f = RunFactor::new(&self.params, steps, values)?;
        // f(x) | runs ~ N(μ₀, v₀); the run's own data adds precision γ and information b.
        let denom = 1.0 + v0 * f.gamma;
        let (mu1, v1) = ((mu0 + v0 * f.b) / denom, v0 / denom);
        Ok(self.curve(Some((&f, steps)), mu1, v1, future_steps))
    }

    /// The curve at `ts` given the asymptote posterior `N(mu, v)` (without `m`) and, optionally,
    /// the run's own factorization: conditional on `f`, a run depends only on its own data.
    fn curve(
        &self,
        own: Option<(&RunFactor, &[f64])>,
        mu: f64,
        v: f64,
        ts: &[f64],
    ) -> CurvePrediction {
        let k = ts.len();
        let m = self.params.mean;
        let decay = &self.params.decay;
        let mut mean = vec![m + mu; k];
        let mut cov = vec![0.0; k * k];
        let mut h = vec![1.0; k];
        let mut vt = Mat::<f64>::zeros(0, k);
        if let Some((f, steps)) = own {
            // V = L⁻¹ k_t(t_n, ts); h_j = 1 − 1ᵀK_n⁻¹k_j; mean_j = m + μ h_j + (y_n − m)ᵀK_n⁻¹k_j.
            vt = Mat::from_fn(steps.len(), k, |i, j| decay.eval(steps[i], ts[j]));
            f.chol.solve_lower_in_place(vt.as_mut());
            for j in 0..k {
                let col = vt.col_as_slice(j);
                h[j] = 1.0 - dot(&f.p, col);
                mean[j] = m + mu * h[j] + dot(&f.e, col);
            }
        }
        for i in 0..k {
            for j in 0..=i {
                let mut c = decay.eval(ts[i], ts[j]) + v * h[i] * h[j];
                if vt.nrows() > 0 {
                    c -= dot(vt.col_as_slice(i), vt.col_as_slice(j));
                }
                cov[i * k + j] = c;
                cov[j * k + i] = c;
            }
        }
        CurvePrediction {
            mean,
            cov,
            asymptote_mean: m + mu,
            asymptote_var: v,
        }
    }
}

/// The value at one step `t` (or, with `step = None`, the asymptote) of a run of a new
/// configuration, as a [`Posterior`] over configurations with input gradients: what an
/// acquisition optimizer (PBGI for "start a new run") maximizes over `x`.
///
/// Mean `m + k_x(x, X) w`, variance `σ_f² − ‖L_A⁻¹ S k_x(X, x)‖² + k_t(t, t)`; gradients
/// `∂μ = Σ_n w_n ∂k_n` and `∂σ² = −2 Σ_n s_n (L_A⁻ᵀ L_A⁻¹ S k)_n ∂k_n` with `∂k_n = ∂k_x(x, x_n)/∂x`.
#[derive(Debug, Clone, Copy)]
pub struct StepPosterior<'a> {
    posterior: &'a LcPosterior,
    step: Option<f64>,
}

impl LcPosterior {
    /// The posterior of a new configuration's value at `step` (`None`: its asymptote), as a
    /// [`Posterior`] over configurations.
    pub fn at_step(&self, step: Option<f64>) -> Result<StepPosterior<'_>> {
        if let Some(t) = step {
            check_steps("step", &[t])?;
        }
        Ok(StepPosterior {
            posterior: self,
            step,
        })
    }
}

impl StepPosterior<'_> {
    fn one(&self, x: &[f64], grad: Option<(&mut [f64], &mut [f64])>) -> (f64, f64) {
        let p = self.posterior;
        let kernel = &p.params.asymptote;
        let extra = self.step.map_or(0.0, |t| p.params.decay.eval(t, t));
        let (mu, v) = p.latent_asymptote(x);
        let (mean, var) = (p.params.mean + mu, (v + extra).max(MIN_VARIANCE));
        let (Some((gm, gv)), Some(chol)) = (grad, &p.chol_a) else {
            return (mean, var);
        };
        let sk: Vec<f64> = p
            .runs
            .iter()
            .zip(&p.s)
            .map(|(r, s)| s * kernel.eval(x, &r.x))
            .collect();
        let u = chol.solve_vec(&sk);
        let mut dk = vec![0.0; x.len()];
        for (n, r) in p.runs.iter().enumerate() {
            kernel.eval_grad_x(x, &r.x, &mut dk);
            let cv = -2.0 * p.s[n] * u[n];
            for ((a, b), g) in gm.iter_mut().zip(gv.iter_mut()).zip(&dk) {
                *a += p.w[n] * g;
                *b += cv * g;
            }
        }
        (mean, var)
    }
}

impl Posterior for StepPosterior<'_> {
    fn dim(&self) -> usize {
        self.posterior.params.asymptote.dim()
    }

    fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        let d = self.dim();
        if !xs.len().is_multiple_of(d) {
            return Err(Error::invalid(
                "xs",
                format!("length {} is not a multiple of the dimension {d}", xs.len()),
            ));
        }
        let m = xs.len() / d;
        let mut out = PosteriorBatch {
            mean: Vec::with_capacity(m),
            var: Vec::with_capacity(m),
            mean_grad: vec![0.0; if grad { m * d } else { 0 }],
            var_grad: vec![0.0; if grad { m * d } else { 0 }],
        };
        for (i, x) in xs.chunks_exact(d).enumerate() {
            check_point("xs", x, d)?;
            let g = grad.then(|| {
                (
                    &mut out.mean_grad[i * d..(i + 1) * d],
                    &mut out.var_grad[i * d..(i + 1) * d],
                )
            });
            let (mu, var) = self.one(x, g);
            out.mean.push(mu);
            out.var.push(var);
        }
        Ok(out)
    }
}
