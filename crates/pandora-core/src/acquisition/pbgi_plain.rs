//! The Pandora's Box Gittins index computed the way the PBGI paper's reference code computes its
//! plain version: bisection in linear scale on a naively evaluated expected improvement, with
//! the implicit-function gradient formed as a naive ratio. **For reproduction only**: it exists
//! so that the PBGI paper's App. D.1 comparison of "PBGI" with its numerically stable variant
//! "S-PBGI" (Figure 10) can be run; [`Pbgi`](super::Pbgi) is the index to use.
//!
//! # Definition
//!
//! The same index as [`pbgi`](super::pbgi): in maximization mode the `g` with
//! `σ·h((μ − g)/σ) = λc`, `h(u) = φ(u) + u·Φ(u)`, `c = exp(m + v/2)` the lognormal mean of a
//! log-cost summary `(m, v)`. In exact arithmetic the two modules return the same `g` and the
//! same gradient; they differ only in floating point.
//!
//! # Algorithm (the authors' plain `GittinsIndexFunction`, as read from their code)
//!
//! 1. `F(g) = σ·h_naive((μ − g)/σ) − λc` with `h_naive(u) = φ(u) + u·Φ(u)` summed as written
//!    (`Φ(u) = erfc(−u/√2)/2`), as BoTorch's `_ei_helper` does.
//! 2. Bracket `[l, h] = [−1, 1]`; double `l` while `F(l) < 0`, then double `h` while
//!    `F(h) > 0` (the reference doubles every candidate's end while any candidate is
//!    unbracketed; here each point is bracketed on its own, which changes nothing but the
//!    bracket's width, and the 100 halvings below reach the resolution of `f64` from any
//!    bracket narrower than `2⁴⁸·|g|`).
//! 3. Exactly 100 bisection steps with no tolerance test: `m = (l + h)/2`; `l ← m` where
//!    `F(m) ≥ 0`, `h ← m` where `F(m) ≤ 0`. The final midpoint is `g`.
//! 4. Gradient by implicit differentiation with the ratios formed directly at
//!    `u = (μ − g)/σ`: `∂g/∂μ = 1`, `∂g/∂σ = φ(u)/Φ(u)`, `∂g/∂m = −λc/Φ(u)`,
//!    `∂g/∂v = −λc/(2Φ(u))`.
//!
//! # Where it departs from the stable index
//!
//! - `h_naive` cancels: its relative error grows like `u²·ε` for `u → −∞`, and it underflows
//!   to `0` below `u ≈ −38.5`, where `F = −λc` carries no information and the bisection only
//!   keeps the sign. The root lies there only when `λc/σ < h(−38.5) ≈ 10⁻³²⁴`, so for every
//!   representable `λc/σ` the root is found; what degrades is the accuracy of `g` as `λc/σ`
//!   shrinks (`|Δg| ≈ σ·ε·u²·φ(u)/Φ(u) ≈ σ·ε·|u|³`, about `6·10⁻¹²·σ` at `u = −30`).
//! - Bisection in `g` knows `u = (μ − g)/σ` only to an ulp of `g` over `σ`, so where `σ` is
//!   small the ratios below are evaluated at a `u` that is off by `ε·|g|/σ` (the stable index
//!   solves for `u` itself).
//! - `φ(u)/Φ(u)` and `λc/Φ(u)` are `0/0 = NaN` once `Φ(u)` underflows (`u < −38.5`), and lose
//!   accuracy before that only through `erfc`'s relative accuracy (a few ulp). The stable
//!   index uses Mills' ratio and `log Φ` there.
//! - Pandora's L-BFGS-B treats a non-finite value or gradient as `+∞` for the minimized
//!   objective: a rejected line-search trial, or the end of a restart that starts there.
//!
//! So at the λ of the PBGI paper's Bayesian-regret experiments (`λ = 10⁻⁴`, prior `σ ≤ 1`,
//! root `u ≳ −3.3`) the two indices agree to a few ulp of `g` and the gradients to
//! `ε·|g|/σ` (tested over `σ ∈ [10⁻⁶, 2]` and costs `10⁻² … 10²`): the paper reports
//! "little-to-no difference between PBGI and S-PBGI", and this module lets that be measured
//! on whole runs.
//!
//! # Degenerate and non-finite inputs
//!
//! `σ ≤ 0` gives the limit `g = μ − λc` (as the stable index; the reference clamps `σ²` at
//! `10⁻¹²` instead). A `NaN` input gives `NaN`. A bracket that cannot be found within 1100
//! doublings (only for `λc` or `|μ|` near the overflow threshold) gives `NaN`.
//!
//! # Reference
//!
//! Xie et al., "Cost-aware Bayesian optimization via the Pandora's Box Gittins index",
//! NeurIPS 2024, App. D.1 (S-PBGI, eq. (84)); the authors' code's plain
//! `GittinsIndexFunction` (bracketing, bisection and gradient as described above).

