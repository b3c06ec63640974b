//! The objective command runner of `pandora run`, end to end: timeouts kill whole process groups,
//! evaluations die with their `pandora run`, durations are validated, commands that keep failing
//! the same way stop the run, commands run in their configuration file's directory, stdout is
//! read in bounded memory, and the per-trial lines of parallel workers stay in order.

mod common;
use common::{export, pandora};

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A study of one float parameter `x` evaluated by `command` (a TOML array).
fn config(command: &str, extra_objective: &str, max_trials: u32) -> String {
    format!(
        r#"
[study]
name = "runner"
storage = "sqlite:study.db"
[objective]
command = {command}
{extra_objective}
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[budget]
max_trials = {max_trials}
[policy]
acquisition = "log_ei"
initial_design = 2
"#
    )
}

/// The pids listed in `file` (one per line).
fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Whether process `pid` is alive (a zombie, dead but not yet reaped by its new parent, is not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Waits (generously) until none of `pids` is alive; returns those still alive.
fn survivors(pids: &[u32]) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || start.elapsed() > Duration::from_secs(15) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the processes a failed test left behind.
fn cleanup(pids: &[u32]) {
    for p in pids {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
}

/// A wrapper script that starts a sleeping grandchild (which keeps stdout open) and sleeps; with
/// `trap '' TERM` both ignore SIGTERM, so only the SIGKILL after the grace period ends them.
const WRAPPER: &str = r#"#!/bin/sh
[ "$1" = ignore-term ] && trap '' TERM
sleep 60 &
echo $! >> pids
echo $$ >> pids
sleep 60
wait
"#;

#[test]
fn a_timeout_kills_the_whole_process_group_of_a_wrapper_script() {
    for mode in ["plain", "ignore-term"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wrap.sh"), WRAPPER).unwrap();
        let command = format!(r#"["sh", "wrap.sh", "{mode}"]"#);
        std::fs::write(
            dir.path().join("s.toml"),
            config(&command, "timeout_s = 1", 1),
        )
        .unwrap();
        let start = Instant::now();
        let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
        let took = start.elapsed();
        let started = pids(&dir.path().join("pids"));
        let left = survivors(&started);
        cleanup(&left);
        assert_eq!(code, 0, "{mode}: {err}");
        // timeout 1 s + grace 5 s + a generous margin; the grandchild sleeps 60 s.
        assert!(
            took < Duration::from_secs(1 + 5 + 10),
            "{mode}: took {took:?}: {out}"
        );
        assert_eq!(started.len(), 2, "{mode}: the script started: {started:?}");
        assert!(left.is_empty(), "{mode}: still running: {left:?}");
        let trials = export(dir.path(), "s.toml");
        assert_eq!(trials.len(), 1);
        assert_eq!(trials[0]["state"], "failed", "{mode}: {}", trials[0]);
        let error = trials[0]["error"].as_str().unwrap();
        assert!(error.contains("timed out after 1.0 s"), "{mode}: {error}");
    }
}

#[test]
fn killing_pandora_run_kills_its_evaluations() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wrap.sh"), WRAPPER).unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        config(r#"["sh", "wrap.sh", "plain"]"#, "", 3),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "--json", "s.toml", "--quiet"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pandora run");
    let file = dir.path().join("pids");
    let start = Instant::now();
    while pids(&file).len() < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "pandora run ended before it was killed"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "no evaluation");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let started = pids(&file);
    let left = survivors(&started);
    cleanup(&left);
    assert!(
        left.is_empty(),
        "evaluation processes outlived pandora run: {left:?} of {started:?}"
    );
}

