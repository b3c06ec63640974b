//! End-to-end tests of the `pandora` binary.

use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn pandora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pandora"))
}

fn example_path() -> String {
    format!("{}/../../examples/eval.json", env!("CARGO_MANIFEST_DIR"))
}

fn run_eval(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = pandora()
        .arg("eval")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pandora");
    {
        let mut si = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            si.write_all(text.as_bytes()).expect("write stdin");
        }
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

#[test]
fn eval_round_trips_the_example_file() {
    let (code, stdout, stderr) = run_eval(&[&example_path()], None);
    assert_eq!(code, 0, "stderr: {stderr}");
    let out: Value = serde_json::from_str(&stdout).expect("JSON output");
    let req: Value =
        serde_json::from_str(&std::fs::read_to_string(example_path()).unwrap()).unwrap();

    // Recompute with the library: the CLI must report exactly the library's posterior.
    let rows = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().flat_map(floats).collect() };
    let k = &req["kernel"];
    let kernel = Kernel::new(
        KernelKind::parse(k["type"].as_str().unwrap()).unwrap(),
        floats(&k["lengthscales"]),
        k["outputscale"].as_f64().unwrap(),
    )
    .unwrap();
    let gp = ExactGp::new(
        rows(&req["train_x"]),
        floats(&req["train_y"]),
        GpParams {
            kernel,
            mean: req["mean"].as_f64().unwrap(),
            noise: req["noise"].as_f64().unwrap(),
        },
    )
    .unwrap();
    let points = rows(&req["points"]);
    let post = gp.posterior(&points, true).unwrap();
    assert_eq!(floats(&out["mean"]), post.mean);
    assert_eq!(floats(&out["std"]), post.std());
    assert_eq!(rows(&out["mean_gradient"]), post.mean_grad);
    assert_eq!(rows(&out["std_gradient"]), post.std_grad());
    assert_eq!(
        out["log_marginal_likelihood"].as_f64().unwrap(),
        gp.log_marginal_likelihood()
    );

    // EI and LogEI agree where EI does not underflow; LogEI stays finite where it does.
    let acqs = out["acquisitions"].as_array().unwrap();
    assert_eq!(acqs.len(), 3);
    let ei = floats(&acqs[0]["value"]);
    let log_ei = floats(&acqs[1]["value"]);
    for (e, l) in ei.iter().zip(&log_ei) {
        assert!(l.is_finite());
        if *e > 1e-300 {
            assert!(
                (e.ln() - l).abs() < 1e-10,
                "log(EI) {} vs LogEI {l}",
                e.ln()
            );
        }
    }
    assert_eq!(acqs[0]["gradient"].as_array().unwrap().len(), 3);
}

#[test]
fn eval_reads_stdin_with_dash_or_no_argument() {
    let text = std::fs::read_to_string(example_path()).unwrap();
    let (c1, from_file, _) = run_eval(&[&example_path()], None);
    let (c2, dash, _) = run_eval(&["-"], Some(&text));
    let (c3, bare, _) = run_eval(&[], Some(&text));
    assert_eq!((c1, c2, c3), (0, 0, 0));
    assert_eq!(from_file, dash);
    assert_eq!(from_file, bare);
}

#[test]
fn eval_optimize_finds_a_maximum_at_least_as_good_as_the_given_points() {
    let mut req: Value =
        serde_json::from_str(&std::fs::read_to_string(example_path()).unwrap()).unwrap();
    req["optimize"] = serde_json::json!({"acquisition": 1, "seed": 7});
    let (code, stdout, stderr) = run_eval(&["-"], Some(&req.to_string()));
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let best = out["optimum"]["value"].as_f64().unwrap();
    let at_points = floats(&out["acquisitions"][1]["value"]);
    assert!(at_points.iter().all(|v| *v <= best));
    let x = floats(&out["optimum"]["x"]);
    assert!(x.iter().all(|v| (0.0..=1.0).contains(v)));
}

