//! Rough evaluation cost of pathwise samples (ignored by default; prints, asserts nothing about
//! time). Run with
//! `cargo test --release -p pandora-core --test gp_paths_timing -- --ignored --nocapture`.

use pandora_core::gp::paths::DEFAULT_NUM_FEATURES;
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind, PosteriorPath, PriorPath};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;
use std::time::Instant;

const D: usize = 8;
const REPS: usize = 20_000;

fn time_per_call(mut f: impl FnMut(usize) -> f64) -> f64 {
    let mut acc = 0.0;
    for i in 0..REPS / 10 {
        acc += f(i);
    }
    let t = Instant::now();
    for i in 0..REPS {
        acc += f(i);
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / REPS as f64;
    black_box(acc);
    us
}

#[test]
#[ignore]
fn evaluation_cost() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let kernel = Kernel::new(KernelKind::Matern52, vec![0.3; D], 1.0).unwrap();
    let points: Vec<Vec<f64>> = (0..256)
        .map(|_| (0..D).map(|_| rng.random::<f64>()).collect())
        .collect();
    let prior = PriorPath::sample(&kernel, DEFAULT_NUM_FEATURES, &mut rng).unwrap();
    let mut g = vec![0.0; D];
    let v = time_per_call(|i| prior.value(&points[i % 256]));
    let vg = time_per_call(|i| prior.value_grad(&points[i % 256], &mut g));
    println!("prior, F = 1024, d = {D}: value {v:.2} µs, value_grad {vg:.2} µs");
    for n in [10, 100, 500] {
        let x: Vec<f64> = (0..n * D).map(|_| rng.random::<f64>()).collect();
        let y: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let params = GpParams {
            kernel: kernel.clone(),
            mean: 0.0,
            noise: 1e-4,
        };
        let gp = ExactGp::new(x, y, params).unwrap();
        let t = Instant::now();
        let post = PosteriorPath::sample(&gp, DEFAULT_NUM_FEATURES, &mut rng).unwrap();
        let draw = t.elapsed().as_secs_f64() * 1e6;
        let v = time_per_call(|i| post.value(&points[i % 256]));
        let vg = time_per_call(|i| post.value_grad(&points[i % 256], &mut g));
        println!(
            "posterior, F = 1024, d = {D}, n = {n}: draw {draw:.0} µs, value {v:.2} µs, value_grad {vg:.2} µs"
        );
    }
}
