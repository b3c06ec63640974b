//! Bayesian-regret objectives: one sample path of a zero-mean GP prior on `[0,1]^d`.
//!
//! The path is `f(x) = sqrt(σ² · 2/F) Σ_j [w_j cos(ω_j·x) + w'_j sin(ω_j·x)]` with `F = 1024`
//! random Fourier features (512 frequencies × {cos, sin}) for an isotropic Matérn-1/2, 3/2, 5/2 or
//! RBF kernel ([`pandora_core::gp::PriorPath`], BoTorch 0.9's construction), drawn from a
//! Xoshiro256++ generator seeded with the instance seed. Its maximum is found once, at
//! construction, by multi-start L-BFGS-B ([`pandora_core::optim::maximize`]: scrambled Sobol
//! screening of `1024·d` points, `10·d` restarts by default).

use pandora_core::gp::{Kernel, KernelKind, PriorPath};
use pandora_core::optim::multistart::{MultiStartOptions, Objective, maximize};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::ProblemError;

/// Settings of a GP prior sample.
#[derive(Debug, Clone, PartialEq)]
pub struct GpSampleSpec {
    /// Dimension `d`.
    pub dim: usize,
    /// Kernel shape.
    pub kernel: KernelKind,
    /// Isotropic lengthscale ℓ.
    pub lengthscale: f64,
    /// Outputscale (prior variance) σ², 1 in the papers.
    pub outputscale: f64,
    /// Number of random Fourier features `F` (even), 1024 in the papers.
    pub num_features: usize,
    /// Sobol points screened by the optimum search (default `1024·d`).
    pub raw_samples: Option<usize>,
    /// L-BFGS-B restarts of the optimum search (default `10·d`).
    pub restarts: Option<usize>,
}

impl GpSampleSpec {
    /// Defaults of the papers: Matérn-5/2, ℓ = 0.1, σ² = 1, 1024 features.
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            kernel: KernelKind::Matern52,
            lengthscale: 0.1,
            outputscale: 1.0,
            num_features: 1024,
            raw_samples: None,
            restarts: None,
        }
    }

    /// The kernel the sample is drawn from.
    pub fn kernel(&self) -> Result<Kernel, ProblemError> {
        Kernel::new(
            self.kernel,
            vec![self.lengthscale; self.dim],
            self.outputscale,
        )
        .map_err(|e| ProblemError(format!("gp_sample: {e}")))
    }

    /// Draws the path for `seed` (no optimum search).
    pub fn path(&self, seed: u64) -> Result<PriorPath, ProblemError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        PriorPath::sample(&self.kernel()?, self.num_features, &mut rng)
            .map_err(|e| ProblemError(format!("gp_sample: {e}")))
    }
}

/// [`Objective`] adapter for a path.
struct PathObjective<'a>(&'a PriorPath);

impl Objective for PathObjective<'_> {
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

/// A GP prior sample with its maximum.
#[derive(Debug, Clone)]
pub struct GpSample {
    path: PriorPath,
    optimum: f64,
    argmax: Vec<f64>,
}

impl GpSample {
    /// Draws the sample for `seed` and maximizes it.
    pub fn new(spec: &GpSampleSpec, seed: u64) -> Result<Self, ProblemError> {
        let path = spec.path(seed)?;
        let d = spec.dim;
        let opts = MultiStartOptions {
            raw_samples: Some(spec.raw_samples.unwrap_or(1024 * d)),
            num_restarts: Some(spec.restarts.unwrap_or(10 * d)),
            ..Default::default()
        };
        let r = maximize(&PathObjective(&path), &opts, seed ^ 0x9e37_79b9_7f4a_7c15)
            .map_err(|e| ProblemError(format!("gp_sample optimum search: {e}")))?;
        Ok(Self {
            path,
            optimum: r.value,
            argmax: r.x,
        })
    }

    /// The sample path.
    pub fn path(&self) -> &PriorPath {
        &self.path
    }

    /// The maximum found by the search.
    pub fn optimum(&self) -> f64 {
        self.optimum
    }

    /// Where the maximum is.
    pub fn argmax(&self) -> &[f64] {
        &self.argmax
    }

