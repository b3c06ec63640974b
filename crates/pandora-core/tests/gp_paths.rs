//! Pathwise GP samples: Monte Carlo moments against the kernel and the exact posterior, gradients
//! against finite differences, determinism and input validation.
//!
//! Every Monte Carlo check uses a fixed seed and a tolerance stated in standard errors (or in units
//! of the outputscale σ²), so a wrong spectral density, weight scale or update term fails.

use pandora_core::gp::paths::DEFAULT_NUM_FEATURES;
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind, PosteriorPath, PriorPath};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const KINDS: [KernelKind; 4] = [
    KernelKind::Matern12,
    KernelKind::Matern32,
    KernelKind::Matern52,
    KernelKind::Rbf,
];

/// Kernel used by the prior tests: d = 2, ARD lengthscales, σ² = 1.7.
fn prior_kernel(kind: KernelKind) -> Kernel {
    Kernel::new(kind, vec![0.3, 0.7], 1.7).unwrap()
}

/// Points at scaled distances 0 (twice the same point), 0.5, 1, 2 along the first axis, 1 along the
/// second axis and 1 along a diagonal (0.6ℓ₁, 0.8ℓ₂).
fn prior_points(k: &Kernel) -> Vec<f64> {
    let (l1, l2) = (k.lengthscales[0], k.lengthscales[1]);
    let x0 = [0.2, 0.1];
    let offsets = [
        [0.0, 0.0],
        [0.0, 0.0],
        [0.5 * l1, 0.0],
        [l1, 0.0],
        [2.0 * l1, 0.0],
        [0.0, l2],
        [0.6 * l1, 0.8 * l2],
    ];
    offsets
        .iter()
        .flat_map(|o| [x0[0] + o[0], x0[1] + o[1]])
        .collect()
}

/// Sample mean and (mean-subtracted, 1/(N−1)) covariance of `samples` (N rows of m values).
fn moments(samples: &[Vec<f64>], m: usize) -> (Vec<f64>, Vec<f64>) {
    let n = samples.len() as f64;
    let mut mean = vec![0.0; m];
    for s in samples {
        for (a, v) in mean.iter_mut().zip(s) {
            *a += v / n;
        }
    }
    let mut cov = vec![0.0; m * m];
    for s in samples {
        for a in 0..m {
            for b in 0..m {
                cov[a * m + b] += (s[a] - mean[a]) * (s[b] - mean[b]) / (n - 1.0);
            }
        }
    }
    (mean, cov)
}

#[test]
fn prior_covariance_converges_to_kernel() {
    const N: usize = 4000;
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let k = prior_kernel(kind);
        let s2 = k.outputscale;
        let xs = prior_points(&k);
        let m = xs.len() / 2;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1000 + idx as u64);
        let samples: Vec<Vec<f64>> = (0..N)
            .map(|_| {
                let p = PriorPath::sample(&k, DEFAULT_NUM_FEATURES, &mut rng).unwrap();
                let mut out = vec![0.0; m];
                p.values(&xs, &mut out).unwrap();
                out
            })
            .collect();
        let (mean, cov) = moments(&samples, m);
        // Mean: standard error sqrt(σ²/N) ≈ 0.0206 here; allow 0.08·σ ≈ 4 s.e.
        let max_mean = mean.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(
            max_mean < 0.08 * s2.sqrt(),
            "{kind:?}: prior mean {max_mean} not ≈ 0"
        );
        // Covariance: standard error ≲ σ² sqrt(2/N) ≈ 0.022σ²; allow 0.08σ² (≈ 3.5 s.e.).
        let mut max_err = 0.0f64;
        for a in 0..m {
            for b in 0..m {
                let kab = k.eval(&xs[2 * a..2 * a + 2], &xs[2 * b..2 * b + 2]);
                let err = (cov[a * m + b] - kab).abs();
                max_err = max_err.max(err / s2);
                assert!(
                    err < 0.08 * s2,
                    "{kind:?}: cov[{a},{b}] = {} vs k = {kab}",
                    cov[a * m + b]
                );
            }
        }
        // The two copies of the same point must give identical values on every path.
        assert!(samples.iter().all(|s| s[0] == s[1]));
        println!("{kind:?}: max |mean| = {max_mean:.4}, max |cov − k|/σ² = {max_err:.4}");
    }
}

