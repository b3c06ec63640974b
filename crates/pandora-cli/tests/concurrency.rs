//! Concurrent `pandora run` processes on one study: four on a SQLite study with a budget; eight
//! on a study with a categorical parameter, on SQLite and on PostgreSQL, kept apart by the
//! pending exclusion in the proposal space.

mod common;

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

// ---------------------------------------------------------------------------------------------
// Eight processes on a study with a categorical parameter, on SQLite and on PostgreSQL.

/// Processes of the categorical test.
const CAT_PROCESSES: usize = 8;
/// `pandora_core::policy::PENDING_EXCLUSION_RADIUS`.
const RADIUS: f64 = 0.1;

fn categorical_config(storage: &str) -> String {
    format!(
        r#"
[study]
name = "cat"
storage = "{storage}"
[objective]
command = ["python3", "cat_obj.py"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "c"
type = "categorical"
choices = ["a", "b", "c"]
[budget]
max_trials = 48
[policy]
acquisition = "log_ei"
initial_design = 4
seed = 5
"#
    )
}

/// Euclidean distance of two points of the proposal space (unit cube, categoricals one-hot).
fn distance(a: &Value, b: &Value) -> f64 {
    let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
    assert_eq!(a.len(), 4, "x = (x, one-hot c)");
    a.iter()
        .zip(b)
        .map(|(p, q)| (p.as_f64().unwrap() - q.as_f64().unwrap()).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// For every model-phase trial, the trials that were pending when it was decided, as far as the
/// timestamps tell: handed out before it and told after it was stored (the storage's lock orders
/// these events). That is a subset of the decision's pending trials; its size is compared with
/// the decision's own count.
fn pending_pairs(trials: &[Value]) -> (Vec<(usize, usize)>, usize) {
    let mut pairs = Vec::new();
    let mut recorded = 0;
    for (i, t) in trials.iter().enumerate() {
        if t["decision"]["phase"] != "model" {
            continue;
        }
        recorded += t["decision"]["pending"].as_u64().unwrap() as usize;
        let created = t["created_at"].as_f64().unwrap();
        for (j, u) in trials[..i].iter().enumerate() {
            if u["finished_at"].as_f64().is_none_or(|f| f > created) {
                pairs.push((j, i));
            }
        }
    }
    (pairs, recorded)
}

/// 8 `pandora run` processes on one study with a categorical parameter: no trial or point handed
/// out twice, and every model-phase proposal at least the exclusion radius away from each trial
/// pending at its decision, in the proposal space.
fn eight_processes_on_a_categorical_study(storage: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cat_obj.py"),
        "import json, random, sys, time\np = json.load(sys.stdin)\n\
         time.sleep(random.uniform(0.1, 0.3))\n\
         print(-(p['x'] - 0.4) ** 2 - {'a': 0.0, 'b': 0.2, 'c': 0.5}[p['c']])\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.toml"), categorical_config(storage)).unwrap();
    let children: Vec<_> = (0..CAT_PROCESSES)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_pandora"))
                .args(["run", "s.toml", "--quiet"])
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn pandora run")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
    }
    let trials = common::export(dir.path(), "s.toml");
    assert_eq!(trials.len(), 48);
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..48).collect::<Vec<_>>());
    // No point is handed out while a trial at it is still running (a point may be proposed
    // again once its evaluation has ended: that is a model decision, not a race).
    for (j, tj) in trials.iter().enumerate() {
        assert_eq!(tj["state"], "complete", "{tj}");
        let created = tj["created_at"].as_f64().unwrap();
        for ti in &trials[..j] {
            let running = ti["created_at"].as_f64().unwrap() <= created
                && ti["finished_at"].as_f64().is_none_or(|f| created < f);
            assert!(
                !(running && ti["x"] == tj["x"]),
                "point handed out twice while running: {ti} and {tj}"
            );
        }
    }
    let (pairs, recorded) = pending_pairs(&trials);
    let closest = pairs
        .iter()
        .map(|&(j, i)| (distance(&trials[j]["x"], &trials[i]["x"]), j, i))
        .fold((f64::INFINITY, 0, 0), |a, b| if b.0 < a.0 { b } else { a });
    eprintln!(
        "{} pending pairs seen of {recorded} recorded; closest {:.4} (trials {} and {})",
        pairs.len(),
        closest.0,
        closest.1,
        closest.2
    );
    // The check is not vacuous: the processes really overlapped.
    assert!(pairs.len() >= 40, "only {} pending pairs", pairs.len());
    for &(j, i) in &pairs {
        let d = distance(&trials[j]["x"], &trials[i]["x"]);
        assert!(
            d >= RADIUS * (1.0 - 1e-9),
            "trial {i} proposed {d} from pending trial {j}: {} vs {}",
            trials[i]["x"],
            trials[j]["x"]
        );
    }
}

#[test]
fn eight_processes_on_a_categorical_sqlite_study_keep_apart() {
    eight_processes_on_a_categorical_study("sqlite:study.db");
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn eight_processes_on_a_categorical_postgres_study_keep_apart() {
    let db = common::TestSchema::new("categorical");
    eight_processes_on_a_categorical_study(&db.url());
}
