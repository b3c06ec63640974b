//! Thompson sampling: maximize one pathwise sample of the posterior (random Fourier features
//! for the prior plus Matheron's update, see [`crate::gp::paths`]).
//!
//! ## Step
//!
//! [`ThompsonSampling`] draws one path of the objective posterior (with the pending points'
//! fantasies) with `ts_features` features, seeded by `seed ^ 0x7473`, and maximizes it over the
//! step's domain with the step's multi-start options. It ignores costs ([`Needs::Objective`]: no
//! cost model is fitted and no cost is predicted) and refuses a variable-amplitude model, whose
//! prior the stationary features do not sample.

use super::acquirer::{Acquired, Acquirer, Needs, StepInputs};
use crate::error::Result;
use crate::gp::ExactGp;
use crate::gp::paths::PosteriorPath;
use crate::optim::domain::maximize_in;
use crate::optim::multistart::Objective;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// One posterior sample path as a differentiable objective (maximize it with
/// [`crate::optim::multistart::maximize`], or over a finite set with `maximize_discrete`).
#[derive(Debug, Clone)]
pub struct ThompsonSample {
    /// The sampled path.
    pub path: PosteriorPath,
}

impl ThompsonSample {
    /// Draws a sample path of `gp` with `num_features` random Fourier features (BoTorch's
    /// default is 1024), seeded.
    pub fn draw(gp: &ExactGp, num_features: usize, seed: u64) -> Result<Self> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Ok(Self {
            path: PosteriorPath::sample(gp, num_features, &mut rng)?,
        })
    }
}

impl Objective for ThompsonSample {
    fn dim(&self) -> usize {
        self.path.dim()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.path.value_grad(x, grad)
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        if self.path.values(xs, out).is_err() {
            out.fill(f64::NAN);
        }
    }
}

/// The `ts` acquisition's step (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ThompsonSampling;

impl Acquirer for ThompsonSampling {
    fn needs(&self) -> Needs {
        Needs::Objective
    }

    fn supports_output_scale(&self) -> bool {
        false
    }

    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        let model = s.model()?;
        let ts = ThompsonSample::draw(model.inner(), s.ts_features, s.seed ^ 0x7473)?;
        let r = maximize_in(&ts, s.d, s.domain, s.ms, s.seed)?;
        Ok(Acquired::point(r.x, r.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::{GpParams, Kernel, KernelKind};
    use crate::optim::multistart::{MultiStartOptions, maximize, maximize_discrete};

    #[test]
    fn thompson_sample_is_maximized_and_deterministic() {
        let x = vec![0.1, 0.2, 0.5, 0.9, 0.8, 0.4, 0.3, 0.7];
        let y = vec![0.0, 1.0, 0.5, -0.3];
        let gp = ExactGp::new(
            x,
            y,
            GpParams {
                kernel: Kernel::new(KernelKind::Matern52, vec![0.3, 0.3], 1.0).unwrap(),
                mean: 0.0,
                noise: 1e-4,
            },
        )
        .unwrap();
        let a = ThompsonSample::draw(&gp, 1024, 3).unwrap();
        let b = ThompsonSample::draw(&gp, 1024, 3).unwrap();
        let q = [0.4, 0.6];
        let mut g = [0.0; 2];
        assert_eq!(a.value_grad(&q, &mut g), b.value_grad(&q, &mut g));
        let best = maximize(&a, &MultiStartOptions::default(), 0).unwrap();
        // A 101 × 101 grid never beats the multi-start maximum by more than rounding.
        let grid: Vec<f64> = (0..=100)
            .flat_map(|i| (0..=100).flat_map(move |j| [i as f64 / 100.0, j as f64 / 100.0]))
            .collect();
        let (_, gbest) = maximize_discrete(&a, &grid).unwrap();
        assert!(best.value >= gbest - 1e-9, "{} < {gbest}", best.value);
    }
}