#[test]
fn single_draw_feature_covariance_approximates_kernel() {
    // One draw of 16384 frequencies: k̂(x, z) = σ² (2/F) Σ_j cos(ω_j·(x − z)) has standard error
    // ≤ σ²/sqrt(16384) ≈ 0.0078σ²; allow 0.04σ² (≈ 5 s.e.). Checks the spectral densities directly.
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let k = prior_kernel(kind);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2000 + idx as u64);
        let p = PriorPath::sample(&k, 32768, &mut rng).unwrap();
        let xs = prior_points(&k);
        let m = xs.len() / 2;
        let mut max_err = 0.0f64;
        for a in 0..m {
            for b in 0..m {
                let (x, z) = (&xs[2 * a..2 * a + 2], &xs[2 * b..2 * b + 2]);
                let err = (p.feature_covariance(x, z) - k.eval(x, z)).abs() / k.outputscale;
                max_err = max_err.max(err);
            }
        }
        println!("{kind:?}: max |k̂ − k|/σ² = {max_err:.4}");
        assert!(
            max_err < 0.04,
            "{kind:?}: feature covariance off by {max_err}σ²"
        );
    }
}

fn model(kind: KernelKind, n: usize, d: usize, noise: f64, seed: u64) -> ExactGp {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| (x[i * d] * 5.0).sin() + x[i * d + d - 1] + 0.1 * rng.random::<f64>())
        .collect();
    let ls: Vec<f64> = (0..d).map(|k| 0.25 + 0.15 * k as f64).collect();
    let params = GpParams {
        kernel: Kernel::new(kind, ls, 1.4).unwrap(),
        mean: 0.3,
        noise,
    };
    ExactGp::new(x, y, params).unwrap()
}

/// Test points: a point near the first training point, inside points, and one outside `[0, 1]²`.
fn posterior_points(gp: &ExactGp) -> Vec<f64> {
    let x0 = &gp.train_x()[..2];
    vec![
        x0[0] + 0.01,
        x0[1] - 0.02,
        0.5,
        0.5,
        0.15,
        0.85,
        0.9,
        0.2,
        1.6,
        -0.4,
    ]
}

