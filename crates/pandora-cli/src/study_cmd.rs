//! Study commands: `run`, `ask`, `tell`, `status`, `best`, `export`, `plot`.
//!
//! Every command names its study by a configuration file or by `--storage URL --study NAME`
//! ([`Target`]).

use crate::plot;
use crate::progress::Progress;
use anyhow::{Context, Result, anyhow, bail};
use pandora_problems::Builtin;
use pandora_study::config::{CostKind, ObjectiveKind};
use pandora_study::storage::Storage;
use pandora_study::{Ask, Outcome, Study, StudyConfig, Trial};
use serde_json::json;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Loads and validates a study configuration file.
pub fn load_config(path: &str) -> Result<StudyConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    StudyConfig::from_toml(&text).map_err(|e| anyhow!("{path}: {e}"))
}

/// Opens the storage named by a URL (`sqlite:PATH`, relative paths from the current directory).
pub fn open_storage(url: &str) -> Result<Box<dyn Storage>> {
    // The URL may hold a password: messages show it redacted.
    pandora_study::storage::open(url).map_err(|e| {
        anyhow!(
            "study.storage: opening {}: {e}",
            pandora_study::storage::redact_url(url)
        )
    })
}

/// Which study a command works on: a configuration file, or `--storage URL --study NAME` (an
/// existing study, opened with its stored configuration).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Target {
    /// Study configuration (TOML).
    pub config: Option<String>,
    /// Storage URL of an existing study (with --study), instead of CONFIG.
    #[arg(long, value_name = "URL")]
    pub storage: Option<String>,
    /// Name of the study in --storage.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
}

impl Target {
    /// Opens the study; also returns the storage URL (for a second connection).
    pub fn open(&self) -> Result<(Study, String)> {
        match (&self.config, &self.storage, &self.study) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                bail!("give either a CONFIG file or --storage URL --study NAME, not both")
            }
            (Some(path), None, None) => {
                let cfg = load_config(path)?;
                let url = cfg.study.storage.clone();
                let storage = open_storage(&url)?;
                let study = Study::open(cfg, storage).map_err(|e| anyhow!("{path}: {e}"))?;
                Ok((study, url))
            }
            (None, Some(url), Some(name)) => {
                if url.starts_with("sqlite:") {
                    // Opening a missing file would create an empty database.
                    let file = pandora_study::storage::sqlite::SqliteStorage::path_of_url(url)
                        .map_err(|e| anyhow!("{e}"))?;
                    if file != ":memory:" && !std::path::Path::new(file).exists() {
                        bail!("--storage {url}: no such database file '{file}'");
                    }
                }
                let storage = open_storage(url)?;
                let study = Study::load_at(name, storage, url)
                    .map_err(|e| anyhow!("--study {name}: {e}"))?;
                Ok((study, url.clone()))
            }
            (None, Some(_), None) => bail!("--storage URL needs --study NAME"),
            (None, None, Some(_)) => bail!("--study NAME needs --storage URL"),
            (None, None, None) => {
                bail!("give a CONFIG file, or --storage URL --study NAME of an existing study")
            }
        }
    }

    /// Opens the study (see [`Target::open`]).
    pub fn study(&self) -> Result<Study> {
        Ok(self.open()?.0)
    }
}

/// Opens the study of a configuration file.
#[allow(dead_code)] // kept for callers outside the study commands
pub fn open_study(path: &str) -> Result<Study> {
    Target {
        config: Some(path.to_string()),
        ..Target::default()
    }
    .study()
}

/// The result of evaluating one trial.
struct Evaluation {
    outcome: Outcome,
}

/// The last `n` lines of `s`, at most 1000 characters (the end kept).
fn tail(s: &str, n: usize) -> String {
    let t: Vec<&str> = s.lines().rev().take(n).collect();
    let t = t.into_iter().rev().collect::<Vec<_>>().join("\n");
    let count = t.chars().count();
    if count > 1000 {
        format!("...{}", t.chars().skip(count - 1000).collect::<String>())
    } else {
        t
    }
}

