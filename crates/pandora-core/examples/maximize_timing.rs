//! Times the acquisition maximization of one BO step on its own, on a fitted model.
//!
//! `cargo run --release -p pandora-core --example maximize_timing -- N D ACQ SEED REPS`
//! (defaults 600 16 pbgi 1 5; ACQ is `pbgi` (λ = 1e-3) or `logei`): fits the papers' GP
//! (`StepConfig::default()`, standardized outcomes) to negated Ackley at `N` uniform random
//! points in `[0, 1]^D`, then runs `optim::multistart::maximize` with the papers' settings
//! (200·D raw samples, 10·D restarts) `REPS` times and prints, as one JSON line, the median wall
//! and process-CPU milliseconds per maximization (CPU time moves less with other jobs on a shared
//! machine), the value reached and the evaluations. The model is fitted once and not timed:
//! this isolates the part of a step that `pandora bench`'s `bo_step_scaling` lines call
//! `screen_ms + restarts_ms`, so two builds can be compared on it quickly (docs/bench.md).

use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, OnModel, build_pointwise};
use pandora_core::gp::{GpModel, Transforms};
use pandora_core::optim::multistart::{MultiStartOptions, maximize};
use pandora_core::policy::StepConfig;
use std::time::Instant;

/// Uniform draws in `[0, 1)` from SplitMix64 (the data need no better generator).
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Negated Ackley on `[−2, 2]^d` (through `x ↦ 4x − 2`) at `n` uniform random points.
fn ackley(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = seed;
    let x: Vec<f64> = (0..n * d).map(|_| uniform(&mut s)).collect();
    let tau = 2.0 * std::f64::consts::PI;
    let y = x
        .chunks_exact(d)
        .map(|r| {
            let s1 = r.iter().map(|v| (4.0 * v - 2.0).powi(2)).sum::<f64>() / d as f64;
            let s2 = r.iter().map(|v| (tau * (4.0 * v - 2.0)).cos()).sum::<f64>() / d as f64;
            20.0 * (-0.2 * s1.sqrt()).exp() + s2.exp() - 20.0 - std::f64::consts::E
        })
        .collect();
    (x, y)
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`; NaN elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    match (tick(11), tick(12)) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let n: usize = arg(0, "600").parse()?;
    let d: usize = arg(1, "16").parse()?;
    let acquisition = match arg(2, "pbgi").as_str() {
        "pbgi" => AcquisitionName::Pbgi,
        "logei" => AcquisitionName::LogEi,
        other => return Err(format!("ACQ must be pbgi or logei, got {other}").into()),
    };
    let seed: u64 = arg(3, "1").parse()?;
    let reps: usize = arg(4, "5").parse::<usize>()?.max(1);
    let (x, y) = ackley(n, d, 1000 + d as u64 + seed);
    let transforms = Transforms {
        standardize_outcomes: true,
        ..Transforms::default()
    };
    let model = GpModel::fit(&x, &y, d, &transforms, &StepConfig::default().fit, None)?;
    let params = AcquisitionParams {
        best_f: Some(y.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        lambda: Some(1e-3),
        t: Some(1.0),
        ..AcquisitionParams::default()
    };
    let obj = OnModel::new(&model, build_pointwise(acquisition, &params, d)?);
    let opts = MultiStartOptions::default();
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..reps {
        let (t, c) = (Instant::now(), cpu_seconds());
        last = Some(maximize(&obj, &opts, seed)?);
        wall.push(t.elapsed().as_secs_f64() * 1e3);
        cpu.push((cpu_seconds() - c) * 1e3);
    }
    let r = last.ok_or("no repetition ran")?;
    println!(
        "{{\"n\": {n}, \"d\": {d}, \"acquisition\": \"{}\", \"wall_ms\": {:.1}, \"cpu_ms\": {:.1}, \"value\": {:e}, \"evaluations\": {}, \"reps\": {reps}}}",
        arg(2, "pbgi"),
        median(wall),
        median(cpu),
        r.value,
        r.evaluations
    );
    Ok(())
}
