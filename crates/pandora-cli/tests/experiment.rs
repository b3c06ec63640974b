//! End-to-end tests of `pandora experiment`: runs, traces, resume, determinism across job
//! counts, summaries against hand-computed statistics, and configuration errors.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pandora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pandora"))
}

const SMOKE: &str = r#"
[experiment]
name = "smoke-test"
seeds = 2
raw_samples = 64
num_restarts = 3

[[problem]]
objective = "ackley"
dim = 2
max_evaluations = 3

[[problem]]
objective = "levy"
dim = 2
cost = "linear_mean"
budget = 12

[[policy]]
acquisition = "random"

[[policy]]
acquisition = "log_ei"

[[policy]]
acquisition = "pbgi_d"
lambda0 = 0.1
decay = 2.0
"#;

fn run_experiment(config: &Path, out: &Path, jobs: usize) {
    let o = pandora()
        .args(["experiment", config.to_str().unwrap(), "--out"])
        .arg(out)
        .args(["--jobs", &jobs.to_string()])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "experiment failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The lines of a trace with the timing fields removed (they are the only nondeterminism).
fn stripped(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("seconds_propose");
                o.remove("seconds_eval");
                o.remove("cpu_seconds_propose");
                o.remove("cpu_seconds_eval");
            }
            v
        })
        .collect()
}

