//! End-to-end tests on a real Slurm cluster: an experiment grid as the array job that
//! `pandora experiment plan --slurm` writes (merged traces equal a single-process run; a task
//! cancelled mid-run and resubmitted resumes), and an array of study workers on one PostgreSQL
//! study.
//!
//! Run when `PANDORA_TEST_SLURM` names the `slurm.conf` of a cluster the tests may submit to
//! (`.ci/run` starts a one-node cluster on loopback, see `.ci/slurm.sh`); without it at build time
//! they are ignored (reported as `ignored`, see build.rs), and run with `--ignored` but without it
//! they fail saying so. The cluster's nodes must see the test's temporary directories and the
//! `pandora` binary at the same paths (one node does; on a real cluster set `TMPDIR` to a shared
//! filesystem). The study test also needs `PANDORA_TEST_POSTGRES_URL`.

mod common;
use common::{TestSchema, pandora};

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The variable naming the slurm.conf of the test cluster.
const ENV: &str = "PANDORA_TEST_SLURM";
/// How long a test waits for its jobs before cancelling them and failing.
const TIMEOUT: Duration = Duration::from_secs(300);

/// One test's jobs at a time: the one-node cluster has 2 CPUs, and the workers' test needs both
/// of its tasks running side by side.
static CLUSTER: Mutex<()> = Mutex::new(());

/// The test cluster's slurm.conf and the cluster to oneself, or a panic saying the variable is
/// missing.
fn slurm_conf(test: &str) -> (String, MutexGuard<'static, ()>) {
    match std::env::var(ENV) {
        Ok(c) if !c.is_empty() => (c, CLUSTER.lock().unwrap_or_else(|e| e.into_inner())),
        _ => panic!("{test}: {ENV} is not set: this test needs a Slurm cluster (see .ci/slurm.sh)"),
    }
}

/// A Slurm client command (`sbatch`, `squeue`, …) for the test cluster.
fn slurm(conf: &str, program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("SLURM_CONF", conf);
    c
}

/// Runs `cmd`; its stdout, asserting success.
fn stdout_of(mut cmd: Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Submits `script` with `args` (from `dir`, with `env`); returns the job id.
fn sbatch(conf: &str, dir: &Path, script: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = slurm(conf, "sbatch");
    cmd.arg("--parsable")
        .args(args)
        .arg(script)
        .current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = stdout_of(cmd);
    // `--parsable` prints `ID` or `ID;CLUSTER`.
    out.trim().split(';').next().unwrap().to_string()
}

/// The state of every task of `job` still known to the controller (array task id → state).
fn states(conf: &str, job: &str) -> BTreeMap<String, String> {
    let out = stdout_of({
        let mut c = slurm(conf, "scontrol");
        c.args(["-o", "show", "job", job]);
        c
    });
    out.lines()
        .filter_map(|l| {
            let field = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .map(str::to_string)
            };
            Some((field("ArrayTaskId=")?, field("JobState=")?))
        })
        .collect()
}

/// Whether `job` (any of its tasks) is still pending or running.
fn active(conf: &str, job: &str) -> bool {
    let mut c = slurm(conf, "squeue");
    c.args(["-h", "-o", "%i", "-j", job]);
    !stdout_of(c).trim().is_empty()
}