/// Parses the objective command's stdout: a bare number or `{"objective": v, "cost": c}`.
fn parse_output(text: &str) -> std::result::Result<(f64, Option<f64>), String> {
    let text = text.trim();
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            // Python's json module writes NaN and Infinity, which are not JSON.
            if let Ok(x) = text.parse::<f64>() {
                return Err(format!("objective is not finite: {x}"));
            }
            if text.contains("NaN") || text.contains("Infinity") {
                return Err(format!(
                    "output contains a value that is not finite: {text}"
                ));
            }
            return Err(format!(
                "malformed output (expected a number or JSON): {e}; output: {}",
                tail(text, 3)
            ));
        }
    };
    let (obj, cost) = match &v {
        serde_json::Value::Number(n) => (n.as_f64(), None),
        serde_json::Value::Object(m) => {
            let o = m
                .get("objective")
                .ok_or("output has no \"objective\" field")?;
            let o = o.as_f64().ok_or("\"objective\" is not a number")?;
            let c = match m.get("cost") {
                None | Some(serde_json::Value::Null) => None,
                Some(c) => Some(c.as_f64().ok_or("\"cost\" is not a number")?),
            };
            (Some(o), c)
        }
        _ => return Err("output is neither a number nor an object".into()),
    };
    let obj = obj.ok_or("objective is not a finite number")?;
    if !obj.is_finite() {
        return Err(format!("objective is not finite: {obj}"));
    }
    if let Some(c) = cost
        && !(c.is_finite() && c > 0.0)
    {
        return Err(format!("cost must be finite and > 0, got {c}"));
    }
    Ok((obj, cost))
}

fn run_command(
    cmd: &[String],
    params: &serde_json::Value,
    timeout: Option<f64>,
) -> (std::result::Result<(f64, Option<f64>), String>, f64) {
    let start = Instant::now();
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return (Err(format!("cannot start {:?}: {e}", cmd[0])), 0.0),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(params.to_string().as_bytes());
    }
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = timeout.map(|t| start + Duration::from_secs_f64(t));
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(format!("timed out after {:.1} s", timeout.unwrap_or(0.0)));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => break Err(format!("waiting for the command: {e}")),
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let result = match status {
        Err(e) => Err(e),
        Ok(s) if !s.success() => Err(format!("exit status {s}; stderr: {}", tail(&err, 5))),
        Ok(_) => parse_output(&out),
    };
    (result, elapsed)
}

/// Evaluates a trial of a `[cvs]` study on its builtin problem: nature (the random parameters'
/// distributions, seeded by the study's seed and the trial number) sets the parameters the
/// control set leaves random.
fn evaluate_cvs(study: &Study, trial: &Trial, builtin: &str) -> Evaluation {
    let realized = study
        .draw_random(trial)
        .and_then(|r| pandora_study::cvs::realize(study.space(), trial, &r));
    let outcome = match realized {
        Ok((params, x)) => Outcome::CompleteAt {
            objective: Builtin::parse(builtin).expect("validated builtin").eval(&x),
            cost: study.trial_cost(trial).unwrap_or(1.0),
            params,
            x,
        },
        Err(e) => Outcome::Failed {
            reason: e.to_string(),
            cost: None,
        },
    };
    Evaluation { outcome }
}

