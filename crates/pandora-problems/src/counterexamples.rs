//! The 1-D counterexamples of the PBGI paper (Figures 2 and 9): a GP sample whose prior variance
//! is a narrow bump at `x = ½`, paired with the [`Bump`] cost that is expensive exactly there.
//!
//! With `b(x) = exp(−(x − ½)²/(2σ_b²))` (`σ_b ≈ 3.2951e-4`, see [`Bump`]) and `ε = 0.1`, the
//! amplitude (prior variance) is
//!
//! - `hard_for_eipc`: `a(x) = b(x)(1 − ε²) + ε²` (0.01 far away, 1 at ½);
//! - `hard_for_ei`: `a(x) = b(x)(1 − (1 − ε)²) + (1 − ε)²` (0.81 far away, 1 at ½).
//!
//! The prior is `k(x, x') = sqrt(a(x) a(x')) k_M52(x, x')` with ℓ = 1e-4, i.e. `f = sqrt(a)·g` with
//! `g ~ GP(0, k_M52)`. **Fix of the reference code:** the reference multiplies the sample by `a(x)`
//! (so its variance is `a²`) while its GP model uses the kernel above (variance `a`); here the
//! objective is `f(x) = sqrt(a(x))·g(x)`, an exact sample of the prior the model assumes. The
//! reference behaviour is available with the option `amplitude = "linear"`.
//!
//! `g` is a 1024-feature RFF path ([`PriorPath`]; the reference used BoTorch's older 1280-feature
//! sampler). The maximum is searched over the whole of `[0,1]` (the reference searched only
//! `[0.45, 0.55]`, which can miss the maximum of `hard_for_ei`, whose amplitude is 0.81 outside
//! the bump): a grid with spacing ℓ/4, then L-BFGS-B around the 32 best grid points.

use pandora_core::gp::{Kernel, KernelKind, OutputScale, PriorPath};
use pandora_core::optim::{LbfgsbOptions, minimize};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::costs::Bump;
use crate::error::ProblemError;

/// Which counterexample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Figure 2: hard for EI per unit cost.
    HardForEipc,
    /// Figure 9: hard for EI.
    HardForEi,
}

/// How the sample is scaled by the amplitude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmplitudeScaling {
    /// `f = sqrt(a)·g` (consistent with the kernel; the default).
    Sqrt,
    /// `f = a·g` (the reference code's mismatch, for reproduction).
    Linear,
}

/// `s(x)` and `s'(x)` for the amplitude `a(x) = b(x)(1 − m) + m` (floor `m`) and a scaling.
fn amplitude_scale(bump: &Bump, m: f64, scaling: AmplitudeScaling, x: f64) -> (f64, f64) {
    let b = bump.bump(x);
    let a = b * (1.0 - m) + m;
    let da = b * (1.0 - m) * (-(x - 0.5) / (bump.sigma * bump.sigma));
    match scaling {
        AmplitudeScaling::Sqrt => {
            let s = a.sqrt();
            (s, da / (2.0 * s))
        }
        AmplitudeScaling::Linear => (a, da),
    }
}

/// Lengthscale of the Matérn-5/2 kernel.
pub const LENGTHSCALE: f64 = 1e-4;

/// A counterexample instance.
#[derive(Debug, Clone)]
pub struct Counterexample {
    variant: Variant,
    scaling: AmplitudeScaling,
    bump: Bump,
    g: PriorPath,
    optimum: f64,
    argmax: f64,
}

impl Counterexample {
    /// Draws `g` from `seed` (`num_features` RFF features) and finds the maximum.
    pub fn new(
        variant: Variant,
        scaling: AmplitudeScaling,
        num_features: usize,
        seed: u64,
    ) -> Result<Self, ProblemError> {
        let kernel = Kernel::new(KernelKind::Matern52, vec![LENGTHSCALE], 1.0)
            .map_err(|e| ProblemError(e.to_string()))?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let g = PriorPath::sample(&kernel, num_features, &mut rng)
            .map_err(|e| ProblemError(format!("counterexample: {e}")))?;
        let mut s = Self {
            variant,
            scaling,
            bump: Bump::default(),
            g,
            optimum: f64::NAN,
            argmax: f64::NAN,
        };
        s.search_optimum()?;
        Ok(s)
    }

