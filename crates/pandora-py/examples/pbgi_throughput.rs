//! The Rust side of the `pandora.acquisition.pbgi` throughput comparison
//! (`crates/pandora-py/bench/overhead.py`): `pbgi_index` on 1e5 points with the same input
//! distribution (μ ∈ [−3, 3], σ log-uniform on [1e-3, 10], λc log-uniform on [1e-12, 1]), values
//! written to an output vector as the binding does. Median of 15 runs.
//!
//! `cargo run --release -p pandora-py --example pbgi_throughput`

use pandora_core::acquisition::pbgi_index;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Instant;

fn main() {
    const N: usize = 100_000;
    let mut r = Xoshiro256PlusPlus::seed_from_u64(7);
    let pts: Vec<(f64, f64, f64)> = (0..N)
        .map(|_| {
            let mu = 6.0 * r.random::<f64>() - 3.0;
            let s = 10f64.powf(-3.0 + 4.0 * r.random::<f64>());
            let l = (-12.0 + 12.0 * r.random::<f64>()) * core::f64::consts::LN_10;
            (mu, s, l)
        })
        .collect();
    let mut times = Vec::new();
    let mut acc = 0.0;
    for _ in 0..15 {
        let t0 = Instant::now();
        let out: Vec<f64> = pts.iter().map(|&(m, s, l)| pbgi_index(m, s, l).g).collect();
        times.push(t0.elapsed().as_secs_f64());
        acc += out[N / 2];
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    println!(
        "rust pbgi_index: {:.2} ms per 1e5 points = {:.1} ns/point (median of 15; checksum {acc:.3})",
        med * 1e3,
        med / N as f64 * 1e9
    );
}
