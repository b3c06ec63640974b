//! Cost of one control-set Gittins index (`cvs::mixture_index`: the root of the bank-averaged
//! expected improvement, with its derivatives) at the paper's bank size `N = 1024`, for a
//! posterior spread typical of a BOCVS run (`μ ∈ [−1, 1]`, `σ` log-uniform on `[0.01, 1]`) and
//! `λc` from 1e-4 to 1e-1.

use criterion::{Criterion, criterion_group, criterion_main};
use pandora_core::cvs::mixture_index;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let n = 1024;
    let mut r = Xoshiro256PlusPlus::seed_from_u64(3);
    let mu: Vec<f64> = (0..n).map(|_| 2.0 * r.random::<f64>() - 1.0).collect();
    let sigma: Vec<f64> = (0..n)
        .map(|_| 10f64.powf(-2.0 + 2.0 * r.random::<f64>()))
        .collect();
    let mut g = c.benchmark_group("cvs");
    for lc in [1e-4f64, 1e-2, 1e-1] {
        g.bench_function(format!("mixture_index/n1024/lc{lc:e}"), |b| {
            b.iter(|| mixture_index(black_box(&mu), black_box(&sigma), lc.ln()).unwrap())
        });
    }
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
