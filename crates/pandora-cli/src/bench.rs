//! `pandora bench`: wall-clock medians of the numerical core on fixed, seeded workloads, printed as
//! JSON lines. The workloads mirror `bench/peer/` (d = 8, Matérn-5/2 ARD): posterior and
//! LogEI at 1600 points, the log marginal likelihood with its gradient, a full MAP fit, and a
//! multi-start LogEI maximization; `bo_step_scaling` ([`scaling`]) times whole BO steps at
//! d ∈ {8, 16} and n up to 2000.

use anyhow::Result;
use pandora_core::acquisition::{LinearMeanCost, LogExpectedImprovement, OnModel, Pbgi};
use pandora_core::gp::fit::{FitOptions, fit};
use pandora_core::gp::likelihood::log_marginal_likelihood;
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use pandora_core::optim::multistart::{MultiStartOptions, maximize};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use std::time::Instant;

mod scaling;
pub use scaling::ScalingArgs;

const D: usize = 8;

/// Times `f` (after one warm-up call) at least `reps` times and for at least 0.3 s; returns the
/// median and minimum in milliseconds. A warm-up call that takes more than 1 s counts as a sample
/// (the multi-second lookahead workloads need no warm-up).
fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, f64, usize) {
    let t = Instant::now();
    std::hint::black_box(f());
    let first = t.elapsed().as_secs_f64() * 1e3;
    let mut samples = Vec::new();
    if first > 1e3 {
        samples.push(first);
    }
    let start = Instant::now();
    let min_secs = if first > 1e3 { 0.0 } else { 0.3 };
    while samples.len() < reps || (start.elapsed().as_secs_f64() < min_secs && samples.len() < 1000)
    {
        let t = Instant::now();
        std::hint::black_box(f());
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[0], samples.len())
}

fn uniform(rng: &mut Xoshiro256PlusPlus, n: usize) -> Vec<f64> {
    (0..n * D).map(|_| rng.random::<f64>()).collect()
}