fn traces(out: &Path) -> BTreeMap<String, PathBuf> {
    std::fs::read_dir(out.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect()
}

#[test]
fn smoke_experiment_runs_resumes_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("smoke.toml");
    std::fs::write(&config, SMOKE).unwrap();
    let a = dir.path().join("a");
    run_experiment(&config, &a, 2);

    let files = traces(&a);
    assert_eq!(files.len(), 12, "{:?}", files.keys());
    for (name, path) in &files {
        let lines = stripped(path);
        assert_eq!(lines[0]["kind"], "header");
        let end = lines.last().unwrap();
        assert_eq!(end["kind"], "end", "{name} is not complete");
        let steps: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "step").collect();
        // The initial design (2(d+1) = 6 points) is free: its cumulative cost stays 0.
        for s in &steps[..6] {
            assert_eq!(s["phase"], "initial");
            assert_eq!(s["cumulative_cost"], 0.0);
        }
        let bo = &steps[6..];
        assert!(!bo.is_empty());
        let cum: Vec<f64> = bo
            .iter()
            .map(|s| s["cumulative_cost"].as_f64().unwrap())
            .collect();
        if name.starts_with("levy") {
            // Stops at the first step that reaches the budget (overshoot kept).
            assert_eq!(end["reason"], "budget");
            assert!(*cum.last().unwrap() >= 12.0);
            assert!(cum.len() < 2 || cum[cum.len() - 2] < 12.0);
        } else {
            assert_eq!(end["reason"], "max_evaluations");
            assert_eq!(bo.len(), 3);
            assert_eq!(cum, vec![1.0, 2.0, 3.0]);
        }
        // Best and regret are consistent (both optima are 0).
        for s in &steps {
            let best = s["best"].as_f64().unwrap();
            assert_eq!(s["regret"].as_f64().unwrap(), -best);
        }
        // PBGI-D: λ starts at λ0 and is halved exactly after the steps whose index fell below
        // the best value observed including that step.
        if name.contains("pbgi_d") {
            let mut expected = 0.1;
            for s in bo {
                assert_eq!(s["lambda"].as_f64().unwrap(), expected, "{name}");
                if s["acquisition_value"].as_f64().unwrap() < s["best"].as_f64().unwrap() {
                    expected /= 2.0;
                }
            }
        }
    }
    let summary = a.join("summary");
    let csv = std::fs::read_to_string(summary.join("ackley-d2-uniform.csv")).unwrap();
    assert!(csv.starts_with("policy,cost,n,median,q25,q75,mean,se2\n"));
    // Grid 0..3 (4 points) for 3 policies.
    assert_eq!(csv.lines().count(), 1 + 3 * 4);
    let levy = std::fs::read_to_string(summary.join("levy-d2-linear_mean.csv")).unwrap();
    assert_eq!(levy.lines().count(), 1 + 3 * 13);
    assert!(summary.join("final.csv").exists());
    // Figures: one per problem and an overview, PNG and SVG, naming every policy.
    for name in ["ackley-d2-uniform", "levy-d2-linear_mean", "all"] {
        let png = std::fs::read(summary.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..4], b"\x89PNG", "{name}.png");
        let svg = std::fs::read_to_string(summary.join(format!("{name}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{name}.svg");
        assert!(svg.contains("log_ei"), "{name}.svg names the policies");
    }

    // Resume: delete one trace and cut another short with a torn last line.
    let originals: BTreeMap<String, Vec<Value>> = files
        .iter()
        .map(|(n, p)| (n.clone(), stripped(p)))
        .collect();
    let raw_before: BTreeMap<String, String> = files
        .iter()
        .map(|(n, p)| (n.clone(), std::fs::read_to_string(p).unwrap()))
        .collect();
    let deleted = "levy-d2-linear_mean__log_ei__s1.jsonl";
    // Header + 6 initial + 1 of the 3 BO steps survive: PBGI-D's λ and the warm start must be
    // rebuilt from the trace.
    let cut = "ackley-d2-uniform__pbgi_d_0.1_2___s0.jsonl";
    std::fs::remove_file(&files[deleted]).unwrap();
    let text = &raw_before[cut];
    let keep: Vec<&str> = text.lines().take(8).collect();
    std::fs::write(
        &files[cut],
        format!("{}\n{{\"kind\":\"step\",\"k\":8,", keep.join("\n")),
    )
    .unwrap();
    run_experiment(&config, &a, 2);
    let after = traces(&a);
    assert_eq!(after.len(), 12);
    for (name, path) in &after {
        assert_eq!(
            stripped(path),
            originals[name],
            "{name} differs after resuming"
        );
        if name != deleted && name != cut {
            // Complete runs are skipped: their files are untouched (timings included).
            assert_eq!(std::fs::read_to_string(path).unwrap(), raw_before[name]);
        }
    }

    // A changed configuration does not silently mix with old traces.
    let changed = dir.path().join("changed.toml");
    std::fs::write(&changed, SMOKE.replace("budget = 12", "budget = 13")).unwrap();
    let o = pandora()
        .args(["experiment", changed.to_str().unwrap(), "--out"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("written by a different configuration"),
        "{err}"
    );

    // One job gives the same traces as two.
    let b = dir.path().join("b");
    run_experiment(&config, &b, 1);
    let one = traces(&b);
    assert_eq!(one.len(), 12);
    for (name, path) in &one {
        assert_eq!(stripped(path), originals[name], "{name}: --jobs 1 differs");
    }
}

#[test]
fn summary_statistics_match_hand_computed_values() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("s.toml");
    std::fs::write(
        &config,
        r#"
[experiment]
name = "hand"
seeds = 3
budget = 4
initial_design = 1

[[problem]]
objective = "ackley"
dim = 1

[[policy]]
acquisition = "random"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    run_experiment(&config, &out, 1);
    // Replace the steps by hand-made ones: (cost, best) after the initial point.
    let runs: [(f64, &[(f64, f64)]); 3] = [
        (-4.0, &[(2.0, -2.0), (2.0, -1.0)]),
        (-2.0, &[(1.0, -2.0), (3.0, 0.0)]),
        (-6.0, &[(4.0, -3.0)]),
    ];
    for (seed, (init, steps)) in runs.iter().enumerate() {
        let path = out
            .join("traces")
            .join(format!("ackley-d1-uniform__random__s{seed}.jsonl"));
        let header = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
        let step = |k: usize, phase: &str, cost: f64, cum: f64, best: f64| {
            serde_json::json!({
                "kind": "step", "k": k, "phase": phase, "x": [0.5], "y": best, "cost": cost,
                "cumulative_cost": cum, "total_cost": cum + 1.0, "best": best,
                "regret": -best, "acquisition_value": null, "lambda": null,
                "predicted_cost": null, "params": null, "seconds_propose": 0.0,
                "seconds_eval": 0.0
            })
            .to_string()
        };
        let mut lines = vec![header, step(0, "initial", 1.0, 0.0, *init)];
        let mut cum = 0.0;
        for (k, (c, b)) in steps.iter().enumerate() {
            cum += c;
            lines.push(step(k + 1, "random", *c, cum, *b));
        }
        lines.push(
            serde_json::json!({"kind": "end", "reason": "budget",
                "evaluations": steps.len() + 1, "cumulative_cost": cum})
            .to_string(),
        );
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }
    let o = pandora()
        .args(["experiment", "summarize"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("ackley-d1-uniform"), "{table}");
    let csv = std::fs::read_to_string(out.join("summary/ackley-d1-uniform.csv")).unwrap();
    let rows: Vec<Vec<f64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|v| v.parse().unwrap()).collect())
        .collect();
    // Regret curves on the grid 0, 1, 2, 3, 4 (linear interpolation):
    //   seed 0: (0,4) (2,2) (4,1)  -> 4, 3, 2, 1.5, 1
    //   seed 1: (0,2) (1,2) (4,0)  -> 2, 2, 4/3, 2/3, 0
    //   seed 2: (0,6) (4,3)        -> 6, 5.25, 4.5, 3.75, 3
    // Columns: cost, n, median, q25, q75, mean, se2 (computed independently with NumPy:
    // np.percentile(linear), mean, 2*std(ddof=1)/sqrt(3)).
    let expected: [[f64; 7]; 5] = [
        [0.0, 3.0, 4.0, 3.0, 5.0, 4.0, 2.3094010767585034],
        [
            1.0,
            3.0,
            3.0,
            2.5,
            4.125,
            3.4166666666666665,
            1.9220937657784662,
        ],
        [
            2.0,
            3.0,
            2.0,
            1.6666666666666667,
            3.25,
            2.611111111111111,
            1.9277057303219414,
        ],
        [
            3.0,
            3.0,
            1.5,
            1.0833333333333335,
            2.625,
            1.9722222222222223,
            1.8417316060278641,
        ],
        [
            4.0,
            3.0,
            1.0,
            0.5,
            2.0,
            1.3333333333333333,
            1.763834207376394,
        ],
    ];
    assert_eq!(rows.len(), 5);
    for (r, e) in rows.iter().zip(&expected) {
        for (a, b) in r.iter().zip(e) {
            assert!((a - b).abs() < 1e-12, "row {r:?} vs {e:?}");
        }
    }
}

