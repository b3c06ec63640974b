//! Studies with steps from the command line: `pandora ask` hands out start and resume actions,
//! `pandora tell --step` records steps, and `kill -9` of either at random moments loses no told
//! step and never records a step twice.

mod common;
use common::{export, pandora};

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CONFIG: &str = r#"
[study]
name = "steps"
storage = "sqlite:steps.db"
direction = "maximize"

[objective]
kind = "external"

[[space]]
name = "a"
type = "float"
low = 0.0
high = 1.0

[budget]
total = 24.0

[policy]
initial_design = 3
seed = 1

[fidelity]
max_steps = 6
lambda = 0.002
steps_per_ask = 2
"#;

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), CONFIG).unwrap();
    dir
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let (code, out, err) = pandora(dir, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// The learning curve of configuration `a` at step `t`.
fn curve(a: f64, t: u64) -> f64 {
    (1.0 - (a - 0.4).powi(2)) * (1.0 - (-(t as f64) / 2.0).exp())
}

#[test]
fn ask_hands_out_steps_and_tell_records_them_one_by_one() {
    let dir = setup();
    let d = dir.path();
    let asked = json(d, &["ask", "s.toml", "--json"]);
    assert_eq!(
        asked["steps"],
        serde_json::json!({"from": 1, "to": 2, "resume": false})
    );
    let n = asked["number"].to_string();
    let told = json(
        d,
        &[
            "tell",
            "s.toml",
            &n,
            "--step",
            "1",
            "--objective",
            "0.5",
            "--json",
        ],
    );
    assert_eq!(
        (told["state"].as_str(), told["cost"].as_f64()),
        (Some("running"), Some(1.0))
    );
    // A step told twice is refused and changes nothing.
    let (code, _, err) = pandora(
        d,
        &["tell", "s.toml", &n, "--step", "1", "--objective", "0.6"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("already told"), "{err}");
    let told = json(
        d,
        &[
            "tell",
            "s.toml",
            &n,
            "--step",
            "2",
            "--objective",
            "0.7",
            "--json",
        ],
    );
    assert_eq!(told["state"], "paused");
    // Known costs are the study's to compute; a failure ends the whole trial, without a step.
    let (code, _, err) = pandora(
        d,
        &[
            "tell",
            "s.toml",
            &n,
            "--step",
            "3",
            "--objective",
            "1",
            "--cost",
            "2",
        ],
    );
    assert_ne!(code, 0, "{err}");
    let (code, _, err) = pandora(d, &["tell", "s.toml", &n, "--step", "3", "--failed", "x"]);
    assert!(code != 0 && err.contains("--step"), "{err}");
    let status = json(d, &["status", "s.toml", "--json"]);
    assert_eq!(
        (status["paused"].as_u64(), status["budget_spent"].as_f64()),
        (Some(1), Some(2.0))
    );
    let (code, text, _) = pandora(d, &["ask", "s.toml"]);
    assert_eq!(code, 0);
    assert!(text.contains("--step T"), "{text}");
    let trials = export(d, "s.toml");
    let steps: Vec<u64> = trials[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2]);
}

/// A deterministic pseudo-random number in [0, 1) for `k`.
fn unit(k: u64) -> f64 {
    let mut z = k.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(7);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Kills at random moments: with probability 1/2 a process is sent SIGKILL after a random delay
/// of up to `span_us`. The span adapts to the machine: when a process had already exited by the
/// time the kill was due, the span shrinks by 30 %, so that on a fast machine the kills still land
/// while processes run (a fixed 40 ms missed most of them on a quiet machine).
struct Killer {
    k: u64,
    span_us: f64,
}

impl Killer {
    fn new() -> Self {
        Self {
            k: 0,
            span_us: 40_000.0,
        }
    }

    fn next(&mut self) -> f64 {
        self.k += 1;
        unit(self.k)
    }

    /// Runs `pandora args` in `dir`, perhaps killing it; returns its stdout if it finished.
    fn run(&mut self, dir: &Path, args: &[&str]) -> Option<String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if self.next() < 0.5 {
            let delay = (self.next() * self.span_us) as u64;
            std::thread::sleep(Duration::from_micros(delay));
            if child.try_wait().unwrap().is_some() {
                self.span_us = (self.span_us * 0.7).max(200.0);
            } else {
                let _ = child.kill();
            }
        }
        let out = child.wait_with_output().unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The told steps of every trial, from the export.
fn told(dir: &Path) -> Vec<(Value, Vec<u64>)> {
    export(dir, "s.toml")
        .into_iter()
        .map(|t| {
            let steps = t["steps"].as_array().map_or(Vec::new(), |s| {
                s.iter().map(|s| s["step"].as_u64().unwrap()).collect()
            });
            (t, steps)
        })
        .collect()
}

/// A worker loop whose `ask` and `tell` processes are killed at random moments. Like a real worker
/// it re-reads the study after a kill (its checkpoint is the last step the study recorded) and
/// treats a trial whose ask it never saw as lost (the heartbeat timeout pauses it, here by
/// `abandon_stale`). At the end every trial's steps are 1, 2, ... without a gap or a repeat, and
/// every step whose tell returned is recorded.
#[test]
fn kill_nine_at_random_moments_loses_no_told_step_and_repeats_none() {
    let dir = setup();
    let d = dir.path();
    let mut killer = Killer::new();
    let mut confirmed: Vec<(u64, u64)> = Vec::new();
    let mut kills = 0;
    for _round in 0..60 {
        let Some(out) = killer.run(d, &["ask", "s.toml", "--json"]) else {
            kills += 1;
            // The ask may have handed out a trial nobody knows of: give it up (paused).
            abandon_stale(d);
            continue;
        };
        let asked: Value = serde_json::from_str(&out).unwrap();
        if asked.get("finished").is_some() {
            break;
        }
        let n = asked["number"].as_u64().unwrap();
        let a = asked["params"]["a"].as_f64().unwrap();
        let (from, to) = (
            asked["steps"]["from"].as_u64().unwrap(),
            asked["steps"]["to"].as_u64().unwrap(),
        );
        let mut step = from;
        while step <= to {
            let v = curve(a, step).to_string();
            let args = [
                "tell",
                "s.toml",
                &n.to_string(),
                "--step",
                &step.to_string(),
                "--objective",
                &v,
            ];
            if killer.run(d, &args).is_some() {
                confirmed.push((n, step));
                step += 1;
                continue;
            }
            kills += 1;
            // Killed: the step is recorded or not, never half; go on after what is recorded.
            let recorded = told(d)[n as usize].1.len() as u64;
            assert!(
                recorded == step || recorded == step - 1,
                "trial {n}: {recorded} after step {step}"
            );
            step = recorded + 1;
        }
    }
    assert!(kills >= 10, "only {kills} kills");
    let trials = told(d);
    for (t, steps) in &trials {
        assert_eq!(
            steps,
            &(1..=steps.len() as u64).collect::<Vec<_>>(),
            "trial {}",
            t["number"]
        );
    }
    for (n, step) in confirmed {
        assert!(
            trials[n as usize].1.contains(&step),
            "trial {n} lost step {step}"
        );
    }
    let status = json(d, &["status", "s.toml", "--json"]);
    let steps: usize = trials.iter().map(|(_, s)| s.len()).sum();
    assert_eq!(status["budget_spent"].as_f64(), Some(steps as f64));
    assert!(steps as f64 <= 24.0);
}

/// Pauses every running trial (a worker presumed gone), through the library.
fn abandon_stale(dir: &Path) {
    let cfg = pandora_study::StudyConfig::from_toml(CONFIG).unwrap();
    let url = format!("sqlite:{}", dir.join("steps.db").display());
    let storage = pandora_study::storage::open(&url).unwrap();
    if let Ok(mut study) = pandora_study::Study::open(cfg, storage) {
        study.abandon_stale(0.0).unwrap();
    }
}

/// A training run as an objective command: it checks that its checkpoint is the one after step
/// `PANDORA_STEP_FROM − 1` (a resumed run continues where the last told step left it), runs the
/// steps, saves a checkpoint after each and prints one line per step. With `FAIL_AT` set it
/// crashes after printing that step.
const TRAIN: &str = r#"import json, math, os, sys
p = json.load(sys.stdin)
first, last = int(os.environ["PANDORA_STEP_FROM"]), int(os.environ["PANDORA_STEP_TO"])
assert int(os.environ["PANDORA_MAX_STEPS"]) == 5
ckpt = os.path.join(os.environ["PANDORA_CHECKPOINT_DIR"], "state.json")
done = json.load(open(ckpt))["step"] if os.path.exists(ckpt) else 0
if done != first - 1:
    sys.exit(f"checkpoint after step {done}, asked to run from step {first}")
for t in range(first, last + 1):
    json.dump({"step": t}, open(ckpt, "w"))
    v = (1 - (p["a"] - 0.4) ** 2) * (1 - math.exp(-t / 2))
    print(json.dumps({"step": t, "objective": v}), flush=True)
    if os.environ.get("FAIL_AT") == str(t):
        sys.exit(1)
"#;

fn run_config(extra: &str) -> String {
    CONFIG
        .replace(
            "kind = \"external\"",
            "command = [\"python3\", \"train.py\"]",
        )
        .replace("max_steps = 6", "max_steps = 5")
        .replace("steps_per_ask = 2", "steps_per_ask = 1")
        + extra
}

#[test]
fn pandora_run_resumes_runs_from_their_checkpoints() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("train.py"), TRAIN).unwrap();
    std::fs::write(d.join("s.toml"), run_config("")).unwrap();
    let (code, _, err) = pandora(d, &["run", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let trials = told(d);
    for (t, steps) in &trials {
        assert_ne!(t["state"], "failed", "{t}");
        assert_eq!(steps, &(1..=steps.len() as u64).collect::<Vec<_>>(), "{t}");
    }
    // With one step per ask, a trial with two or more steps was resumed from its checkpoint.
    assert!(
        trials.iter().any(|(_, s)| s.len() >= 2),
        "no run was resumed"
    );
    let told_steps: usize = trials.iter().map(|(_, s)| s.len()).sum();
    let status = json(d, &["status", "s.toml", "--json"]);
    assert_eq!(status["budget_spent"].as_f64(), Some(told_steps as f64));
    assert!(d.join("pandora-checkpoints").is_dir());
}

#[test]
fn a_run_that_crashes_keeps_the_steps_it_printed_and_fails() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("train.py"), TRAIN).unwrap();
    let cfg = run_config("").replace("steps_per_ask = 1", "steps_per_ask = 3");
    std::fs::write(d.join("s.toml"), cfg).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "s.toml", "--quiet"])
        .env("FAIL_AT", "2")
        .current_dir(d)
        .output()
        .unwrap();
    // Every run fails at step 2: the run stops after three failures in a row.
    assert_ne!(out.status.code(), Some(0));
    let trials = told(d);
    assert!(!trials.is_empty());
    for (t, steps) in &trials {
        assert_eq!(t["state"], "failed", "{t}");
        assert_eq!(steps, &[1, 2], "{t}");
        assert!(
            t["error"].as_str().unwrap().contains("exited with code 1"),
            "{t}"
        );
    }
}

