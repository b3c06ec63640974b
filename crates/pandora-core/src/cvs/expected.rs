//! Expectations over the random variables of acquisition-like integrands, as differentiable
//! objectives of the controlled values `x^I`:
//!
//! ```text
//! A(x^I) = (1/N) Σ_s a([x^I, S_s^{−I}]),    ∇_{x^I} A = (1/N) Σ_s (∇a)([x^I, S_s^{−I}])|_I
//! ```
//!
//! over the rows `S_s` of the problem's sample bank (a full query uses the single point `x`).
//! Gradients are analytic (chain rule through the posterior mean and standard deviation), not
//! finite differences.

use super::CvsFunction;
use super::problem::CvsProblem;
use crate::acquisition::pbgi_index;
use crate::error::{Error, Result};
use crate::gp::{Posterior, PosteriorPath};
use crate::math::{log_h, log_norm_cdf, log_norm_pdf};
use crate::optim::multistart::Objective;

/// A function of full queries evaluated in batches, with optional gradients.
pub trait Integrand: Sync {
    /// Writes values at the rows of `xs` (row-major `m × d`) into `vals` and, if `grad`, the
    /// row-major `m × d` gradients into `grads`.
    fn eval(&self, xs: &[f64], grad: bool, vals: &mut [f64], grads: &mut [f64]) -> Result<()>;
}

/// The upper confidence bound `u(x) = μ(x) + β·σ(x)` of a model's latent posterior (`β = 0`: the
/// posterior mean).
pub struct Ucb<'a, P: Posterior> {
    /// The model.
    pub model: &'a P,
    /// Multiplier of the posterior standard deviation (the BOCVS code's `beta = 2`).
    pub beta: f64,
}

impl<P: Posterior> Integrand for Ucb<'_, P> {
    fn eval(&self, xs: &[f64], grad: bool, vals: &mut [f64], grads: &mut [f64]) -> Result<()> {
        let d = self.model.dim();
        let post = self.model.posterior(xs, grad)?;
        for (j, v) in vals.iter_mut().enumerate() {
            let s = post.var[j].sqrt();
            *v = post.mean[j] + self.beta * s;
            if grad {
                for k in 0..d {
                    let i = j * d + k;
                    grads[i] = post.mean_grad[i] + self.beta * post.var_grad[i] / (2.0 * s);
                }
            }
        }
        Ok(())
    }
}

/// A posterior sample path (Thompson sampling).
pub struct Path<'a>(pub &'a PosteriorPath);

impl Integrand for Path<'_> {
    fn eval(&self, xs: &[f64], grad: bool, vals: &mut [f64], grads: &mut [f64]) -> Result<()> {
        let d = self.0.dim();
        for (j, (x, v)) in xs.chunks_exact(d).zip(vals.iter_mut()).enumerate() {
            *v = if grad {
                self.0.value_grad(x, &mut grads[j * d..(j + 1) * d])
            } else {
                self.0.value(x)
            };
        }
        Ok(())
    }
}

/// A known objective of full queries.
pub struct Function<'a>(pub &'a dyn CvsFunction);

impl Integrand for Function<'_> {
    fn eval(&self, xs: &[f64], grad: bool, vals: &mut [f64], grads: &mut [f64]) -> Result<()> {
        let d = self.0.dim();
        for (j, (x, v)) in xs.chunks_exact(d).zip(vals.iter_mut()).enumerate() {
            *v = if grad {
                self.0.value_grad(x, &mut grads[j * d..(j + 1) * d])
            } else {
                self.0.value(x)
            };
        }
        Ok(())
    }
}

/// `x^I ↦ (1/N) Σ_s a([x^I, S_s^{−I}])` for an [`Integrand`] `a`, as an [`Objective`] on the
/// controlled values of one set.
pub struct Expected<'a, I: Integrand> {
    /// The problem (bank and control sets).
    pub problem: &'a CvsProblem,
    /// The control set.
    pub set: usize,
    /// The integrand.
    pub integrand: I,
}

