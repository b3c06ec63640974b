//! Tests of the learning-curve model: the structured solve against the dense joint GP, the
//! gradient against finite differences, degenerate inputs, and recovery of a known truth.

use super::*;
use crate::gp::kernel::{Kernel, KernelKind};
use crate::linalg::{Cholesky, JitterPolicy};
use faer::Mat;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

fn params(d: usize) -> LcParams {
    LcParams {
        asymptote: Kernel::new(
            KernelKind::Matern52,
            (0..d).map(|i| 0.3 + 0.2 * i as f64).collect(),
            1.3,
        )
        .unwrap(),
        decay: DecayKernel::new(0.8, 1.4, 3.0).unwrap(),
        noise: 0.01,
        mean: 0.4,
    }
}

/// Random runs with 1–8 integer steps drawn with replacement (duplicates included).
fn random_runs(n: usize, d: usize, seed: u64) -> Vec<Run> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
            let t = rng.random_range(1..=8usize);
            let steps: Vec<f64> = (0..t).map(|_| rng.random_range(1..=10u32) as f64).collect();
            let values = steps
                .iter()
                .map(|s| x[0] + 2.0 / s + 0.1 * rng.random::<f64>())
                .collect();
            Run { x, steps, values }
        })
        .collect()
}

/// The dense joint GP over every `(run, step)` pair: the reference for the structured solve.
struct Dense {
    /// `(run id, x, step)` of each observation.
    obs: Vec<(usize, Vec<f64>, f64)>,
    chol: Cholesky,
    alpha: Vec<f64>,
    lml: f64,
}

fn joint_cov(p: &LcParams, a: (usize, &[f64], f64), b: (usize, &[f64], f64)) -> f64 {
    let mut c = p.asymptote.eval(a.1, b.1);
    if a.0 == b.0 {
        c += p.decay.eval(a.2, b.2);
    }
    c
}

impl Dense {
    fn new(p: &LcParams, runs: &[Run]) -> Self {
        let obs: Vec<(usize, Vec<f64>, f64)> = runs
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.steps.iter().map(move |t| (i, r.x.clone(), *t)))
            .collect();
        let y: Vec<f64> = runs
            .iter()
            .flat_map(|r| r.values.iter().map(|v| v - p.mean))
            .collect();
        let m = obs.len();
        let k = Mat::from_fn(m, m, |i, j| {
            let (a, b) = (&obs[i], &obs[j]);
            joint_cov(p, (a.0, &a.1, a.2), (b.0, &b.1, b.2)) + if i == j { p.noise } else { 0.0 }
        });
        let chol = Cholesky::factor(k.as_ref(), JitterPolicy::default()).unwrap();
        assert_eq!(chol.jitter(), 0.0);
        let alpha = chol.solve_vec(&y);
        let quad: f64 = alpha.iter().zip(&y).map(|(a, b)| a * b).sum();
        let lml =
            -0.5 * quad - 0.5 * chol.log_det() - 0.5 * m as f64 * (2.0 * std::f64::consts::PI).ln();
        Self {
            obs,
            chol,
            alpha,
            lml,
        }
    }

    /// Mean and covariance of the latent curve of run `id` (configuration `x`) at `ts`.
    fn predict(&self, p: &LcParams, id: usize, x: &[f64], ts: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (m, k) = (self.obs.len(), ts.len());
        let c = Mat::from_fn(m, k, |i, j| {
            let o = &self.obs[i];
            joint_cov(p, (o.0, &o.1, o.2), (id, x, ts[j]))
        });
        let mut sc = c.clone();
        self.chol.solve_in_place(sc.as_mut());
        let mean = (0..k)
            .map(|j| p.mean + (0..m).map(|i| c[(i, j)] * self.alpha[i]).sum::<f64>())
            .collect();
        let mut cov = vec![0.0; k * k];
        for a in 0..k {
            for b in 0..k {
                let prior = joint_cov(p, (id, x, ts[a]), (id, x, ts[b]));
                cov[a * k + b] = prior - (0..m).map(|i| c[(i, a)] * sc[(i, b)]).sum::<f64>();
            }
        }
        (mean, cov)
    }
}

/// Asserts `|got − want| ≤ rel·max(|want|, 1)` entrywise; returns the largest such ratio.
fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst: f64 = 0.0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = (g - w).abs() / w.abs().max(1.0);
        assert!(e <= rel, "{what}[{i}]: structured {g} vs dense {w}");
        worst = worst.max(e);
    }
    worst
}

