//! The `bo_step_scaling` workload: one BO step exactly as a study takes it ([`propose`]: MAP fit
//! of the papers' model on standardized outcomes, then the multi-start maximization with 200·d
//! raw samples and 10·d L-BFGS-B restarts), for LogEI and PBGI (λ = 1e-3, uniform cost), on
//! negated Ackley at uniform random points, over a grid of dimensions and sizes.
//!
//! Besides the whole step, the three phases are timed on their own with the step's settings: the
//! fit ([`GpModel::fit`]), the raw-sample screening (the acquisition's batched `values` at the
//! 200·d scrambled Sobol points, in the optimizer's chunks) and the whole maximization
//! ([`maximize`]); the restart phase is the maximization minus the screening. The acquisition
//! value each step reached is printed per seed, so that a change of the numerical core can be
//! checked for equal quality on the same data and seeds.
//!
//! A step inside a run has a previous step: the driver carries its hyperparameters. The
//! `bo_step_scaling_carry` lines time that step on the same cell: the previous step's full fit on
//! the first `n − 1` points (untimed) gives `θ_prev`, then the step on all `n` points is timed
//! with [`Refit::Always`] (the full multi-start fit with `θ_prev` as one more start) and with
//! [`Refit::Warm`] (a single start from `θ_prev`, as the driver does between scheduled refits),
//! each with its fit alone, the fit's evaluations, the warm fit's gain per point and the values
//! the steps reached.
//!
//! A run does not take the same step twice: the `bo_step_scaling_period` lines follow the
//! driver's objective fits ([`fit_objective_model`]) through one period of the default refit
//! schedule around `n` (a scheduled full refit, then the steps up to the next), carrying the
//! hyperparameters from step to step, with warm runs to the usual tolerances (`keep_grad = 0`,
//! the driver before the keep test) and with [`Refit::DEFAULT`]: how many steps fitted in full,
//! ran warm or kept the hyperparameters, the evaluations, the fit time per step (the amortized
//! cost a run pays) and the last step's log posterior against a full fit's on the same data.
//!
//! `--write-data DIR` writes every data set as `{"x": [[...]], "y": [...]}`
//! (`ackley_d16_n0600.json`), the format of `botorch_rs_scaling.py`, so the peer can be timed on
//! exactly the same points.

use anyhow::{Context, Result};
use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, OnModel, build_pointwise};
use pandora_core::gp::GpParams;
use pandora_core::gp::fit::FitOptions;
use pandora_core::gp::{GpModel, Transforms};
use pandora_core::optim::multistart::{Objective, maximize};
use pandora_core::optim::sobol::Sobol;
use pandora_core::policy::{
    CostSetting, FitKind, History, Refit, StepConfig, StepContext, fit_objective_model, propose,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The default grid.
pub const DIMS: [usize; 2] = [8, 16];
/// The default sizes.
pub const SIZES: [usize; 5] = [100, 300, 600, 1000, 2000];

/// Which part of the grid to run and where to write the data.
#[derive(Debug, Clone, Default)]
pub struct ScalingArgs {
    /// Dimensions (default [`DIMS`]).
    pub dims: Vec<usize>,
    /// Sizes (default [`SIZES`]).
    pub sizes: Vec<usize>,
    /// Write the data sets here (and still run the timings).
    pub write_data: Option<PathBuf>,
    /// Replace the fit's L-BFGS-B relative-reduction tolerance `factr` (default 1e7, SciPy's):
    /// measures what a looser hyperparameter fit would save and cost.
    pub fit_factr: Option<f64>,
}

/// The data set of one grid cell, as the peer script reads it.
#[derive(Serialize)]
struct DataFile<'a> {
    x: Vec<&'a [f64]>,
    y: &'a [f64],
}

/// One printed measurement.
#[derive(Serialize)]
struct Line<'a> {
    bench: &'a str,
    d: usize,
    /// The fit's `factr` (1e7 unless `--fit-factr`).
    fit_factr: f64,
    n: usize,
    acquisition: &'a str,
    raw_samples: usize,
    restarts: usize,
    step_ms: f64,
    step_min_ms: f64,
    /// Median CPU time of a step (both cores: up to twice the wall time).
    step_cpu_ms: f64,
    fit_ms: f64,
    screen_ms: f64,
    restarts_ms: f64,
    /// Likelihood evaluations of the first seed's fit (all hyperparameter starts).
    fit_evaluations: usize,
    /// Acquisition value reached by each seed's step (seeds 1, 2, …).
    values: Vec<f64>,
    /// The first seed's proposal.
    x: Vec<f64>,
    reps: usize,
    threads: usize,
}