#[test]
fn explicit_initial_points_replace_the_sobol_design() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("p.toml");
    std::fs::write(
        &config,
        r#"
[experiment]
name = "points"
seeds = 1
max_evaluations = 1

[[problem]]
objective = "ackley"
dim = 1
initial_points = [[0.25], [1.0]]

[[policy]]
acquisition = "random"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    run_experiment(&config, &out, 1);
    let lines = stripped(&out.join("traces/ackley-d1-uniform__random__s0.jsonl"));
    assert_eq!(lines[1]["x"], serde_json::json!([0.25]));
    assert_eq!(lines[2]["x"], serde_json::json!([1.0]));
    assert_eq!(lines[2]["phase"], "initial");
    assert_eq!(lines[3]["phase"], "random");
    assert_eq!(lines[4]["kind"], "end");
}

fn expect_config_error(body: &str, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, body).unwrap();
    let o = pandora()
        .args(["experiment", config.to_str().unwrap(), "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!dir.path().join("out").exists(), "nothing is run");
}

#[test]
fn configuration_errors_are_clear() {
    expect_config_error(
        &SMOKE.replace("\"log_ei\"", "\"log_eii\""),
        "unknown variant `log_eii`",
    );
    expect_config_error(
        &SMOKE.replace("\"ackley\"", "\"ackly\""),
        "unknown objective \"ackly\"",
    );
    expect_config_error(
        &SMOKE.replace("budget = 12", "budget = 12\nbudjet = 3"),
        "unknown field `budjet`",
    );
    expect_config_error(&SMOKE.replace("lambda0 = 0.1", "lambda0 = -1.0"), "lambda0");
    expect_config_error(
        &SMOKE.replace("lambda0 = 0.1", "lambda0 = 0.1\ntree = [1]"),
        "unknown field `tree`",
    );
    // Multi-step EI takes a tree and the warm start, but has no budget to refill.
    let msei = SMOKE.replace(
        "acquisition = \"pbgi_d\"\nlambda0 = 0.1\ndecay = 2.0",
        "acquisition = \"ms_ei\"\ntree = [1, 1]\nwarm_start = false\nrefill = true",
    );
    assert!(msei.contains("ms_ei"));
    expect_config_error(&msei, "unknown field `refill`");
    expect_config_error(
        &SMOKE.replace("lambda0 = 0.1", "lambda0 = 0.1\nwarm_start = true"),
        "unknown field `warm_start`",
    );
    // Keys renamed when studies and experiments came to share `PolicySpec` say the new name.
    expect_config_error(
        &SMOKE.replace("decay = 2.0", "beta = 2.0"),
        "`beta` is now called `decay`",
    );
    expect_config_error(
        &SMOKE.replace(
            "acquisition = \"pbgi_d\"\nlambda0 = 0.1\ndecay = 2.0",
            "acquisition = \"ucb\"\nucb_beta = 2.0",
        ),
        "`ucb_beta` is now called `beta`",
    );
}

/// Every `pandora experiment` configuration in `experiments/` parses, and its smoke size runs end
/// to end. The `cvs_*.toml` grids belong to `pandora cvs` and are checked in `cvs_cli.rs`;
/// `freeze_thaw_bench*.toml` belongs to `pandora freeze-thaw-bench` and is checked by the tests
/// of `pandora_experiment::freeze_thaw_bench`.
#[test]
fn paper_configs_run_at_smoke_size() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut configs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cvs_") || n.starts_with("freeze_thaw_bench"))
        })
        .collect();
    configs.sort();
    assert!(configs.len() >= 8, "{configs:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for (i, c) in configs.iter().enumerate() {
        let out = dir.path().join(i.to_string());
        let o = pandora()
            .args([
                "experiment",
                c.to_str().unwrap(),
                "--smoke",
                "--quiet",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{c:?} failed at smoke size: {err}");
        ran += 1;
        assert!(out.join("summary/final.csv").exists());
    }
    assert!(
        ran >= 8,
        "every paper config runs at smoke size ({ran} ran)"
    );
}

/// Splits a CSV line (no quoted fields in these files).
fn csv_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    (head, rows)
}

