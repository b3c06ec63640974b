//! Construction and evaluation times of the problems that search for their optimum at
//! construction. Run with `cargo run --release -p pandora-problems --example build_times`.

use pandora_problems::{ProblemSpec, build};
use std::time::Instant;

/// Objective, dimension, cost, options.
type Case = (
    &'static str,
    usize,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

fn main() {
    let cases: Vec<Case> = vec![
        ("gp_sample", 8, "uniform", vec![]),
        ("gp_sample", 16, "uniform", vec![]),
        ("gp_sample", 32, "uniform", vec![]),
        (
            "gp_sample",
            8,
            "uniform",
            vec![("lengthscale", "1.0"), ("kernel", "rbf")],
        ),
        ("counterexample_eipc", 1, "native", vec![]),
        ("counterexample_ei", 1, "native", vec![]),
        ("lda", 3, "native", vec![]),
        ("pest_control", 25, "native", vec![]),
        ("hartmann6", 6, "cosine", vec![]),
    ];
    println!("| objective | d | options | build (median of 3) | eval (median over 1000) |");
    println!("|---|---|---|---|---|");
    for (name, d, cost, opts) in cases {
        let mut builds = Vec::new();
        let mut evals = Vec::new();
        for seed in 0..3 {
            let spec = ProblemSpec {
                objective: name.into(),
                dim: d,
                cost: cost.into(),
                seed,
                options: opts
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            };
            let t = Instant::now();
            let p = build(&spec).expect("build");
            builds.push(t.elapsed().as_secs_f64());
            let x = vec![0.37; d];
            let t = Instant::now();
            let mut s = 0.0;
            for _ in 0..1000 {
                s += p.eval(&x) + p.cost(&x);
            }
            evals.push(t.elapsed().as_secs_f64() / 1000.0);
            assert!(s.is_finite());
        }
        builds.sort_by(f64::total_cmp);
        evals.sort_by(f64::total_cmp);
        let o: Vec<String> = opts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "| {name} | {d} | {} | {:.3} s | {:.1} µs |",
            o.join(" "),
            builds[1],
            evals[1] * 1e6
        );
    }
}
