//! Many workers on one study: ask latency, lock waits and throughput (issue 27).
//!
//! `W` worker processes (this program started again, one per worker, as workers on a cluster
//! are), each with its own storage connection and [`Study`] handle on one study, loop
//! ask → objective (Levy in `d` dimensions, plus a sleep standing for the real evaluation) →
//! tell until `max_trials` trials are handed out. Each worker prints its asks' timings as JSON
//! lines; the first process gathers them. Prints ask latency median and p95, the time
//! waiting for the lock against computing, and trials per minute, for `ask` (decide on a
//! snapshot, claim under the lock) or `ask_locked` (the whole decision under the lock).
//!
//! ```text
//! cargo run --release -p pandora-study --example ask_bench -- \
//!     STORAGE_URL WORKERS DIM MAX_TRIALS SLEEP_S snapshot|locked [INITIAL]
//! ```
//!
//! `STORAGE_URL` is `sqlite:PATH` or a PostgreSQL URL (a fresh study is created per run).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pandora_study::{Ask, AskTiming, ClaimPath, Outcome, Study, StudyConfig};

struct Args {
    url: String,
    workers: usize,
    dim: usize,
    max_trials: usize,
    sleep: f64,
    locked: bool,
    initial: usize,
}

fn args() -> Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ask_bench URL WORKERS DIM MAX_TRIALS SLEEP_S snapshot|locked [INITIAL]";
    if a.len() < 6 {
        return Err(usage.into());
    }
    let num = |i: usize| a[i].parse::<usize>().map_err(|e| format!("{}: {e}", a[i]));
    Ok(Args {
        url: a[0].clone(),
        workers: num(1)?,
        dim: num(2)?,
        max_trials: num(3)?,
        sleep: a[4].parse().map_err(|e| format!("{}: {e}", a[4]))?,
        locked: a[5] == "locked",
        initial: if a.len() > 6 { num(6)? } else { 8 },
    })
}

fn config(a: &Args, name: &str) -> Result<StudyConfig, pandora_study::Error> {
    StudyConfig::from_toml(&format!(
        r#"
[study]
name = "{name}"
storage = "{url}"
decide = "snapshot"
[objective]
builtin = "levy"
dim = {dim}
[budget]
max_trials = {n}
[policy]
acquisition = "log_ei"
initial_design = {init}
seed = 1
"#,
        url = a.url,
        dim = a.dim,
        n = a.max_trials,
        init = a.initial
    ))
}

/// One worker's loop; returns the timing of every ask that handed out a trial.
fn worker(a: &Args, name: &str, id: usize) -> Result<Vec<AskTiming>, pandora_study::Error> {
    let cfg = config(a, name)?;
    let storage = pandora_study::storage::open(&a.url)?;
    let mut study = Study::open(cfg, storage)?;
    let levy = study.config().builtin_problem()?;
    let mut out = Vec::new();
    let who = format!("w{id}");
    loop {
        let ask = if a.locked {
            study.ask_locked(&who)?
        } else {
            study.ask(&who)?
        };
        let Ask::Trial(t) = ask else { break };
        out.push(study.last_ask());
        std::thread::sleep(Duration::from_secs_f64(a.sleep));
        let y = levy.as_ref().map_or(0.0, |p| p.eval(&t.x));
        study.tell(
            t.number,
            &Outcome::Complete {
                objective: y,
                cost: 1.0,
            },
        )?;
    }
    Ok(out)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(a: &Args, all: &[AskTiming], wall: f64) {
    let mut total: Vec<f64> = all.iter().map(|t| t.total_s).collect();
    total.sort_by(f64::total_cmp);
    let sum = |f: fn(&AskTiming) -> f64| all.iter().map(f).sum::<f64>();
    let (ask, wait, compute, held) = (
        sum(|t| t.total_s),
        sum(|t| t.wait_s),
        sum(|t| t.compute_s),
        sum(|t| t.held_s),
    );
    let count = |p: ClaimPath| all.iter().filter(|t| t.path == p).count();
    println!(
        "mode={} workers={} d={} n={} sleep={}s asks={} ask_median={:.3}s ask_p95={:.3}s \
         wait={:.1}% compute={:.1}% held={:.1}% of ask time; trials/min={:.1} wall={:.1}s \
         paths: unchanged={} revalidated={} runner_up={} retried={} locked={}",
        if a.locked { "locked" } else { "snapshot" },
        a.workers,
        a.dim,
        a.max_trials,
        a.sleep,
        all.len(),
        quantile(&total, 0.5),
        quantile(&total, 0.95),
        100.0 * wait / ask,
        100.0 * compute / ask,
        100.0 * held / ask,
        all.len() as f64 / wall * 60.0,
        wall,
        count(ClaimPath::Unchanged),
        count(ClaimPath::Revalidated),
        count(ClaimPath::RunnerUp),
        count(ClaimPath::Retried),
        count(ClaimPath::Locked),
    );
}

/// The environment variable that makes this program one worker: `ID NAME`.
const WORKER_ENV: &str = "PANDORA_ASK_BENCH_WORKER";

/// Runs worker `id` of study `name`, its asks' timings to stdout as JSON lines.
fn run_worker(a: &Args, spec: &str) -> Result<(), String> {
    let (id, name) = spec.split_once(' ').ok_or("bad worker spec")?;
    let id: usize = id.parse().map_err(|e| format!("worker id: {e}"))?;
    let timings = worker(a, name, id).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for t in &timings {
        let line = serde_json::to_string(t).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Starts the worker processes and gathers their timings (a worker that fails is reported and
/// its asks left out).
fn run_workers(a: &Args, name: &str) -> Result<Vec<AskTiming>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut children = Vec::new();
    for i in 0..a.workers {
        let child = Command::new(&exe)
            .args(std::env::args().skip(1))
            .env(WORKER_ENV, format!("{i} {name}"))
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting worker {i}: {e}"))?;
        children.push(child);
    }
    let mut all = Vec::new();
    for (i, mut child) in children.into_iter().enumerate() {
        let stdout = child.stdout.take().ok_or("no worker stdout")?;
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("worker {i}: {e}"))?;
            match serde_json::from_str::<AskTiming>(&line) {
                Ok(t) => all.push(t),
                Err(e) => eprintln!("worker {i}: unreadable line ({e})"),
            }
        }
        match child.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!("worker {i} failed ({s})"),
            Err(e) => eprintln!("worker {i}: {e}"),
        }
    }
    Ok(all)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        if let Err(e) = run_worker(&a, &spec) {
            eprintln!("worker failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let name = format!("bench-{}-{}", std::process::id(), a.workers);
    // Create the study once, before the workers race to open it.
    if let Err(e) = config(&a, &name).and_then(|c| {
        let s = pandora_study::storage::open(&a.url)?;
        Study::open(c, s).map(|_| ())
    }) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let start = Instant::now();
    let all = match run_workers(&a, &name) {
        Ok(all) => all,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let wall = start.elapsed().as_secs_f64();
    report(&a, &all, wall);
}