#[test]
fn malformed_input_is_an_error_naming_the_field() {
    let text = std::fs::read_to_string(example_path()).unwrap();
    let bad = text.replace("\"matern52\"", "\"matern99\"");
    let (code, stdout, stderr) = run_eval(&["-"], Some(&bad));
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("kernel.type"), "{stderr}");
    let (code, _, stderr) = run_eval(&["-"], Some("{not json"));
    assert_eq!(code, 2);
    assert!(stderr.starts_with("error:"), "{stderr}");
    let (code, _, stderr) = run_eval(&["/nonexistent/request.json"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent/request.json"), "{stderr}");
}

#[test]
fn bench_quick_prints_json_lines() {
    let out = pandora()
        .args(["bench", "--quick", "--filter", "lml"])
        .output()
        .expect("run bench");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert!(!lines.is_empty());
    for l in lines {
        assert_eq!(l["bench"], "lml_grad");
        assert!(l["median_ms"].as_f64().unwrap() > 0.0);
    }
}

/// The scaling workload's smoke size (d = 8, n = 100, one seed): one line per acquisition with
/// the phase times and the value reached, and the data set written in the peer script's format.
#[test]
fn bench_scaling_writes_the_peer_data_and_reports_phases() {
    let dir = tempfile::tempdir().unwrap();
    let out = pandora()
        .args([
            "bench",
            "--quick",
            "--filter",
            "bo_step_scaling",
            "--write-data",
        ])
        .arg(dir.path())
        .output()
        .expect("run bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    // Per acquisition: the step without a previous step, then the step with one (full and warm
    // fits from the previous step's hyperparameters); then one period of the refit schedule with
    // warm runs and with the default (keep or warm).
    assert_eq!(lines.len(), 6, "{text}");
    let (steps, periods) = lines.split_at(4);
    for (l, refit) in periods.iter().zip(["warm", "default"]) {
        assert_eq!(l["bench"], "bo_step_scaling_period");
        assert_eq!(l["refit"], refit);
        assert_eq!(l["full"].as_u64(), Some(1), "{l}");
        let steps = l["to"].as_u64().unwrap() - l["from"].as_u64().unwrap();
        let counted = ["full", "warm", "kept"].map(|k| l[k].as_u64().unwrap());
        assert_eq!(counted.iter().sum::<u64>(), steps, "{l}");
        assert!(l["log_posterior_last"].as_f64().unwrap().is_finite());
    }
    assert_eq!(periods[0]["kept"].as_u64(), Some(0));
    let lines = steps;
    for (l, acq) in lines.iter().skip(1).step_by(2).zip(["logei", "pbgi"]) {
        assert_eq!(l["bench"], "bo_step_scaling_carry");
        assert_eq!(l["acquisition"], acq);
        for k in ["step_full_ms", "step_warm_ms", "fit_full_ms", "fit_warm_ms"] {
            assert!(l[k].as_f64().unwrap() >= 0.0, "{k}");
        }
        let full = l["fit_full_evaluations"].as_u64().unwrap();
        let warm = l["fit_warm_evaluations"].as_u64().unwrap();
        assert!(full > warm, "{l}");
        assert!(l["values_warm"][0].as_f64().unwrap().is_finite());
    }
    for (l, acq) in lines.iter().step_by(2).zip(["logei", "pbgi"]) {
        assert_eq!(l["bench"], "bo_step_scaling");
        assert_eq!(l["acquisition"], acq);
        assert_eq!((l["d"].as_u64(), l["n"].as_u64()), (Some(8), Some(100)));
        for k in ["step_ms", "fit_ms", "screen_ms", "restarts_ms"] {
            assert!(l[k].as_f64().unwrap() >= 0.0, "{k}");
        }
        assert!(l["values"][0].as_f64().unwrap().is_finite());
        assert_eq!(l["x"].as_array().unwrap().len(), 8);
    }
    let data: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("ackley_d08_n0100.json")).unwrap(),
    )
    .unwrap();
    let x = data["x"].as_array().unwrap();
    assert_eq!(x.len(), 100);
    assert!(x.iter().all(|r| r.as_array().unwrap().len() == 8));
    assert_eq!(data["y"].as_array().unwrap().len(), 100);
}

#[test]
fn eval_computes_every_named_acquisition_with_costs() {
    let req = r#"{"train_x": [[0.1, 0.2], [0.4, 0.9], [0.8, 0.3], [0.55, 0.55]],
     "train_y": [1.0, 0.3, 1.4, 0.9],
     "kernel": {"type": "matern52", "lengthscales": [0.3, 0.5], "outputscale": 1.7},
     "noise": 1e-4, "mean": 0.2, "points": [[0.5, 0.5], [0.9, 0.1]],
     "acquisitions": [
      {"name": "ei", "best_f": 1.4},
      {"name": "eipc", "best_f": 1.4, "cost": {"type": "linear_mean", "offset": 1, "slope": 20}},
      {"name": "log_eipc", "best_f": 1.4, "convention": "expected", "cost": {"type": "values", "values": [2, 3]}},
      {"name": "eicc", "best_f": 1.4, "remaining_budget": 40, "budget": 100, "cost": {"type": "linear_mean", "offset": 1, "slope": 20}},
      {"name": "pi", "best_f": 1.4}, {"name": "log_pi", "best_f": 1.4},
      {"name": "ucb", "beta": 2.0}, {"name": "ucb", "t": 3}, {"name": "lcb", "beta": 2.0},
      {"name": "log_ei", "best_f": 1.4}, {"name": "log_eicc", "best_f": 1.4, "alpha": 0.5},
      {"name": "pbgi", "lambda": 1e-4, "cost": {"type": "linear_mean", "offset": 1, "slope": 20}},
      {"name": "pbgi_d", "lambda": 0.1}, {"name": "ts", "seed": 1}],
     "optimize": {"acquisition": 11}}"#;
    let (code, stdout, stderr) = run_eval(&["-"], Some(req));
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let acqs = out["acquisitions"].as_array().unwrap();
    assert_eq!(acqs.len(), 14);
    for a in acqs {
        assert!(
            floats(&a["value"]).iter().all(|v| v.is_finite()),
            "{}",
            a["name"]
        );
        assert_eq!(a["gradient"].as_array().unwrap().len(), 2);
    }
    let ei = floats(&acqs[0]["value"]);
    let eipc = floats(&acqs[1]["value"]);
    let log_eipc = floats(&acqs[2]["value"]);
    let eicc = floats(&acqs[3]["value"]);
    // c(x) = 1 + 20·mean(x): 11 at (0.5, 0.5) and 11 at (0.9, 0.1).
    for j in 0..2 {
        assert!((eipc[j] - ei[j] / 11.0).abs() < 1e-15 * (1.0 + ei[j]));
        assert!((eicc[j] - ei[j] / 11f64.powf(0.4)).abs() < 1e-14 * (1.0 + ei[j]));
        let c = [2.0f64, 3.0][j];
        assert!((log_eipc[j] - (ei[j].ln() - c.ln())).abs() < 1e-10);
    }
    assert_eq!(out["optimum"]["acquisition"], "pbgi");
}
