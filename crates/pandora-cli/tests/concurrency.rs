//! Four concurrent `pandora run` processes on one SQLite study.

use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};

const PROCESSES: usize = 4;
const BUDGET: f64 = 300.0;

// `Study::ask` charges running trials' known costs to the budget, so concurrent workers cannot
// overshoot it (before that fix: 302.5 spent of 300).
#[test]
fn four_processes_share_one_study_without_duplicates_or_overspending() {
    let dir = tempfile::tempdir().unwrap();
    // Known costs 1 + mean(x) in [1, 2]: the budget of 300 pays for 150 to 300 trials, about 50
    // per process; the budget, not max_trials, ends the study.
    std::fs::write(
        dir.path().join("s.toml"),
        format!(
            r#"
[study]
name = "shared"
storage = "sqlite:study.db"
[objective]
builtin = "levy"
dim = 2
[cost]
kind = "known"
formula = "linear_mean"
offset = 1.0
slope = 1.0
[budget]
total = {BUDGET}
max_trials = 1000
[policy]
acquisition = "log_ei"
seed = 3
"#
        ),
    )
    .unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_pandora"))
                .args(["run", "--json", "s.toml", "--quiet"])
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn pandora run")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["stopped"].as_str().unwrap().contains("budget"), "{v}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["export", "s.toml", "--format", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let trials: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    check(&trials, dir.path());
}

fn check(trials: &[Value], _dir: &Path) {
    assert!(trials.len() >= 150, "only {} trials", trials.len());
    // Numbers are 0..n without gaps or repeats: no trial was handed out twice.
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..trials.len() as u64).collect::<Vec<_>>());
    // Every tell was stored: all trials complete, with their cost.
    for t in trials {
        assert_eq!(t["state"], "complete", "{t}");
        let x: Vec<f64> = serde_json::from_value(t["x"].clone()).unwrap();
        let c = t["cost"].as_f64().unwrap();
        assert!((c - (1.0 + (x[0] + x[1]) / 2.0)).abs() < 1e-12, "{t}");
    }
    // The processes really ran side by side: trials come from several workers. Not necessarily
    // all four: SQLite's write lock is not fair (a waiting connection sleeps and retries), so on
    // a 2-core machine one process can wait out the whole run while the others take turns.
    let workers: HashSet<&str> = trials
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    assert!((2..=PROCESSES).contains(&workers.len()), "{workers:?}");
    // No model-phase point was proposed twice (pending trials are accounted for).
    let mut seen = HashSet::new();
    for t in trials.iter().filter(|t| t["decision"]["phase"] == "model") {
        let key: Vec<u64> = t["x"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap().to_bits())
            .collect();
        assert!(seen.insert(key), "x proposed twice: {t}");
    }
    assert!(seen.len() >= 100);
    // The budget is respected: the known costs of all trials fit.
    let spent: f64 = trials.iter().map(|t| t["cost"].as_f64().unwrap()).sum();
    assert!(spent <= BUDGET + 1e-9, "spent {spent} of {BUDGET}");
    // ... and it was used: the study stopped only when no trial fitted any more.
    assert!(spent > BUDGET - 2.0, "spent {spent} of {BUDGET}");
}