const FUTURE: [f64; 4] = [3.0, 12.0, 40.0, 200.0];

#[test]
fn structured_posterior_equals_the_dense_joint_gp() {
    for (seed, n, d) in [(1, 12, 3), (2, 1, 2), (3, 25, 1), (4, 7, 4)] {
        let p = params(d);
        let runs = random_runs(n, d, seed);
        let post = LcPosterior::new(runs.clone(), p.clone()).unwrap();
        let dense = Dense::new(&p, &runs);
        let (a, b) = (post.log_marginal_likelihood(), dense.lml);
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "lml {a} vs {b}");
        // A fitted run.
        let r = n / 2;
        let got = post.predict_run(r, &FUTURE).unwrap();
        let (mean, cov) = dense.predict(&p, r, &runs[r].x, &FUTURE);
        let mut worst = assert_close("fitted mean", &got.mean, &mean, 1e-9);
        worst = worst.max(assert_close("fitted cov", &got.cov, &cov, 1e-9));
        // A new configuration without observations (run id n is nobody's).
        let x: Vec<f64> = (0..d).map(|i| 0.1 + 0.15 * i as f64).collect();
        let got = post.predict(&x, None, &FUTURE).unwrap();
        let (mean, cov) = dense.predict(&p, n, &x, &FUTURE);
        worst = worst.max(assert_close("new mean", &got.mean, &mean, 1e-9));
        worst = worst.max(assert_close("new cov", &got.cov, &cov, 1e-9));
        // The asymptote: the curve far out, where the decaying part has vanished.
        let (am, av) = post.asymptote(&x).unwrap();
        let (mean, cov) = dense.predict(&p, n, &x, &[1e12]);
        assert_close("asymptote", &[am, av], &[mean[0], cov[0]], 1e-6);
        // A new configuration with observations of its own: dense = the augmented data set.
        let steps = [1.0, 2.0, 2.0, 5.0];
        let values = [2.0, 1.4, 1.5, 0.9];
        let got = post
            .predict(&x, Some((&steps[..], &values[..])), &FUTURE)
            .unwrap();
        let mut aug = runs.clone();
        aug.push(Run {
            x: x.clone(),
            steps: steps.to_vec(),
            values: values.to_vec(),
        });
        let (mean, cov) = Dense::new(&p, &aug).predict(&p, n, &x, &FUTURE);
        worst = worst.max(assert_close("observed mean", &got.mean, &mean, 1e-9));
        worst = worst.max(assert_close("observed cov", &got.cov, &cov, 1e-9));
        eprintln!(
            "seed {seed}: lml rel. error {:.1e}, worst prediction rel. error {worst:.1e}",
            (a - b).abs() / b.abs()
        );
    }
}

#[test]
fn no_runs_give_the_prior_and_one_step_runs_work() {
    let p = params(2);
    let post = LcPosterior::new(vec![], p.clone()).unwrap();
    assert_eq!(post.log_marginal_likelihood(), 0.0);
    assert!(post.lml_grad().iter().all(|g| *g == 0.0));
    let got = post.predict(&[0.2, 0.3], None, &[1.0, 4.0]).unwrap();
    assert_eq!(got.mean, vec![p.mean; 2]);
    let want = p.asymptote.outputscale + p.decay.eval(1.0, 4.0);
    assert!((got.cov[1] - want).abs() < 1e-15);
    assert_eq!(got.asymptote_var, p.asymptote.outputscale);
    // One run, one step.
    let run = Run {
        x: vec![0.5, 0.5],
        steps: vec![1.0],
        values: vec![3.0],
    };
    let post = LcPosterior::new(vec![run.clone()], p.clone()).unwrap();
    let dense = Dense::new(&p, std::slice::from_ref(&run));
    let (mean, cov) = dense.predict(&p, 0, &run.x, &FUTURE);
    let got = post.predict_run(0, &FUTURE).unwrap();
    assert_close("one-step mean", &got.mean, &mean, 1e-12);
    assert_close("one-step cov", &got.cov, &cov, 1e-12);
}