/// Waits until `cond` holds, polling every 100 ms; past [`TIMEOUT`], cancels `job` and fails with
/// `what`.
fn wait_for(conf: &str, job: &str, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > TIMEOUT {
            let _ = slurm(conf, "scancel").arg(job).status();
            panic!("job {job}: {what} not within {TIMEOUT:?} (cancelled)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for every task of `job` to end; returns their states.
fn wait_job(conf: &str, job: &str) -> BTreeMap<String, String> {
    wait_for(conf, job, "the end of every task", || !active(conf, job));
    states(conf, job)
}

/// Asserts that every task of `job` completed, showing the tasks' logs otherwise.
fn assert_completed(states: &BTreeMap<String, String>, n: usize, logs: &Path) {
    let ok = states.len() == n && states.values().all(|s| s == "COMPLETED");
    if !ok {
        let mut text = String::new();
        for e in std::fs::read_dir(logs).into_iter().flatten().flatten() {
            let body = std::fs::read_to_string(e.path()).unwrap_or_default();
            text += &format!("---- {}\n{body}\n", e.path().display());
        }
        panic!("tasks {states:?}, expected {n} COMPLETED\n{text}");
    }
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

/// The files of `out/traces`, by name.
fn traces(out: &Path) -> BTreeMap<String, PathBuf> {
    std::fs::read_dir(out.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect()
}

/// Asserts that the traces of `out` are those of `reference`, timing fields aside: the same
/// complete `.jsonl` files and nothing else (no `.part`, no temporary file), line for line.
fn assert_same_traces(out: &Path, reference: &Path, what: &str) {
    let (got, want) = (traces(out), traces(reference));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: one complete trace per run and nothing else"
    );
    for (name, path) in &got {
        assert_eq!(stripped(path), stripped(&want[name]), "{what}: {name}");
    }
}

/// `pandora experiment CONFIG --out OUT --jobs 2` in one process.
fn run_single(dir: &Path, config: &Path, out: &Path) {
    let (code, _, err) = pandora(
        dir,
        &[
            "experiment",
            config.to_str().unwrap(),
            "--quiet",
            "--jobs",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
}

/// `pandora experiment plan CONFIG --out OUT --slurm SCRIPT --shards N` (small memory, so that
/// any node takes it); returns the script's path.
fn plan(dir: &Path, config: &Path, out: &Path, shards: usize, extra: &[&str]) -> PathBuf {
    let script = dir.join("grid.sbatch");
    let shards = shards.to_string();
    let mut args = vec![
        "experiment",
        "plan",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--slurm",
        script.to_str().unwrap(),
        "--shards",
        &shards,
        "--mem",
        "500M",
    ];
    args.extend_from_slice(extra);
    let (code, text, err) = pandora(dir, &args);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("CPU-hours"), "{text}");
    script
}

/// `pandora experiment summarize OUT`: whether it succeeded, and its stderr.
fn summarize(dir: &Path, out: &Path) -> (bool, String) {
    let (code, _, err) = pandora(dir, &["experiment", "summarize", out.to_str().unwrap()]);
    (code == 0, err)
}

const GRID: &str = r#"
[experiment]
name = "slurm-grid"
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

/// (a) The smoke grid (12 runs) as the 3-task array of the generated script: every task
/// completes, each ran its own shard, and the merged traces and summary equal a single-process
/// run of the same configuration.
#[test]
#[cfg_attr(
    not(pandora_slurm),
    ignore = "set PANDORA_TEST_SLURM to run (see .ci/slurm.sh)"
)]
fn experiment_grid_as_a_slurm_array_equals_one_process() {
    let (conf, _cluster) = slurm_conf("experiment_grid_as_a_slurm_array_equals_one_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("grid.toml");
    std::fs::write(&config, GRID).unwrap();
    let out = dir.join("array");
    let script = plan(dir, &config, &out, 3, &[]);
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("#SBATCH --array=0-2%3"), "{text}");

    let job = sbatch(&conf, dir, &script, &[], &[]);
    let single = dir.join("single");
    run_single(dir, &config, &single);
    assert_completed(&wait_job(&conf, &job), 3, &out.join("slurm"));

    // Each task ran its own shard (the logs say which), and no task wrote the summary.
    for k in 0..3 {
        let log = std::fs::read_to_string(out.join(format!("slurm/{job}_{k}.out"))).unwrap();
        assert!(log.contains(&format!("shard {k}/3: ")), "task {k}: {log}");
    }
    assert!(!out.join("summary").exists(), "a task writes no summary");
    assert_same_traces(&out, &single, "merged array");
    let (ok, err) = summarize(dir, &out);
    assert!(ok, "{err}");
    for csv in ["ackley-d2-uniform.csv", "levy-d2-linear_mean.csv"] {
        assert_eq!(
            std::fs::read(out.join("summary").join(csv)).unwrap(),
            std::fs::read(single.join("summary").join(csv)).unwrap(),
            "{csv}"
        );
    }
}

/// A CVS grid at smoke size: 2 settings × 2 policies × 2 seeds.
const CVS_GRID: &str = r#"
[experiment]
name = "slurm-cvs"
seeds = 2
[policies]
names = ["ucb-cvs", "random"]
[[problem]]
objective = "hartmann3"
costs = ["moderate"]
variances = [0.02]
[[problem]]
objective = "gp_sample"
costs = ["expensive"]
variances = [0.04]
[smoke]
seeds = 2
budget = 0.6
bank_size = 16
raw_samples = 16
"#;

/// The run records of a `pandora cvs` output directory without their wall time, by name.
fn cvs_records(out: &Path) -> BTreeMap<String, Value> {
    std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("wall_seconds");
                o.remove("cpu_seconds");
            }
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// (a′) The CVS grid (8 runs) as the 3-task array that `pandora cvs plan --slurm` writes: every
/// task completes its own shard, and the merged run records (wall time aside) and summary equal a
/// single-process run's.
#[test]
#[cfg_attr(
    not(pandora_slurm),
    ignore = "set PANDORA_TEST_SLURM to run (see .ci/slurm.sh)"
)]
fn cvs_grid_as_a_slurm_array_equals_one_process() {
    let (conf, _cluster) = slurm_conf("cvs_grid_as_a_slurm_array_equals_one_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("cvs.toml");
    std::fs::write(&config, CVS_GRID).unwrap();
    let out = dir.join("array");
    let script = dir.join("cvs.sbatch");
    let (code, text, err) = pandora(
        dir,
        &[
            "cvs",
            "plan",
            config.to_str().unwrap(),
            "--smoke",
            "--out",
            out.to_str().unwrap(),
            "--slurm",
            script.to_str().unwrap(),
            "--shards",
            "3",
            "--mem",
            "500M",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("CPU-hours"), "{text}");
    let job = sbatch(&conf, dir, &script, &[], &[]);
    let single = dir.join("single");
    let (code, _, err) = pandora(
        dir,
        &[
            "cvs",
            config.to_str().unwrap(),
            "--smoke",
            "--quiet",
            "--jobs",
            "2",
            "--out",
            single.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_completed(&wait_job(&conf, &job), 3, &out.join("slurm"));
    for k in 0..3 {
        let log = std::fs::read_to_string(out.join(format!("slurm/{job}_{k}.out"))).unwrap();
        assert!(log.contains(&format!("shard {k}/3: ")), "task {k}: {log}");
    }
    assert!(
        !out.join("summary.csv").exists(),
        "a task writes no summary"
    );
    let (got, want) = (cvs_records(&out), cvs_records(&single));
    assert_eq!(got.len(), 8);
    assert_eq!(got, want, "merged array");
    let (code, _, err) = pandora(dir, &["cvs", "summarize", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let csv = |d: &Path| -> Vec<String> {
        // The last column is the mean wall time.
        std::fs::read_to_string(d.join("summary.csv"))
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string())
            .collect()
    };
    assert_eq!(csv(&out), csv(&single));
}

/// Three runs of 54 BO steps each (512 raw samples, 8 restarts): one per shard of a 3-task
/// array, long enough to be cancelled mid-way. With 34 steps of 64 raw samples and 3 restarts,
/// a run on a quiet machine could finish between the mid-run check and `scancel` taking effect.
const LONG: &str = r#"
[experiment]
name = "slurm-cancel"
seeds = 3
raw_samples = 512
num_restarts = 8

[[problem]]
objective = "ackley"
dim = 2
max_evaluations = 60

[[policy]]
acquisition = "log_ei"
"#;

/// Trace lines of a run mid-way: the header, the 6 initial points and 3 BO steps.
const MID_RUN_LINES: usize = 10;

/// The `.part` traces of `out` with at least `lines` lines.
fn parts_with(out: &Path, lines: usize) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(out.join("traces")) else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.part"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.lines().count() >= lines))
        .collect()
}

/// (b) A task of the array (throttled to one task at a time, so the run in progress is the running
/// task's) is cancelled with `scancel` mid-run: it ends CANCELLED with its run unfinished, the
/// other tasks complete, `summarize` names the unfinished run; resubmitted alone
/// (`sbatch --array=K`, an array of one task), the task runs shard K/3 again and resumes the
/// run: every trace equals the single-process run's, with no duplicate step and no leftover
/// `.part` or temporary file.
#[test]
#[cfg_attr(
    not(pandora_slurm),
    ignore = "set PANDORA_TEST_SLURM to run (see .ci/slurm.sh)"
)]
fn cancelled_task_resubmitted_resumes_without_duplicates() {
    let (conf, _cluster) = slurm_conf("cancelled_task_resubmitted_resumes_without_duplicates");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("long.toml");
    std::fs::write(&config, LONG).unwrap();
    let out = dir.join("array");
    let script = plan(dir, &config, &out, 3, &["--max-parallel", "1"]);

    let job = sbatch(&conf, dir, &script, &[], &[]);
    wait_for(&conf, &job, "a run mid-way", || {
        !parts_with(&out, MID_RUN_LINES).is_empty()
    });
    // One task runs at a time, so the run in progress is the running task's.
    let running = stdout_of({
        let mut c = slurm(&conf, "squeue");
        c.args(["-h", "-j", &job, "-t", "RUNNING", "-o", "%K"]);
        c
    });
    let k = running.trim().to_string();
    assert!(k.parse::<usize>().is_ok(), "one running task: {running:?}");
    stdout_of({
        let mut c = slurm(&conf, "scancel");
        c.arg(format!("{job}_{k}"));
        c
    });
    let states = wait_job(&conf, &job);
    assert_eq!(states.len(), 3, "{states:?}");
    for (task, state) in &states {
        let want = if *task == k { "CANCELLED" } else { "COMPLETED" };
        assert_eq!(state, want, "task {task}: {states:?}");
    }
    let unfinished = parts_with(&out, 1);
    assert_eq!(
        unfinished.len(),
        1,
        "task {k}'s run is left unfinished: {unfinished:?}"
    );
    let name = unfinished[0].file_name().unwrap().to_string_lossy();
    let name = name.trim_end_matches(".part");
    assert!(
        !out.join("traces").join(name).exists(),
        "{name}: the run finished before the cancel; make LONG's runs longer"
    );
    let (ok, err) = summarize(dir, &out);
    assert!(
        !ok && err.contains("unfinished (1):") && err.contains(name),
        "{err}"
    );

    let again = sbatch(&conf, dir, &script, &[&format!("--array={k}")], &[]);
    let single = dir.join("single");
    run_single(dir, &config, &single);
    assert_completed(&wait_job(&conf, &again), 1, &out.join("slurm"));
    let log = std::fs::read_to_string(out.join(format!("slurm/{again}_{k}.out"))).unwrap();
    assert!(
        log.contains(&format!("shard {k}/3: ")),
        "the resubmitted task: {log}"
    );
    assert_same_traces(&out, &single, "resumed array");
    let (ok, err) = summarize(dir, &out);
    assert!(ok, "{err}");
}

/// The study of the workers' array: `x` in [0, 1] evaluated by a Python script that sleeps
/// 0.2 s (so that both workers get trials), known costs 1 + x, a budget of 10.
const STUDY: &str = r#"
[study]
name = "slurm-workers"
direction = "maximize"
[objective]
command = ["python3", "obj.py"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[cost]
kind = "known"
formula = "linear_mean"
offset = 1.0
slope = 1.0
[budget]
total = 10.0
max_trials = 100
[policy]
acquisition = "log_ei"
initial_design = 3
seed = 5
"#;

/// The workers' array, as docs/postgres.md shows it (the storage URL from the environment).
fn workers_script(dir: &Path) -> String {
    format!(
        "#!/bin/bash\n\
         #SBATCH --job-name=pandora-test-workers\n\
         #SBATCH --array=0-1\n\
         #SBATCH --cpus-per-task=1\n\
         #SBATCH --mem=500M\n\
         #SBATCH --time=0-00:10:00\n\
         #SBATCH --signal=B:TERM@90\n\
         #SBATCH --output={d}/slurm/%A_%a.out\n\
         #SBATCH --error={d}/slurm/%A_%a.err\n\
         exec {bin} run study.toml --json --quiet --workers \"$SLURM_CPUS_PER_TASK\" --grace 60\n",
        d = dir.display(),
        bin = env!("CARGO_BIN_EXE_pandora"),
    )
}

/// (c) A 2-task array of `pandora run` workers on one PostgreSQL study: both tasks complete and
/// stop at the budget, the trials are numbered without gaps or repeats, all complete, no point
/// is proposed twice, both workers took part, and the known costs fit the budget.
#[test]
#[cfg_attr(
    not(all(pandora_slurm, pandora_postgres)),
    ignore = "set PANDORA_TEST_SLURM and PANDORA_TEST_POSTGRES_URL to run (see .ci/run)"
)]
fn study_workers_as_a_slurm_array_share_one_postgres_study() {
    let (conf, _cluster) = slurm_conf("study_workers_as_a_slurm_array_share_one_postgres_study");
    let db = TestSchema::new("slurm_workers");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("slurm")).unwrap();
    std::fs::write(
        dir.join("obj.py"),
        "import json, sys, time\np = json.load(sys.stdin)\ntime.sleep(0.2)\n\
         print(-(p['x'] - 0.3) ** 2)\n",
    )
    .unwrap();
    std::fs::write(dir.join("study.toml"), STUDY).unwrap();
    let script = dir.join("workers.sbatch");
    std::fs::write(&script, workers_script(dir)).unwrap();

    // The URL (with its password) reaches the tasks through the environment, not the script.
    let url = db.url();
    let env = [("PANDORA_STORAGE_URL", url.as_str())];
    let job = sbatch(&conf, dir, &script, &[], &env);
    assert_completed(&wait_job(&conf, &job), 2, &dir.join("slurm"));
    for k in 0..2 {
        let out = std::fs::read_to_string(dir.join(format!("slurm/{job}_{k}.out"))).unwrap();
        let v: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("task {k}: {e}: {out}"));
        let stopped = v["stopped"].as_str().unwrap_or_default();
        assert!(stopped.contains("budget"), "task {k}: {v}");
    }

    let cfg = dir.join("study.toml");
    let trials = {
        // `export` reads the storage from the same variable (`common::export` sets none).
        let o = Command::new(env!("CARGO_BIN_EXE_pandora"))
            .args(["export", cfg.to_str().unwrap(), "--format", "json"])
            .env("PANDORA_STORAGE_URL", &url)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Vec<Value>>(&o.stdout).unwrap()
    };
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (0..trials.len() as u64).collect::<Vec<_>>(),
        "no trial twice"
    );
    let mut points = HashSet::new();
    let mut spent = 0.0;
    for t in &trials {
        assert_eq!(t["state"], "complete", "{t}");
        let x: Vec<f64> = serde_json::from_value(t["x"].clone()).unwrap();
        assert!(points.insert(x[0].to_bits()), "x proposed twice: {t}");
        spent += t["cost"].as_f64().unwrap();
    }
    assert!(spent <= 10.0 + 1e-9, "spent {spent} of 10");
    assert!(spent > 10.0 - 2.0, "stopped early: spent {spent} of 10");
    let workers: BTreeSet<&str> = trials
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    assert_eq!(workers.len(), 2, "both tasks took trials: {workers:?}");
}
