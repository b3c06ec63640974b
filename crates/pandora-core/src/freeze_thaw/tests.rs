use super::*;
use crate::acquisition::LinearMeanCost;
use crate::acquisition::pbgi_index;
use crate::gp::kernel::{Kernel, KernelKind};
use crate::gp::learning_curve::DecayKernel;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// `Var(f_last | first j reports)` for j = 0..=k by dense Gauss–Jordan solves (independent of
/// the Cholesky route).
fn dense_conditional_variances(cov: &[f64], k: usize, noise: f64) -> Vec<f64> {
    let target = cov[k * k - 1];
    let mut out = vec![target];
    for j in 1..=k {
        // Solve (C_j + σ² I) z = c_j.
        let mut a: Vec<Vec<f64>> = (0..j)
            .map(|r| {
                let mut row: Vec<f64> = (0..j)
                    .map(|c| cov[r * k + c] + if r == c { noise } else { 0.0 })
                    .collect();
                row.push(cov[r * k + k - 1]);
                row
            })
            .collect();
        for p in 0..j {
            let piv = (p..j)
                .max_by(|&x, &y| a[x][p].abs().total_cmp(&a[y][p].abs()))
                .unwrap();
            a.swap(p, piv);
            for r in 0..j {
                if r != p {
                    let f = a[r][p] / a[p][p];
                    let pivot_row = a[p].clone();
                    for (x, v) in a[r].iter_mut().zip(&pivot_row).skip(p) {
                        *x -= f * v;
                    }
                }
            }
        }
        let quad: f64 = (0..j).map(|r| cov[r * k + k - 1] * a[r][j] / a[r][r]).sum();
        out.push(target - quad);
    }
    out
}

fn random_cov(rng: &mut Xoshiro256PlusPlus, k: usize) -> Vec<f64> {
    let a: Vec<f64> = (0..k * k).map(|_| rng.random::<f64>() - 0.5).collect();
    let mut c = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            c[i * k + j] = (0..k).map(|l| a[i * k + l] * a[j * k + l]).sum::<f64>()
                + if i == j { 0.05 } else { 0.0 };
        }
    }
    c
}

#[test]
fn drops_equal_dense_conditioning() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for case in 0..50 {
        let k = 1 + case % 8;
        let cov = random_cov(&mut rng, k);
        let noise = [0.0, 1e-3, 0.1, 2.0][case % 4];
        let drops = final_value_drops(&cov, k, noise).unwrap();
        let vars = dense_conditional_variances(&cov, k, noise);
        for j in 0..k {
            let want = vars[j] - vars[j + 1];
            assert!(
                (drops[j] - want).abs() <= 1e-9 * cov[k * k - 1].max(1.0),
                "case {case} step {j}: {} vs {want}",
                drops[j]
            );
        }
        let total: f64 = drops.iter().sum();
        assert!(total <= cov[k * k - 1] + 1e-12);
        if noise == 0.0 {
            // The last report is the final value itself: all its variance is removed.
            assert!((total - cov[k * k - 1]).abs() <= 1e-7 * cov[k * k - 1]);
        }
    }
}

fn params(noise: f64) -> LcParams {
    LcParams {
        asymptote: Kernel::new(KernelKind::Matern52, vec![0.3], 0.04).unwrap(),
        decay: DecayKernel::new(0.05, 1.5, 2.0).unwrap(),
        noise,
        mean: 0.5,
    }
}

fn trial(x: f64, values: &[f64], busy: bool) -> TrialState {
    TrialState {
        x: vec![x],
        values: values.to_vec(),
        busy,
    }
}

fn quick(lambda: f64) -> ThawOptions {
    let mut o = ThawOptions::new(lambda);
    o.multistart.raw_samples = Some(64);
    o.multistart.num_restarts = Some(4);
    o
}

fn model_for(trials: &[TrialState], schedule: &Schedule, noise: f64) -> LcPosterior {
    let (data, _) = observed_runs(trials, schedule).unwrap();
    LcPosterior::new(data, params(noise)).unwrap()
}