/// One printed measurement of the step with a previous step (`bo_step_scaling_carry`).
#[derive(Serialize)]
struct CarryLine<'a> {
    bench: &'a str,
    d: usize,
    n: usize,
    acquisition: &'a str,
    /// Median step with [`Refit::Always`] and `θ_prev` as an extra start (the driver before).
    step_full_ms: f64,
    /// Median step with [`Refit::Warm`] from `θ_prev` (no refit due) run to the usual
    /// tolerances (`keep_grad = 0`, the driver before the keep test).
    step_warm_ms: f64,
    /// Median step with [`Refit::DEFAULT`] from `θ_prev` (no refit due): `θ_prev` kept when its
    /// gradient passes the test, else a warm run stopped at that gradient.
    step_keep_ms: f64,
    /// The full fit alone, the warm fit alone and the keep-or-warm fit alone (medians).
    fit_full_ms: f64,
    fit_warm_ms: f64,
    fit_keep_ms: f64,
    /// Likelihood evaluations of the first seed's full, warm and keep-or-warm fits.
    fit_full_evaluations: usize,
    fit_warm_evaluations: usize,
    fit_keep_evaluations: usize,
    /// Whether [`Refit::DEFAULT`] kept `θ_prev` (first seed).
    kept: bool,
    /// The warm fit's log-posterior gain per point over `θ_prev` (first seed).
    warm_gain: f64,
    /// The log posteriors the full, warm and keep-or-warm fits reached (first seed).
    log_posterior_full: f64,
    log_posterior_warm: f64,
    log_posterior_keep: f64,
    /// Acquisition values reached by each seed's step, full, warm and keep-or-warm.
    values_full: Vec<f64>,
    values_warm: Vec<f64>,
    values_keep: Vec<f64>,
    reps: usize,
}

/// The fits of one period of the default refit schedule (`bo_step_scaling_period`).
#[derive(Serialize)]
struct PeriodLine<'a> {
    bench: &'a str,
    d: usize,
    /// The cell's size, inside the period.
    n: usize,
    /// `"warm"` (`keep_grad = 0`) or `"default"` ([`Refit::DEFAULT`]).
    refit: &'a str,
    keep_grad: f64,
    /// The period: the steps at `from ≤ m < to` observations (a full refit scheduled at `from`).
    from: usize,
    to: usize,
    /// Steps that fitted in full, ran a warm fit, kept the hyperparameters.
    full: usize,
    warm: usize,
    kept: usize,
    /// Likelihood evaluations over the period.
    evaluations: usize,
    /// Fit time per step over the period (wall and process CPU, ms): the amortized fit cost.
    fit_ms_per_step: f64,
    fit_cpu_ms_per_step: f64,
    /// The last step's log posterior, and a full fit's on the same data (the fit's quality).
    log_posterior_last: f64,
    log_posterior_last_full: f64,
}

/// Negated Ackley on `[−2, 2]^d` (through `x ↦ 4x − 2`) at `n` uniform random points.
pub fn ackley_data(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
    let y = x
        .chunks_exact(d)
        .map(|r| {
            let s1 = r.iter().map(|v| (4.0 * v - 2.0).powi(2)).sum::<f64>() / d as f64;
            let s2 = r
                .iter()
                .map(|v| (2.0 * std::f64::consts::PI * (4.0 * v - 2.0)).cos())
                .sum::<f64>()
                / d as f64;
            20.0 * (-0.2 * s1.sqrt()).exp() + s2.exp() - 20.0 - std::f64::consts::E
        })
        .collect();
    (x, y)
}

