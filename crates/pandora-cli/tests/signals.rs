//! `pandora run` under a scheduler: on `SIGTERM`/`SIGINT` it hands out no new trial, lets the
//! running evaluation finish within `--grace` or stops it and abandons its trial (a later run
//! finishes the study), and exits 0 with one line saying so; a second signal ends the grace at
//! once.
//!
//! The signal is sent by the evaluation itself to its parent (`pandora run`), so that it arrives
//! mid-evaluation by construction, whatever the machine's load.
#![cfg(unix)]

mod common;
use common::{export, pandora};

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The objective: logs its pid, signals `pandora run` with `$1` (`TERM`, `INT`, `INT2` for two
/// `SIGINT`s) on the first evaluation only, then sleeps the seconds in the file `sleep_s`.
const OBJECTIVE: &str = r#"#!/bin/sh
cat > /dev/null
echo $$ >> started.log
if [ ! -e signalled ]; then
  touch signalled
  case "$1" in
    INT2) kill -INT $PPID; sleep 0.3; kill -INT $PPID ;;
    *) kill -$1 $PPID ;;
  esac
fi
sleep $(cat sleep_s)
echo 0.5
"#;

/// A study of one float parameter `x` evaluated by `obj.sh SIGNAL`, whose evaluations sleep
/// `sleep_s` seconds.
fn setup(dir: &Path, signal: &str, sleep_s: f64) {
    std::fs::write(dir.join("obj.sh"), OBJECTIVE).unwrap();
    std::fs::write(dir.join("sleep_s"), sleep_s.to_string()).unwrap();
    std::fs::write(
        dir.join("s.toml"),
        format!(
            r#"
[study]
name = "signals"
storage = "sqlite:study.db"
[objective]
command = ["sh", "obj.sh", "{signal}"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[budget]
max_trials = 3
[policy]
initial_design = 2
"#
        ),
    )
    .unwrap();
}

/// Runs `pandora run --json s.toml --quiet ARGS` in `dir` with a watchdog (a test that hangs
/// fails instead); returns the exit code, the JSON summary and stderr.
fn run(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "--json", "s.toml", "--quiet"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pandora run");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("pandora run did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code(), json, stderr)
}

/// Lines of `started.log`: one per evaluation started.
fn started(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("started.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether process `pid` is alive (not a zombie).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

#[test]
fn sigterm_lets_the_running_evaluation_finish_within_the_grace_and_asks_no_more() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), "TERM", 1.0);
    let (code, json, err) = run(dir.path(), &["--grace", "60"]);
    assert_eq!(code, Some(0), "{err}");
    let line = "stopped by SIGTERM: 1 trial finished during the grace period";
    assert!(err.contains(line), "{err}");
    assert_eq!(json["stopped"], line, "{json}");
    // The evaluation under way was told; no trial was asked, none started, after the signal.
    let trials = export(dir.path(), "s.toml");
    assert_eq!(trials.len(), 1, "{trials:?}");
    assert_eq!(trials[0]["state"], "complete", "{}", trials[0]);
    assert_eq!(started(dir.path()).len(), 1);
}

#[test]
fn past_the_grace_the_evaluation_is_stopped_its_trial_abandoned_and_a_later_run_finishes() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), "TERM", 30.0);
    let (code, json, err) = run(dir.path(), &["--grace", "0.5"]);
    assert_eq!(code, Some(0), "{err}");
    let line = "stopped by SIGTERM: trial 0 abandoned";
    assert!(err.contains(line), "{err}");
    assert_eq!(json["stopped"], line, "{json}");
    assert_eq!(json["summary"]["abandoned"], 1, "{json}");
    assert_eq!(json["summary"]["running"], 0, "{json}");
    let trials = export(dir.path(), "s.toml");
    assert_eq!(trials.len(), 1, "{trials:?}");
    assert_eq!(trials[0]["state"], "abandoned", "{}", trials[0]);
    let error = trials[0]["error"].as_str().unwrap();
    assert!(error.contains("grace period"), "{error}");
    // The evaluation's process was stopped with it.
    let pids = started(dir.path());
    assert_eq!(pids.len(), 1);
    assert!(!alive(&pids[0]), "the evaluation outlived its grace period");
    // The status says so, and a later run (no signal now) finishes the study.
    let (code, out, err) = pandora(dir.path(), &["status", "s.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1 abandoned"), "{out}");
    std::fs::write(dir.path().join("sleep_s"), "0").unwrap();
    let (code, json, err) = run(dir.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        json["stopped"].as_str().unwrap().contains("max_trials"),
        "{json}"
    );
    assert_eq!(json["summary"]["running"], 0, "{json}");
    assert!(json["summary"]["complete"].as_u64().unwrap() >= 2, "{json}");
}

#[test]
fn a_second_sigint_ends_the_grace_at_once() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), "INT2", 60.0);
    let (code, json, err) = run(dir.path(), &["--grace", "60"]);
    assert_eq!(code, Some(0), "{err}");
    let line = "stopped by SIGINT: trial 0 abandoned";
    assert!(err.contains(line), "{err}");
    assert_eq!(json["stopped"], line, "{json}");
    let trials = export(dir.path(), "s.toml");
    assert_eq!(trials.len(), 1, "{trials:?}");
    assert_eq!(trials[0]["state"], "abandoned", "{}", trials[0]);
}

#[test]
fn a_grace_out_of_range_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), "TERM", 0.0);
    for bad in ["-1", "NaN", "inf"] {
        let flag = format!("--grace={bad}");
        let (code, _, err) = pandora(dir.path(), &["run", "s.toml", &flag]);
        assert_ne!(code, 0, "--grace {bad}");
        assert!(err.contains("--grace"), "--grace {bad}: {err}");
    }
    assert!(started(dir.path()).is_empty());
}