impl<I: Integrand> Expected<'_, I> {
    /// Value and gradient (with respect to the controlled values) at `x`.
    pub fn eval(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let p = self.problem;
        let vars = &p.sets()[self.set].vars;
        if x.len() != vars.len() || grad.len() != vars.len() {
            return Err(Error::dim("controlled values", vars.len(), x.len()));
        }
        let d = p.dim();
        let n = p.rows_for(self.set);
        let pts = p.points(self.set, x);
        let mut vals = vec![0.0; n];
        let mut grads = vec![0.0; n * d];
        self.integrand.eval(&pts, true, &mut vals, &mut grads)?;
        grad.fill(0.0);
        for row in grads.chunks_exact(d) {
            for (g, &v) in grad.iter_mut().zip(vars) {
                *g += row[v];
            }
        }
        let inv = 1.0 / n as f64;
        grad.iter_mut().for_each(|g| *g *= inv);
        Ok(vals.iter().sum::<f64>() * inv)
    }

    /// Values at the rows of `xs` (row-major `m × |I|`).
    pub fn eval_many(&self, xs: &[f64]) -> Result<Vec<f64>> {
        let p = self.problem;
        let k = p.sets()[self.set].vars.len();
        let d = p.dim();
        let n = p.rows_for(self.set);
        let m = xs.len().checked_div(k).unwrap_or(1);
        let mut pts = vec![0.0; m * n * d];
        for j in 0..m {
            p.fill_points(
                self.set,
                &xs[j * k..(j + 1) * k],
                &mut pts[j * n * d..(j + 1) * n * d],
            );
        }
        let mut vals = vec![0.0; m * n];
        self.integrand.eval(&pts, false, &mut vals, &mut [])?;
        Ok(vals
            .chunks_exact(n)
            .map(|c| c.iter().sum::<f64>() / n as f64)
            .collect())
    }
}

impl<I: Integrand> Objective for Expected<'_, I> {
    fn dim(&self) -> usize {
        self.problem.sets()[self.set].vars.len()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.eval(x, grad).unwrap_or_else(|_| {
            grad.fill(0.0);
            f64::NAN
        })
    }
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        match self.eval_many(xs) {
            Ok(v) if v.len() == out.len() => out.copy_from_slice(&v),
            _ => out.fill(f64::NAN),
        }
    }
}

/// The EI-PSQ acquisition of one control set: with posterior sample paths `f̃_1..f̃_S` and their
/// incumbents `b_r = max_j f̃_r(x_j)` over the training inputs,
/// `EI(x^I) = (1/S) Σ_r max(E_bank f̃_r([x^I, X]) − b_r, 0)`.
pub struct ExpectedImprovementPsq<'a> {
    /// The problem.
    pub problem: &'a CvsProblem,
    /// The control set.
    pub set: usize,
    /// Posterior sample paths.
    pub paths: &'a [PosteriorPath],
    /// Incumbent of each path.
    pub best: &'a [f64],
}

impl Objective for ExpectedImprovementPsq<'_> {
    fn dim(&self) -> usize {
        self.problem.sets()[self.set].vars.len()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let k = x.len();
        let mut g = vec![0.0; k];
        grad.fill(0.0);
        let mut total = 0.0;
        for (path, &b) in self.paths.iter().zip(self.best) {
            let e = Expected {
                problem: self.problem,
                set: self.set,
                integrand: Path(path),
            };
            match e.eval(x, &mut g) {
                Ok(v) if v > b => {
                    total += v - b;
                    grad.iter_mut().zip(&g).for_each(|(a, c)| *a += c);
                }
                Ok(_) => {}
                Err(_) => return f64::NAN,
            }
        }
        let inv = 1.0 / self.paths.len().max(1) as f64;
        grad.iter_mut().for_each(|a| *a *= inv);
        total * inv
    }
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        out.fill(0.0);
        for (path, &b) in self.paths.iter().zip(self.best) {
            let e = Expected {
                problem: self.problem,
                set: self.set,
                integrand: Path(path),
            };
            match e.eval_many(xs) {
                Ok(v) => out
                    .iter_mut()
                    .zip(v)
                    .for_each(|(o, v)| *o += (v - b).max(0.0)),
                Err(_) => {
                    out.fill(f64::NAN);
                    return;
                }
            }
        }
        let inv = 1.0 / self.paths.len().max(1) as f64;
        out.iter_mut().for_each(|o| *o *= inv);
    }
}

