//! Hyperparameter fitting: recovery of known lengthscales on data drawn from a GP, agreement of the
//! optimum with the gradient (stationarity), warm starts and determinism.

use pandora_core::gp::fit::{FitOptions, NoiseSpec, Priors, fit, fit_warm, fit_warm_or_keep};
use pandora_core::gp::likelihood::log_marginal_likelihood;
use pandora_core::gp::model::kernel_matrix;
use pandora_core::gp::{Kernel, KernelKind};
use pandora_core::linalg::{Cholesky, JitterPolicy};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Draws `n` points uniformly in [0,1]^d and a GP sample at them (plus noise).
fn gp_sample(kernel: &Kernel, n: usize, noise: f64, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let d = kernel.dim();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
    let k = kernel_matrix(kernel, &x, noise);
    let chol = Cholesky::factor(k.as_ref(), JitterPolicy::default()).unwrap();
    let z: Vec<f64> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
    let l = chol.l();
    let y = (0..n)
        .map(|i| (0..=i).map(|j| l[(i, j)] * z[j]).sum::<f64>())
        .collect();
    (x, y)
}

#[test]
fn ml_fit_recovers_known_lengthscales() {
    let truth = Kernel::new(KernelKind::Matern52, vec![0.15, 0.6], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 300, 1e-4, 3);
    let opts = FitOptions {
        priors: Priors::none(),
        noise: NoiseSpec::Fixed(1e-4),
        restarts: 2,
        ..FitOptions::default()
    };
    let f = fit(&x, &y, 2, &opts, None).unwrap();
    let ls = &f.params.kernel.lengthscales;
    assert!(
        (ls[0] / 0.15 - 1.0).abs() < 0.25,
        "lengthscale 0: {}",
        ls[0]
    );
    assert!((ls[1] / 0.6 - 1.0).abs() < 0.35, "lengthscale 1: {}", ls[1]);
    assert!((f.params.kernel.outputscale / 1.0 - 1.0).abs() < 0.6);
    // The fitted model explains the data better than the truth by likelihood (it is the ML optimum).
    let at_truth = log_marginal_likelihood(&truth, 1e-4, f.params.mean, &x, &y).unwrap();
    assert!(f.log_marginal_likelihood >= at_truth.value - 1e-6);
}

#[test]
fn map_fit_is_a_stationary_point_of_the_log_posterior() {
    let truth = Kernel::new(KernelKind::Rbf, vec![0.3, 0.4, 0.5], 2.0).unwrap();
    let (x, y) = gp_sample(&truth, 60, 1e-3, 8);
    let opts = FitOptions {
        kind: KernelKind::Rbf,
        noise: NoiseSpec::Learned { floor: 1e-4 },
        ..FitOptions::default()
    };
    let f = fit(&x, &y, 3, &opts, None).unwrap();
    let p = &f.params;
    let l = log_marginal_likelihood(&p.kernel, p.noise, p.mean, &x, &y).unwrap();
    // The mean is profiled: its gradient vanishes exactly.
    assert!(l.grad[5].abs() < 1e-8, "mean gradient {}", l.grad[5]);
    // Interior parameters: gradient of LML + log prior ≈ 0.
    let pri = Priors::papers();
    for (i, ls) in p.kernel.lengthscales.iter().enumerate() {
        let g = l.grad[i] + pri.lengthscale.log_density_dlog(*ls).1;
        assert!(
            g.abs() < 1e-3 * (1.0 + l.value.abs()),
            "lengthscale {i}: gradient {g}"
        );
    }
    let g = l.grad[3] + pri.outputscale.log_density_dlog(p.kernel.outputscale).1;
    assert!(
        g.abs() < 1e-3 * (1.0 + l.value.abs()),
        "outputscale gradient {g}"
    );
    if p.noise > 1.01e-4 {
        let g = l.grad[4] + pri.noise.log_density_dlog(p.noise).1;
        assert!(g.abs() < 1e-3 * (1.0 + l.value.abs()), "noise gradient {g}");
    }
}

#[test]
fn fit_is_deterministic_and_warm_start_is_no_worse() {
    let truth = Kernel::new(KernelKind::Matern52, vec![0.2; 4], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 80, 1e-4, 5);
    let opts = FitOptions::default();
    let a = fit(&x, &y, 4, &opts, None).unwrap();
    let b = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| fit(&x, &y, 4, &opts, None).unwrap());
    assert_eq!(a.params, b.params);
    let w = fit(&x, &y, 4, &opts, Some(&a.params)).unwrap();
    assert!(w.log_posterior >= a.log_posterior - 1e-9);
}

#[test]
fn fit_rejects_bad_input() {
    let opts = FitOptions::default();
    assert!(fit(&[], &[], 2, &opts, None).is_err());
    assert!(fit(&[0.1, 0.2, 0.3], &[1.0], 2, &opts, None).is_err());
    assert!(fit(&[0.1, f64::NAN], &[1.0], 2, &opts, None).is_err());
}