/// `experiments/stopping_bayesian_regret_1d.toml` at smoke size: every trace carries one
/// stopping line per iteration `t = 0..=T`, on the data `D_t` (placed after the step that completed
/// it); the CSVs are consistent with the traces and with each other; an independent replay of the
/// PBGI rule agrees; and an interrupted run resumes with identical statistics.
#[test]
fn stopping_config_records_statistics_and_replays_consistently() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/stopping_bayesian_regret_1d.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a");
    let run = |out: &Path| {
        let o = pandora()
            .args(["experiment", config.to_str().unwrap(), "--smoke", "--quiet"])
            .args(["--jobs", "2", "--out"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&out);
    let files = traces(&out);
    // 3 costs × 6 policies × 2 seeds.
    assert_eq!(files.len(), 36);
    let n_init = 4;
    let last = 6;
    // (problem, policy, seed) → (regret at t, cost at t, max LogEIPC at t).
    type Series = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut series: BTreeMap<(String, String, u64), Series> = BTreeMap::new();
    for (name, path) in &files {
        let lines = stripped(path);
        let header = &lines[0];
        let mut steps = 0;
        let mut t_expected = 0;
        let mut s: Series = Default::default();
        let mut last_step: Option<&Value> = None;
        for l in &lines[1..] {
            match l["kind"].as_str().unwrap() {
                "step" => {
                    steps += 1;
                    last_step = Some(l);
                }
                "stopping" => {
                    // The line of iteration t follows step n_init − 1 + t: its data is D_t.
                    assert_eq!(l["iteration"], t_expected, "{name}");
                    assert_eq!(l["n"], steps, "{name}");
                    assert_eq!(steps, n_init + t_expected, "{name}");
                    let st = last_step.unwrap();
                    assert_eq!(l["best"], st["best"], "{name}");
                    assert_eq!(l["cumulative_cost"], st["cumulative_cost"], "{name}");
                    for key in ["max_log_eipc", "max_log_eipc_inv", "ucb_lcb", "prb"] {
                        assert!(l[key].as_f64().unwrap().is_finite(), "{name} {key}");
                    }
                    // Known costs: both LogEIPC conventions are the same statistic.
                    assert_eq!(l["max_log_eipc"], l["max_log_eipc_inv"]);
                    // SRGap needs D_{t−1}'s posterior: undefined at t = 0 only.
                    assert_eq!(l["srgap"].is_null(), t_expected == 0, "{name}");
                    // The smoke PRB schedule 8 → ×1.5 → 16.
                    let expected_samples = [8, 12, 16][t_expected.min(2)];
                    assert_eq!(l["prb_samples"], expected_samples);
                    let p = l["prb"].as_f64().unwrap();
                    assert!((0.0..=1.0).contains(&p));
                    // Every recorded statistic is timed (on the wall clock: with --jobs 2 the
                    // runs share a pool, where the thread clock would miss work); the posterior
                    // of D_{t−1} is rebuilt from t = 1.
                    let secs = &l["statistic_seconds"];
                    assert_eq!(secs["clock"], "wall", "{name}");
                    for key in ["log_eipc", "log_eipc_inv", "ucb_lcb", "srgap", "prb"] {
                        assert!(secs[key].as_f64().unwrap() >= 0.0, "{name} {key}");
                    }
                    assert!(secs["log_eipc_before_update"].is_null());
                    assert_eq!(secs["previous_posterior"].is_null(), t_expected == 0);
                    s.0.push(st["regret"].as_f64().unwrap());
                    s.1.push(st["cumulative_cost"].as_f64().unwrap());
                    s.2.push(l["max_log_eipc"].as_f64().unwrap());
                    t_expected += 1;
                }
                "end" => {}
                other => panic!("unexpected line kind {other}"),
            }
        }
        assert_eq!(steps, n_init + last, "{name}");
        assert_eq!(
            t_expected,
            last + 1,
            "{name}: one stopping line per iteration"
        );
        let key = (
            header["problem"].as_str().unwrap().to_string(),
            header["policy"].as_str().unwrap().to_string(),
            header["seed"].as_u64().unwrap(),
        );
        series.insert(key, s);
    }

    // stopping_runs.csv: one row per run × rule × λ (PBGI(λ) policies at their own λ only).
    let (head, rows) = csv_rows(&out.join("summary/stopping_runs.csv"));
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let (c_prob, c_pol, c_seed, c_rule, c_lambda) = (
        col("problem"),
        col("policy"),
        col("seed"),
        col("rule"),
        col("lambda"),
    );
    let f = |r: &Vec<String>, c: &str| r[col(c)].parse::<f64>().unwrap();
    let rules = 10;
    // 3 problems × 2 seeds × (3 policies × 3 λ + 3 PBGI policies × 1 λ) × 10 rules.
    assert_eq!(rows.len(), 3 * 2 * 12 * rules);
    let mut hindsight: BTreeMap<(String, String, String, String), f64> = BTreeMap::new();
    for r in &rows {
        let lambda = f(r, "lambda");
        if r[c_pol].starts_with("PBGI") {
            assert_eq!(r[c_pol], format!("PBGI({lambda})"), "policy_lambda_only");
        }
        let (stop, len) = (f(r, "stop") as usize, f(r, "run_length") as usize);
        assert_eq!(len, last);
        assert!(stop <= len);
        let fired = r[col("fired")] == "true";
        if !fired {
            assert_eq!(
                stop, len,
                "a rule that never fired is charged the run's end"
            );
        }
        let big_r = f(r, "cost_adjusted_regret");
        let reg = f(r, "simple_regret");
        let cost = f(r, "cumulative_cost");
        assert!((big_r - (reg + lambda * cost)).abs() <= 1e-12 * (1.0 + big_r.abs()));
        // The stop is charged the regret and cost of D_stop, as recorded in the trace.
        let key = (
            r[c_prob].clone(),
            r[c_pol].clone(),
            r[c_seed].parse().unwrap(),
        );
        let s = &series[&key];
        assert_eq!(reg, s.0[stop], "{r:?}");
        assert_eq!(cost, s.1[stop], "{r:?}");
        // Hindsight: the minimum of R over t, below every rule's R.
        let h = f(r, "hindsight_regret");
        let min_r = (0..=last)
            .map(|t| s.0[t] + lambda * s.1[t])
            .fold(f64::INFINITY, f64::min);
        assert!((h - min_r).abs() <= 1e-12 * (1.0 + h.abs()));
        assert!(h <= big_r + 1e-12);
        assert!((f(r, "gap_to_hindsight") - (big_r - h)).abs() <= 1e-12 * (1.0 + big_r.abs()));
        let hk = (
            r[c_prob].clone(),
            r[c_pol].clone(),
            r[c_seed].clone(),
            r[c_lambda].clone(),
        );
        let prev = hindsight.insert(hk, h);
        assert!(prev.is_none_or(|p| p == h));
        // An independent replay of the PBGI/LogEIPC rule: the first t with max LogEIPC ≤ log λ.
        if r[c_rule] == "pbgi" {
            let first = s.2.iter().position(|&v| v <= lambda.ln());
            assert_eq!(first.unwrap_or(last), stop, "{r:?}");
            assert_eq!(first.is_some(), fired);
        }
        // Fixed budgets beyond the run never fire; the smoke run has 6 iterations.
        if r[c_rule].starts_with("fixed-") {
            assert!(!fired);
        }
    }

    // stopping.csv: per problem × policy × rule × λ (plus the two oracles), means of the rows.
    let (ghead, groups) = csv_rows(&out.join("summary/stopping.csv"));
    let gcol = |name: &str| ghead.iter().position(|h| h == name).unwrap();
    assert_eq!(groups.len(), 3 * 12 * (rules + 2));
    for g in &groups {
        let g_rule = &g[gcol("rule")];
        let n: usize = g[gcol("n")].parse().unwrap();
        assert_eq!(n, 2);
        if g_rule == "hindsight" || g_rule == "best-fixed" {
            continue;
        }
        let mine: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| {
                r[c_prob] == g[gcol("problem")]
                    && r[c_pol] == g[gcol("policy")]
                    && &r[c_rule] == g_rule
                    && r[c_lambda] == g[gcol("lambda")]
            })
            .collect();
        assert_eq!(mine.len(), n);
        let mean = mine
            .iter()
            .map(|r| f(r, "cost_adjusted_regret"))
            .sum::<f64>()
            / 2.0;
        let mean_r: f64 = g[gcol("mean_r")].parse().unwrap();
        assert!((mean - mean_r).abs() <= 1e-12 * (1.0 + mean.abs()));
        let never = mine.iter().filter(|r| r[col("fired")] == "false").count();
        assert_eq!(g[gcol("never_fired")], never.to_string());
    }

    // Stopping figures: one per problem and λ, PNG and SVG.
    for prob in ["gp-d1-uniform", "gp-d1-linear", "gp-d1-periodic"] {
        for lambda in ["0.1", "0.01", "0.001"] {
            let png =
                std::fs::read(out.join(format!("summary/stopping_{prob}_lambda{lambda}.png")))
                    .unwrap();
            assert_eq!(&png[..4], b"\x89PNG");
            let svg = std::fs::read_to_string(
                out.join(format!("summary/stopping_{prob}_lambda{lambda}.svg")),
            )
            .unwrap();
            assert!(svg.contains("hindsight") && svg.contains("fixed iteration"));
        }
    }

    // The statistics' runtime: one row per problem × policy × timed statistic, and a figure.
    let (rhead, rrows) = csv_rows(&out.join("summary/stopping_runtime.csv"));
    let rcol = |name: &str| rhead.iter().position(|h| h == name).unwrap();
    assert_eq!(rrows.len(), 3 * 6 * 6);
    for r in &rrows {
        assert_eq!(r[rcol("clock")], "wall");
        assert_eq!(r[rcol("runs")], "2");
        let expected = if r[rcol("statistic")] == "previous_posterior" {
            2 * last
        } else {
            2 * (last + 1)
        };
        assert_eq!(r[rcol("iterations")], expected.to_string(), "{r:?}");
    }
    let png = std::fs::read(out.join("summary/stopping_runtime_gp-d1-linear.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");

    // Resume: cut one trace right after a stopping line (before the step it precedes) and tear
    // the next line; delete another. The rerun rewrites both identically.
    let cut = "gp-d1-linear__PBGI_0.01___s1.jsonl";
    let deleted = "gp-d1-periodic__TS__s0.jsonl";
    let originals: BTreeMap<String, Vec<Value>> = files
        .iter()
        .map(|(n, p)| {
            let mut v = stripped(p);
            for l in &mut v {
                if let Some(o) = l.as_object_mut() {
                    o.remove("seconds");
                    o.remove("cpu_seconds");
                    o.remove("seconds_prb");
                    o.remove("statistic_seconds");
                }
            }
            (n.clone(), v)
        })
        .collect();
    let text = std::fs::read_to_string(&files[cut]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Header, 4 initial steps, stopping t = 0, step, stopping t = 1, step, stopping t = 2.
    let keep = &lines[..10];
    assert!(keep[9].contains("\"kind\":\"stopping\""));
    std::fs::write(
        &files[cut],
        format!("{}\n{{\"kind\":\"step\",\"k\":6,\"ph", keep.join("\n")),
    )
    .unwrap();
    std::fs::remove_file(&files[deleted]).unwrap();
    run(&out);
    for (name, path) in traces(&out) {
        let mut v = stripped(&path);
        for l in &mut v {
            if let Some(o) = l.as_object_mut() {
                o.remove("seconds");
                o.remove("cpu_seconds");
                o.remove("seconds_prb");
                o.remove("statistic_seconds");
            }
        }
        assert_eq!(v, originals[&name], "{name} differs after resuming");
    }
    // A changed statistics setting (PRB's ε) does not mix with the recorded traces …
    let changed = dir.path().join("changed.toml");
    std::fs::write(
        &changed,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("epsilon = 0.1", "epsilon = 0.2"),
    )
    .unwrap();
    let o = pandora()
        .args([
            "experiment",
            changed.to_str().unwrap(),
            "--smoke",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("different configuration"));
    // … while replay-only settings (λ values, rules needing no new statistic) keep them valid.
    let relaxed = dir.path().join("relaxed.toml");
    std::fs::write(
        &relaxed,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("\"gss\",", "\"gss\", { rule = \"gss\", window = 3 },"),
    )
    .unwrap();
    let o = pandora()
        .args([
            "experiment",
            relaxed.to_str().unwrap(),
            "--smoke",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, rows2) = csv_rows(&out.join("summary/stopping_runs.csv"));
    assert_eq!(rows2.len(), 3 * 2 * 12 * (rules + 1));
}

/// B-MS-EI carries its suggested budget, refill lower bound and trees from step to step through
/// the trace: the refill rule holds between recorded steps, and a run cut after its first model
/// step resumes to the identical trace (the warm start and the refill state are rebuilt from
/// the last recorded step).
#[test]
fn bmsei_carry_is_recorded_and_resumes_exactly() {
    let config_text = r#"
[experiment]
name = "bmsei-carry"
seeds = 1
raw_samples = 24
num_restarts = 2

[[problem]]
objective = "dropwave"
dim = 2
cost = "cosine"
cost_setting = "unknown"
budget = 8
max_evaluations = 6

[[policy]]
name = "4-B-MS-EI_p"
acquisition = "b_ms_ei"
tree = [1, 1, 1]
"#;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, config_text).unwrap();
    let out = dir.path().join("out");
    run_experiment(&config, &out, 1);
    let files = traces(&out);
    assert_eq!(files.len(), 1);
    let path = files.values().next().unwrap();
    let lines = stripped(path);
    let model: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "step" && l["phase"] == "model")
        .collect();
    assert!(model.len() >= 3, "{} model steps", model.len());
    let mut refills = 0;
    for pair in model.windows(2) {
        let (a, b) = (&pair[0]["bmsei"], &pair[1]["bmsei"]);
        let left = a["suggested_budget"].as_f64().unwrap() - pair[0]["cost"].as_f64().unwrap();
        let lower = a["lower_bound"].as_f64().unwrap();
        assert_eq!(b["trees"].as_array().unwrap().len(), 2 + 1);
        if left > lower {
            refills += 1;
            assert_eq!(b["suggested_budget"].as_f64().unwrap(), left);
            assert_eq!(b["lower_bound"].as_f64().unwrap(), lower);
        }
    }
    assert!(refills >= 1, "no step refilled");

    // Cut after the first model step (header + 6 initial + 1) with a torn line, and resume.
    let original = lines.clone();
    let text = std::fs::read_to_string(path).unwrap();
    let keep: Vec<&str> = text.lines().take(8).collect();
    std::fs::write(path, format!("{}\n{{\"kind\":\"step\",", keep.join("\n"))).unwrap();
    run_experiment(&config, &out, 1);
    assert_eq!(stripped(path), original, "the resumed run differs");
}

/// Runs `pandora experiment CONFIG --out OUT` with extra arguments and environment variables;
/// returns stderr, asserting success.
fn run_shard(config: &Path, out: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = pandora();
    cmd.args(["experiment", config.to_str().unwrap(), "--quiet", "--out"])
        .arg(out)
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "shard failed: {err}");
    err
}

fn summarize(out: &Path, partial: bool) -> std::process::Output {
    let mut cmd = pandora();
    cmd.args(["experiment", "summarize"]).arg(out);
    if partial {
        cmd.arg("--partial");
    }
    cmd.output().unwrap()
}

/// `final.csv` without its timing column (`mean_seconds_per_step`, the last one).
fn final_without_timing(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("summary/final.csv"))
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string())
        .collect()
}