#[test]
fn bad_inputs_are_errors_that_name_the_field() {
    let p = params(2);
    let good = Run {
        x: vec![0.5, 0.5],
        steps: vec![1.0],
        values: vec![3.0],
    };
    let cases = [
        (
            Run {
                x: vec![0.5],
                ..good.clone()
            },
            "runs[1].x",
        ),
        (
            Run {
                steps: vec![],
                values: vec![],
                ..good.clone()
            },
            "runs[1]",
        ),
        (
            Run {
                values: vec![1.0, 2.0],
                ..good.clone()
            },
            "runs[1].values",
        ),
        (
            Run {
                steps: vec![f64::NAN],
                ..good.clone()
            },
            "runs[1].steps",
        ),
        (
            Run {
                steps: vec![-1.0],
                ..good.clone()
            },
            "runs[1].steps",
        ),
        (
            Run {
                values: vec![f64::INFINITY],
                ..good.clone()
            },
            "runs[1].values",
        ),
    ];
    for (bad, field) in cases {
        let err = LcPosterior::new(vec![good.clone(), bad], p.clone()).unwrap_err();
        assert!(err.to_string().contains(field), "{err} should name {field}");
    }
    let post = LcPosterior::new(vec![good], p).unwrap();
    assert!(post.predict_run(1, &[1.0]).is_err());
    assert!(post.predict(&[0.1], None, &[1.0]).is_err());
    assert!(post.predict(&[0.1, 0.2], None, &[f64::NAN]).is_err());
    assert!(
        post.predict(&[0.1, 0.2], Some((&[1.0][..], &[][..])), &[1.0])
            .is_err()
    );
    assert!(LearningCurveGp::fit(vec![], &LcFitOptions::default(), None).is_err());
}

#[test]
fn gradient_matches_finite_differences() {
    let d = 3;
    let runs = random_runs(10, d, 7);
    let theta = params(d).to_theta();
    let lml = |t: &[f64]| {
        LcPosterior::new(
            runs.clone(),
            LcParams::from_theta(KernelKind::Matern52, t).unwrap(),
        )
        .unwrap()
        .log_marginal_likelihood()
    };
    let g = LcPosterior::new(runs.clone(), params(d))
        .unwrap()
        .lml_grad();
    assert_eq!(g.len(), LcParams::num_params(d));
    for p in 0..theta.len() {
        let h = 1e-5;
        let mut tp = theta.clone();
        let mut tm = theta.clone();
        tp[p] += h;
        tm[p] -= h;
        let fd = (lml(&tp) - lml(&tm)) / (2.0 * h);
        assert!(
            (fd - g[p]).abs() < 1e-6 * (1.0 + fd.abs()),
            "param {p}: fd {fd} vs analytic {}",
            g[p]
        );
    }
}

fn sample_mvn(cov: &Mat<f64>, rng: &mut Xoshiro256PlusPlus) -> Vec<f64> {
    let n = cov.nrows();
    let chol = Cholesky::factor(cov.as_ref(), JitterPolicy::default()).unwrap();
    let z: Vec<f64> = (0..n).map(|_| StandardNormal.sample(rng)).collect();
    let l = chol.l();
    (0..n)
        .map(|i| (0..=i).map(|j| l[(i, j)] * z[j]).sum())
        .collect()
}

/// Configurations, latent curves and noisy observations of a sampled family.
type Family = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>);

/// Latent curves of `n` configurations over steps `1..=t` sampled from the model `truth`
/// (with a shared asymptote GP draw), and their noisy observations.
fn sample_family(truth: &LcParams, n: usize, t: usize, seed: u64) -> Family {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let d = truth.asymptote.dim();
    let xs: Vec<Vec<f64>> = (0..n)
        .map(|_| (0..d).map(|_| rng.random::<f64>()).collect())
        .collect();
    let kx = Mat::from_fn(n, n, |i, j| truth.asymptote.eval(&xs[i], &xs[j]));
    let f = sample_mvn(&kx, &mut rng);
    let steps: Vec<f64> = (1..=t).map(|s| s as f64).collect();
    let kt = Mat::from_fn(t, t, |i, j| truth.decay.eval(steps[i], steps[j]));
    let mut latent = Vec::new();
    let mut noisy = Vec::new();
    for fi in &f {
        let r = sample_mvn(&kt, &mut rng);
        let curve: Vec<f64> = r.iter().map(|v| truth.mean + fi + v).collect();
        let obs = curve
            .iter()
            .map(|v| {
                let z: f64 = StandardNormal.sample(&mut rng);
                v + truth.noise.sqrt() * z
            })
            .collect();
        latent.push(curve);
        noisy.push(obs);
    }
    (xs, latent, noisy)
}