/// A command whose trial 0 prints step 1 and then waits for a file `go` that the test writes
/// only once it has seen step 1 in the study: the steps must be recorded as they are printed,
/// not when the command exits.
const HOLD: &str = r#"import json, os, sys, time
p = json.load(sys.stdin)
first, last = int(os.environ["PANDORA_STEP_FROM"]), int(os.environ["PANDORA_STEP_TO"])
for t in range(first, last + 1):
    time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
    print(json.dumps({"step": t, "objective": p["a"] * t / 10}), flush=True)
    if os.environ.get("HOLD") and os.environ["PANDORA_TRIAL"] == "0" and t == 1:
        for _ in range(1200):
            if os.path.exists("go"):
                break
            time.sleep(0.05)
        else:
            sys.exit("nobody saw step 1 while the command ran")
"#;

#[test]
fn pandora_run_records_each_step_as_the_command_prints_it() {
    records_each_step_as_printed(None);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn pandora_run_records_each_step_as_the_command_prints_it_on_postgres() {
    let db = common::TestSchema::new("steps_stream");
    records_each_step_as_printed(Some(&db.url()));
}

/// Starts `pandora run s.toml --quiet ARGS` in `dir` on the [`HOLD`] command (three steps per
/// run; trial 0 waits after step 1 for a file `go`), on the default SQLite study or on
/// `storage`, and polls the study (up to 60 s) until trial 0 has step 1 recorded; returns the
/// process and trial 0's state then (`None`: step 1 was never seen).
fn start_held_run(dir: &Path, args: &[&str], storage: Option<&str>) -> (Child, Option<Value>) {
    std::fs::write(dir.join("train.py"), HOLD).unwrap();
    let mut cfg = run_config("").replace("steps_per_ask = 1", "steps_per_ask = 3");
    if let Some(url) = storage {
        cfg = cfg.replace("sqlite:steps.db", url);
    }
    std::fs::write(dir.join("s.toml"), cfg).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "s.toml", "--quiet"])
        .args(args)
        .env("HOLD", "1")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = (0..1200).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        let trials = told(dir);
        let first = trials.first()?;
        (first.1 == [1]).then(|| first.0["state"].clone())
    });
    (child, seen)
}