/// The smoke grid run as 3 shards (two by `--shard`, one from the Slurm array variables with an
/// offset) and merged by `summarize` equals a single-process run: traces (timing fields aside)
/// and summaries. `summarize` refuses, naming them, while runs are missing or unfinished; a shard
/// killed mid-run (a torn `.part` trace, a leftover temporary file) resumes without duplicates.
#[test]
fn shards_merge_to_the_single_process_result_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("smoke.toml");
    std::fs::write(&config, SMOKE).unwrap();
    let single = dir.path().join("single");
    run_experiment(&config, &single, 2);
    let reference = traces(&single);
    assert_eq!(reference.len(), 12);

    let sharded = dir.path().join("sharded");
    let err = run_shard(&config, &sharded, &["--shard", "0/3", "--jobs", "2"], &[]);
    assert!(
        !sharded.join("summary").exists(),
        "a shard writes no summary"
    );
    let count = |err: &str, k: usize| -> usize {
        let tag = format!("shard {k}/3: ");
        let at = err
            .find(&tag)
            .unwrap_or_else(|| panic!("{tag} not in {err}"))
            + tag.len();
        err[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = count(&err, 0);
    assert_eq!(traces(&sharded).len(), first);
    // Missing runs are named, and nothing is averaged over fewer seeds.
    let o = summarize(&sharded, false);
    assert!(!o.status.success());
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(
        msg.contains(&format!("{} of 12 run(s) are not complete", 12 - first)),
        "{msg}"
    );
    let absent: Vec<&String> = reference
        .keys()
        .filter(|n| !sharded.join("traces").join(n).exists())
        .collect();
    assert!(!absent.is_empty());
    for n in &absent {
        assert!(msg.contains(n.as_str()), "{n} not named in {msg}");
    }
    assert!(!sharded.join("summary").exists());
    // … unless asked to.
    let o = summarize(&sharded, true);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning"));
    std::fs::remove_dir_all(sharded.join("summary")).unwrap();

    let err = run_shard(&config, &sharded, &["--shard", "1/3"], &[]);
    let second = count(&err, 1);
    // Shard 2 from the array variables: task 7 of an array starting at 5.
    let slurm = [
        ("SLURM_ARRAY_TASK_ID", "7"),
        ("SLURM_ARRAY_TASK_MIN", "5"),
        ("SLURM_ARRAY_TASK_COUNT", "3"),
    ];
    let err = run_shard(&config, &sharded, &[], &slurm);
    let third = count(&err, 2);
    assert_eq!(first + second + third, 12);
    assert!(first > 0 && second > 0 && third > 0);
    let o = summarize(&sharded, false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let compare = |what: &str| {
        let merged = traces(&sharded);
        assert_eq!(
            merged.keys().collect::<Vec<_>>(),
            reference.keys().collect::<Vec<_>>(),
            "{what}: only complete traces, one per run"
        );
        for (name, path) in &merged {
            assert_eq!(stripped(path), stripped(&reference[name]), "{what}: {name}");
        }
        for csv in ["ackley-d2-uniform.csv", "levy-d2-linear_mean.csv"] {
            assert_eq!(
                std::fs::read(sharded.join("summary").join(csv)).unwrap(),
                std::fs::read(single.join("summary").join(csv)).unwrap(),
                "{what}: {csv}"
            );
        }
        assert_eq!(
            final_without_timing(&sharded),
            final_without_timing(&single)
        );
    };
    compare("merged shards");

    // A killed shard: one run torn mid-way in its `.part` file, another killed while writing
    // its first prefix (only a temporary file left).
    let names: Vec<&String> = reference.keys().collect();
    let (torn, fresh) = (names[2].clone(), names[9].clone());
    let tdir = sharded.join("traces");
    let text = std::fs::read_to_string(tdir.join(&torn)).unwrap();
    let keep: Vec<&str> = text.lines().take(8).collect();
    std::fs::remove_file(tdir.join(&torn)).unwrap();
    std::fs::write(
        tdir.join(format!("{torn}.part")),
        format!("{}\n{{\"kind\":\"step\",\"k\":8,", keep.join("\n")),
    )
    .unwrap();
    std::fs::remove_file(tdir.join(&fresh)).unwrap();
    std::fs::write(tdir.join(format!("{fresh}.part.tmp")), "{\"kind\":\"hea").unwrap();
    let o = summarize(&sharded, false);
    assert!(!o.status.success());
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(
        msg.contains("unfinished (1):") && msg.contains(&torn),
        "{msg}"
    );
    assert!(
        msg.contains("missing (1):") && msg.contains(&fresh),
        "{msg}"
    );
    // Resubmitting every task resumes: complete traces are skipped, the others finished.
    for k in 0..3 {
        run_shard(&config, &sharded, &["--shard", &format!("{k}/3")], &[]);
    }
    let leftovers: Vec<String> = std::fs::read_dir(&tdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".jsonl"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let o = summarize(&sharded, false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    compare("resumed shards");

    // Bad shard values name the flag or the variable.
    for (args, env, needle) in [
        (vec!["--shard", "3/3"], vec![], "--shard"),
        (
            vec![],
            vec![("SLURM_ARRAY_TASK_ID", "1")],
            "SLURM_ARRAY_TASK_COUNT",
        ),
    ] {
        let mut cmd = pandora();
        cmd.args(["experiment", config.to_str().unwrap(), "--out"])
            .arg(dir.path().join("bad"))
            .args(&args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        assert!(!o.status.success());
        let msg = String::from_utf8_lossy(&o.stderr);
        assert!(msg.contains(needle), "{msg}");
    }
}

/// `pandora experiment plan`: run count, CPU-hours and the longest run from the traces of an
/// output directory or from a calibration, and an sbatch script for the array.
#[test]
fn plan_estimates_and_writes_an_sbatch_script() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("smoke.toml");
    std::fs::write(&config, SMOKE).unwrap();
    let out = dir.path().join("out");
    let script = dir.path().join("grid.sbatch");
    let plan = |out: &Path, extra: &[&str]| {
        let o = pandora()
            .args(["experiment", "plan", config.to_str().unwrap(), "--out"])
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // No traces yet: every (problem, policy) pair is calibrated.
    let text = plan(&out, &[]);
    assert!(text.contains("12 run(s)"), "{text}");
    assert_eq!(
        text.matches("calibration (4 steps), CPU time").count(),
        6,
        "{text}"
    );
    assert!(
        text.contains("calibrations run: 6, for 6 group(s)"),
        "{text}"
    );
    assert!(text.contains("clock: CPU time ("), "{text}");
    assert!(
        text.contains("CPU-hours") && text.contains("longest run"),
        "{text}"
    );
    assert!(
        !out.join("traces").exists(),
        "the calibration writes elsewhere"
    );
    // With traces, they are the source; complete runs are counted as done.
    run_experiment(&config, &out, 2);
    let text = plan(
        &out,
        &[
            "--slurm",
            script.to_str().unwrap(),
            "--shards",
            "3",
            "--cpus-per-task",
            "2",
            "--mem",
            "2G",
            "--max-parallel",
            "2",
            "--bin",
            "/opt/pandora/bin/pandora",
        ],
    );
    // Runs sharing a process (--jobs 2) record no CPU time: the plan falls back to wall time
    // and says so.
    assert_eq!(
        text.matches("traces in the output directory, wall time")
            .count(),
        6,
        "{text}"
    );
    assert!(text.contains("but wall time for 6 group(s)"), "{text}");
    assert!(text.contains("12 complete already"), "{text}");
    let sb = std::fs::read_to_string(&script).unwrap();
    let lines: Vec<&str> = sb.lines().collect();
    assert_eq!(lines[0], "#!/bin/bash");
    assert!(lines.contains(&"#SBATCH --array=0-2%2"), "{sb}");
    assert!(lines.contains(&"#SBATCH --cpus-per-task=2"), "{sb}");
    assert!(lines.contains(&"#SBATCH --mem=2G"), "{sb}");
    // Nothing left to run: the limit is the 10-minute allowance (rounded up to a minute).
    assert!(lines.contains(&"#SBATCH --time=0-00:10:00"), "{sb}");
    let out_abs = out.to_str().unwrap();
    assert!(
        lines.contains(&format!("#SBATCH --output={out_abs}/slurm/%A_%a.out").as_str()),
        "{sb}"
    );
    assert!(out.join("slurm").is_dir(), "sbatch needs the log directory");
    let last = lines.last().unwrap();
    assert_eq!(
        *last,
        format!(
            "/opt/pandora/bin/pandora experiment {} --quiet --out {out_abs} --shard \
             \"${{SLURM_ARRAY_TASK_ID:?submit with sbatch}}/3\" --jobs \
             \"${{SLURM_CPUS_PER_TASK:-1}}\"",
            config.to_str().unwrap()
        )
    );
    // A --jobs 1 run records CPU times, and the plan reads them.
    let one = dir.path().join("one");
    run_experiment(&config, &one, 1);
    let any = traces(&one).into_values().next().unwrap();
    assert!(
        std::fs::read_to_string(&any)
            .unwrap()
            .contains("\"cpu_seconds_eval\":"),
        "{any:?}"
    );
    let text = plan(&one, &[]);
    assert_eq!(
        text.matches("traces in the output directory, CPU time")
            .count(),
        6,
        "{text}"
    );
    assert!(text.contains("clock: CPU time ("), "{text}");
}

/// One run long enough to be caught mid-way (80 BO steps).
const LONG: &str = r#"
[experiment]
name = "lock-test"
seeds = 1
raw_samples = 64
num_restarts = 3

[[problem]]
objective = "ackley"
dim = 2
max_evaluations = 80

[[policy]]
acquisition = "log_ei"
"#;

/// The `.part` trace of `out` once it has at least `lines` lines, waiting up to a minute.
fn wait_for_part(out: &Path, lines: usize, child: &mut std::process::Child) -> PathBuf {
    let start = std::time::Instant::now();
    loop {
        if let Ok(dir) = std::fs::read_dir(out.join("traces")) {
            for p in dir.flatten().map(|e| e.path()) {
                if p.to_string_lossy().ends_with(".jsonl.part")
                    && std::fs::read_to_string(&p).is_ok_and(|t| t.lines().count() >= lines)
                {
                    return p;
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before it was caught mid-way: make LONG longer");
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no run mid-way"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts `pandora experiment CONFIG --out OUT --quiet` in the background.
fn spawn_experiment(config: &Path, out: &Path) -> std::process::Child {
    pandora()
        .args([
            "experiment",
            config.to_str().unwrap(),
            "--quiet",
            "--jobs",
            "1",
            "--out",
        ])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two processes on the same shard: the second refuses the run the first is writing, naming it
/// and the first's pid and host, exits non-zero and leaves the trace alone; the first's trace is
/// complete and equals a single undisturbed run's, and no lock file is left.
#[test]
fn a_second_writer_of_a_run_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("long.toml");
    std::fs::write(&config, LONG).unwrap();
    let out = dir.path().join("out");
    let mut first = spawn_experiment(&config, &out);
    let part = wait_for_part(&out, 10, &mut first);
    let name = part
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace(".part", "");
    let second = pandora()
        .args(["experiment", config.to_str().unwrap(), "--quiet", "--out"])
        .arg(&out)
        .args(["--shard", "0/1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "run {name} skipped: another process is writing it (pid {} on ",
            first.id()
        )),
        "{err}"
    );
    assert!(
        err.contains("1 run(s) skipped because another process"),
        "{err}"
    );
    let status = first.wait().unwrap();
    assert!(status.success());
    let reference = dir.path().join("reference");
    run_experiment(&config, &reference, 1);
    let names: Vec<String> = traces(&out).into_keys().collect();
    assert_eq!(
        names,
        vec![name.clone()],
        "one complete trace, no .part, no lock"
    );
    assert_eq!(
        stripped(&out.join("traces").join(&name)),
        stripped(&reference.join("traces").join(&name))
    );
}

/// A writer killed with SIGKILL leaves its `.part` trace and its lock file, but the kernel
/// dropped the lock: the next run takes it over and resumes to the undisturbed trace.
#[test]
fn a_lock_left_by_a_killed_writer_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("long.toml");
    std::fs::write(&config, LONG).unwrap();
    let out = dir.path().join("out");
    let mut first = spawn_experiment(&config, &out);
    let part = wait_for_part(&out, 10, &mut first);
    first.kill().unwrap();
    first.wait().unwrap();
    let lock = PathBuf::from(part.to_string_lossy().replace(".part", ".lock"));
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.starts_with(&format!("pid {} on ", first.id())),
        "{text}"
    );
    run_experiment(&config, &out, 1);
    let reference = dir.path().join("reference");
    run_experiment(&config, &reference, 1);
    let name = lock
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace(".lock", "");
    assert_eq!(
        traces(&out).into_keys().collect::<Vec<_>>(),
        vec![name.clone()]
    );
    assert_eq!(
        stripped(&out.join("traces").join(&name)),
        stripped(&reference.join("traces").join(&name))
    );
}