fn standardize(y: &mut [f64]) {
    let n = y.len() as f64;
    let m = y.iter().sum::<f64>() / n;
    let s = (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
    for v in y {
        *v = (*v - m) / s.max(1e-12);
    }
}

/// The peer micro-benchmark's data: X uniform, y = Σ sin(5x), standardized.
fn micro_data(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = uniform(&mut rng, n);
    let mut y: Vec<f64> = x
        .chunks_exact(D)
        .map(|r| r.iter().map(|v| (5.0 * v).sin()).sum())
        .collect();
    standardize(&mut y);
    (x, y)
}

/// Negated Ackley on [−2, 2]^d (through x ↦ 4x − 2), standardized: the peer iteration benchmark.
fn ackley_data(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = uniform(&mut rng, n);
    let mut y: Vec<f64> = x
        .chunks_exact(D)
        .map(|r| {
            let z: Vec<f64> = r.iter().map(|v| 4.0 * v - 2.0).collect();
            let s1 = z.iter().map(|v| v * v).sum::<f64>() / D as f64;
            let s2 = z
                .iter()
                .map(|v| (2.0 * std::f64::consts::PI * v).cos())
                .sum::<f64>()
                / D as f64;
            -(-20.0 * (-0.2 * s1.sqrt()).exp() - s2.exp() + 20.0 + std::f64::consts::E)
        })
        .collect();
    standardize(&mut y);
    (x, y)
}

fn micro_params() -> GpParams {
    let ln2 = std::f64::consts::LN_2;
    GpParams {
        kernel: Kernel::new(KernelKind::Matern52, vec![ln2; D], ln2).expect("valid kernel"),
        mean: 0.0,
        noise: (-5f64).exp(),
    }
}

fn emit(v: serde_json::Value) {
    println!("{v}");
}

/// Runs the benchmarks.
pub fn main(filter: Option<&str>, quick: bool, reps: usize, scaling: &ScalingArgs) -> Result<()> {
    let want = |name: &str| filter.is_none_or(|f| name.contains(f));
    let sizes: &[usize] = if quick { &[50] } else { &[50, 200, 1000] };
    let reps = if quick { 1 } else { reps.max(1) };
    let threads = rayon::current_num_threads();

    for &n in sizes {
        let (x, y) = micro_data(n, 0);
        let gp = ExactGp::new(x.clone(), y.clone(), micro_params())?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let pts = uniform(&mut rng, 1600);
        if want("posterior_grad") {
            let (med, min, r) = time(reps, || {
                let p = gp.posterior(&pts, true).expect("posterior");
                p.std_grad()
            });
            emit(
                json!({"bench": "posterior_grad", "n": n, "d": D, "points": 1600,
                "median_ms": med, "min_ms": min, "reps": r, "threads": 1}),
            );
        }
        if want("logei_value_grad") {
            let acq = OnModel::new(&gp, LogExpectedImprovement { best_f: 0.0 });
            let (med, min, r) = time(reps, || acq.evaluate(&pts, true).expect("logei"));
            emit(
                json!({"bench": "logei_value_grad", "n": n, "d": D, "points": 1600,
                "median_ms": med, "min_ms": min, "reps": r, "threads": 1}),
            );
        }
        if want("pbgi_value_grad") {
            // The peer's PBGI workload: λ = 1e-4, known cost c(x) = 1 + 20·mean(x).
            let cost = LinearMeanCost {
                offset: 1.0,
                slope: 20.0,
            };
            let acq = OnModel::with_cost(&gp, Pbgi { lambda: 1e-4 }, &cost);
            let (med, min, r) = time(reps, || acq.evaluate(&pts, true).expect("pbgi"));
            emit(
                json!({"bench": "pbgi_value_grad", "n": n, "d": D, "points": 1600,
                "median_ms": med, "min_ms": min, "reps": r, "threads": 1}),
            );
        }
        if want("lml_grad") {
            let p = micro_params();
            let (med, min, r) = time(reps, || {
                log_marginal_likelihood(&p.kernel, p.noise, p.mean, &x, &y).expect("lml")
            });
            emit(json!({"bench": "lml_grad", "n": n, "d": D,
                "median_ms": med, "min_ms": min, "reps": r, "threads": 1}));
        }
    }

    let fit_sizes: &[usize] = if quick { &[50] } else { &[50, 200] };
    for &n in fit_sizes {
        let (x, y) = ackley_data(n, 100);
        let opts = FitOptions::default();
        if want("fit") {
            let mut last = None;
            let (med, min, r) = time(reps, || {
                let f = fit(&x, &y, D, &opts, None).expect("fit");
                last = Some((f.log_posterior, f.evaluations));
            });
            let (lp, evals) = last.expect("at least one fit");
            emit(
                json!({"bench": "fit_map", "n": n, "d": D, "kernel": "matern52",
                "restarts": opts.restarts + 1, "log_posterior": lp, "evaluations": evals,
                "median_ms": med, "min_ms": min, "reps": r, "threads": threads}),
            );
        }
        if want("logei_maximize") && (n == 200 || quick) {
            let f = fit(&x, &y, D, &opts, None)?;
            let best_f = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let acq = OnModel::new(&f.gp, LogExpectedImprovement { best_f });
            let ms = MultiStartOptions::default();
            let mut value = f64::NAN;
            let mut seed = 0;
            let (med, min, r) = time(reps, || {
                seed += 1;
                let res = maximize(&acq, &ms, seed).expect("maximize");
                value = res.value;
            });
            emit(json!({"bench": "logei_maximize", "n": n, "d": D,
                "raw_samples": 200 * D, "restarts": 10 * D, "value": value,
                "median_ms": med, "min_ms": min, "reps": r, "threads": threads}));
        }
        if want("pbgi_maximize") && (n == 200 || quick) {
            let f = fit(&x, &y, D, &opts, None)?;
            let cost = LinearMeanCost {
                offset: 1.0,
                slope: 20.0,
            };
            let acq = OnModel::with_cost(&f.gp, Pbgi { lambda: 1e-4 }, &cost);
            let ms = MultiStartOptions::default();
            let mut value = f64::NAN;
            let mut seed = 0;
            let (med, min, r) = time(reps, || {
                seed += 1;
                value = maximize(&acq, &ms, seed).expect("maximize").value;
            });
            emit(
                json!({"bench": "pbgi_maximize", "n": n, "d": D, "lambda": 1e-4,
                "cost": "1 + 20 mean(x)", "raw_samples": 200 * D, "restarts": 10 * D,
                "value": value, "median_ms": med, "min_ms": min, "reps": r, "threads": threads}),
            );
        }
    }
    if want("bo_step") {
        // One full BO step as a study runs it: MAP fit with restarts + PBGI maximization
        // (200·d raw samples, 10·d starts), known cost 1 + 20·mean(x).
        use pandora_core::policy::{CostSetting, History, StepConfig, StepContext, propose};
        let cost = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let steps: &[usize] = if quick { &[50] } else { &[50, 200] };
        for &n in steps {
            let (x, y) = ackley_data(n, 7);
            let c: Vec<f64> = vec![1.0; n];
            let config = StepConfig::default();
            let mut seed = 0;
            let (med, min, r) = time(reps, || {
                seed += 1;
                let h = History {
                    x: &x,
                    y: &y,
                    cost: &c,
                    pending: &[],
                };
                propose(
                    D,
                    h,
                    &config,
                    &StepContext::default(),
                    CostSetting::Known(&cost),
                    seed,
                    None,
                )
                .expect("step")
            });
            emit(
                json!({"bench": "bo_step", "n": n, "d": D, "acquisition": "pbgi",
                "median_ms": med, "min_ms": min, "reps": r, "threads": threads}),
            );
        }
    }
    lookahead(&want, quick, reps, threads)?;
    // Minutes at full size: only when the filter asks for it (`bo_step_scaling`, `scaling`).
    if filter.is_some_and(|f| f.contains("scaling")) {
        let args = if quick {
            ScalingArgs {
                dims: vec![8],
                sizes: vec![100],
                ..scaling.clone()
            }
        } else {
            scaling.clone()
        };
        scaling::run(&args, if quick { 1 } else { reps.min(3) }, threads)?;
    }
    Ok(())
}

/// One full step (`policy::propose`: MAP fit of the objective GP, and of the log-cost GP when
/// costs are unknown, plus the acquisition) on fixed data; a new step seed per repetition.
fn time_step(
    d: usize,
    h: pandora_core::policy::History<'_>,
    config: &pandora_core::policy::StepConfig,
    ctx: &pandora_core::policy::StepContext,
    unknown_cost: bool,
    reps: usize,
) -> (f64, f64, usize) {
    use pandora_core::policy::{CostSetting, propose};
    let mut seed = 0;
    time(reps, || {
        seed += 1;
        let cost = if unknown_cost {
            CostSetting::Unknown
        } else {
            CostSetting::Uniform
        };
        propose(d, h, config, ctx, cost, seed, None).expect("step")
    })
}

/// A history without pending points.
fn history<'a>(x: &'a [f64], y: &'a [f64], cost: &'a [f64]) -> pandora_core::policy::History<'a> {
    pandora_core::policy::History {
        x,
        y,
        cost,
        pending: &[],
    }
}