/// `pandora run` of the [`HOLD`] command on the default SQLite study or on `storage`.
fn records_each_step_as_printed(storage: Option<&str>) {
    let dir = setup();
    let d = dir.path();
    let (child, seen) = start_held_run(d, &[], storage);
    std::fs::write(d.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        seen.as_ref().and_then(Value::as_str),
        Some("running"),
        "{err}"
    );
    assert!(out.status.success(), "{err}");
    let trials = told(d);
    assert_ne!(trials[0].0["state"], "failed", "{}", trials[0].0);
    assert!(trials[0].1.len() >= 3, "{:?}", trials[0].1);
}

#[test]
fn runtime_step_costs_are_the_time_between_step_lines() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("train.py"), HOLD).unwrap();
    let cfg = run_config("\n[cost]\nkind = \"runtime\"\n")
        .replace("total = 24.0", "total = 2.0")
        .replace("steps_per_ask = 1", "steps_per_ask = 2");
    std::fs::write(d.join("s.toml"), cfg).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["run", "s.toml", "--quiet"])
        .env("STEP_SECONDS", "0.15")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trials = export(d, "s.toml");
    let mut spent = 0.0;
    for t in &trials {
        let steps = t["steps"].as_array().unwrap();
        let costs: Vec<f64> = steps.iter().map(|s| s["cost"].as_f64().unwrap()).collect();
        // Each step slept 0.15 s before its line (the first also started Python). One interval
        // between lines as the runner read them can be shorter than 0.15 s, even 0 (a late read
        // of the previous line on a loaded machine, or two lines in one read), but the k-th line
        // of a command cannot be read before k sleeps have passed since it started, so the
        // running sums are bounded below (a wall-clock lower bound that load cannot break).
        assert!(costs.iter().all(|&c| c >= 0.0), "{t}");
        let mut running = 0.0;
        for (k, c) in costs.iter().enumerate() {
            running += c;
            assert!(running >= 0.15 * (k + 1) as f64, "{t}");
        }
        let sum: f64 = costs.iter().sum();
        assert!(
            (t["cost"].as_f64().unwrap_or(0.0) - sum).abs() < 1e-9,
            "{t}"
        );
        spent += sum;
    }
    assert!(
        trials
            .iter()
            .any(|t| !t["steps"].as_array().unwrap().is_empty())
    );
    let status = json(d, &["status", "s.toml", "--json"]);
    assert!((status["budget_spent"].as_f64().unwrap() - spent).abs() < 1e-9);
}

