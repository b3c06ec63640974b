//! Timings of the optimizers: one bounded Rosenbrock-8 L-BFGS-B solve and a default multi-start
//! maximization of a cheap 8-D function.

use criterion::{Criterion, criterion_group, criterion_main};
use pandora_core::optim::{
    LbfgsbOptions, LbfgsbWorkspace, MultiStartOptions, Objective, maximize, minimize,
    minimize_with_workspace, scrambled_sobol,
};
use std::hint::black_box;

fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
    g.fill(0.0);
    let mut f = 0.0;
    for i in 0..x.len() - 1 {
        let a = x[i + 1] - x[i] * x[i];
        let b = 1.0 - x[i];
        f += 100.0 * a * a + b * b;
        g[i] += -400.0 * x[i] * a - 2.0 * b;
        g[i + 1] += 200.0 * a;
    }
    f
}

/// A cheap multimodal 8-D function: `Σ cos(3π xᵢ)·xᵢ − |x − 0.6|²`.
struct Cheap;

impl Objective for Cheap {
    fn dim(&self) -> usize {
        8
    }
    fn value_grad(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let w = 3.0 * std::f64::consts::PI;
        let mut v = 0.0;
        for i in 0..8 {
            let (s, c) = (w * x[i]).sin_cos();
            v += c * x[i] - (x[i] - 0.6).powi(2);
            g[i] = c - w * s * x[i] - 2.0 * (x[i] - 0.6);
        }
        v
    }
}

fn bench(c: &mut Criterion) {
    let l = vec![-2.0; 8];
    let u = vec![0.5; 8];
    let opts = LbfgsbOptions::default();
    c.bench_function("lbfgsb_rosenbrock8_bounded", |b| {
        b.iter(|| {
            let mut x = vec![0.0; 8];
            let r = minimize(rosenbrock, &mut x, &l, &u, &opts).unwrap();
            black_box(r.f)
        })
    });
    let mut ws = LbfgsbWorkspace::new(8, opts.memory);
    c.bench_function("lbfgsb_rosenbrock8_bounded_reused_workspace", |b| {
        b.iter(|| {
            let mut x = vec![0.0; 8];
            let r = minimize_with_workspace(rosenbrock, &mut x, &l, &u, &opts, &mut ws).unwrap();
            black_box(r.f)
        })
    });
    c.bench_function("sobol_scrambled_1600x8", |b| {
        b.iter(|| black_box(scrambled_sobol(1600, 8, 1).unwrap()))
    });
    let mopts = MultiStartOptions::default();
    c.bench_function("multistart_cheap8_default", |b| {
        b.iter(|| black_box(maximize(&Cheap, &mopts, 3).unwrap().value))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