#[test]
fn durations_out_of_range_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["1e300", "-1", "0", "nan", "inf", "2592001"] {
        std::fs::write(
            dir.path().join("s.toml"),
            config(r#"["true"]"#, &format!("timeout_s = {bad}"), 3),
        )
        .unwrap();
        let (code, _, err) = pandora(dir.path(), &["status", "--json", "s.toml"]);
        assert_eq!(code, 2, "timeout_s = {bad}: {err}");
        assert!(err.contains("objective.timeout_s"), "{bad}: {err}");
        assert!(!err.contains("panicked"), "{bad}: {err}");
    }
    std::fs::write(
        dir.path().join("s.toml"),
        config(r#"["true"]"#, "timeout_s = 2592000", 3),
    )
    .unwrap();
    let (code, _, err) = pandora(dir.path(), &["status", "--json", "s.toml"]);
    assert_eq!(code, 0, "30 days is allowed: {err}");
    // Below ten heartbeats (10 s), a run could take another run's live trial for abandoned.
    for bad in ["1e300", "-1", "nan", "0.2", "9.9"] {
        let (code, _, err) = pandora(
            dir.path(),
            &[
                "run",
                "--json",
                "s.toml",
                "--quiet",
                &format!("--abandon-after={bad}"),
            ],
        );
        assert_eq!(code, 2, "--abandon-after {bad}: {err}");
        assert!(err.contains("--abandon-after"), "{bad}: {err}");
        assert!(err.contains("from 10"), "{bad}: {err}");
    }
}

#[test]
fn repeated_identical_failures_stop_the_run_with_the_commands_error() {
    for (command, expected) in [
        (r#"["./missing.sh"]"#, "cannot start"),
        (
            r#"["python3", "missing.py"]"#,
            "exited with code 2; stderr: ",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.toml"), config(command, "", 10)).unwrap();
        let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
        assert_eq!(code, 2, "{command}: {out}{err}");
        assert!(
            err.contains("3 trials in a row failed with the same error")
                && err.contains(expected)
                && err.contains("missing"),
            "{command}: {err}"
        );
        assert!(
            err.matches("exited").count() <= 1 && !err.contains("exit status"),
            "the status is said once: {err}"
        );
        let trials = export(dir.path(), "s.toml");
        assert_eq!(trials.len(), 3, "{command}: stopped after 3 trials");
        assert!(trials.iter().all(|t| t["state"] == "failed"));
    }
    // Failures with different reasons do not stop the run.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("obj.py"),
        "import json, sys\nx = json.load(sys.stdin)['x']\nsys.exit(f'x was {x}')\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        config(r#"["python3", "obj.py"]"#, "", 5),
    )
    .unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(export(dir.path(), "s.toml").len(), 5);
}

#[test]
fn commands_run_in_the_directory_of_their_configuration_file() {
    for command in [r#"["python3", "obj.py"]"#, r#"["bin/obj.sh"]"#] {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir_all(sub.join("bin")).unwrap();
        std::fs::write(
            sub.join("obj.py"),
            "import json, sys\nprint(-(json.load(sys.stdin)['x'] - 0.3) ** 2)\n",
        )
        .unwrap();
        let script = sub.join("bin/obj.sh");
        std::fs::write(&script, "#!/bin/sh\nexec python3 obj.py\n").unwrap();
        let mut perm = std::fs::metadata(&script).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&script, perm).unwrap();
        std::fs::write(sub.join("s.toml"), config(command, "", 3)).unwrap();
        // Run from the parent directory (the storage path stays relative to it).
        let (code, out, err) = pandora(dir.path(), &["run", "--json", "sub/s.toml", "--quiet"]);
        assert_eq!(code, 0, "{command}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["summary"]["complete"], 3, "{command}: {out}");
    }
}

#[test]
fn stdout_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    // Prints 200 MiB, then records the peak memory of its parent (pandora run) once all but the
    // last pipe buffer of it has been read.
    std::fs::write(
        dir.path().join("obj.py"),
        r#"import os, sys
chunk = b"x" * (1 << 20)
for _ in range(200):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
for line in open(f"/proc/{os.getppid()}/status"):
    if line.startswith("VmHWM:"):
        open("hwm_kb", "w").write(line.split()[1])
print("1.0")
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        config(r#"["python3", "obj.py"]"#, "", 1),
    )
    .unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let hwm_kb: u64 = std::fs::read_to_string(dir.path().join("hwm_kb"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        hwm_kb < 100 * 1024,
        "pandora run peaked at {hwm_kb} kB reading 200 MiB"
    );
    let trials = export(dir.path(), "s.toml");
    assert_eq!(trials[0]["state"], "failed");
    let error = trials[0]["error"].as_str().unwrap();
    assert!(error.contains("more than the 1048576"), "{error}");
    assert!(error.len() < 1000, "{error}");
}

#[test]
fn zero_workers_are_refused_and_parallel_lines_come_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        r#"
[study]
name = "lines"
storage = "sqlite:study.db"
[objective]
builtin = "ackley"
dim = 2
[budget]
max_trials = 30
[policy]
acquisition = "random"
"#,
    )
    .unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--workers", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--workers"), "{err}");
    assert!(export(dir.path(), "s.toml").is_empty(), "nothing was run");

    // stderr is not a terminal here: one line per trial.
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--workers", "2"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 30, "{err}");
    let mut last = 0.0;
    for l in &lines {
        assert!(l.contains(" trial ") && l.contains(" spent "), "{l}");
        let spent: f64 = l
            .split(" spent ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no cost spent in '{l}'"));
        assert!(spent >= last, "the cost spent went back: {err}");
        last = spent;
    }
    assert_eq!(last, 30.0, "{err}");
}