    fn floor(&self) -> f64 {
        let e = self.bump.eps;
        match self.variant {
            Variant::HardForEipc => e * e,
            Variant::HardForEi => (1.0 - e) * (1.0 - e),
        }
    }

    /// The amplitude `a(x)` (the prior variance of the objective at `x`).
    pub fn amplitude(&self, x: f64) -> f64 {
        let m = self.floor();
        self.bump.bump(x) * (1.0 - m) + m
    }

    /// The prior variance of the objective at `x`: `a(x)` with the default scaling (`a(x)²` with
    /// the reference's linear scaling).
    pub fn prior_variance(&self, x: f64) -> f64 {
        match self.scaling {
            AmplitudeScaling::Sqrt => self.amplitude(x),
            AmplitudeScaling::Linear => self.amplitude(x).powi(2),
        }
    }

    /// The multiplier `s(x)` with `f = s·g`, and `s'(x)`.
    fn scale(&self, x: f64) -> (f64, f64) {
        amplitude_scale(&self.bump, self.floor(), self.scaling, x)
    }

    /// The known amplitude `s(x)` of the objective (`f = s·g`, `g` stationary) as a model's
    /// [`OutputScale`]: a GP model with it has exactly the prior the objective was drawn from
    /// (the paper's variable-amplitude kernel `sqrt(a(x) a(x')) k_M52(x, x')` with the default
    /// scaling; with `amplitude = "linear"` the model knows the reference's `a(x)` scaling).
    pub fn output_scale(&self) -> OutputScale {
        let (bump, floor, scaling) = (self.bump, self.floor(), self.scaling);
        OutputScale::new(move |x: &[f64], g: &mut [f64]| {
            let (s, ds) = amplitude_scale(&bump, floor, scaling, x[0]);
            g[0] = ds;
            s
        })
    }

    /// The objective `f(x) = s(x)·g(x)`.
    pub fn eval(&self, x: f64) -> f64 {
        self.scale(x).0 * self.g.value(&[x])
    }

    /// `f(x)` and `f'(x)`.
    pub fn eval_grad(&self, x: f64) -> (f64, f64) {
        let mut dg = [0.0];
        let g = self.g.value_grad(&[x], &mut dg);
        let (s, ds) = self.scale(x);
        (s * g, ds * g + s * dg[0])
    }

    /// The bump cost of this problem.
    pub fn cost(&self) -> Bump {
        self.bump
    }

    /// The maximum found.
    pub fn optimum(&self) -> f64 {
        self.optimum
    }

    /// Where the maximum is.
    pub fn argmax(&self) -> f64 {
        self.argmax
    }

