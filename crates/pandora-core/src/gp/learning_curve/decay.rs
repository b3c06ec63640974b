//! The exponential-decay kernel of Swersky, Snoek & Adams (2014) over training steps,
//!
//! ```text
//! k(t, t') = σ_r² · β^α / (t + t' + β)^α = σ_r² · ∫₀^∞ e^{−λt} e^{−λt'} Gamma(λ; α, β) dλ,
//! ```
//!
//! an infinite mixture of exponential decays whose rates follow a Gamma(α, β) (shape, rate)
//! law. With `s = t + t'` and `k = σ_r² exp(α·log(β/(s + β)))`, its log-hyperparameter
//! derivatives are
//!
//! - `∂k/∂log σ_r² = k`,
//! - `∂k/∂log α = α · log(β/(s + β)) · k`,
//! - `∂k/∂log β = α · s/(s + β) · k`.
//!
//! The variance `k(t, t) = σ_r² (β/(2t + β))^α` decays to 0 as `t → ∞`: every sample path
//! converges to 0, so a curve `f(x) + r(t)` converges to its asymptote `f(x)`.

use crate::error::{Error, Result};

/// The exponential-decay kernel `σ_r² β^α / (t + t' + β)^α` (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayKernel {
    /// Output scale `σ_r²`: the prior variance of the decaying part at `t = 0`.
    pub outputscale: f64,
    /// Shape `α > 0` of the Gamma law of decay rates.
    pub alpha: f64,
    /// Rate `β > 0` of the Gamma law of decay rates (in the units of the steps).
    pub beta: f64,
}

impl DecayKernel {
    /// Creates a kernel, checking that every hyperparameter is finite and positive.
    pub fn new(outputscale: f64, alpha: f64, beta: f64) -> Result<Self> {
        for (name, v) in [
            ("decay.outputscale", outputscale),
            ("decay.alpha", alpha),
            ("decay.beta", beta),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    name,
                    format!("must be finite and > 0, got {v}"),
                ));
            }
        }
        Ok(Self {
            outputscale,
            alpha,
            beta,
        })
    }

    /// `k(t, t')`.
    #[inline]
    pub fn eval(&self, t: f64, u: f64) -> f64 {
        let s = t + u;
        self.outputscale * (-self.alpha * (s / self.beta).ln_1p()).exp()
    }

    /// `k(t, t')` and its gradient with respect to `(log σ_r², log α, log β)`.
    #[inline]
    pub fn eval_grad(&self, t: f64, u: f64) -> (f64, [f64; 3]) {
        let s = t + u;
        // log(β/(s + β)) = −log1p(s/β), accurate for s ≪ β.
        let l = -(s / self.beta).ln_1p();
        let k = self.outputscale * (self.alpha * l).exp();
        (
            k,
            [k, self.alpha * l * k, self.alpha * s / (s + self.beta) * k],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_matches_the_closed_form_and_the_gamma_mixture() {
        let k = DecayKernel::new(1.7, 1.3, 4.0).unwrap();
        let (t, u) = (2.0, 5.0);
        let direct = 1.7 * 4f64.powf(1.3) / (t + u + 4.0f64).powf(1.3);
        assert!((k.eval(t, u) - direct).abs() < 1e-14 * direct);
        // Mixture: ∫ e^{−λ(t+u)} Gamma(λ; α, β) dλ by the trapezoid rule on a fine grid.
        let (a, b) = (1.3f64, 4.0f64);
        let norm = b.powf(a) / statrs_gamma(a);
        let h: f64 = 1e-4;
        let mut s = 0.0;
        let mut lam = h;
        while lam < 40.0 {
            s += lam.powf(a - 1.0) * (-lam * (b + t + u)).exp();
            lam += h;
        }
        let mixture = 1.7 * norm * s * h;
        assert!(
            (mixture - direct).abs() < 1e-3 * direct,
            "{mixture} vs {direct}"
        );
    }

    /// Γ(a) for `a ∈ (1, 2)` from the Lanczos approximation (g = 7), enough for the check above.
    fn statrs_gamma(a: f64) -> f64 {
        const C: [f64; 9] = [
            0.999_999_999_999_809_9,
            676.520_368_121_885_1,
            -1_259.139_216_722_402_8,
            771.323_428_777_653_1,
            -176.615_029_162_140_6,
            12.507_343_278_686_905,
            -0.138_571_095_265_720_12,
            9.984_369_578_019_572e-6,
            1.505_632_735_149_311_6e-7,
        ];
        let x = a - 1.0;
        let mut s = C[0];
        for (i, c) in C.iter().enumerate().skip(1) {
            s += c / (x + i as f64);
        }
        let t = x + 7.5;
        (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * s
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let k = DecayKernel::new(0.8, 2.1, 3.5).unwrap();
        let (_, g) = k.eval_grad(1.0, 7.0);
        let theta = [0.8f64.ln(), 2.1f64.ln(), 3.5f64.ln()];
        for p in 0..3 {
            let h = 1e-6;
            let at = |d: f64| {
                let mut t = theta;
                t[p] += d;
                DecayKernel::new(t[0].exp(), t[1].exp(), t[2].exp())
                    .unwrap()
                    .eval(1.0, 7.0)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (fd - g[p]).abs() < 1e-8 * (1.0 + fd.abs()),
                "{p}: {fd} vs {}",
                g[p]
            );
        }
    }

    #[test]
    fn variance_decays_to_zero_and_bad_values_are_rejected() {
        let k = DecayKernel::new(1.0, 1.0, 1.0).unwrap();
        assert!(k.eval(1e9, 1e9) < 1e-9);
        assert_eq!(k.eval(0.0, 0.0), 1.0);
        assert!(DecayKernel::new(0.0, 1.0, 1.0).is_err());
        assert!(DecayKernel::new(1.0, f64::NAN, 1.0).is_err());
        assert!(DecayKernel::new(1.0, 1.0, -2.0).is_err());
    }
}