#[test]
fn a_worker_stopped_by_sigterm_pauses_its_run_with_the_steps_printed() {
    let dir = setup();
    let d = dir.path();
    let (child, seen) = start_held_run(d, &["--grace", "0.5"], None);
    let seen = seen.is_some();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(seen && kill.success(), "{err}");
    assert!(out.status.success(), "{err}");
    let trials = told(d);
    // Stopped in the middle of its run (it waits for a file that never comes): paused with the
    // step it printed, to be resumed from step 2.
    assert_eq!(trials.len(), 1, "{err}");
    assert_eq!(trials[0].0["state"], "paused", "{}", trials[0].0);
    assert_eq!(trials[0].1, [1]);
}

/// A training command with a checkpoint per step (it loads exactly the one after step
/// `PANDORA_STEP_FROM − 1`, as docs/freeze-thaw.md says to) that logs every step it trains.
const TRAIN_LOGGED: &str = r#"import json, math, os, sys, time
p = json.load(sys.stdin)
n = os.environ["PANDORA_TRIAL"]
first, last = int(os.environ["PANDORA_STEP_FROM"]), int(os.environ["PANDORA_STEP_TO"])
ckpt = lambda t: os.path.join(os.environ["PANDORA_CHECKPOINT_DIR"], f"after-{t}")
if first > 1 and not os.path.exists(ckpt(first - 1)):
    sys.exit(f"no checkpoint after step {first - 1}")