#[test]
fn map_fit_with_the_papers_priors_recovers_lengthscales() {
    let truth = Kernel::new(KernelKind::Matern52, vec![0.2, 0.4], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 300, 1e-4, 13);
    let f = fit(&x, &y, 2, &FitOptions::default(), None).unwrap();
    let ls = &f.params.kernel.lengthscales;
    assert!((ls[0] / 0.2 - 1.0).abs() < 0.3, "lengthscale 0: {}", ls[0]);
    assert!((ls[1] / 0.4 - 1.0).abs() < 0.3, "lengthscale 1: {}", ls[1]);
}

#[test]
fn botorch_preset_fixes_the_outputscale_and_respects_the_noise_floor() {
    let truth = Kernel::new(KernelKind::Rbf, vec![0.3, 0.3], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 40, 0.0, 2);
    let f = fit(&x, &y, 2, &FitOptions::botorch(2), None).unwrap();
    assert_eq!(f.params.kernel.outputscale, 1.0);
    assert_eq!(f.params.kernel.kind, KernelKind::Rbf);
    assert!(
        f.params.noise >= 1e-4 * (1.0 - 1e-12),
        "noise {}",
        f.params.noise
    );
}

#[test]
fn a_warm_fit_from_the_previous_mode_stays_there_and_reports_its_gain() {
    let truth = Kernel::new(KernelKind::Matern52, vec![0.2, 0.5, 0.3], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 81, 1e-4, 5);
    let d = 3;
    let opts = FitOptions::default();
    // The previous step: the full fit on the first 80 points.
    let prev = fit(&x[..80 * d], &y[..80], d, &opts, None).unwrap();
    // The next step, one point more: the warm fit lands on the full fit's mode in a fraction of
    // its evaluations, with a small gain per point.
    let full = fit(&x, &y, d, &opts, Some(&prev.params)).unwrap();
    let warm = fit_warm(&x, &y, d, &opts, &prev.params).unwrap();
    assert_eq!(warm.result.best_start, 0);
    assert!(
        warm.result.evaluations * 2 < full.evaluations,
        "{} vs {}",
        warm.result.evaluations,
        full.evaluations
    );
    assert!(
        (warm.result.log_posterior - full.log_posterior).abs() < 1e-4,
        "{} vs {}",
        warm.result.log_posterior,
        full.log_posterior
    );
    assert!(
        warm.gain_per_point >= 0.0 && warm.gain_per_point < 1e-2,
        "{}",
        warm.gain_per_point
    );
    // From its own mode the gain is (numerically) zero; from a distant start it is large.
    let again = fit_warm(&x, &y, d, &opts, &warm.result.params).unwrap();
    assert!(again.gain_per_point < 1e-8, "{}", again.gain_per_point);
    let mut far = prev.params.clone();
    far.kernel.lengthscales = vec![5.0; d];
    let moved = fit_warm(&x, &y, d, &opts, &far).unwrap();
    assert!(moved.gain_per_point > 0.05, "{}", moved.gain_per_point);
    // A warm start of another dimension is refused (the caller fits in full instead).
    let other = Kernel::new(KernelKind::Matern52, vec![0.2; 2], 1.0).unwrap();
    let mut wrong = prev.params.clone();
    wrong.kernel = other;
    assert!(fit_warm(&x, &y, d, &opts, &wrong).is_err());
}

#[test]
fn a_warm_start_within_the_gradient_tolerance_is_kept_and_others_run() {
    let truth = Kernel::new(KernelKind::Matern52, vec![0.2, 0.5, 0.3], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, 81, 1e-4, 5);
    let d = 3;
    let opts = FitOptions::default();
    let prev = fit(&x[..80 * d], &y[..80], d, &opts, None).unwrap();
    let bits = |p: &pandora_core::gp::GpParams| -> Vec<u64> {
        let k = &p.kernel;
        k.lengthscales
            .iter()
            .chain([k.outputscale, p.mean, p.noise].iter())
            .map(|v| v.to_bits())
            .collect()
    };
    // Tolerance 0 is fit_warm, and a tolerance nothing passes runs the same search (the first
    // evaluation handed to L-BFGS-B instead of being repeated): the same bits, evaluations
    // counted alike.
    let plain = fit_warm(&x, &y, d, &opts, &prev.params).unwrap();
    for tol in [0.0, 1e-300] {
        let w = fit_warm_or_keep(&x, &y, d, &opts, &prev.params, tol).unwrap();
        assert!(!w.kept);
        assert_eq!(bits(&w.result.params), bits(&plain.result.params), "{tol}");
        assert_eq!(w.result.evaluations, plain.result.evaluations);
        assert_eq!(w.gain_per_point.to_bits(), plain.gain_per_point.to_bits());
    }
    // A generous tolerance keeps the previous kernel hyperparameters after one evaluation; the
    // mean is profiled on the new data and the log posterior is the one at the kept point.
    let kept = fit_warm_or_keep(&x, &y, d, &opts, &prev.params, 1.0).unwrap();
    assert!(kept.kept);
    assert_eq!(kept.result.evaluations, 1);
    assert_eq!(kept.gain_per_point, 0.0);
    assert_eq!(kept.result.params.kernel, prev.params.kernel);
    assert!(kept.result.log_posterior <= plain.result.log_posterior + 1e-9);
    // From a distant start the gradient is large: not kept, a run that stops at the tolerance
    // (fewer evaluations than to the usual tolerances) and gains.
    let mut far = prev.params.clone();
    far.kernel.lengthscales = vec![5.0; d];
    let strict = fit_warm(&x, &y, d, &opts, &far).unwrap();
    let loose = fit_warm_or_keep(&x, &y, d, &opts, &far, 0.05).unwrap();
    assert!(!loose.kept);
    assert!(loose.gain_per_point > 0.05, "{}", loose.gain_per_point);
    assert!(
        loose.result.evaluations < strict.result.evaluations,
        "{} vs {}",
        loose.result.evaluations,
        strict.result.evaluations
    );
}

