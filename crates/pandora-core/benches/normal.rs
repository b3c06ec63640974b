//! Throughput of the hot standard-normal helpers over 10k points (reported per batch; divide
//! by 10 000 for ns/call).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pandora_core::math;
use std::hint::black_box;

const N: usize = 10_000;

/// Points typical of acquisition optimization: z = (μ − best)/σ mostly in [−10, 5].
fn common_points() -> Vec<f64> {
    (0..N)
        .map(|i| -10.0 + 15.0 * (i as f64 + 0.5) / N as f64)
        .collect()
}

/// Far-tail points, z in [−1e6, −10] (log-spaced).
fn tail_points() -> Vec<f64> {
    (0..N)
        .map(|i| -(10f64.powf(1.0 + 5.0 * (i as f64 + 0.5) / N as f64)))
        .collect()
}

fn bench_fn(c: &mut Criterion, group: &str, f: fn(f64) -> f64) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(N as u64));
    for (label, pts) in [
        ("z_in_-10_5", common_points()),
        ("z_in_-1e6_-10", tail_points()),
    ] {
        g.bench_function(label, |b| {
            b.iter(|| {
                let mut acc = 0.0;
                for &z in &pts {
                    acc += f(black_box(z));
                }
                acc
            })
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_fn(c, "log_h", math::log_h);
    bench_fn(c, "log_norm_cdf", math::log_norm_cdf);
    bench_fn(c, "dlog_h", math::dlog_h);
}

criterion_group!(normal, benches);
criterion_main!(normal);