/// The Gittins index of a mixture of Gaussian boxes and its partial derivatives.
#[derive(Debug, Clone, PartialEq)]
pub struct MixtureIndex {
    /// The index `g`: `(1/N) Σ_s σ_s h((μ_s − g)/σ_s) = λc`.
    pub g: f64,
    /// `∂g/∂μ_s = Φ(u_s) / Σ_r Φ(u_r)`.
    pub d_mu: Vec<f64>,
    /// `∂g/∂σ_s = φ(u_s) / Σ_r Φ(u_r)`.
    pub d_sigma: Vec<f64>,
}

/// `log Σ exp(a_i)`.
fn log_sum_exp(a: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = a.clone().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + a.map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// The Gittins index of the box whose value, under the posterior, is the equal-weight mixture of
/// `N(μ_s, σ_s²)`: the unique `g` with `(1/N) Σ_s E[(Y_s − g)^+] = λc`, i.e.
/// `(1/N) Σ_s σ_s h((μ_s − g)/σ_s) = λc` (the PBGI equation with the expected improvement
/// averaged over the random variables). Solved by safeguarded Newton steps on the logarithm of the
/// averaged improvement inside a guaranteed bracket (`[mean μ − λc, max_s μ_s + σ_s z]` with
/// `σ_max h(−z) = λc`); for `N = 1` it is the PBGI. Derivatives by implicit differentiation.
pub fn mixture_index(mu: &[f64], sigma: &[f64], log_lambda_c: f64) -> Result<MixtureIndex> {
    let n = mu.len();
    if n == 0 || sigma.len() != n {
        return Err(Error::dim("mixture components", n.max(1), sigma.len()));
    }
    if mu.iter().chain(sigma).any(|v| !v.is_finite()) || sigma.iter().any(|&s| s <= 0.0) {
        return Err(Error::invalid(
            "mixture",
            "needs finite means and positive deviations",
        ));
    }
    if !log_lambda_c.is_finite() {
        return Err(Error::invalid("log(lambda*cost)", "must be finite"));
    }
    // Bracket. Lower end: EI_s(g) ≥ μ_s − g, so the mean EI at `mean μ − λc` is ≥ λc. Upper end:
    // with `z` solving `σ_max h(−z) = λc` (one single-box index), every component satisfies
    // `EI_s(g) = σ_s h(−(g − μ_s)/σ_s) ≤ σ_max h(−z) = λc` once `g ≥ μ_s + σ_s z`.
    let lambda_c = log_lambda_c.exp();
    let smax = sigma.iter().cloned().fold(0.0, f64::max);
    let z = pbgi_index(0.0, smax, log_lambda_c).g / smax;
    let mut hi = mu
        .iter()
        .zip(sigma)
        .map(|(&m, &s)| m + s * z)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut lo = (mu.iter().sum::<f64>() / n as f64 - lambda_c).min(hi);
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(Error::Numerical(
            "non-finite bracket of the mixture index".into(),
        ));
    }
    let log_n = (n as f64).ln();
    // F(g) = log mean_s EI_s(g) − log λc (decreasing) and d log EI / dg = −ΣΦ/ΣEI. Every
    // component's terms are computed once per evaluation into buffers (the log-sum-exps take two
    // passes), and log σ_s once for all.
    let ln_sigma: Vec<f64> = sigma.iter().map(|s| s.ln()).collect();
    let mut ei_terms = vec![0.0; n];
    let mut phi_terms = vec![0.0; n];
    let mut f = |g: f64| {
        for s in 0..n {
            let u = (mu[s] - g) / sigma[s];
            ei_terms[s] = ln_sigma[s] + log_h(u);
            phi_terms[s] = log_norm_cdf(u);
        }
        let lei = log_sum_exp(ei_terms.iter().copied());
        let lphi = log_sum_exp(phi_terms.iter().copied());
        (lei - log_n - log_lambda_c, -(lphi - lei).exp())
    };
    // Newton steps; a step that leaves the bracket (tightened by the sign of F at every iterate)
    // falls back to bisection.
    // Start from the index of the moment-matched Gaussian (usually within a few percent of the
    // root); the first evaluation of F then places it inside the bracket.
    let mean_mu = mu.iter().sum::<f64>() / n as f64;
    let second = mu
        .iter()
        .zip(sigma)
        .map(|(&m, &s)| s * s + (m - mean_mu) * (m - mean_mu))
        .sum::<f64>()
        / n as f64;
    let g0 = pbgi_index(mean_mu, second.sqrt().max(f64::MIN_POSITIVE), log_lambda_c).g;
    let mut g = if g0.is_finite() { g0.clamp(lo, hi) } else { hi };
    if hi - lo > 0.0 {
        for _ in 0..200 {
            let (fv, dv) = f(g);
            if fv == 0.0 {
                break;
            }
            if fv > 0.0 {
                lo = g;
            } else {
                hi = g;
            }
            let mut next = g - fv / dv;
            if !(next > lo && next < hi && next.is_finite()) {
                next = 0.5 * (lo + hi);
            }
            let step = (next - g).abs();
            g = next;
            if step <= 1e-13 * g.abs().max(1.0) || hi - lo <= 1e-13 * g.abs().max(1.0) {
                break;
            }
        }
    }
    let lphi: Vec<f64> = mu
        .iter()
        .zip(sigma)
        .map(|(&m, &s)| log_norm_cdf((m - g) / s))
        .collect();
    let lpdf: Vec<f64> = mu
        .iter()
        .zip(sigma)
        .map(|(&m, &s)| log_norm_pdf((m - g) / s))
        .collect();
    let log_den = log_sum_exp(lphi.iter().cloned());
    Ok(MixtureIndex {
        g,
        d_mu: lphi.iter().map(|l| (l - log_den).exp()).collect(),
        d_sigma: lpdf.iter().map(|l| (l - log_den).exp()).collect(),
    })
}