fn truth() -> LcParams {
    LcParams {
        asymptote: Kernel::new(KernelKind::Matern52, vec![0.25, 0.6], 1.0).unwrap(),
        decay: DecayKernel::new(2.0, 1.2, 4.0).unwrap(),
        noise: 1e-3,
        mean: 0.5,
    }
}

#[test]
fn fit_recovers_the_hyperparameters_of_a_known_truth() {
    let truth = truth();
    let (xs, _, noisy) = sample_family(&truth, 40, 30, 11);
    let steps: Vec<f64> = (1..=30).map(|s| s as f64).collect();
    let runs: Vec<Run> = xs
        .iter()
        .zip(&noisy)
        .map(|(x, y)| Run {
            x: x.clone(),
            steps: steps.clone(),
            values: y.clone(),
        })
        .collect();
    let fit = LearningCurveGp::fit(runs, &LcFitOptions::default(), None).unwrap();
    let p = fit.params();
    eprintln!("fitted {p:?} in {} evaluations", fit.evaluations());
    let ratio = |a: f64, b: f64| (a / b).max(b / a);
    assert!(
        ratio(p.decay.outputscale, 2.0) < 2.0,
        "σ_r² {}",
        p.decay.outputscale
    );
    assert!(ratio(p.decay.alpha, 1.2) < 2.0, "α {}", p.decay.alpha);
    assert!(ratio(p.decay.beta, 4.0) < 2.0, "β {}", p.decay.beta);
    assert!(ratio(p.noise, 1e-3) < 1.5, "noise {}", p.noise);
    assert!(
        ratio(p.asymptote.outputscale, 1.0) < 4.0,
        "σ_f² {}",
        p.asymptote.outputscale
    );
    assert!(
        ratio(p.asymptote.lengthscales[0], 0.25) < 3.0,
        "ℓ {:?}",
        p.asymptote.lengthscales
    );
}

/// Freeze-thaw's question: 30 finished runs and 20 observed for their first 10 of 30 steps;
/// predict the partial runs' final (latent) values. Returns the model's and the "last observed
/// value" baseline's mean absolute errors, and that of the model with the true hyperparameters.
fn final_value_errors(seed: u64) -> (f64, f64, f64) {
    let truth = truth();
    let (full, part, t, seen) = (30, 20, 30, 10);
    let (xs, latent, noisy) = sample_family(&truth, full + part, t, seed);
    let steps: Vec<f64> = (1..=t).map(|s| s as f64).collect();
    let runs: Vec<Run> = (0..full + part)
        .map(|i| {
            let k = if i < full { t } else { seen };
            Run {
                x: xs[i].clone(),
                steps: steps[..k].to_vec(),
                values: noisy[i][..k].to_vec(),
            }
        })
        .collect();
    let oracle_post = LcPosterior::new(runs.clone(), truth).unwrap();
    let fit = LearningCurveGp::fit(runs, &LcFitOptions::default(), None).unwrap();
    let (mut model, mut baseline, mut oracle) = (0.0, 0.0, 0.0);
    for i in full..full + part {
        let want = latent[i][t - 1];
        let pred = fit.predict_run(i, &[t as f64]).unwrap();
        model += (pred.mean[0] - want).abs() / part as f64;
        let pred = oracle_post.predict_run(i, &[t as f64]).unwrap();
        oracle += (pred.mean[0] - want).abs() / part as f64;
        baseline += (noisy[i][seen - 1] - want).abs() / part as f64;
    }
    (model, baseline, oracle)
}

#[test]
fn predicted_final_values_beat_the_last_observed_value() {
    let mut wins = 0;
    let (mut sum_model, mut sum_base) = (0.0, 0.0);
    for seed in 21..24 {
        let (m, b, o) = final_value_errors(seed);
        eprintln!("seed {seed}: model MAE {m:.4}, last-value MAE {b:.4}, true-θ MAE {o:.4}");
        wins += usize::from(m < b);
        sum_model += m;
        sum_base += b;
    }
    eprintln!(
        "mean: model {:.4}, last value {:.4}",
        sum_model / 3.0,
        sum_base / 3.0
    );
    assert!(wins == 3 && sum_model < 0.7 * sum_base);
}

