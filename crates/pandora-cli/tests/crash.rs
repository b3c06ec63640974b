//! Crash safety: `kill -9` a `pandora run` in the middle of an evaluation, resume it, and check
//! that every evaluation completed before the kill survived, the interrupted trial is marked
//! abandoned, and the study finishes; then the same with [`KILLS`] kills at random moments on
//! SQLite and on PostgreSQL (no told trial lost, no duplicate, no orphaned objective process,
//! the budget held); and that a live trial of another run is never abandoned, while a late
//! outcome is recorded with a warning.

mod common;
use common::pandora;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn export(dir: &Path) -> Vec<Value> {
    common::export(dir, "s.toml")
}

const MAX_TRIALS: usize = 10;

#[test]
fn kill_nine_then_resume_loses_no_completed_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    // Logs each evaluation when it starts and when it ends (just before printing the result).
    std::fs::write(
        dir.path().join("obj.py"),
        r#"import json, sys, time
p = json.load(sys.stdin)
with open("started.log", "a") as f:
    f.write(json.dumps(p, sort_keys=True) + "\n")
time.sleep(0.3)
v = -(p["x"] - 0.3) ** 2 - (p["y"] - 0.6) ** 2
with open("done.log", "a") as f:
    f.write(json.dumps(p, sort_keys=True) + "\n")
print(json.dumps({"objective": v}))
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        format!(
            r#"
[study]
name = "crash"
storage = "sqlite:study.db"
[objective]
command = ["python3", "obj.py"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "y"
type = "float"
low = 0.0
high = 1.0
[budget]
max_trials = {MAX_TRIALS}
[policy]
acquisition = "log_ei"
initial_design = 4
"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "--json", "s.toml", "--quiet"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pandora run");
    // Wait until 5 evaluations are done and the 6th has started (its trial is stored as
    // running, and the 0.3 s evaluation is under way): then kill -9.
    let start = Instant::now();
    let done_before = loop {
        let done = lines(&dir.path().join("done.log"));
        let started = lines(&dir.path().join("started.log"));
        if done.len() >= 5 && started.len() == done.len() + 1 {
            child.kill().unwrap(); // SIGKILL
            break done;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "pandora run ended before it was killed"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(10));
    };
    child.wait().unwrap();

    // Everything that completed before the kill is stored, and the interrupted trial is running.
    let before = export(dir.path());
    let complete: Vec<&Value> = before.iter().filter(|t| t["state"] == "complete").collect();
    let running: Vec<&Value> = before.iter().filter(|t| t["state"] == "running").collect();
    assert_eq!(complete.len(), done_before.len(), "{before:?}");
    assert_eq!(running.len(), 1, "{before:?}");
    for t in &complete {
        let p = serde_json::to_string(&t["params"]).unwrap();
        let logged = done_before
            .iter()
            .any(|l| serde_json::from_str::<Value>(l).unwrap() == t["params"]);
        assert!(logged, "{p} was not evaluated");
    }

    // Resume with the same command (and the shortest abandon timeout, instead of the default
    // 120 s), once the interrupted trial is stale.
    std::thread::sleep(Duration::from_secs_f64(MIN_ABANDON_S + 0.5));
    let abandon = format!("{MIN_ABANDON_S}");
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "--json",
            "s.toml",
            "--quiet",
            "--abandon-after",
            &abandon,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["stopped"].as_str().unwrap().contains("max_trials"),
        "{out}"
    );
    let s = &v["summary"];
    assert_eq!(s["abandoned"], 1, "{out}");
    assert_eq!(s["running"], 0, "{out}");
    assert_eq!(
        s["complete"].as_u64().unwrap() + s["failed"].as_u64().unwrap() + 1,
        MAX_TRIALS as u64,
        "{out}"
    );

    // Every trial completed before the kill is unchanged; the interrupted one is abandoned.
    let after = export(dir.path());
    assert_eq!(after.len(), MAX_TRIALS);
    for t in &complete {
        let n = t["number"].as_u64().unwrap() as usize;
        assert_eq!(&&after[n], t, "trial {n} changed");
    }
    let n = running[0]["number"].as_u64().unwrap() as usize;
    assert_eq!(after[n]["state"], "abandoned");
    assert_eq!(after[n]["params"], running[0]["params"]);
    assert!(
        after[n]["error"].as_str().unwrap().contains("heartbeat"),
        "{}",
        after[n]
    );
    // The resumed run evaluated only new trials: one evaluation per trial, plus the killed one.
    let started = lines(&dir.path().join("started.log"));
    assert_eq!(started.len(), MAX_TRIALS, "{started:?}");
}