fn evaluate(study: &Study, trial: &Trial) -> Evaluation {
    let cfg = study.config();
    if let (Some(_), Some(b)) = (&cfg.cvs, cfg.objective.builtin.as_deref()) {
        return evaluate_cvs(study, trial, b);
    }
    let known = study.known_cost(&trial.x);
    let (result, elapsed) = if let Some(b) = cfg.objective.builtin.as_deref() {
        let start = Instant::now();
        let v = Builtin::parse(b).expect("validated builtin").eval(&trial.x);
        (Ok((v, None)), start.elapsed().as_secs_f64())
    } else if let Some(cmd) = cfg.objective.command.as_ref() {
        run_command(cmd, &trial.params, cfg.objective.timeout_s)
    } else {
        // `run` refuses external objectives before any trial is handed out.
        (Err(EXTERNAL_RUN.to_string()), 0.0)
    };
    let cost_of = |reported: Option<f64>| -> std::result::Result<f64, String> {
        match cfg.cost.kind {
            CostKind::Uniform | CostKind::Known => Ok(known.unwrap_or(1.0)),
            CostKind::Runtime => Ok(elapsed.max(1e-9)),
            CostKind::Reported => reported.ok_or_else(|| {
                "cost.kind = \"reported\" but the output has no \"cost\"".to_string()
            }),
        }
    };
    let outcome = match result {
        Ok((objective, reported)) => match cost_of(reported) {
            Ok(cost) => Outcome::Complete { objective, cost },
            Err(reason) => Outcome::Failed { reason, cost: None },
        },
        Err(reason) => {
            let cost = match cfg.cost.kind {
                CostKind::Runtime => Some(elapsed),
                CostKind::Uniform | CostKind::Known => known,
                CostKind::Reported => None,
            };
            Outcome::Failed { reason, cost }
        }
    };
    Evaluation { outcome }
}

/// Seconds between heartbeats of a running evaluation (at most; see [`heartbeat_interval`]).
const HEARTBEAT_S: f64 = 10.0;
/// By default, a running trial without a heartbeat for this long is abandoned when a run starts.
pub const STALE_S: f64 = 120.0;

/// The heartbeat period for an abandon timeout: several heartbeats per timeout, so that a live
/// worker's trial is never taken for abandoned.
fn heartbeat_interval(abandon_after_s: f64) -> Duration {
    Duration::from_secs_f64((abandon_after_s / 4.0).clamp(0.05, HEARTBEAT_S))
}

/// Evaluates `trial` while a second connection (to `url`) keeps its heartbeat fresh.
fn evaluate_with_heartbeat(study: &Study, url: &str, trial: &Trial, every: Duration) -> Evaluation {
    let done = std::sync::atomic::AtomicBool::new(false);
    let name = study.config().study.name.clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            let Ok(mut storage) = open_storage(url) else {
                return;
            };
            let mut last = Instant::now();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if last.elapsed() >= every {
                    let _ = storage.heartbeat(&name, trial.number);
                    last = Instant::now();
                }
            }
        });
        let ev = evaluate(study, trial);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        ev
    })
}

fn worker_loop(
    target: &Target,
    worker: &str,
    progress: &Progress,
    every: Duration,
) -> Result<String> {
    let (mut study, url) = target.open()?;
    loop {
        let trial = match study.ask(worker).map_err(|e| anyhow!("{e}"))? {
            Ask::Finished(f) => return Ok(f.to_string()),
            Ask::Trial(t) => t,
        };
        let ev = evaluate_with_heartbeat(&study, &url, &trial, every);
        let told = study
            .tell(trial.number, &ev.outcome)
            .map_err(|e| anyhow!("storing trial {}: {e}", trial.number))?;
        let s = study.summary().map_err(|e| anyhow!("{e}"))?;
        progress.trial(worker, &told, &s);
    }
}

/// Options of `pandora run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Worker threads evaluating trials in parallel.
    pub workers: usize,
    /// No progress output.
    pub quiet: bool,
    /// Running trials without a heartbeat for this many seconds are marked abandoned at start.
    pub abandon_after_s: f64,
}

/// Why `pandora run` cannot evaluate a study with an external objective.
const EXTERNAL_RUN: &str = "has an external objective ([objective] kind = \"external\", e.g. \
     created from Python with pandora.Study): its trials are evaluated outside Pandora. Use \
     `pandora ask` and `pandora tell` (or Python), or give the configuration an [objective] \
     command for `pandora run`";