#[test]
fn a_one_step_run_has_the_pbgi_index_of_its_final_value() {
    // With one step the chain is a Pandora's box: pay λc, see the final value (noisy, so the
    // box's spread is the variance the report removes).
    let schedule = Schedule::epochs(1).unwrap();
    let trials = vec![trial(0.1, &[0.4], false), trial(0.7, &[], false)];
    let model = model_for(&trials, &schedule, 1e-3);
    let mut opts = quick(0.5);
    opts.grid_points = 401;
    let d = decide_on(&model, &trials, &schedule, None, &opts, 1).unwrap();
    let curve = model.predict(&[0.7], None, &[1.0]).unwrap();
    let drop = curve.cov[0] * curve.cov[0] / (curve.cov[0] + 1e-3);
    let want = pbgi_index(curve.mean[0], drop.sqrt(), 0.5f64.ln()).g;
    let got = d.indices[1].unwrap();
    assert!((got - want).abs() <= 2e-3 * drop.sqrt(), "{got} vs {want}");
    assert_eq!(d.indices[0], None, "a complete run has no index");
    assert_eq!(d.fallback, Some(0.4));
}

#[test]
fn a_promising_paused_run_is_continued_and_a_hopeless_one_is_not() {
    let schedule = Schedule::epochs(6).unwrap();
    let done = [0.30, 0.42, 0.48, 0.51, 0.52, 0.53];
    let trials = vec![
        trial(0.1, &done, false),
        trial(0.5, &[0.50, 0.62, 0.68], false),
        trial(0.9, &[0.05, 0.10], false),
        trial(0.3, &[0.55], true),
    ];
    let model = model_for(&trials, &schedule, 1e-4);
    let d = decide_on(&model, &trials, &schedule, None, &quick(1e-3), 3).unwrap();
    let g = &d.indices;
    assert_eq!(g[0], None);
    assert_eq!(g[3], None, "a busy run cannot be continued");
    assert!(g[1].unwrap() > 0.53, "{g:?}");
    assert!(g[1].unwrap() > g[2].unwrap(), "{g:?}");
    assert_eq!(d.fallback, Some(0.53));
    let best = g[1].unwrap().max(d.start.index);
    if best == g[1].unwrap() {
        assert_eq!(d.action, ThawAction::Continue { trial: 1, step: 4 });
    } else {
        assert!(matches!(d.action, ThawAction::Start { .. }));
    }
    // Expensive steps: nothing is worth more than the run in hand.
    let d = decide_on(&model, &trials, &schedule, None, &quick(10.0), 3).unwrap();
    assert_eq!(d.action, ThawAction::Stop, "{:?}", d.indices);
}

#[test]
fn indices_fall_as_steps_get_dearer() {
    let schedule = Schedule::epochs(4).unwrap();
    let trials = vec![trial(0.2, &[0.3, 0.4], false), trial(0.8, &[0.45], false)];
    let model = model_for(&trials, &schedule, 1e-3);
    let cheap = LinearMeanCost {
        offset: 1.0,
        slope: 0.0,
    };
    let dear = LinearMeanCost {
        offset: 1.0,
        slope: 20.0,
    };
    let a = decide_on(&model, &trials, &schedule, Some(&cheap), &quick(1e-2), 0).unwrap();
    let b = decide_on(&model, &trials, &schedule, Some(&dear), &quick(1e-2), 0).unwrap();
    for k in 0..2 {
        assert!(b.indices[k].unwrap() < a.indices[k].unwrap());
    }
    // The cost grows with x: the dear model prefers smaller x for a new run than the cheap one.
    assert!(
        b.start.x[0] <= a.start.x[0] + 1e-9,
        "{:?} {:?}",
        a.start,
        b.start
    );
}

#[test]
fn decisions_are_deterministic_for_a_seed() {
    let schedule = Schedule::epochs(5).unwrap();
    let trials = vec![
        trial(0.2, &[0.3, 0.4, 0.45], false),
        trial(0.6, &[0.5], false),
        trial(0.9, &[0.2, 0.3, 0.35, 0.38, 0.4], false),
    ];
    let mut opts = quick(1e-2);
    opts.fit.restarts = 1;
    let a = decide(&trials, &schedule, None, &opts, None, 11).unwrap();
    let b = decide(&trials, &schedule, None, &opts, None, 11).unwrap();
    assert_eq!(a, b);
    let c = decide(&trials, &schedule, None, &opts, Some(&a.params), 11).unwrap();
    assert!(c.indices.iter().all(|g| g.is_none_or(f64::is_finite)));
}