/// Compares the moments of `paths` at the test points with the exact posterior, allowing `se_tol`
/// standard errors plus a bias of `bias`·σ² (covariances) or `bias`·σ (means); returns
/// (max mean error in s.e., max covariance error in s.e., max covariance error / σ²).
fn check_posterior_moments(
    gp: &ExactGp,
    paths: &[PosteriorPath],
    se_tol: f64,
    bias: f64,
    abs_tol: f64,
) -> (f64, f64, f64) {
    let xs = posterior_points(gp);
    let m = xs.len() / 2;
    let s2 = gp.params().kernel.outputscale;
    let post = gp.posterior(&xs, false).unwrap();
    let cov = gp.posterior_covariance(&xs).unwrap();
    for a in 0..m {
        assert!((cov[a * m + a] - post.var[a]).abs() < 1e-9 * s2);
    }
    let n = paths.len() as f64;
    let samples: Vec<Vec<f64>> = paths
        .iter()
        .map(|p| {
            let mut out = vec![0.0; m];
            p.values(&xs, &mut out).unwrap();
            out
        })
        .collect();
    // Unbiased estimators with the exact mean μ: mean of f − μ and of (f_a − μ_a)(f_b − μ_b); their
    // standard errors are estimated from the samples (the paths are not exactly Gaussian: the
    // Fourier frequencies are random).
    let (mut worst_mean, mut worst_cov, mut worst_abs) = (0.0f64, 0.0f64, 0.0f64);
    for a in 0..m {
        let r: Vec<f64> = samples.iter().map(|s| s[a] - post.mean[a]).collect();
        let mr = r.iter().sum::<f64>() / n;
        let se = (post.var[a] / n).sqrt();
        let z = mr.abs() / se;
        worst_mean = worst_mean.max(z);
        assert!(
            mr.abs() < se_tol * se + bias * s2.sqrt(),
            "mean at point {a}: path mean − μ = {mr:e}, s.e. {se:e}"
        );
        for b in 0..m {
            let prod: Vec<f64> = samples
                .iter()
                .map(|s| (s[a] - post.mean[a]) * (s[b] - post.mean[b]))
                .collect();
            let c = prod.iter().sum::<f64>() / n;
            let var = prod.iter().map(|p| (p - c) * (p - c)).sum::<f64>() / (n - 1.0);
            let se = (var / n).sqrt().max(1e-12 * s2);
            let err = (c - cov[a * m + b]).abs();
            worst_cov = worst_cov.max(err / se);
            worst_abs = worst_abs.max(err / s2);
            assert!(
                err < se_tol * se + bias * s2,
                "cov[{a},{b}]: paths {c:e} vs exact {:e} (s.e. {se:e})",
                cov[a * m + b]
            );
            assert!(
                err < abs_tol * s2,
                "cov[{a},{b}]: error {err:e} > {abs_tol}σ²"
            );
        }
    }
    (worst_mean, worst_cov, worst_abs)
}

#[test]
fn posterior_paths_match_exact_posterior_moments() {
    const N: usize = 3000;
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let gp = model(kind, 10, 2, 1e-3, 77 + idx as u64);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3000 + idx as u64);
        let paths: Vec<PosteriorPath> = (0..N)
            .map(|_| PosteriorPath::sample(&gp, DEFAULT_NUM_FEATURES, &mut rng).unwrap())
            .collect();
        // 4.5 estimated standard errors per entry, no bias; and the absolute error below 0.08σ².
        let (zm, zc, ac) = check_posterior_moments(&gp, &paths, 4.5, 0.0, 0.08);
        println!("{kind:?}: max mean error {zm:.2} s.e., max cov error {zc:.2} s.e. = {ac:.4}σ²");
    }
}

#[test]
fn posterior_batch_with_shared_frequencies_is_close() {
    // Paths sharing one frequency draw have the posterior moments of the Fourier-feature kernel k̂,
    // not of k: with F = 8192 the entries of k̂ − k have standard deviation ≤ σ²/sqrt(4096) ≈
    // 0.016σ². Allow 4.5 Monte Carlo standard errors plus a bias of 0.05σ² (≈ 3 s.d. of k̂ − k).
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let gp = model(kind, 10, 2, 1e-3, 91 + idx as u64);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4000 + idx as u64);
        let paths = PosteriorPath::sample_batch(&gp, 8192, 2000, &mut rng).unwrap();
        assert_eq!(paths.len(), 2000);
        assert_eq!(
            paths[0].prior().frequencies(),
            paths[1999].prior().frequencies()
        );
        let (_, _, ac) = check_posterior_moments(&gp, &paths, 4.5, 0.05, 0.15);
        println!("{kind:?} (shared frequencies): max cov error {ac:.4}σ²");
    }
}

#[test]
fn posterior_paths_nearly_interpolate_low_noise_data() {
    // With σ_n² = 1e-6, f_post(x_i) − y_i = −ε_i + O(σ_n²) terms: |error| ≲ 5e-3 at 5 s.d.
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let gp = model(kind, 10, 2, 1e-6, 5 + idx as u64);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6000 + idx as u64);
        let p = PosteriorPath::sample(&gp, 256, &mut rng).unwrap();
        let mut out = vec![0.0; gp.n()];
        p.values(gp.train_x(), &mut out).unwrap();
        for (f, y) in out.iter().zip(gp.train_y()) {
            assert!((f - y).abs() < 5e-3, "{kind:?}: path {f} vs y {y}");
        }
    }
}