fn write_data(dir: &Path, d: usize, x: &[f64], y: &[f64]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--write-data {}", dir.display()))?;
    let path = dir.join(format!("ackley_d{d:02}_n{:04}.json", y.len()));
    let file = DataFile {
        x: x.chunks_exact(d).collect(),
        y,
    };
    let text = serde_json::to_string(&file)?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

fn config(acquisition: AcquisitionName, fit_factr: Option<f64>) -> StepConfig {
    let mut cfg = StepConfig {
        acquisition,
        // The full fit (the step without a previous step; `carry_line` times the warm fit).
        refit: Refit::Always,
        ..StepConfig::default()
    };
    if let Some(f) = fit_factr {
        cfg.fit.lbfgsb.factr = f;
    }
    cfg
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// CPU time (user + system, all threads) of this process so far in ms: on a shared machine it
/// moves far less with the other jobs than wall-clock time does. NaN where unavailable. (The
/// whole process, not a thread: a benchmarked step spreads over the rayon pool.)
fn cpu_ms() -> f64 {
    pandora_experiment::cpu_clock::process_seconds().map_or(f64::NAN, |s| s * 1e3)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The phases of one step with the step's own settings: (fit, screening, maximization) in ms.
fn phases(
    d: usize,
    x: &[f64],
    y: &[f64],
    cfg: &StepConfig,
    seed: u64,
) -> Result<([f64; 3], usize)> {
    let t = Instant::now();
    let transforms = Transforms {
        standardize_outcomes: cfg.standardize,
        ..Transforms::default()
    };
    let fit_opts = FitOptions {
        seed,
        ..cfg.fit.clone()
    };
    let model = GpModel::fit(x, y, d, &transforms, &fit_opts, None)?;
    let fit_ms = ms(t);
    let params = AcquisitionParams {
        best_f: Some(y.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        t: Some(1.0),
        ..cfg.params
    };
    let acq = build_pointwise(cfg.acquisition, &params, d)?;
    let obj = OnModel::new(&model, acq);
    let raw = cfg.multistart.raw_samples.unwrap_or(200 * d);
    let pts = Sobol::scrambled(d, seed)?.points(raw)?;
    let t = Instant::now();
    let mut vals = vec![0.0; raw];
    vals.par_chunks_mut(128)
        .zip(pts.par_chunks(128 * d))
        .for_each(|(o, p)| obj.values(p, o));
    std::hint::black_box(&vals);
    let screen_ms = ms(t);
    let t = Instant::now();
    maximize(&obj, &cfg.multistart, seed)?;
    let evals = model.fit_summary().map_or(0, |f| f.evaluations);
    Ok(([fit_ms, screen_ms, ms(t)], evals))
}

/// The step with a previous step on one cell and acquisition (see the module documentation).
fn carry_line<'a>(
    d: usize,
    x: &[f64],
    y: &[f64],
    cfg: &StepConfig,
    name: &'a str,
    reps: usize,
) -> Result<CarryLine<'a>> {
    let n = y.len();
    let transforms = Transforms {
        standardize_outcomes: cfg.standardize,
        ..Transforms::default()
    };
    let prev_opts = FitOptions {
        seed: 0,
        ..cfg.fit.clone()
    };
    let prev = GpModel::fit(
        &x[..(n - 1) * d],
        &y[..n - 1],
        d,
        &transforms,
        &prev_opts,
        None,
    )?;
    let prev: GpParams = prev.params().clone();
    let h = History {
        x,
        y,
        cost: &[],
        pending: &[],
    };
    let warm_cfg = StepConfig {
        refit: Refit::Warm {
            growth: 0.05,
            max_gain: f64::INFINITY,
            keep_grad: 0.0,
        },
        ..cfg.clone()
    };
    let Refit::Warm { keep_grad, .. } = Refit::DEFAULT else {
        anyhow::bail!("the default refit is warm");
    };
    let keep_cfg = StepConfig {
        refit: Refit::Warm {
            growth: 0.05,
            max_gain: f64::INFINITY,
            keep_grad,
        },
        ..cfg.clone()
    };
    let ctx = StepContext {
        warm_fit: true,
        ..StepContext::default()
    };
    let mut t_step = [Vec::new(), Vec::new(), Vec::new()];
    let mut t_fit = [Vec::new(), Vec::new(), Vec::new()];
    let mut values = [Vec::new(), Vec::new(), Vec::new()];
    let (mut evals, mut lp, mut gain, mut kept) = ([0; 3], [0.0; 3], 0.0, false);
    for seed in 1..=reps.max(1) as u64 {
        for (i, c) in [cfg, &warm_cfg, &keep_cfg].into_iter().enumerate() {
            let t = Instant::now();
            let p = propose(d, h, c, &ctx, CostSetting::Uniform, seed, Some(&prev))?;
            t_step[i].push(ms(t));
            values[i].push(p.acquisition_value);
        }
        let opts = FitOptions {
            seed,
            ..cfg.fit.clone()
        };
        let t = Instant::now();
        let full = GpModel::fit(x, y, d, &transforms, &opts, Some(&prev))?;
        t_fit[0].push(ms(t));
        let t = Instant::now();
        let (warm, g) = GpModel::fit_warm(x, y, d, &transforms, &opts, &prev)?;
        t_fit[1].push(ms(t));
        let t = Instant::now();
        let (keep, k) = GpModel::fit_warm_or_keep(x, y, d, &transforms, &opts, &prev, keep_grad)?;
        t_fit[2].push(ms(t));
        if seed == 1 {
            kept = k.kept;
            for (i, m) in [&full, &warm, &keep].into_iter().enumerate() {
                let s = m
                    .fit_summary()
                    .context("a fitted model has a fit summary")?;
                evals[i] = s.evaluations;
                lp[i] = s.log_posterior;
            }
            gain = g;
        }
    }
    let [s0, s1, s2] = t_step;
    let [f0, f1, f2] = t_fit;
    let [v0, v1, v2] = values;
    Ok(CarryLine {
        bench: "bo_step_scaling_carry",
        d,
        n,
        acquisition: name,
        step_full_ms: median(s0),
        step_warm_ms: median(s1),
        step_keep_ms: median(s2),
        fit_full_ms: median(f0),
        fit_warm_ms: median(f1),
        fit_keep_ms: median(f2),
        fit_full_evaluations: evals[0],
        fit_warm_evaluations: evals[1],
        fit_keep_evaluations: evals[2],
        kept,
        warm_gain: gain,
        log_posterior_full: lp[0],
        log_posterior_warm: lp[1],
        log_posterior_keep: lp[2],
        values_full: v0,
        values_warm: v1,
        values_keep: v2,
        reps: reps.max(1),
    })
}

/// The period of the default schedule around `n`: the scheduled full refits `from ≤ n < to`.
fn schedule_period(n: usize) -> (usize, usize) {
    let from = (0..=n)
        .rev()
        .find(|&m| Refit::DEFAULT.scheduled(m))
        .unwrap_or(0);
    let to = (n + 1..)
        .find(|&m| Refit::DEFAULT.scheduled(m))
        .unwrap_or(n + 1);
    (from, to)
}

/// The objective fits of the driver over one period of the default refit schedule around `n`
/// (the steps at `from ≤ m < to` observations of the cell's data, continued), with the
/// hyperparameters carried from step to step as the driver carries them: `keep_grad = 0` (warm
/// runs to the usual tolerances) and the default. The previous period's last fit is stood in for
/// by a full fit on `from − 1` points (untimed).
fn period_lines(
    d: usize,
    n: usize,
    keep_modes: &[(&'static str, f64)],
) -> Result<Vec<PeriodLine<'static>>> {
    let (from, to) = schedule_period(n);
    let (x, y) = ackley_data(to, d, 1000 + d as u64);
    let base = config(AcquisitionName::LogEi, None);
    let hist = |m: usize| History {
        x: &x[..m * d],
        y: &y[..m],
        cost: &[],
        pending: &[],
    };
    let start = fit_objective_model(d, hist(from - 1), &base, &StepContext::default(), 0, None)?;
    let mut lines = Vec::new();
    for &(name, keep_grad) in keep_modes {
        let cfg = StepConfig {
            refit: Refit::Warm {
                growth: 0.05,
                max_gain: 0.01,
                keep_grad,
            },
            ..base.clone()
        };
        let mut warm = Some(start.0.params().clone());
        let (mut counts, mut evaluations, mut wall, mut cpu) = ([0usize; 3], 0, 0.0, 0.0);
        let mut last = None;
        for m in from..to {
            let ctx = StepContext {
                warm_fit: !cfg.refit.scheduled(m),
                ..StepContext::default()
            };
            let (t, c) = (Instant::now(), cpu_ms());
            let (model, kind) =
                fit_objective_model(d, hist(m), &cfg, &ctx, m as u64, warm.as_ref())?;
            wall += ms(t);
            cpu += cpu_ms() - c;
            counts[kind as usize] += 1;
            evaluations += model.fit_summary().map_or(0, |f| f.evaluations);
            warm = Some(model.params().clone());
            last = Some(model);
        }
        let last = last.context("a period has at least one step")?;
        let (full, _) =
            fit_objective_model(d, hist(to - 1), &base, &StepContext::default(), 0, None)?;
        let lp = |m: &GpModel| m.fit_summary().map_or(f64::NAN, |f| f.log_posterior);
        let steps = (to - from) as f64;
        lines.push(PeriodLine {
            bench: "bo_step_scaling_period",
            d,
            n,
            refit: name,
            keep_grad,
            from,
            to,
            full: counts[FitKind::Full as usize],
            warm: counts[FitKind::Warm as usize],
            kept: counts[FitKind::Kept as usize],
            evaluations,
            fit_ms_per_step: wall / steps,
            fit_cpu_ms_per_step: cpu / steps,
            log_posterior_last: lp(&last),
            log_posterior_last_full: lp(&full),
        });
    }
    Ok(lines)
}

/// Runs the grid: per cell and acquisition, `reps` steps (seeds 1..=reps) timed whole, and the
/// phases timed once per seed.
pub fn run(args: &ScalingArgs, reps: usize, threads: usize) -> Result<()> {
    let dims = if args.dims.is_empty() {
        DIMS.to_vec()
    } else {
        args.dims.clone()
    };
    let sizes = if args.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        args.sizes.clone()
    };
    for &d in &dims {
        for &n in &sizes {
            let (x, y) = ackley_data(n, d, 1000 + d as u64);
            if let Some(dir) = &args.write_data {
                write_data(dir, d, &x, &y)?;
            }
            for (name, acq) in [
                ("logei", AcquisitionName::LogEi),
                ("pbgi", AcquisitionName::Pbgi),
            ] {
                let cfg = config(acq, args.fit_factr);
                let (mut steps, mut values, mut first_x) = (Vec::new(), Vec::new(), Vec::new());
                let mut cpu = Vec::new();
                let mut phase = [Vec::new(), Vec::new(), Vec::new()];
                let mut fit_evaluations = 0;
                for seed in 1..=reps.max(1) as u64 {
                    let h = History {
                        x: &x,
                        y: &y,
                        cost: &[],
                        pending: &[],
                    };
                    let (t, c) = (Instant::now(), cpu_ms());
                    let p = propose(
                        d,
                        h,
                        &cfg,
                        &StepContext::default(),
                        CostSetting::Uniform,
                        seed,
                        None,
                    )?;
                    steps.push(ms(t));
                    cpu.push(cpu_ms() - c);
                    values.push(p.acquisition_value);
                    if first_x.is_empty() {
                        first_x = p.x;
                    }
                    let ([f, s, m], evals) = phases(d, &x, &y, &cfg, seed)?;
                    if fit_evaluations == 0 {
                        fit_evaluations = evals;
                    }
                    phase[0].push(f);
                    phase[1].push(s);
                    phase[2].push(m - s);
                }
                let min = steps.iter().copied().fold(f64::INFINITY, f64::min);
                let [f, s, r] = phase;
                let line = Line {
                    bench: "bo_step_scaling",
                    d,
                    fit_factr: cfg.fit.lbfgsb.factr,
                    n,
                    acquisition: name,
                    raw_samples: 200 * d,
                    restarts: 10 * d,
                    step_ms: median(steps),
                    step_min_ms: min,
                    step_cpu_ms: median(cpu),
                    fit_ms: median(f),
                    screen_ms: median(s),
                    restarts_ms: median(r),
                    fit_evaluations,
                    values,
                    x: first_x,
                    reps: reps.max(1),
                    threads,
                };
                println!("{}", serde_json::to_string(&line)?);
                let carry = carry_line(d, &x, &y, &cfg, name, reps)?;
                println!("{}", serde_json::to_string(&carry)?);
            }
            let Refit::Warm { keep_grad, .. } = Refit::DEFAULT else {
                anyhow::bail!("the default refit is warm");
            };
            // Warm runs to the usual tolerances take minutes per period beyond n = 1000.
            let modes: &[(&str, f64)] = if n <= 1000 {
                &[("warm", 0.0), ("default", keep_grad)]
            } else {
                &[("default", keep_grad)]
            };
            for line in period_lines(d, n, modes)? {
                println!("{}", serde_json::to_string(&line)?);
            }
        }
    }
    Ok(())
}
