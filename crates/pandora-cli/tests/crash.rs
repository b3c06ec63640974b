//! Crash safety: `kill -9` a `pandora run` in the middle of an evaluation, resume it, and check
//! that every evaluation completed before the kill survived, the interrupted trial is marked
//! abandoned, and the study finishes.

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

    // Resume with the same command (and a short abandon timeout, instead of the default 120 s).
    std::thread::sleep(Duration::from_millis(400));
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "run",
            "--json",
            "s.toml",
            "--quiet",
            "--abandon-after",
            "0.2",
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
