//! Writes one `gp_sample` instance as JSON, so another library (BoTorch, see
//! `tools/botorch_same_instances.py`) can run on exactly the objective Pandora's experiments use:
//! the frequencies, the scaled cosine and sine weights, the searched optimum and its argmax, and a
//! few check points with their values.
//!
//! `cargo run --release -p pandora-problems --example export_gp_sample -- DIM SEED [LENGTHSCALE]`
//! (Matérn-5/2, 1024 features, the optimum search of `pandora experiment`; the instance of run
//! seed `SEED`, since the experiments' problem seed is the run seed.)

use pandora_problems::gp_sample::{GpSample, GpSampleSpec};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [d, seed] => d
            .parse::<usize>()
            .ok()
            .zip(seed.parse::<u64>().ok())
            .map(|(d, s)| (d, s, 0.1)),
        [d, seed, ls] => d
            .parse::<usize>()
            .ok()
            .zip(seed.parse::<u64>().ok())
            .zip(ls.parse::<f64>().ok())
            .map(|((d, s), l)| (d, s, l)),
        _ => None,
    };
    let Some((d, seed, ls)) = parsed else {
        eprintln!("usage: export_gp_sample DIM SEED [LENGTHSCALE]");
        std::process::exit(2);
    };
    let mut spec = GpSampleSpec::new(d);
    spec.lengthscale = ls;
    let sample = match GpSample::new(&spec, seed) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("export_gp_sample: {e}");
            std::process::exit(1);
        }
    };
    let path = sample.path();
    let freqs: Vec<&[f64]> = path.frequencies().chunks_exact(d).collect();
    // Check points: a fixed lattice-like set, so a port can verify it reproduces the values.
    let checks: Vec<Vec<f64>> = (0..8)
        .map(|i| {
            (0..d)
                .map(|k| ((i * 7 + k * 3) % 11) as f64 / 10.0)
                .collect()
        })
        .collect();
    let values: Vec<f64> = checks.iter().map(|x| sample.eval(x)).collect();
    let out = json!({
        "dim": d,
        "seed": seed,
        "lengthscale": ls,
        "optimum": sample.optimum(),
        "argmax": sample.argmax(),
        "freqs": freqs,
        "w_cos": path.cos_weights(),
        "w_sin": path.sin_weights(),
        "check_x": checks,
        "check_f": values,
    });
    println!("{out}");
}