for t in range(first, last + 1):
    time.sleep(0.2)
    with open("trained.log", "a") as log:
        log.write(f"{n} {t}\n")
    open(ckpt(t), "w").close()
    v = (1 - (p["a"] - 0.4) ** 2) * (1 - math.exp(-t / 2))
    print(json.dumps({"step": t, "objective": v}), flush=True)
"#;

/// `pandora run` killed with SIGKILL at random moments and started again (after the heartbeat
/// timeout, here `abandon_stale`): no recorded step is lost or recorded twice, every run
/// resumes from its checkpoint, and a step is trained again only when its worker was killed
/// between the step's line and its record (at most one step per kill).
#[test]
fn pandora_run_killed_at_random_moments_loses_no_step_and_reruns_at_most_one_per_kill() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("train.py"), TRAIN_LOGGED).unwrap();
    let cfg = run_config("").replace("steps_per_ask = 1", "steps_per_ask = 3");
    std::fs::write(d.join("s.toml"), cfg).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let (mut kills, mut finished) = (0, false);
    for _round in 0..40 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
            .args(["run", "s.toml", "--quiet"])
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        std::thread::sleep(Duration::from_millis(300 + state % 1200));
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "pandora run failed: {status}");
            finished = true;
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        abandon_stale(d);
    }
    assert!(finished, "the study did not finish in 40 rounds");
    assert!(kills >= 3, "only {kills} kills");
    let trials = told(d);
    let mut recorded = 0;
    for (t, steps) in &trials {
        assert_ne!(t["state"], "failed", "{t}");
        assert_eq!(steps, &(1..=steps.len() as u64).collect::<Vec<_>>(), "{t}");
        recorded += steps.len();
    }
    let log = std::fs::read_to_string(d.join("trained.log")).unwrap();
    let trained = log.lines().count();
    eprintln!("kills {kills} trained {trained} recorded {recorded}");
    // Every recorded step was trained; the surplus are steps run again after a kill.
    assert!(
        trained >= recorded,
        "{trained} trained, {recorded} recorded"
    );
    let unique: std::collections::BTreeSet<&str> = log.lines().collect();
    assert!(unique.len() >= recorded);
    assert!(
        trained - recorded <= kills,
        "{trained} trained, {recorded} recorded, {kills} kills"
    );
}