/// `pandora run CONFIG [--workers K] [--quiet] [--abandon-after S]`.
///
/// Refuses (an error, exit code 2) a study whose objective is external
/// (`[objective] kind = "external"`), before changing anything.
pub fn run(target: &Target, opts: &RunOptions) -> Result<()> {
    let workers = opts.workers.max(1);
    let stale = opts.abandon_after_s;
    if !(stale.is_finite() && stale > 0.0) {
        bail!("--abandon-after: must be a positive number of seconds, got {stale}");
    }
    let (progress, every) = {
        // Trials of workers that vanished (killed, machine lost) are marked abandoned, not lost.
        let (mut study, _) = target.open()?;
        if study.config().objective_kind() == ObjectiveKind::External {
            bail!(
                "pandora run: study '{}' {EXTERNAL_RUN}",
                study.config().study.name
            );
        }
        let gone = study.abandon_stale(stale).map_err(|e| anyhow!("{e}"))?;
        let budget = study.config().budget.clone();
        let progress = Progress::new(opts.quiet, budget.max_trials, budget.total);
        if !gone.is_empty() {
            progress.note(&format!(
                "marked abandoned (no heartbeat for {stale} s): trials {gone:?}"
            ));
        }
        progress.start(&study.summary().map_err(|e| anyhow!("{e}"))?);
        (progress, heartbeat_interval(stale))
    };
    let reasons: Vec<Result<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|k| {
                let name = format!("{}-{}-{k}", hostname(), std::process::id());
                let progress = &progress;
                s.spawn(move || worker_loop(target, &name, progress, every))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a worker panicked")))
            })
            .collect()
    });
    progress.finish();
    let mut first_reason = None;
    for r in reasons {
        first_reason.get_or_insert(r?);
    }
    let mut study = target.study()?;
    let s = study.summary().map_err(|e| anyhow!("{e}"))?;
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "study": study.config().study.name,
            "stopped": first_reason,
            "summary": summary_json(&s),
        }))?
    );
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}

fn trial_json(t: &Trial) -> serde_json::Value {
    serde_json::to_value(t).unwrap_or(serde_json::Value::Null)
}

fn summary_json(s: &pandora_study::Summary) -> serde_json::Value {
    s.to_json()
}

/// A human-readable summary (`pandora status --format text`).
fn summary_text(name: &str, budget: Option<f64>, s: &pandora_study::Summary) -> String {
    let mut out = format!(
        "study {name}: {} complete, {} running, {} failed, {} abandoned\n",
        s.counts[1], s.counts[0], s.counts[2], s.counts[3]
    );
    match budget {
        Some(b) => out.push_str(&format!(
            "cost: {:.6} spent toward the budget of {b} ({:.6} remaining); {:.6} in all\n",
            s.budget_spent,
            b - s.budget_spent,
            s.total_cost
        )),
        None => out.push_str(&format!("cost: {:.6} in all\n", s.total_cost)),
    }
    match &s.best {
        Some(b) => out.push_str(&format!(
            "best: trial {} with objective {} at {}\n",
            b.number,
            b.objective.map_or("?".into(), |v| v.to_string()),
            b.params
        )),
        None => out.push_str("best: no complete trial yet\n"),
    }
    if let Some(l) = s.lambda {
        out.push_str(&format!("lambda: {l:e}\n"));
    }
    if let Some(st) = &s.stopping {
        let value = if st.value.is_finite() {
            format!("{:.4}", st.value)
        } else {
            "not available yet".into()
        };
        out.push_str(&format!(
            "stopping ({}, lambda = {:e}): {} = {value} vs threshold {:.4} after {} BO evaluations{}\n",
            st.rule,
            st.lambda,
            st.statistic,
            st.threshold,
            st.iteration,
            if st.fired { " (fired)" } else { "" }
        ));
    }
    if let Some(r) = &s.stop_reason {
        out.push_str(&format!("stopped: {r}\n"));
    }
    out
}