#[test]
fn fitting_the_negated_values_negates_the_predictions() {
    let runs = random_runs(8, 2, 5);
    let neg: Vec<Run> = runs
        .iter()
        .map(|r| Run {
            values: r.values.iter().map(|v| -v).collect(),
            ..r.clone()
        })
        .collect();
    let opts = LcFitOptions::default();
    let a = LearningCurveGp::fit(runs, &opts, None).unwrap();
    let b = LearningCurveGp::fit(neg, &opts, None).unwrap();
    for (pa, pb) in [
        (
            a.predict_run(3, &FUTURE).unwrap(),
            b.predict_run(3, &FUTURE).unwrap(),
        ),
        (
            a.predict(&[0.3, 0.6], None, &FUTURE).unwrap(),
            b.predict(&[0.3, 0.6], None, &FUTURE).unwrap(),
        ),
    ] {
        let neg_mean: Vec<f64> = pb.mean.iter().map(|v| -v).collect();
        assert_close("negated mean", &pa.mean, &neg_mean, 1e-9);
        assert_close("same cov", &pa.cov, &pb.cov, 1e-9);
    }
}

/// Long runs with small noise (ill-conditioned blocks): the structured solve still matches
/// the dense one.
#[test]
fn structured_solve_is_accurate_for_long_runs_with_small_noise() {
    let mut p = params(2);
    p.noise = 1e-6;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let runs: Vec<Run> = (0..10)
        .map(|i| {
            let t = 5 + 4 * i;
            let x = vec![rng.random::<f64>(), rng.random::<f64>()];
            let steps: Vec<f64> = (1..=t).map(|s| s as f64).collect();
            let values = steps.iter().map(|s| x[0] + 2.0 / s).collect();
            Run { x, steps, values }
        })
        .collect();
    let post = LcPosterior::new(runs.clone(), p.clone()).unwrap();
    let dense = Dense::new(&p, &runs);
    let (a, b) = (post.log_marginal_likelihood(), dense.lml);
    let got = post.predict_run(9, &FUTURE).unwrap();
    let (mean, cov) = dense.predict(&p, 9, &runs[9].x, &FUTURE);
    assert!((a - b).abs() <= 1e-9 * b.abs(), "lml {a} vs {b}");
    assert_close("mean", &got.mean, &mean, 1e-9);
    assert_close("cov", &got.cov, &cov, 1e-9);
}

#[test]
fn step_posterior_matches_predict_and_its_gradient_finite_differences() {
    use crate::gp::Posterior;
    let d = 3;
    let post = LcPosterior::new(random_runs(9, d, 13), params(d)).unwrap();
    let x = [0.2, 0.7, 0.4, 0.9, 0.1, 0.5];
    for step in [Some(6.0), None] {
        let sp = post.at_step(step).unwrap();
        let b = sp.posterior(&x, true).unwrap();
        for (i, xi) in x.chunks(d).enumerate() {
            let (want_m, want_v) = match step {
                Some(t) => {
                    let p = post.predict(xi, None, &[t]).unwrap();
                    (p.mean[0], p.cov[0])
                }
                None => post.asymptote(xi).unwrap(),
            };
            assert!((b.mean[i] - want_m).abs() < 1e-12 && (b.var[i] - want_v).abs() < 1e-12);
            for k in 0..d {
                let h = 1e-6;
                let mut xp = xi.to_vec();
                let mut xm = xi.to_vec();
                xp[k] += h;
                xm[k] -= h;
                let (p, m) = (
                    sp.posterior(&xp, false).unwrap(),
                    sp.posterior(&xm, false).unwrap(),
                );
                let fd_m = (p.mean[0] - m.mean[0]) / (2.0 * h);
                let fd_v = (p.var[0] - m.var[0]) / (2.0 * h);
                let (gm, gv) = (b.mean_grad[i * d + k], b.var_grad[i * d + k]);
                assert!(
                    (fd_m - gm).abs() < 1e-6 * (1.0 + fd_m.abs()),
                    "mean {k}: {fd_m} vs {gm}"
                );
                assert!(
                    (fd_v - gv).abs() < 1e-6 * (1.0 + fd_v.abs()),
                    "var {k}: {fd_v} vs {gv}"
                );
            }
        }
    }
    assert!(post.at_step(Some(f64::NAN)).is_err());
    assert!(
        post.at_step(None)
            .unwrap()
            .posterior(&[0.1, 0.2], false)
            .is_err()
    );
}