#[test]
fn empty_model_gives_prior_plus_mean() {
    let params = GpParams {
        kernel: Kernel::new(KernelKind::Matern32, vec![0.5, 0.5], 2.0).unwrap(),
        mean: -0.7,
        noise: 1e-3,
    };
    let gp = ExactGp::new(vec![], vec![], params.clone()).unwrap();
    let post = PosteriorPath::sample(&gp, 64, &mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap();
    let prior = PriorPath::sample(
        &params.kernel,
        64,
        &mut Xoshiro256PlusPlus::seed_from_u64(9),
    )
    .unwrap();
    for x in [[0.1, 0.2], [3.0, -1.0]] {
        assert_eq!(post.value(&x), -0.7 + prior.value(&x));
    }
}

/// Fourth-order central difference of `f` along coordinate `i`.
fn fd4(f: impl Fn(&[f64]) -> f64, x: &[f64], i: usize, h: f64) -> f64 {
    let at = |t: f64| {
        let mut y = x.to_vec();
        y[i] += t;
        f(&y)
    };
    (at(-2.0 * h) - 8.0 * at(-h) + 8.0 * at(h) - at(2.0 * h)) / (12.0 * h)
}

/// Largest |analytic − finite difference| / (1 + |analytic|) over coordinates.
fn grad_error(
    value: impl Fn(&[f64]) -> f64,
    value_grad: impl Fn(&[f64], &mut [f64]) -> f64,
    x: &[f64],
    h: f64,
) -> f64 {
    let mut g = vec![0.0; x.len()];
    let f = value_grad(x, &mut g);
    assert_eq!(f, value(x), "value_grad and value disagree");
    (0..x.len())
        .map(|i| (fd4(&value, x, i, h) - g[i]).abs() / (1.0 + g[i].abs()))
        .fold(0.0, f64::max)
}

#[test]
fn gradients_match_finite_differences() {
    // Fourth-order central differences with h = min(1e-4, 1e-3 / max|ω|): the truncation error of
    // each feature is ~(h|ω|)⁴/30 relative, negligible even for the heavy-tailed (Cauchy-like)
    // Matérn-1/2 frequencies. Tolerance 1e-6 relative to (1 + |∂f|).
    let d = 3;
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let k = Kernel::new(kind, vec![0.4, 0.8, 1.5], 1.2).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7000 + idx as u64);
        let prior = PriorPath::sample(&k, 256, &mut rng).unwrap();
        let x: Vec<f64> = (0..n_train() * d).map(|_| rng.random::<f64>()).collect();
        let y: Vec<f64> = (0..n_train()).map(|_| rng.random::<f64>()).collect();
        let params = GpParams {
            kernel: k.clone(),
            mean: 0.1,
            noise: 1e-3,
        };
        let gp = ExactGp::new(x, y, params).unwrap();
        let post = PosteriorPath::sample(&gp, 256, &mut rng).unwrap();
        let step = |p: &PriorPath| {
            let wmax = p.frequencies().iter().fold(0.0f64, |a, w| a.max(w.abs()));
            (1e-3 / wmax).min(1e-4)
        };
        let (h_prior, h_post) = (step(&prior), step(post.prior()));
        let (mut worst_prior, mut worst_post) = (0.0f64, 0.0f64);
        for _ in 0..20 {
            let q: Vec<f64> = (0..d).map(|_| 1.4 * rng.random::<f64>() - 0.2).collect();
            worst_prior = worst_prior.max(grad_error(
                |x| prior.value(x),
                |x, g| prior.value_grad(x, g),
                &q,
                h_prior,
            ));
            worst_post = worst_post.max(grad_error(
                |x| post.value(x),
                |x, g| post.value_grad(x, g),
                &q,
                h_post,
            ));
        }
        println!(
            "{kind:?}: gradient rel. error prior {worst_prior:.2e}, posterior {worst_post:.2e}"
        );
        assert!(
            worst_prior < 1e-6,
            "{kind:?}: prior gradient error {worst_prior}"
        );
        assert!(
            worst_post < 1e-6,
            "{kind:?}: posterior gradient error {worst_post}"
        );
    }
}