    /// `f(x)`.
    pub fn eval(&self, x: &[f64]) -> f64 {
        self.path.value(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    /// Over independent seeds, `E[f(x) f(z)] = k(x, z)` exactly (both frequencies and weights are
    /// redrawn). With `n` samples the standard error of the product mean is estimated from the
    /// samples; the test allows 5 standard errors (a false failure has probability < 1e-6 per
    /// pair), which for n = 3000 is about ±0.1 in covariance — far tighter than the gap between
    /// kernels at the chosen distances (e.g. Matérn-1/2 vs RBF at r = ℓ: 0.37 vs 0.61).
    #[test]
    fn empirical_covariance_over_seeds_matches_the_kernel() {
        let n = 3000;
        for kind in [
            KernelKind::Matern12,
            KernelKind::Matern32,
            KernelKind::Matern52,
            KernelKind::Rbf,
        ] {
            let mut spec = GpSampleSpec::new(2);
            spec.kernel = kind;
            spec.lengthscale = 0.2;
            let kernel = spec.kernel().unwrap();
            let x0 = [0.3, 0.4];
            let others = [[0.3, 0.4], [0.5, 0.4], [0.3 + 0.12, 0.4 + 0.16], [0.9, 0.1]];
            let mut prods = vec![Vec::with_capacity(n); others.len()];
            for seed in 0..n as u64 {
                let p = spec.path(seed).unwrap();
                let f0 = p.value(&x0);
                for (k, z) in others.iter().enumerate() {
                    prods[k].push(f0 * p.value(z));
                }
            }
            for (k, z) in others.iter().enumerate() {
                let m = prods[k].iter().sum::<f64>() / n as f64;
                let var = prods[k].iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
                let se = (var / n as f64).sqrt();
                let want = kernel.eval(&x0, z);
                assert!(
                    (m - want).abs() < 5.0 * se,
                    "{kind:?} z={z:?}: empirical {m} vs kernel {want} (se {se})"
                );
            }
        }
    }

    #[test]
    fn the_optimum_beats_many_random_points() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for (d, kind, l) in [
            (1, KernelKind::Matern52, 0.1),
            (2, KernelKind::Matern32, 0.2),
            (3, KernelKind::Rbf, 0.3),
        ] {
            let mut spec = GpSampleSpec::new(d);
            spec.kernel = kind;
            spec.lengthscale = l;
            for seed in 0..2 {
                let s = GpSample::new(&spec, seed).unwrap();
                assert!((s.eval(s.argmax()) - s.optimum()).abs() < 1e-12);
                assert!(s.argmax().iter().all(|v| (0.0..=1.0).contains(v)));
                for _ in 0..10_000 {
                    let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
                    assert!(s.eval(&x) <= s.optimum() + 1e-9, "d={d} seed={seed}");
                }
            }
        }
    }

    /// The exported parts (frequencies, scaled cosine and sine weights) rebuild the path exactly:
    /// what `examples/export_gp_sample.rs` writes for another library to evaluate.
    #[test]
    fn frequencies_and_weights_rebuild_the_path() {
        let d = 3;
        let s = GpSample::new(&GpSampleSpec::new(d), 5).unwrap();
        let p = s.path();
        assert_eq!(p.cos_weights().len(), p.num_features() / 2);
        assert_eq!(p.sin_weights().len(), p.num_features() / 2);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for _ in 0..20 {
            let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
            let mut f = 0.0;
            for ((w, a), b) in p
                .frequencies()
                .chunks_exact(d)
                .zip(p.cos_weights())
                .zip(p.sin_weights())
            {
                let z: f64 = w.iter().zip(&x).map(|(wk, xk)| wk * xk).sum();
                f += a * z.cos() + b * z.sin();
            }
            assert!((f - s.eval(&x)).abs() < 1e-12, "{f} vs {}", s.eval(&x));
        }
    }

    #[test]
    fn same_seed_same_function() {
        let spec = GpSampleSpec::new(4);
        let a = spec.path(5).unwrap();
        let b = spec.path(5).unwrap();
        let c = spec.path(6).unwrap();
        let x = [0.1, 0.2, 0.3, 0.4];
        assert_eq!(a.value(&x), b.value(&x));
        assert_ne!(a.value(&x), c.value(&x));
    }
}
