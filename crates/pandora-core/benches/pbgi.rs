//! Cost of one Pandora's Box Gittins index (`pbgi_index`, value and partial derivatives) versus
//! one `LogExpectedImprovement::eval` on the same 10k `(μ, σ)` inputs (reported per batch;
//! divide by 10 000 for ns/call).
//!
//! Inputs: `μ ∈ [−3, 3]`, `σ` log-uniform on `[1e-3, 10]`, `λc` log-uniform on `[1e-12, 1]`
//! (the `λ` ranges of the PBGI and stopping papers times costs of order one), plus a far-tail set
//! with `λc` log-uniform on `[1e-300, 1e-12]`. LogEI uses the incumbent `best_f = 1`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pandora_core::acquisition::{
    LogCost, LogExpectedImprovement, PointwiseAcquisition, pbgi_index,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

const N: usize = 10_000;

fn inputs(log10_lc: (f64, f64)) -> Vec<(f64, f64, f64)> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(7);
    (0..N)
        .map(|_| {
            let mu = 6.0 * r.random::<f64>() - 3.0;
            let s = 10f64.powf(-3.0 + 4.0 * r.random::<f64>());
            let l = log10_lc.0 + (log10_lc.1 - log10_lc.0) * r.random::<f64>();
            (mu, s, l * core::f64::consts::LN_10)
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("pbgi");
    g.throughput(Throughput::Elements(N as u64));
    for (label, pts) in [
        ("lc_1e-12_1", inputs((-12.0, 0.0))),
        ("lc_1e-300_1e-12", inputs((-300.0, -12.0))),
    ] {
        g.bench_function(format!("pbgi_index/{label}"), |b| {
            b.iter(|| {
                let mut acc = 0.0;
                for &(mu, s, l) in &pts {
                    let r = pbgi_index(black_box(mu), black_box(s), black_box(l));
                    acc += r.g + r.dg_dsigma + r.dg_dlog_lambda_c;
                }
                acc
            })
        });
        let ei = LogExpectedImprovement { best_f: 1.0 };
        g.bench_function(format!("log_ei/{label}"), |b| {
            b.iter(|| {
                let mut acc = 0.0;
                for &(mu, s, _) in &pts {
                    let p = ei.eval(black_box(mu), black_box(s), LogCost::default());
                    acc += p.value + p.d_mu + p.d_sigma;
                }
                acc
            })
        });
    }
    g.finish();
}

criterion_group!(pbgi, benches);
criterion_main!(pbgi);