/// `pandora ask CONFIG`: hands out one trial and prints `{"number", "params"}`.
pub fn ask(target: &Target, worker: Option<&str>) -> Result<()> {
    let mut study = target.study()?;
    let w = worker.map_or_else(
        || format!("{}-{}", hostname(), std::process::id()),
        str::to_string,
    );
    match study.ask(&w).map_err(|e| anyhow!("{e}"))? {
        Ask::Trial(t) => {
            let mut out = json!({"number": t.number, "params": t.params});
            if let Some(c) = t.decision.get("cvs") {
                // The control set: which parameters to set, which are left to chance (their
                // realized values go to `pandora tell --random NAME=VALUE`), and the cost.
                out["control_set"] = json!({
                    "index": c["control_set"],
                    "name": c["name"],
                    "controlled": c["controlled"],
                    "random": c["random"],
                    "cost": c["cost"],
                });
            }
            println!("{out}")
        }
        Ask::Finished(f) => println!("{}", json!({"finished": f.to_string()})),
    }
    Ok(())
}

/// What `pandora tell` reports about a trial.
#[derive(Debug, Clone, Default)]
pub struct TellArgs {
    /// `--objective`.
    pub objective: Option<f64>,
    /// `--cost`.
    pub cost: Option<f64>,
    /// `--failed`.
    pub failed: Option<String>,
    /// `--random NAME=VALUE`, repeated.
    pub random: Vec<String>,
}

/// Parses `--random NAME=VALUE` arguments into a JSON object (values must be numbers).
fn parse_random(args: &[String]) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut out = serde_json::Map::new();
    for a in args {
        let Some((name, value)) = a.split_once('=') else {
            bail!("--random: expected NAME=VALUE, got '{a}'");
        };
        let v: f64 = value
            .trim()
            .parse()
            .map_err(|_| anyhow!("--random {name}: '{value}' is not a number"))?;
        if out.insert(name.trim().to_string(), json!(v)).is_some() {
            bail!("--random: '{name}' is given twice");
        }
    }
    Ok(out)
}

/// `pandora tell CONFIG NUMBER (--objective V [--cost C] [--random NAME=VALUE ...] |
/// --failed REASON)`.
pub fn tell(target: &Target, number: u64, args: TellArgs) -> Result<()> {
    let TellArgs {
        objective,
        cost,
        failed,
        random,
    } = args;
    let mut study = target.study()?;
    let trials = study.trials().map_err(|e| anyhow!("{e}"))?;
    let trial = trials
        .iter()
        .find(|t| t.number == number)
        .ok_or_else(|| anyhow!("trial {number} does not exist"))?;
    let known = study.trial_cost(trial);
    let random = parse_random(&random)?;
    if !random.is_empty() && failed.is_some() {
        bail!("--random: only with --objective (a failed trial has no realized values)");
    }
    let t = match (objective, failed) {
        (Some(_), Some(_)) => bail!("give either --objective or --failed"),
        (None, None) => bail!("give --objective V (and --cost C) or --failed REASON"),
        (Some(objective), None) if study.config().cvs.is_some() => study
            .tell_realized(number, objective, cost, &random)
            .map_err(|e| anyhow!("{e}"))?,
        (Some(_), None) if !random.is_empty() => {
            bail!("--random: only a study with a [cvs] section has random parameters")
        }
        (Some(objective), None) => {
            let cost = match (cost, study.config().cost.kind) {
                (Some(c), _) => c,
                (None, CostKind::Uniform | CostKind::Known) => known.unwrap_or(1.0),
                (None, _) => bail!("--cost: required because cost.kind is reported or runtime"),
            };
            study
                .tell(number, &Outcome::Complete { objective, cost })
                .map_err(|e| anyhow!("{e}"))?
        }
        (None, Some(reason)) => study
            .tell(number, &Outcome::Failed { reason, cost })
            .map_err(|e| anyhow!("{e}"))?,
    };
    println!("{}", trial_json(&t));
    Ok(())
}

/// `pandora status CONFIG [--format json|text]`.
pub fn status(target: &Target, format: &str) -> Result<()> {
    if !matches!(format, "json" | "text") {
        bail!("--format: expected json or text, got '{format}'");
    }
    let mut study = target.study()?;
    let s = study.summary().map_err(|e| anyhow!("{e}"))?;
    if format == "text" {
        let c = study.config();
        print!("{}", summary_text(&c.study.name, c.budget.total, &s));
    } else {
        println!("{}", serde_json::to_string_pretty(&summary_json(&s))?);
    }
    Ok(())
}