#[test]
fn ties_stop_first_then_the_lowest_run_then_start() {
    let start = StartCandidate {
        x: vec![0.5],
        index: 1.0,
        proxy: 1.0,
    };
    let trials = vec![trial(0.1, &[0.2], false), trial(0.2, &[0.2], false)];
    let idx = vec![Some(1.0), Some(1.0)];
    assert_eq!(choose(&idx, &start, Some(1.0), &trials), ThawAction::Stop);
    assert_eq!(
        choose(&idx, &start, None, &trials),
        ThawAction::Continue { trial: 0, step: 2 }
    );
    assert_eq!(
        choose(&[None, Some(0.9)], &start, Some(0.5), &trials),
        ThawAction::Start { x: vec![0.5] }
    );
}

#[test]
fn errors_name_the_field() {
    let schedule = Schedule::epochs(3).unwrap();
    let good = vec![trial(0.2, &[0.3], false)];
    let model = model_for(&good, &schedule, 1e-3);
    let msg = |r: Result<ThawDecision>| r.unwrap_err().to_string();
    let m = msg(decide_on(&model, &good, &schedule, None, &quick(0.0), 0));
    assert!(m.contains("lambda"), "{m}");
    let mut o = quick(1.0);
    o.grid_points = 100;
    assert!(msg(decide_on(&model, &good, &schedule, None, &o, 0)).contains("grid_points"));
    let bad = vec![trial(0.2, &[0.3], false), trial(1.5, &[], false)];
    let m = msg(decide_on(&model, &bad, &schedule, None, &quick(1.0), 0));
    assert!(m.contains("trials[1].x[0]"), "{m}");
    let bad = vec![trial(0.2, &[0.3, 0.1, 0.2, 0.4], false)];
    let m = msg(decide_on(&model, &bad, &schedule, None, &quick(1.0), 0));
    assert!(m.contains("trials[0].values"), "{m}");
    let none = vec![trial(0.2, &[], false)];
    let m = msg(decide(&none, &schedule, None, &quick(1.0), None, 0));
    assert!(m.contains("initial design"), "{m}");
    assert!(Schedule::new(vec![1.0, 1.0], vec![1.0, 1.0]).is_err());
    assert!(Schedule::new(vec![1.0], vec![0.0]).is_err());
}

/// A synthetic family with known curves: `y(x, t) = a(x) − (a(x) − 0.1)·e^{−t/2}`, with
/// asymptote `a(x) = 0.8 − 1.5 (x − 0.3)²` (best 0.8 at `x = 0.3`), 8 epochs of cost 1.
#[test]
fn on_known_curves_the_policy_drops_bad_runs_and_keeps_a_good_one() {
    let a = |x: f64| 0.8 - 1.5 * (x - 0.3) * (x - 0.3);
    let y = |x: f64, t: usize| a(x) - (a(x) - 0.1) * (-(t as f64) / 2.0).exp();
    let schedule = Schedule::epochs(8).unwrap();
    let mut trials: Vec<TrialState> = [0.05, 0.5, 0.95]
        .iter()
        .map(|&x| trial(x, &[y(x, 1)], false))
        .collect();
    let mut opts = quick(2e-3);
    opts.fit.restarts = 1;
    let (mut steps, mut warm, mut stopped) = (3usize, None, false);
    for decision in 0..60 {
        let d = decide(&trials, &schedule, None, &opts, warm.as_ref(), decision).unwrap();
        warm = Some(d.params.clone());
        match d.action {
            ThawAction::Stop => {
                stopped = true;
                break;
            }
            ThawAction::Continue { trial, step } => {
                assert_eq!(step, trials[trial].values.len() + 1);
                let x = trials[trial].x[0];
                trials[trial].values.push(y(x, step));
            }
            ThawAction::Start { x } => trials.push(trial(x[0], &[y(x[0], 1)], false)),
        }
        steps += 1;
    }
    let complete: Vec<&TrialState> = trials.iter().filter(|t| t.values.len() == 8).collect();
    let best = complete
        .iter()
        .map(|t| t.values[7])
        .fold(f64::NEG_INFINITY, f64::max);
    let dropped = trials.iter().filter(|t| t.values.len() < 8).count();
    eprintln!(
        "stopped {stopped} after {steps} steps: {} trials, {} complete, best final {best:.4} \
         (optimum {:.4}), {dropped} left unfinished",
        trials.len(),
        complete.len(),
        y(0.3, 8)
    );
    assert!(stopped, "the policy should stop within 60 decisions");
    assert!(best >= y(0.3, 8) - 0.03, "best final value {best}");
    assert!(dropped >= 1, "some run should be left unfinished");
    assert!(steps < 8 * trials.len(), "pausing should save steps");
}