/// A fit conditions its GP on the factor it already has (the kept warm start: the likelihood's
/// own; every fit: one factorization for the mean and the GP) instead of factorizing the same
/// matrix two or three times. The GP must be the one `ExactGp::new` builds from the fitted
/// hyperparameters, to the bit, for every kernel and a learned noise.
#[test]
fn fitted_gps_equal_a_fresh_conditioning_on_their_hyperparameters() {
    use pandora_core::gp::model::ExactGp;
    let d = 3;
    let kinds = [
        KernelKind::Matern12,
        KernelKind::Matern32,
        KernelKind::Matern52,
        KernelKind::Rbf,
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let truth = Kernel::new(kind, vec![0.3, 0.5, 0.4], 1.0).unwrap();
        let (x, y) = gp_sample(&truth, 61, 1e-4, 11 + i as u64);
        let opts = FitOptions {
            kind,
            noise: if i % 2 == 0 {
                NoiseSpec::Fixed(1e-4)
            } else {
                NoiseSpec::Learned { floor: 1e-4 }
            },
            ..FitOptions::default()
        };
        let prev = fit(&x[..60 * d], &y[..60], d, &opts, None).unwrap();
        let full = fit(&x, &y, d, &opts, Some(&prev.params)).unwrap();
        let warm = fit_warm_or_keep(&x, &y, d, &opts, &prev.params, 0.0).unwrap();
        let kept = fit_warm_or_keep(&x, &y, d, &opts, &prev.params, 1e9).unwrap();
        assert!(kept.kept && !warm.kept);
        let q: Vec<f64> = (0..20 * d)
            .map(|t| ((t * 37) % 101) as f64 / 100.0)
            .collect();
        for (what, r) in [
            ("full", &full),
            ("warm", &warm.result),
            ("kept", &kept.result),
        ] {
            let fresh = ExactGp::new(x.clone(), y.clone(), r.params.clone()).unwrap();
            let bits = |v: &[f64]| v.iter().map(|t| t.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(r.gp.alpha()), bits(fresh.alpha()), "{kind:?} {what}");
            let (m1, v1) = r.gp.predict(&q).unwrap();
            let (m2, v2) = fresh.predict(&q).unwrap();
            assert_eq!(
                (bits(&m1), bits(&v1)),
                (bits(&m2), bits(&v2)),
                "{kind:?} {what}"
            );
            assert_eq!(
                r.log_marginal_likelihood.to_bits(),
                fresh.log_marginal_likelihood().to_bits(),
                "{kind:?} {what}"
            );
        }
    }
}

/// From `SCREEN_FROM_N` observations the cold starts of a full fit run on a subset and only the
/// best candidate (by its value on all the data) is refined on all of it: deterministic, and
/// as good as single runs on all the data from the warm start and from the true
/// hyperparameters.
#[test]
fn a_screened_fit_at_large_n_reaches_the_full_data_optimum() {
    use pandora_core::gp::fit::SCREEN_FROM_N;
    let d = 4;
    let n = SCREEN_FROM_N + 76;
    let truth = Kernel::new(KernelKind::Matern52, vec![0.3, 0.6, 0.4, 0.8], 1.0).unwrap();
    let (x, y) = gp_sample(&truth, n, 1e-4, 21);
    let opts = FitOptions {
        restarts: 2,
        ..FitOptions::default()
    };
    let prev = fit(&x[..500 * d], &y[..500], d, &opts, None).unwrap();
    let a = fit(&x, &y, d, &opts, Some(&prev.params)).unwrap();
    let b = fit(&x, &y, d, &opts, Some(&prev.params)).unwrap();
    assert_eq!(a.log_posterior.to_bits(), b.log_posterior.to_bits());
    assert_eq!(a.params, b.params);
    let from_prev = fit_warm(&x, &y, d, &opts, &prev.params).unwrap().result;
    let true_params = pandora_core::gp::GpParams {
        kernel: truth.clone(),
        mean: 0.0,
        noise: 1e-4,
    };
    let from_truth = fit_warm(&x, &y, d, &opts, &true_params).unwrap().result;
    let reference = from_prev.log_posterior.max(from_truth.log_posterior);
    assert!(
        a.log_posterior >= reference - 1e-4 * n as f64,
        "{} vs {reference}",
        a.log_posterior
    );
}