// ---------------------------------------------------------------------------------------------
// Repeated kills at random moments, on SQLite and on PostgreSQL.

/// Kills of `pandora run` per backend (each while the run was alive).
const KILLS: usize = 12;
/// The budget, in trials of unit cost.
const KILL_BUDGET: f64 = 80.0;
/// The shortest `--abandon-after` `pandora run` accepts (`study_cmd::MIN_ABANDON_S`).
const MIN_ABANDON_S: f64 = 10.0;

/// The objective of the kill test: logs its pid and point when it starts, sleeps 0.1-0.4 s (so
/// that most kills land during an evaluation), logs again when done.
const KILL_OBJECTIVE: &str = r#"import json, os, random, sys, time
p = json.load(sys.stdin)
with open("started.log", "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "p": p}, sort_keys=True) + "\n")
time.sleep(random.uniform(0.1, 0.4))
v = -(p["x"] - 0.3) ** 2 - (0.5 if p["c"] == "b" else 0.0)
with open("done.log", "a") as f:
    f.write(json.dumps(p, sort_keys=True) + "\n")
print(json.dumps({"objective": v}))
"#;

fn kill_config(storage: &str) -> String {
    format!(
        r#"
[study]
name = "kills"
storage = "{storage}"
[objective]
command = ["python3", "kill_obj.py"]
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
total = {KILL_BUDGET}
[policy]
acquisition = "log_ei"
initial_design = 5
"#
    )
}

/// Pids of objective processes of this test (their command line names `kill_obj.py` and their
/// working directory is `dir`) that are still alive (zombies, dead but not reaped by a PID 1
/// that does not reap, do not count).
fn live_objectives(dir: &Path) -> Vec<i64> {
    let dir = dir.canonicalize().unwrap();
    lines(&dir.join("started.log"))
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["pid"]
                .as_i64()
                .unwrap()
        })
        .filter(|pid| {
            let proc_dir = format!("/proc/{pid}");
            let cmdline = std::fs::read(format!("{proc_dir}/cmdline")).unwrap_or_default();
            let ours = String::from_utf8_lossy(&cmdline).contains("kill_obj.py")
                && std::fs::read_link(format!("{proc_dir}/cwd")).is_ok_and(|c| c == dir);
            let stat = std::fs::read_to_string(format!("{proc_dir}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            ours && !zombie
        })
        .collect()
}

/// Waits up to 3 s for the objectives of a killed run to die; returns the survivors.
fn orphans_after_kill(dir: &Path) -> Vec<i64> {
    let start = Instant::now();
    loop {
        let alive = live_objectives(dir);
        if alive.is_empty() || start.elapsed() > Duration::from_secs(3) {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks that every trial told in `before` is unchanged in `after` (no told trial lost or
/// altered) and that trial numbers are 0..n without gaps or repeats (no trial handed out twice).
fn check_no_loss(before: &[Value], after: &[Value]) {
    let numbers: Vec<u64> = after
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..after.len() as u64).collect::<Vec<_>>());
    for t in before
        .iter()
        .filter(|t| t["state"] == "complete" || t["state"] == "failed")
    {
        let n = t["number"].as_u64().unwrap() as usize;
        assert_eq!(&after[n], t, "told trial {n} lost or changed");
    }
}

/// Spending counted toward the budget (every trial's cost; the initial design counts).
fn spent(trials: &[Value]) -> f64 {
    trials.iter().filter_map(|t| t["cost"].as_f64()).sum()
}

/// `pandora run` with a command objective on `storage`, SIGKILLed [`KILLS`] times at random
/// moments (every other one during an evaluation) and resumed each time; then finished once the killed
/// runs' trials are stale. Nothing told is lost, nothing is handed out twice, no objective
/// outlives its run, and the budget holds.
fn kill_and_resume(storage: &str) {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kill_obj.py"), KILL_OBJECTIVE).unwrap();
    std::fs::write(dir.path().join("s.toml"), kill_config(storage)).unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill moments seed {seed}");
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let abandon = format!("{MIN_ABANDON_S}");
    let mut before = Vec::new();
    let (mut kills, mut during_evaluation) = (0, 0);
    let start = Instant::now();
    while kills < KILLS {
        assert!(start.elapsed() < Duration::from_secs(90), "no progress");
        let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
            .args(["run", "s.toml", "--quiet", "--workers", "2"])
            .args(["--abandon-after", &abandon])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn pandora run");
        if kills % 2 == 1 {
            // Every other kill lands during an evaluation: once one is under way, at a random
            // moment of it.
            let waiting = Instant::now();
            while live_objectives(dir.path()).is_empty()
                && waiting.elapsed() < Duration::from_secs(10)
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        } else {
            std::thread::sleep(Duration::from_millis(rng.random_range(100..1200)));
        }
        if child.try_wait().unwrap().is_some() {
            break; // the study finished: it had no more budget
        }
        let evaluating = !live_objectives(dir.path()).is_empty();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        during_evaluation += usize::from(evaluating);
        let orphans = orphans_after_kill(dir.path());
        assert!(
            orphans.is_empty(),
            "objectives outlived their run: {orphans:?}"
        );
        let after = export(dir.path());
        check_no_loss(&before, &after);
        assert!(
            spent(&after) <= KILL_BUDGET + 1e-9,
            "spent {} of {KILL_BUDGET}",
            spent(&after)
        );
        before = after;
    }
    assert!(kills >= 10, "only {kills} kills before the study finished");
    assert!(
        during_evaluation >= 3,
        "only {during_evaluation} kills during an evaluation"
    );
    // Let the killed runs' trials go stale, then finish the study.
    std::thread::sleep(Duration::from_secs_f64(MIN_ABANDON_S + 0.5));
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--quiet",
            "--workers",
            "2",
            "--abandon-after",
            &abandon,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["stopped"].as_str().unwrap().contains("budget"), "{out}");
    assert_eq!(v["summary"]["running"], 0, "{out}");
    let after = export(dir.path());
    check_no_loss(&before, &after);
    assert!(live_objectives(dir.path()).is_empty());
    let total = spent(&after);
    assert!(
        total <= KILL_BUDGET + 1e-9,
        "spent {total} of {KILL_BUDGET}"
    );
    assert!(
        total > KILL_BUDGET - 1.5,
        "spent only {total} of {KILL_BUDGET}"
    );
    // No point is shared by two model-phase trials running at once (the pending-point
    // exclusion). A point may be proposed again after its first evaluation ended: when every
    // acquisition value is numerically zero (seen: log EI = -244 at trial 30, with 21 trials
    // pending), the maximizer's answer is a corner of the cube, evaluated before.
    let model: Vec<&Value> = after
        .iter()
        .filter(|t| t["decision"]["phase"] == "model" && t["state"] == "complete")
        .collect();
    for (j, b) in model.iter().enumerate() {
        for a in &model[..j] {
            let (ca, cb) = (
                a["created_at"].as_f64().unwrap(),
                b["created_at"].as_f64().unwrap(),
            );
            let fa = a["finished_at"].as_f64().unwrap_or(f64::INFINITY);
            let at_once = ca <= cb && cb < fa;
            assert!(
                !(at_once && a["x"] == b["x"]),
                "trials {} and {} share a point while both run",
                a["number"],
                b["number"]
            );
        }
    }
    eprintln!(
        "{kills} kills ({during_evaluation} during an evaluation), {} trials, {} abandoned, \
         spent {total} of {KILL_BUDGET}",
        after.len(),
        after.iter().filter(|t| t["state"] == "abandoned").count()
    );
}

#[test]
fn sqlite_run_killed_at_random_moments_loses_nothing() {
    kill_and_resume("sqlite:study.db");
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn postgres_run_killed_at_random_moments_loses_nothing() {
    let db = common::TestSchema::new("kills");
    kill_and_resume(&db.url());
}

// ---------------------------------------------------------------------------------------------
// Abandonment takes only silent trials; a late outcome counts, with a warning.

/// A one-float study of `storage` whose objective sleeps `sleep_s` seconds.
fn slow_config(dir: &Path, limits: &str, sleep_s: f64) {
    std::fs::write(
        dir.join("slow.py"),
        format!(
            "import json, sys, time\np = json.load(sys.stdin)\nopen('started.log', 'a').write('x\\n')\n\
             time.sleep({sleep_s})\nprint(json.dumps({{'objective': p['x']}}))\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("s.toml"),
        format!(
            r#"
[study]
name = "slow"
storage = "sqlite:study.db"
[objective]
command = ["python3", "slow.py"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[budget]
{limits}
"#
        ),
    )
    .unwrap();
}

/// A run started with the shortest `--abandon-after` while another run's trial has been
/// evaluating for longer than that leaves the trial alone: it is heartbeating.
#[test]
fn a_live_trial_of_another_run_is_never_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    slow_config(dir.path(), "max_trials = 1", MIN_ABANDON_S + 3.0);
    let a = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "--json", "s.toml", "--quiet"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pandora run");
    let start = Instant::now();
    while lines(&dir.path().join("started.log")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no evaluation started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    // Well past the abandon timeout since the trial was handed out, but the evaluation is on.
    std::thread::sleep(Duration::from_secs_f64(MIN_ABANDON_S + 1.0));
    let abandon = format!("{MIN_ABANDON_S}");
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "--json",
            "s.toml",
            "--quiet",
            "--abandon-after",
            &abandon,
        ],
    );
    assert!(started.elapsed() < Duration::from_secs_f64(MIN_ABANDON_S + 3.0));
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["abandoned"], 0, "{out}");
    assert_eq!(v["summary"]["running"], 1, "{out}");
    let a = a.wait_with_output().unwrap();
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let v: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["summary"]["complete"], 1, "{v}");
    assert!(!String::from_utf8_lossy(&a.stderr).contains("warning"));
}

/// A trial handed out by `pandora ask` and never heartbeated is abandoned by a run, whose own
/// trials then use the budget; its late `tell` is recorded, its cost counted (the spending
/// exceeds the budget, honestly), and the tell says so.
#[test]
fn a_late_tell_is_recorded_and_says_the_budget_is_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    slow_config(dir.path(), "total = 2.0", 0.0);
    let (code, out, err) = pandora(dir.path(), &["ask", "--json", "s.toml"]);
    assert_eq!(code, 0, "{err}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    let number = asked["number"].as_u64().unwrap().to_string();
    // Once the trial is older than the shortest abandon timeout, a run abandons it and spends
    // the budget on trials of its own.
    std::thread::sleep(Duration::from_secs_f64(MIN_ABANDON_S + 0.5));
    let abandon = format!("{MIN_ABANDON_S}");
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "--json",
            "s.toml",
            "--quiet",
            "--abandon-after",
            &abandon,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["abandoned"], 1, "{out}");
    assert_eq!(v["summary"]["budget_spent"], 2.0, "{out}");
    let (code, out, err) = pandora(
        dir.path(),
        &["tell", "--json", "s.toml", &number, "--objective", "0.5"],
    );
    assert_eq!(code, 0, "{err}");
    let told: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(told["state"], "complete", "{out}");
    assert!(
        err.contains("warning") && err.contains("abandoned"),
        "{err}"
    );
    assert!(
        err.contains("3 spent of the budget 2, over it by 1"),
        "{err}"
    );
    let (code, out, err) = pandora(dir.path(), &["status", "--json", "s.toml"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(st["budget_spent"], 3.0, "{out}");
    assert_eq!(st["abandoned"], 0, "{out}");
}

// ---------------------------------------------------------------------------------------------
// Soak: 8 workers, 1000 trials, random kills (ignored by default; run by hand, see
// docs/studies.md for the last figures).

/// Trials of the soak test.
const SOAK_TRIALS: usize = 1000;
/// Concurrent `pandora run` processes of the soak test.
const SOAK_WORKERS: usize = 8;

fn soak_config(storage: &str) -> String {
    format!(
        r#"
[study]
name = "soak"
storage = "{storage}"
[objective]
command = ["python3", "kill_obj.py"]
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
max_trials = {SOAK_TRIALS}
[policy]
acquisition = "random"
"#
    )
}

fn spawn_worker(dir: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "s.toml", "--quiet", "--abandon-after"])
        .arg(format!("{MIN_ABANDON_S}"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pandora run")
}

/// [`SOAK_WORKERS`] `pandora run` processes share a study of [`SOAK_TRIALS`] trials (random
/// search, so that the storage, not the model, is under test); every 0.5-2 s one of them is
/// killed at random and replaced. Checked as in [`kill_and_resume`]; the figures are printed.
fn soak(storage: &str) {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kill_obj.py"), KILL_OBJECTIVE).unwrap();
    std::fs::write(dir.path().join("s.toml"), soak_config(storage)).unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(21);
    let start = Instant::now();
    let mut workers: Vec<_> = (0..SOAK_WORKERS)
        .map(|_| spawn_worker(dir.path()))
        .collect();
    let (mut kills, mut before) = (0, Vec::new());
    loop {
        std::thread::sleep(Duration::from_millis(rng.random_range(500..2000)));
        let k = rng.random_range(0..SOAK_WORKERS);
        if workers.iter_mut().all(|w| w.try_wait().unwrap().is_some()) {
            break;
        }
        if workers[k].try_wait().unwrap().is_none() {
            workers[k].kill().unwrap();
            workers[k].wait().unwrap();
            kills += 1;
            workers[k] = spawn_worker(dir.path());
        }
        let after = export(dir.path());
        check_no_loss(&before, &after);
        before = after;
    }
    std::thread::sleep(Duration::from_secs_f64(MIN_ABANDON_S + 0.5));
    let abandon = format!("{MIN_ABANDON_S}");
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "--json",
            "s.toml",
            "--quiet",
            "--abandon-after",
            &abandon,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let after = export(dir.path());
    check_no_loss(&before, &after);
    assert_eq!(after.len(), SOAK_TRIALS, "{out}");
    assert!(orphans_after_kill(dir.path()).is_empty());
    let count = |s: &str| after.iter().filter(|t| t["state"] == s).count();
    assert_eq!(count("running"), 0);
    let evaluations = lines(&dir.path().join("started.log")).len();
    eprintln!(
        "soak on {}: {SOAK_TRIALS} trials by {SOAK_WORKERS} processes in {:.0} s, {kills} kills; \
         {} complete, {} abandoned, {} failed; {evaluations} evaluations started",
        storage.split(':').next().unwrap_or("?"),
        start.elapsed().as_secs_f64(),
        count("complete"),
        count("abandoned"),
        count("failed"),
    );
}

#[test]
#[ignore = "soak test (minutes): cargo test --test crash -- --ignored soak"]
fn soak_sqlite() {
    soak("sqlite:study.db");
}

#[test]
#[ignore = "soak test (minutes): needs PANDORA_TEST_POSTGRES_URL; cargo test --test crash -- --ignored soak"]
fn soak_postgres() {
    let db = common::TestSchema::new("soak");
    soak(&db.url());
}