/// `pandora best CONFIG`.
pub fn best(target: &Target) -> Result<()> {
    let mut study = target.study()?;
    match study.best().map_err(|e| anyhow!("{e}"))? {
        Some(t) => println!("{}", serde_json::to_string_pretty(&trial_json(&t))?),
        None => bail!("no complete trial yet"),
    }
    Ok(())
}

fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// `pandora export CONFIG --format csv|json`: every trial, parameters flattened into columns for
/// CSV (`param.NAME`).
pub fn export(target: &Target, format: &str) -> Result<()> {
    if !matches!(format, "csv" | "json") {
        bail!("--format: expected csv or json, got '{format}'");
    }
    let mut study = target.study()?;
    let trials = study.trials().map_err(|e| anyhow!("{e}"))?;
    match format {
        "json" => {
            let rows: Vec<serde_json::Value> = trials.iter().map(Trial::export_json).collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
        "csv" => {
            let names: Vec<String> = study.space().names().map(str::to_string).collect();
            let mut header = vec![
                "number",
                "state",
                "objective",
                "cost",
                "worker",
                "created_at",
                "created_at_iso",
                "finished_at",
                "finished_at_iso",
                "phase",
                "acquisition_value",
                "lambda",
                "error",
            ]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
            // Studies with cost-varying variable subsets: the control set of every trial and
            // the parameters it left random.
            let cvs = study.config().cvs.is_some();
            if cvs {
                header.extend(["control_set".to_string(), "random".to_string()]);
            }
            header.extend(names.iter().map(|n| format!("param.{n}")));
            println!(
                "{}",
                header
                    .iter()
                    .map(|h| csv_field(h))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let num = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
            let iso = |v: Option<f64>| {
                v.and_then(pandora_study::trial::iso8601_utc)
                    .unwrap_or_default()
            };
            for t in &trials {
                let mut row = vec![
                    t.number.to_string(),
                    t.state.as_str().to_string(),
                    num(t.objective),
                    num(t.cost),
                    t.worker.clone().unwrap_or_default(),
                    format!("{}", t.created_at),
                    iso(Some(t.created_at)),
                    num(t.finished_at),
                    iso(t.finished_at),
                    t.decision["phase"].as_str().unwrap_or("").to_string(),
                    num(t.decision["acquisition_value"].as_f64()),
                    num(t.decision["lambda"].as_f64()),
                    t.error.clone().unwrap_or_default(),
                ];
                if cvs {
                    let c = &t.decision["cvs"];
                    row.push(
                        c["control_set"]
                            .as_u64()
                            .map_or(String::new(), |i| i.to_string()),
                    );
                    let random: Vec<&str> = c["random"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                        .unwrap_or_default();
                    row.push(random.join(" "));
                }
                for n in &names {
                    row.push(match &t.params[n] {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Null => String::new(),
                        other => other.to_string(),
                    });
                }
                println!(
                    "{}",
                    row.iter()
                        .map(|f| csv_field(f))
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
        other => bail!("--format: expected csv or json, got '{other}'"),
    }
    Ok(())
}

/// `pandora plot CONFIG [--out FILE]`: writes the study's figure (PNG or SVG by extension;
/// default `<study>.png`) and prints `{"figure": FILE, "trials": N}`.
pub fn plot(target: &Target, out: Option<&str>) -> Result<()> {
    let mut study = target.study()?;
    let trials = study.trials().map_err(|e| anyhow!("{e}"))?;
    let out = out.map_or_else(
        || format!("{}.png", study.config().study.name),
        str::to_string,
    );
    let c = study.config();
    let fig = crate::study_plot::study_figure(&c.study.name, c.study.direction, &trials);
    plot::render(&fig, std::path::Path::new(&out))?;
    println!("{}", json!({"figure": out, "trials": trials.len()}));
    Ok(())
}