fn n_train() -> usize {
    8
}

#[test]
fn matern12_update_gradient_is_zero_subgradient_at_training_points() {
    // At a training point the Matérn-1/2 update term of that point contributes the symmetric
    // subgradient 0, so the posterior gradient there is the prior path's gradient plus
    // Σ_{i≠0} v_i ∇_x k(x_0, x_i) (computed here with `Kernel::eval_grad_x`).
    let gp = model(KernelKind::Matern12, 6, 2, 1e-3, 3);
    let k = &gp.params().kernel;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let p = PosteriorPath::sample(&gp, 128, &mut rng).unwrap();
    let x0 = gp.train_x()[..2].to_vec();
    let mut g = [0.0; 2];
    let f = p.value_grad(&x0, &mut g);
    assert_eq!(f, p.value(&x0));
    let mut expect = [0.0; 2];
    p.prior().value_grad(&x0, &mut expect);
    for (xi, vi) in gp.train_x().chunks_exact(2).zip(p.update_weights()).skip(1) {
        let mut gi = [0.0; 2];
        k.eval_grad_x(&x0, xi, &mut gi);
        expect[0] += vi * gi[0];
        expect[1] += vi * gi[1];
    }
    for (a, b) in g.iter().zip(&expect) {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn same_seed_same_path_different_seed_different_path() {
    let gp = model(KernelKind::Matern52, 10, 2, 1e-3, 11);
    let xs = posterior_points(&gp);
    let eval = |seed: u64| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let prior = PriorPath::sample(&gp.params().kernel, 128, &mut rng).unwrap();
        let post = PosteriorPath::sample(&gp, 128, &mut rng).unwrap();
        let mut a = vec![0.0; 5];
        let mut b = vec![0.0; 5];
        prior.values(&xs, &mut a).unwrap();
        post.values(&xs, &mut b).unwrap();
        (a, b)
    };
    let (a1, b1) = eval(42);
    let (a2, b2) = eval(42);
    let (a3, b3) = eval(43);
    assert_eq!(a1, a2);
    assert_eq!(b1, b2);
    assert!(a1.iter().zip(&a3).all(|(u, v)| u != v));
    assert!(b1.iter().zip(&b3).all(|(u, v)| u != v));
    // A clone evaluates identically; fresh weights on the same frequencies differ.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let p = PriorPath::sample(&gp.params().kernel, 128, &mut rng).unwrap();
    let c = p.clone();
    let r = p.resample_weights(&mut rng);
    assert_eq!(p.frequencies(), r.frequencies());
    assert_eq!(p.value(&[0.3, 0.3]), c.value(&[0.3, 0.3]));
    assert_ne!(p.value(&[0.3, 0.3]), r.value(&[0.3, 0.3]));
}

#[test]
fn invalid_input_is_an_error() {
    let gp = model(KernelKind::Rbf, 5, 2, 1e-3, 1);
    let k = gp.params().kernel.clone();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for f in [0, 1, 5, 1025] {
        assert!(PriorPath::sample(&k, f, &mut rng).is_err());
        assert!(PosteriorPath::sample(&gp, f, &mut rng).is_err());
        assert!(PosteriorPath::sample_batch(&gp, f, 3, &mut rng).is_err());
    }
    let p = PosteriorPath::sample(&gp, 64, &mut rng).unwrap();
    let mut out = vec![0.0; 2];
    // Not a whole number of rows / wrong output length.
    assert!(p.values(&[0.1, 0.2, 0.3], &mut out).is_err());
    assert!(p.values(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &mut out).is_err());
    assert!(p.prior().values(&[0.1, 0.2, 0.3], &mut out).is_err());
    // Single-point evaluation with the wrong length reports NaN rather than panicking.
    assert!(p.value(&[0.1]).is_nan());
    let mut g = vec![0.0; 2];
    assert!(p.value_grad(&[0.1, 0.2, 0.3], &mut g).is_nan());
    let mut g3 = vec![0.0; 3];
    assert!(p.value_grad(&[0.1, 0.2], &mut g3).is_nan());
    // A prior path of another dimension cannot be conditioned on this model.
    let k3 = Kernel::new(KernelKind::Rbf, vec![1.0; 3], 1.0).unwrap();
    let p3 = PriorPath::sample(&k3, 16, &mut rng).unwrap();
    assert!(PosteriorPath::from_prior(&gp, p3, &mut rng).is_err());
    // ... nor one drawn for other hyperparameters; one for the model's own kernel can.
    let mut k2 = k.clone();
    k2.lengthscales[0] *= 2.0;
    let p2 = PriorPath::sample(&k2, 16, &mut rng).unwrap();
    assert!(PosteriorPath::from_prior(&gp, p2, &mut rng).is_err());
    let own = PriorPath::sample(&k, 16, &mut rng).unwrap();
    assert_eq!(own.kernel(), &k);
    assert!(PosteriorPath::from_prior(&gp, own, &mut rng).is_ok());
}

/// `sample_batch` computes the training points' features once but draws exactly the paths of
/// `PriorPath::sample` → `resample_weights` → `from_prior`, and `values_many` evaluates many
/// paths at once (shared features, or path by path) as `value` does, to rounding.
#[test]
fn batched_sampling_and_evaluation_match_the_path_by_path_versions() {
    for (idx, kind) in KINDS.into_iter().enumerate() {
        let gp = model(kind, 12, 3, 1e-4, 70 + idx as u64);
        let mut r1 = Xoshiro256PlusPlus::seed_from_u64(900 + idx as u64);
        let batch = PosteriorPath::sample_batch(&gp, 256, 5, &mut r1).unwrap();
        let mut r2 = Xoshiro256PlusPlus::seed_from_u64(900 + idx as u64);
        let first = PriorPath::sample(&gp.params().kernel, 256, &mut r2).unwrap();
        let mut manual = Vec::new();
        for i in 0..5 {
            let prior = if i == 0 {
                first.clone()
            } else {
                first.resample_weights(&mut r2)
            };
            manual.push(PosteriorPath::from_prior(&gp, prior, &mut r2).unwrap());
        }
        let mut pr = Xoshiro256PlusPlus::seed_from_u64(5);
        let xs: Vec<f64> = (0..40 * 3).map(|_| pr.random::<f64>()).collect();
        for (b, m) in batch.iter().zip(&manual) {
            assert_eq!(b.update_weights(), m.update_weights(), "{kind:?}");
        }
        let shared = PosteriorPath::values_many(&batch, &xs).unwrap();
        // Independent draws (no shared frequencies) take the path-by-path branch.
        let own: Vec<PosteriorPath> = (0..3)
            .map(|_| PosteriorPath::sample(&gp, 64, &mut pr).unwrap())
            .collect();
        let separate = PosteriorPath::values_many(&own, &xs).unwrap();
        for (paths, vals) in [(&batch, &shared), (&own, &separate)] {
            assert_eq!(vals.len(), paths.len() * 40);
            for (i, p) in paths.iter().enumerate() {
                for (j, x) in xs.chunks_exact(3).enumerate() {
                    let v = p.value(x);
                    assert!(
                        (vals[i * 40 + j] - v).abs() <= 1e-12 * (1.0 + v.abs()),
                        "{kind:?} path {i} point {j}: {} vs {v}",
                        vals[i * 40 + j]
                    );
                }
            }
        }
        assert!(PosteriorPath::values_many(&batch, &xs[..7]).is_err());
        assert!(PosteriorPath::values_many(&[], &xs).unwrap().is_empty());
    }
}