use super::{LogCost, Partials, PointwiseAcquisition};

/// `1/√(2π)`.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// Bisection steps (the reference's fixed count).
const BISECTIONS: u32 = 100;
/// Cap on bracket doublings (`2¹¹⁰⁰` overflows `f64`).
const MAX_DOUBLINGS: u32 = 1100;

/// `φ(u)` as written.
#[inline]
fn pdf(u: f64) -> f64 {
    INV_SQRT_2PI * libm::exp(-0.5 * u * u)
}

/// `Φ(u) = erfc(−u/√2)/2`.
#[inline]
fn cdf(u: f64) -> f64 {
    0.5 * libm::erfc(-u * core::f64::consts::FRAC_1_SQRT_2)
}

/// `h(u) = φ(u) + u·Φ(u)` summed as written (cancels for `u ≪ 0`).
#[inline]
fn h_naive(u: f64) -> f64 {
    pdf(u) + u * cdf(u)
}

/// The plain index in maximization mode: `(g, u)` with `u = (μ − g)/σ`, by the reference's
/// bracketing and 100 bisection steps (module docs). `σ > 0`, `λc > 0`, inputs finite.
pub fn pbgi_plain_index(mu: f64, sigma: f64, lambda_c: f64) -> (f64, f64) {
    let f = |g: f64| sigma * h_naive((mu - g) / sigma) - lambda_c;
    let (mut lo, mut hi) = (-1.0f64, 1.0f64);
    let mut k = 0;
    while f(lo) < 0.0 {
        lo *= 2.0;
        k += 1;
        if k > MAX_DOUBLINGS || !lo.is_finite() {
            return (f64::NAN, f64::NAN);
        }
    }
    k = 0;
    while f(hi) > 0.0 {
        hi *= 2.0;
        k += 1;
        if k > MAX_DOUBLINGS || !hi.is_finite() {
            return (f64::NAN, f64::NAN);
        }
    }
    let mut m = 0.5 * (lo + hi);
    for _ in 0..BISECTIONS {
        let s = f(m);
        if s >= 0.0 {
            lo = m;
        }
        if s <= 0.0 {
            hi = m;
        }
        m = 0.5 * (lo + hi);
    }
    (m, (mu - m) / sigma)
}

/// PBGI computed as the reference code's plain version ([module docs](self)), as a
/// [`PointwiseAcquisition`] (maximization). Partials as [`Pbgi`](super::Pbgi)'s, formed
/// naively: `∂g/∂μ = 1`, `∂g/∂σ = φ(u)/Φ(u)`, `∂g/∂m = −λc/Φ(u)`, `∂g/∂v = −λc/(2Φ(u))`.
/// For reproducing the PBGI paper's App. D.1 only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PbgiPlain {
    /// The cost-scaling factor `λ` (positive).
    pub lambda: f64,
}