    fn search_optimum(&mut self) -> Result<(), ProblemError> {
        let h = LENGTHSCALE / 4.0;
        let n = (1.0 / h).round() as usize + 1;
        let vals: Vec<f64> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| self.eval((i as f64 * h).min(1.0)))
            .collect();
        let mut idx: Vec<usize> = (0..n).filter(|&i| vals[i].is_finite()).collect();
        if idx.is_empty() {
            return Err(ProblemError(
                "counterexample: objective is not finite".into(),
            ));
        }
        idx.sort_by(|&a, &b| vals[b].total_cmp(&vals[a]));
        let mut best = (idx[0] as f64 * h, vals[idx[0]]);
        let opts = LbfgsbOptions {
            pgtol: 1e-10,
            ..Default::default()
        };
        for &i in idx.iter().take(32) {
            let x0 = (i as f64 * h).min(1.0);
            let mut x = [x0];
            let lo = [(x0 - h).max(0.0)];
            let hi = [(x0 + h).min(1.0)];
            let r = minimize(
                |x, g| {
                    let (f, df) = self.eval_grad(x[0]);
                    g[0] = -df;
                    -f
                },
                &mut x,
                &lo,
                &hi,
                &opts,
            )
            .map_err(|e| ProblemError(format!("counterexample optimum search: {e}")))?;
            if -r.f > best.1 {
                best = (x[0], -r.f);
            }
        }
        self.argmax = best.0;
        self.optimum = self.eval(best.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn amplitudes_and_cost_have_the_papers_ranges() {
        let a = Counterexample::new(Variant::HardForEipc, AmplitudeScaling::Sqrt, 64, 0).unwrap();
        assert!((a.amplitude(0.5) - 1.0).abs() < 1e-15);
        assert!((a.amplitude(0.0) - 0.01).abs() < 1e-15);
        let b = Counterexample::new(Variant::HardForEi, AmplitudeScaling::Sqrt, 64, 0).unwrap();
        assert!((b.amplitude(0.9) - 0.81).abs() < 1e-15);
        use crate::costs::CostFn;
        assert!((a.cost().cost(&[0.5]) - 10.0).abs() < 1e-12);
    }

    /// The model's output scale is `sqrt(prior variance)` (both scalings), with the derivative.
    #[test]
    fn output_scale_is_the_prior_standard_deviation_with_its_derivative() {
        for scaling in [AmplitudeScaling::Sqrt, AmplitudeScaling::Linear] {
            for variant in [Variant::HardForEipc, Variant::HardForEi] {
                let c = Counterexample::new(variant, scaling, 16, 1).unwrap();
                let sc = c.output_scale();
                for x in [0.0, 0.4995, 0.4999, 0.5, 0.50013, 0.7] {
                    let mut g = [0.0];
                    let s = sc.eval(&[x], &mut g).unwrap();
                    assert!((s * s - c.prior_variance(x)).abs() < 1e-14, "{x}");
                    let h = 1e-9;
                    let mut gg = [0.0];
                    let fd = (sc.eval(&[x + h], &mut gg).unwrap()
                        - sc.eval(&[x - h], &mut gg).unwrap())
                        / (2.0 * h);
                    assert!(
                        (fd - g[0]).abs() < 1e-4 * (1.0 + fd.abs()),
                        "{x}: {fd} vs {}",
                        g[0]
                    );
                }
            }
        }
    }

    /// The fix: the objective's variance over seeds is `a(x)`, the kernel's variance (the
    /// reference's linear scaling gives `a(x)²`, 0.0001 instead of 0.01 far from the bump).
    #[test]
    fn objective_variance_matches_the_kernel_variance() {
        let n = 4000;
        for (x, want) in [(0.5, 1.0), (0.2, 0.01)] {
            let mut s2 = 0.0;
            let mut s4 = 0.0;
            for seed in 0..n {
                let kernel = Kernel::new(KernelKind::Matern52, vec![LENGTHSCALE], 1.0).unwrap();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                let g = PriorPath::sample(&kernel, 64, &mut rng).unwrap();
                let c = Counterexample {
                    variant: Variant::HardForEipc,
                    scaling: AmplitudeScaling::Sqrt,
                    bump: Bump::default(),
                    g,
                    optimum: 0.0,
                    argmax: 0.0,
                };
                let f = c.eval(x);
                s2 += f * f;
                s4 += f.powi(4);
                assert_eq!(c.prior_variance(x), c.amplitude(x));
            }
            let m = s2 / n as f64;
            let se = ((s4 / n as f64 - m * m) / n as f64).sqrt();
            assert!(
                (m - want).abs() < 5.0 * se,
                "x={x}: {m} vs {want} (se {se})"
            );
        }
    }

    #[test]
    fn optimum_beats_random_points_and_gradient_is_right() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for (variant, scaling) in [
            (Variant::HardForEipc, AmplitudeScaling::Sqrt),
            (Variant::HardForEi, AmplitudeScaling::Sqrt),
            (Variant::HardForEipc, AmplitudeScaling::Linear),
        ] {
            {
                let c = Counterexample::new(variant, scaling, 1024, 1).unwrap();
                assert!((c.eval(c.argmax()) - c.optimum()).abs() < 1e-15);
                for _ in 0..10_000 {
                    let x: f64 = rng.random();
                    assert!(c.eval(x) <= c.optimum() + 1e-9);
                }
                // Dense check near the bump, where the structure is finest.
                // (spacing 2e-6 = ℓ/50, finer than the search grid).
                for k in 0..=10_000 {
                    let x = 0.49 + 0.02 * k as f64 / 10_000.0;
                    assert!(c.eval(x) <= c.optimum() + 1e-9);
                }
                for k in 0..50 {
                    let x = 0.4985 + 3e-5 * k as f64;
                    let (_, df) = c.eval_grad(x);
                    let h = 1e-9;
                    let fd = (c.eval(x + h) - c.eval(x - h)) / (2.0 * h);
                    assert!((fd - df).abs() < 1e-5 * df.abs().max(1e3), "{fd} vs {df}");
                }
            }
        }
    }
}
