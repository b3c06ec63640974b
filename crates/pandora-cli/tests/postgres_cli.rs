//! End-to-end tests of `pandora run` with PostgreSQL storage: several processes on one study.
//!
//! Run when `PANDORA_TEST_POSTGRES_URL` names a database the tests may create schemas in
//! (`.ci/run` starts one); without it at build time they are ignored (reported as `ignored`, see
//! build.rs). Every test uses
//! its own schema (`?schema=...` in the storage URL), dropped at the end.

mod common;
use common::{ENV, TestSchema, pandora};

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn config(url: &str, limits: &str) -> String {
    format!(
        r#"
[study]
name = "shared"
storage = "{url}"
direction = "maximize"
[objective]
builtin = "ackley"
dim = 2
[cost]
kind = "known"
formula = "linear_mean"
[budget]
{limits}
[policy]
acquisition = "pbgi_d"
seed = 7
"#
    )
}

/// Starts `n` `pandora run` processes on `cfg` at once (the first two with two worker threads
/// each) and waits for all of them.
fn run_concurrently(dir: &Path, cfg: &str, n: usize) -> Vec<Output> {
    let children: Vec<_> = (0..n)
        .map(|k| {
            let workers = if k < 2 { "2" } else { "1" };
            Command::new(env!("CARGO_BIN_EXE_pandora"))
                .args(["run", "--json", cfg, "--quiet", "--workers", workers])
                .current_dir(dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn pandora run")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait for pandora run"))
        .collect()
}

/// The trials of the study as exported in JSON, after checking that they are numbered
/// 0..n without gaps or duplicates (no trial handed out twice).
fn exported_trials(dir: &Path, cfg: &str) -> Vec<Value> {
    let (code, js, err) = pandora(dir, &["export", cfg, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let trials: Vec<Value> = serde_json::from_str(&js).unwrap();
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..trials.len() as u64).collect::<Vec<_>>());
    let workers: BTreeSet<&str> = trials
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    eprintln!("{} trials by {} workers", trials.len(), workers.len());
    trials
}

/// Pending trials keep parallel workers off each other's points: the initial design continues
/// over pending trials, and a model step conditions on fantasies at pending points and proposes
/// at least `PENDING_EXCLUSION_RADIUS` away from them.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn concurrent_workers_receive_distinct_points() {
    let db = TestSchema::new("points");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pg.toml"),
        config(&db.url(), "max_trials = 24"),
    )
    .unwrap();
    for out in run_concurrently(dir.path(), "pg.toml", 4) {
        assert!(out.status.success());
    }
    let trials = exported_trials(dir.path(), "pg.toml");
    let xs: BTreeSet<String> = trials.iter().map(|t| t["x"].to_string()).collect();
    assert_eq!(xs.len(), trials.len(), "a point was handed out twice");
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn four_processes_share_one_study_up_to_max_trials() {
    const MAX: u64 = 24;
    let db = TestSchema::new("count");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pg.toml"),
        config(&db.url(), &format!("max_trials = {MAX}")),
    )
    .unwrap();
    for out in run_concurrently(dir.path(), "pg.toml", 4) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pandora run failed: {stderr}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["stopped"].as_str().unwrap().contains("max_trials"), "{v}");
    }
    let trials = exported_trials(dir.path(), "pg.toml");
    assert_eq!(trials.len() as u64, MAX, "exactly max_trials trials");
    for t in &trials {
        assert_eq!(t["state"], "complete", "{t}");
        assert!(t["objective"].as_f64().unwrap().is_finite());
    }
    let workers: BTreeSet<&str> = trials
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    eprintln!("{} trials by {} workers", trials.len(), workers.len());

    // status and best read the same study back.
    let (code, st, err) = pandora(dir.path(), &["status", "--json", "pg.toml"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["complete"].as_u64().unwrap(), MAX);
    assert_eq!(st["running"].as_u64().unwrap(), 0);
    let best_objective = trials
        .iter()
        .map(|t| t["objective"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(st["best"]["objective"].as_f64().unwrap(), best_objective);
    let (code, best, err) = pandora(dir.path(), &["best", "--json", "pg.toml"]);
    assert_eq!(code, 0, "{err}");
    let best: Value = serde_json::from_str(&best).unwrap();
    assert_eq!(best["objective"].as_f64().unwrap(), best_objective);
    let (code, csv, err) = pandora(dir.path(), &["export", "pg.toml", "--format", "csv"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(csv.lines().count() as u64, MAX + 1);

    // Running again resumes a finished study: nothing is added.
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "pg.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["complete"].as_u64().unwrap(), MAX);
}

/// 4 processes (6 workers) on a study with a budget of `TOTAL` cost units. With `strict`, the
/// total cost must not exceed it; otherwise only by the cost of trials still pending when the
/// budget ran out (what `Study::ask` guarantees today).
fn budget_run(name: &str, strict: bool) {
    const TOTAL: f64 = 80.0;
    let db = TestSchema::new(name);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pg.toml"),
        config(&db.url(), &format!("total = {TOTAL}")),
    )
    .unwrap();
    for out in run_concurrently(dir.path(), "pg.toml", 4) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pandora run failed: {stderr}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["stopped"].as_str().unwrap().contains("budget"), "{v}");
    }
    let trials = exported_trials(dir.path(), "pg.toml");
    let spent: f64 = trials.iter().map(|t| t["cost"].as_f64().unwrap()).sum();
    // Known costs 1 + 20 mean(x) lie in [1, 21].
    let max_cost = 21.0;
    eprintln!("spent {spent} of a budget of {TOTAL}");
    assert!(trials.len() >= 4, "{} trials", trials.len());
    // `Study::ask` refuses a proposal once the cost of the evaluated trials plus its own would
    // exceed the budget, but does not count the known cost of trials still pending, so with 6
    // workers the total may exceed the budget by up to 5 pending trials' costs.
    let allowed = if strict {
        TOTAL
    } else {
        TOTAL + 5.0 * max_cost
    };
    assert!(
        spent <= allowed + 1e-9,
        "spent {spent} of a budget of {TOTAL}"
    );
    // And the budget was used: another trial of the cheapest kind would not have fitted
    // without exceeding it by much.
    assert!(spent > TOTAL - max_cost, "spent only {spent} of {TOTAL}");
    let (code, st, err) = pandora(dir.path(), &["status", "--json", "pg.toml"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["running"].as_u64().unwrap(), 0);
    assert!((st["budget_spent"].as_f64().unwrap() - spent).abs() < 1e-9);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn four_processes_share_one_study_within_the_budget_up_to_pending_trials() {
    budget_run("budget", false);
}

/// The strict form: the issue asks for an almost-sure budget, so pending trials' known costs
/// should count. Fails today (e.g. 111 to 123 spent of 80 in 3 runs here).
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn four_processes_share_one_study_within_the_budget_strictly() {
    budget_run("budget_strict", true);
}

/// A study with cost-varying variable subsets on PostgreSQL, two processes of two workers each:
/// the budget holds with running trials committed, every trial ends with its realized point.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn cvs_study_with_several_processes() {
    let db = TestSchema::new("cvs");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[study]
name = "cvs"
storage = "{}"
[objective]
builtin = "ackley"
dim = 3
[budget]
total = 30.0
[cvs]
policy = "ucb-cvs"
initial_design = 3
bank_size = 64
control_sets = [
  {{ params = ["x0"], cost = 1.0 }},
  {{ params = ["x0", "x1"], cost = 2.0 }},
  {{ params = ["x0", "x1", "x2"], cost = 4.0 }},
]
[cvs.random]
x1 = {{ dist = "uniform" }}
x2 = {{ dist = "truncated_normal", mean = 0.5, sd = 0.2 }}
"#,
        db.url()
    );
    std::fs::write(dir.path().join("c.toml"), text).unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_pandora"))
                .args(["run", "--json", "c.toml", "--workers", "2", "--quiet"])
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out: Output = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (code, out, err) = pandora(dir.path(), &["export", "c.toml", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let trials: Vec<Value> = serde_json::from_str(&out).unwrap();
    let spent: f64 = trials.iter().map(|t| t["cost"].as_f64().unwrap()).sum();
    assert!(spent <= 30.0 + 1e-9, "{spent}");
    assert!(spent >= 29.0 - 1e-9, "{spent}");
    let numbers: BTreeSet<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers.len(), trials.len());
    for t in &trials {
        assert_eq!(t["state"], "complete", "{t}");
        let p = t["params"].as_object().unwrap();
        assert_eq!(p.len(), 3, "{t}");
        let x: Vec<f64> = t["x"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        for (k, xk) in x.iter().enumerate() {
            assert_eq!(p[&format!("x{k}")].as_f64().unwrap(), *xk);
        }
    }
}

/// The password can stay out of the URL: from a private `password_file=`, from `PGPASSWORD`, with
/// the URL itself from `PANDORA_STORAGE_URL`; a wrong password is refused without being printed.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn the_password_can_come_from_a_file_or_the_environment() {
    let db = TestSchema::new("password_sources");
    let (no_password, password) = pandora_study::redact::split_password(&db.url());
    let Some(password) = password.map(|p| String::from_utf8(p).unwrap()) else {
        eprintln!("skipping: {ENV} has no password");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
            .args(args)
            .env_remove("PGPASSWORD")
            .env_remove("PANDORA_STORAGE_URL")
            .envs(envs.iter().copied())
            .current_dir(d)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains(&password), "{err}");
        (out.status.code(), err)
    };
    // A config without a password: PGPASSWORD gives it.
    std::fs::write(d.join("s.toml"), config(&no_password, "max_trials = 2")).unwrap();
    let (code, err) = run(
        &["run", "--json", "s.toml", "--quiet"],
        &[("PGPASSWORD", &password)],
    );
    assert_eq!(code, Some(0), "{err}");
    // A private password file.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(d.join("pw")).unwrap();
        writeln!(f, "{password}").unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("pw"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let with_file = format!("{no_password}&password_file=pw");
    let (code, err) = run(
        &[
            "status",
            "--json",
            "--storage",
            &with_file,
            "--study",
            "shared",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    // The URL from the environment.
    let (code, err) = run(
        &["best", "--json", "--study", "shared"],
        &[("PANDORA_STORAGE_URL", &with_file)],
    );
    assert_eq!(code, Some(0), "{err}");
    // No password anywhere, or a wrong one: refused by the server.
    let (code, err) = run(
        &[
            "status",
            "--json",
            "--storage",
            &no_password,
            "--study",
            "shared",
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(
        &[
            "status",
            "--json",
            "--storage",
            &no_password,
            "--study",
            "shared",
        ],
        &[("PGPASSWORD", "wrong-password")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("password authentication failed"), "{err}");
}