impl PointwiseAcquisition for PbgiPlain {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        let lambda_c = self.lambda * libm::exp(cost.mean + 0.5 * cost.var);
        if mu.is_nan() || sigma.is_nan() || lambda_c.is_nan() {
            return Partials {
                value: f64::NAN,
                d_mu: f64::NAN,
                d_sigma: f64::NAN,
                d_cost_mean: f64::NAN,
                d_cost_var: f64::NAN,
            };
        }
        if sigma <= 0.0 {
            return Partials {
                value: mu - lambda_c,
                d_mu: 1.0,
                d_sigma: 0.0,
                d_cost_mean: -lambda_c,
                d_cost_var: -0.5 * lambda_c,
            };
        }
        let (g, u) = pbgi_plain_index(mu, sigma, lambda_c);
        let phi_cdf = cdf(u);
        let d_cost_mean = -lambda_c / phi_cdf;
        Partials {
            value: g,
            d_mu: 1.0,
            d_sigma: pdf(u) / phi_cdf,
            d_cost_mean,
            d_cost_var: 0.5 * d_cost_mean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::Pbgi;

    #[test]
    fn agrees_with_the_stable_index_where_the_paper_runs_it() {
        // λ = 1e-4, σ from 1e-6 to 2, costs from 1e-2 to 1e2: roots u from about −4.8 to +1e4.
        let (plain, stable) = (PbgiPlain { lambda: 1e-4 }, Pbgi { lambda: 1e-4 });
        let (mut worst, mut worst_grad) = (0.0f64, 0.0f64);
        for &sigma in &[1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0, 2.0] {
            for &mu in &[-3.0, -0.2, 0.0, 0.7, 5.0] {
                for &m in &[-4.6, 0.0, 4.6] {
                    let cost = LogCost { mean: m, var: 0.0 };
                    let (a, b) = (plain.eval(mu, sigma, cost), stable.eval(mu, sigma, cost));
                    // g to a few ulp of |g| + |μ| plus 1e-12 of the scale of the root.
                    let ulps = 4.0 * f64::EPSILON * (b.value.abs() + mu.abs());
                    let scale = sigma.max(1e-4 * m.exp());
                    let err = (a.value - b.value).abs() / (ulps + 1e-12 * scale);
                    worst = worst.max(err);
                    assert!(err < 1.0, "g: σ {sigma} μ {mu} m {m}: {a:?} {b:?}");
                    // The ratios are taken at u = (μ − g)/σ, which bisection in g knows only to
                    // an ulp of g over σ (the stable index solves for u itself).
                    let u_err = 4.0 * f64::EPSILON * (a.value.abs() + mu.abs() + 1.0) / sigma;
                    let u = (mu - b.value) / sigma;
                    let tol = 1e-12 + u_err * (u.abs() + 2.0);
                    let rel_s = (a.d_sigma - b.d_sigma).abs() / b.d_sigma.abs().max(1.0);
                    let rel_m = (a.d_cost_mean - b.d_cost_mean).abs() / b.d_cost_mean.abs();
                    worst_grad = worst_grad.max(rel_s.max(rel_m) / tol);
                    assert!(rel_s < tol, "∂g/∂σ: σ {sigma} μ {mu} m {m}: {a:?} {b:?}");
                    assert!(rel_m < tol, "∂g/∂m: σ {sigma} μ {mu} m {m}: {a:?} {b:?}");
                }
            }
        }
        eprintln!("worst g error / tolerance {worst:e}; gradient {worst_grad:e}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let p = PbgiPlain { lambda: 0.05 };
        let (mu, sigma, cost) = (
            0.3,
            0.4,
            LogCost {
                mean: 0.2,
                var: 0.1,
            },
        );
        let a = p.eval(mu, sigma, cost);
        let h = 1e-6;
        let fd = |f: &dyn Fn(f64) -> f64, x: f64| (f(x + h) - f(x - h)) / (2.0 * h);
        let ds = fd(&|s| p.eval(mu, s, cost).value, sigma);
        let dm = fd(
            &|m| p.eval(mu, sigma, LogCost { mean: m, var: 0.1 }).value,
            0.2,
        );
        let dv = fd(
            &|v| p.eval(mu, sigma, LogCost { mean: 0.2, var: v }).value,
            0.1,
        );
        let dmu = fd(&|x| p.eval(x, sigma, cost).value, mu);
        assert!((dmu - a.d_mu).abs() < 1e-7, "{dmu} {a:?}");
        assert!((ds - a.d_sigma).abs() < 1e-7, "{ds} {a:?}");
        assert!((dm - a.d_cost_mean).abs() < 1e-7, "{dm} {a:?}");
        assert!((dv - a.d_cost_var).abs() < 1e-7, "{dv} {a:?}");
    }

    #[test]
    fn breaks_down_in_the_far_tail_where_the_stable_index_does_not() {
        // Walk log(λc/σ) down the tail: the plain index keeps g close, but its gradient
        // ratio φ/Φ leaves the stable one (Mills' ratio) once Φ(u) is subnormal or zero.
        let mut first_bad = None;
        for k in 0..200 {
            let log_lc = -10.0 - 5.0 * k as f64;
            let cost = LogCost {
                mean: log_lc,
                var: 0.0,
            };
            let a = PbgiPlain { lambda: 1.0 }.eval(0.0, 1.0, cost);
            let b = Pbgi { lambda: 1.0 }.eval(0.0, 1.0, cost);
            assert!(
                b.d_sigma.is_finite() && b.value.is_finite(),
                "{log_lc}: {b:?}"
            );
            let ok = (a.d_sigma - b.d_sigma).abs() <= 1e-6 * b.d_sigma;
            if !ok && first_bad.is_none() {
                first_bad = Some((log_lc, b.value));
            }
        }
        let (log_lc, g) = first_bad.expect("the plain gradient never broke down");
        // It holds down to λc/σ ≈ e^-700 (u ≈ −37) and no further than the underflow of Φ.
        assert!((-760.0..=-690.0).contains(&log_lc), "{log_lc} (g {g})");
    }

    #[test]
    fn degenerate_and_nan() {
        let p = PbgiPlain { lambda: 0.5 };
        let a = p.eval(1.0, 0.0, LogCost::default());
        assert_eq!((a.value, a.d_sigma), (0.5, 0.0));
        assert!(p.eval(f64::NAN, 1.0, LogCost::default()).value.is_nan());
        assert!(p.eval(0.0, f64::NAN, LogCost::default()).value.is_nan());
    }
}
