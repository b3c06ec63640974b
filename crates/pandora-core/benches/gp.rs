//! Criterion benchmarks of the GP core (d = 8, Matérn-5/2 ARD): the posterior with gradients at
//! 1600 points, the log marginal likelihood with its gradient, a MAP fit, and a LogEI
//! maximization. `pandora bench` reports the same workloads as JSON lines.

use criterion::{Criterion, criterion_group, criterion_main};
use pandora_core::acquisition::{LogExpectedImprovement, OnModel};
use pandora_core::gp::fit::{FitOptions, fit};
use pandora_core::gp::likelihood::log_marginal_likelihood;
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use pandora_core::optim::multistart::{MultiStartOptions, maximize};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

const D: usize = 8;

fn data(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..n * D).map(|_| rng.random::<f64>()).collect();
    let mut y: Vec<f64> = x
        .chunks_exact(D)
        .map(|r| r.iter().map(|v| (5.0 * v).sin()).sum())
        .collect();
    let m = y.iter().sum::<f64>() / n as f64;
    let s = (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    for v in &mut y {
        *v = (*v - m) / s;
    }
    (x, y)
}

fn params() -> GpParams {
    let ln2 = std::f64::consts::LN_2;
    GpParams {
        kernel: Kernel::new(KernelKind::Matern52, vec![ln2; D], ln2).unwrap(),
        mean: 0.0,
        noise: (-5f64).exp(),
    }
}

fn bench(c: &mut Criterion) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let pts: Vec<f64> = (0..1600 * D).map(|_| rng.random::<f64>()).collect();
    for n in [50usize, 200] {
        let (x, y) = data(n, 0);
        let gp = ExactGp::new(x.clone(), y.clone(), params()).unwrap();
        c.bench_function(&format!("posterior_grad_1600_n{n}"), |b| {
            b.iter(|| black_box(gp.posterior(&pts, true).unwrap()))
        });
        let p = params();
        c.bench_function(&format!("lml_grad_n{n}"), |b| {
            b.iter(|| black_box(log_marginal_likelihood(&p.kernel, p.noise, 0.0, &x, &y).unwrap()))
        });
    }
    let (x, y) = data(50, 3);
    let opts = FitOptions::default();
    c.bench_function("fit_map_n50", |b| {
        b.iter(|| black_box(fit(&x, &y, D, &opts, None).unwrap()))
    });
    let (x, y) = data(200, 4);
    let model = fit(&x, &y, D, &opts, None).unwrap();
    let best_f = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let acq = OnModel::new(&model.gp, LogExpectedImprovement { best_f });
    let ms = MultiStartOptions::default();
    let mut group = c.benchmark_group("slow");
    group.sample_size(20);
    group.bench_function("logei_maximize_n200", |b| {
        b.iter(|| black_box(maximize(&acq, &ms, 0).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