/// The issue-8 lookahead and entropy workloads: one full B-MS-EI acquisition (fit of both GPs,
/// suggested-budget rollout, tree maximization) on a 3-D problem with an unknown cosine cost at
/// n = 50, for the 4-step path `[1, 1, 1]` and the `[4, 4, 2]` tree; one full KG and MES step at
/// d = 8, n = 100.
fn lookahead(want: &dyn Fn(&str) -> bool, quick: bool, reps: usize, threads: usize) -> Result<()> {
    use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, FantasyTree};
    use pandora_core::policy::{StepConfig, StepContext};
    if want("bmsei_step") {
        // Alpine1 (d = 3) with the B-MS-EI paper's random cosine cost (seed 0), 50 uniform points;
        // budget 60 of which 30 remain.
        let d = 3;
        let n = if quick { 20 } else { 50 };
        let problem = pandora_problems::build(&pandora_problems::ProblemSpec {
            objective: "alpine1".into(),
            dim: d,
            cost: "cosine".into(),
            seed: 0,
            ..Default::default()
        })?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
        let y: Vec<f64> = x.chunks_exact(d).map(|r| problem.eval(r)).collect();
        let c: Vec<f64> = x.chunks_exact(d).map(|r| problem.cost(r)).collect();
        let trees: &[&[usize]] = if quick {
            &[&[1]]
        } else {
            &[&[1], &[32], &[1, 1, 1], &[4, 4, 2]]
        };
        for stages in trees {
            let tree = FantasyTree::new(stages)?;
            let config = StepConfig {
                acquisition: AcquisitionName::BMsEi,
                params: AcquisitionParams {
                    tree: Some(tree),
                    ..AcquisitionParams::default()
                },
                ..StepConfig::default()
            };
            let ctx = StepContext {
                remaining_budget: Some(30.0),
                total_budget: Some(60.0),
                ..StepContext::default()
            };
            let (med, min, r) = time_step(d, history(&x, &y, &c), &config, &ctx, true, reps);
            emit(
                json!({"bench": "bmsei_step", "n": n, "d": d, "problem": "alpine1",
                "cost": "cosine (unknown)", "tree": stages, "points": tree.num_points(),
                "raw_samples": 200 * d, "restarts": 10 * d,
                "median_ms": med, "min_ms": min, "reps": r, "threads": threads}),
            );
        }
    }
    for (name, acq) in [
        ("kg_step", AcquisitionName::Kg),
        ("one_shot_kg_step", AcquisitionName::OneShotKg),
        ("mes_step", AcquisitionName::Mes),
    ] {
        if !want(name) {
            continue;
        }
        let n = if quick { 20 } else { 100 };
        let (x, y) = ackley_data(n, 11);
        let c = vec![1.0; n];
        let config = StepConfig {
            acquisition: acq,
            params: AcquisitionParams::default(),
            ..StepConfig::default()
        };
        let (med, min, r) = time_step(
            D,
            history(&x, &y, &c),
            &config,
            &StepContext::default(),
            false,
            reps,
        );
        emit(json!({"bench": name, "n": n, "d": D, "data": "ackley",
            "median_ms": med, "min_ms": min, "reps": r, "threads": threads}));
    }
    Ok(())
}