/// The Gittins index of a control set at controlled values `x^I`: the [`mixture_index`] of the
/// posterior at the bank points `[x^I, S_s^{−I}]` with `λ·c_i`, as an [`Objective`] (gradient by
/// implicit differentiation through the posterior mean and standard deviation).
pub struct GittinsIndex<'a, P: Posterior> {
    /// The problem.
    pub problem: &'a CvsProblem,
    /// The control set.
    pub set: usize,
    /// The model.
    pub model: &'a P,
    /// `log(λ·c_i)`.
    pub log_lambda_c: f64,
}

impl<P: Posterior> GittinsIndex<'_, P> {
    /// Index and (if `grad` is non-empty) its gradient at `x`.
    pub fn eval(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let p = self.problem;
        let vars = &p.sets()[self.set].vars;
        let d = p.dim();
        let want = !grad.is_empty();
        let pts = p.points(self.set, x);
        let post = self.model.posterior(&pts, want)?;
        let sd = post.std();
        let mi = mixture_index(&post.mean, &sd, self.log_lambda_c)?;
        if want {
            grad.fill(0.0);
            for (s, &sds) in sd.iter().enumerate() {
                for (g, &v) in grad.iter_mut().zip(vars) {
                    let i = s * d + v;
                    *g += mi.d_mu[s] * post.mean_grad[i]
                        + mi.d_sigma[s] * post.var_grad[i] / (2.0 * sds);
                }
            }
        }
        Ok(mi.g)
    }
}

impl<P: Posterior> Objective for GittinsIndex<'_, P> {
    fn dim(&self) -> usize {
        self.problem.sets()[self.set].vars.len()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if grad.is_empty() {
            return self.eval(x, &mut []).unwrap_or(f64::NAN);
        }
        self.eval(x, grad).unwrap_or_else(|_| {
            grad.fill(0.0);
            f64::NAN
        })
    }
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        let k = self.dim();
        for (j, o) in out.iter_mut().enumerate() {
            *o = self
                .eval(&xs[j * k..(j + 1) * k], &mut [])
                .unwrap_or(f64::NAN);
        }
    }
}
