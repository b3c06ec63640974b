//! Study commands: `run`, `ask`, `tell`, `status`, `best`.

use anyhow::{Context, Result, anyhow, bail};
use pandora_problems::Builtin;
use pandora_study::config::CostKind;
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

/// Opens the study of a configuration file.
pub fn open_study(path: &str) -> Result<Study> {
    let cfg = load_config(path)?;
    let storage = open_storage(&cfg.study.storage)?;
    Study::open(cfg, storage).map_err(|e| anyhow!("{e}"))
}

/// The result of evaluating one trial.
struct Evaluation {
    outcome: Outcome,
}

fn tail(s: &str, n: usize) -> String {
    let t: Vec<&str> = s.lines().rev().take(n).collect();
    t.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Parses the objective command's stdout: a bare number or `{"objective": v, "cost": c}`.
fn parse_output(text: &str) -> std::result::Result<(f64, Option<f64>), String> {
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("malformed output (expected a number or JSON): {e}"))?;
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

fn evaluate(study: &Study, trial: &Trial) -> Evaluation {
    let cfg = study.config();
    let known = study.known_cost(&trial.x);
    let (result, elapsed) = if let Some(b) = cfg.objective.builtin.as_deref() {
        let start = Instant::now();
        let v = Builtin::parse(b).expect("validated builtin").eval(&trial.x);
        (Ok((v, None)), start.elapsed().as_secs_f64())
    } else {
        let cmd = cfg.objective.command.as_ref().expect("validated command");
        run_command(cmd, &trial.params, cfg.objective.timeout_s)
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

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.6}"))
}

/// Seconds between heartbeats of a running evaluation.
const HEARTBEAT_S: u64 = 10;
/// A running trial without a heartbeat for this long is abandoned when a run starts.
pub const STALE_S: f64 = 120.0;

/// Evaluates `trial` while a second connection keeps its heartbeat fresh.
fn evaluate_with_heartbeat(study: &Study, trial: &Trial) -> Evaluation {
    let done = std::sync::atomic::AtomicBool::new(false);
    let url = study.config().study.storage.clone();
    let name = study.config().study.name.clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            let Ok(mut storage) = open_storage(&url) else {
                return;
            };
            let mut last = Instant::now();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() >= Duration::from_secs(HEARTBEAT_S) {
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

fn worker_loop(path: &str, worker: &str, quiet: bool) -> Result<String> {
    let mut study = open_study(path)?;
    loop {
        let trial = match study.ask(worker).map_err(|e| anyhow!("{e}"))? {
            Ask::Finished(f) => return Ok(f.to_string()),
            Ask::Trial(t) => t,
        };
        let ev = evaluate_with_heartbeat(&study, &trial);
        let told = study
            .tell(trial.number, &ev.outcome)
            .map_err(|e| anyhow!("storing trial {}: {e}", trial.number))?;
        if !quiet {
            let s = study.summary().map_err(|e| anyhow!("{e}"))?;
            let budget = match study.config().budget.total {
                Some(b) => format!("{:.2}/{b:.2}", s.budget_spent),
                None => format!("{:.2}", s.budget_spent),
            };
            let status = match &told.error {
                Some(e) => format!("failed ({e})"),
                None => format!("value {}", fmt_opt(told.objective)),
            };
            eprintln!(
                "[{worker}] trial {:>4} {:<7} {status}  cost {}  best {}  spent {budget}{}",
                told.number,
                told.decision["phase"].as_str().unwrap_or("?"),
                fmt_opt(told.cost),
                fmt_opt(s.best.as_ref().and_then(|b| b.objective)),
                s.lambda.map_or(String::new(), |l| format!("  λ {l:.3e}")),
            );
        }
    }
}

/// `pandora run CONFIG [--workers K]`.
pub fn run(path: &str, workers: usize, quiet: bool) -> Result<()> {
    let workers = workers.max(1);
    {
        // Trials of workers that vanished (killed, machine lost) are marked abandoned, not lost.
        let mut study = open_study(path)?;
        let gone = study.abandon_stale(STALE_S).map_err(|e| anyhow!("{e}"))?;
        if !gone.is_empty() && !quiet {
            eprintln!("marked abandoned (no heartbeat for {STALE_S} s): trials {gone:?}");
        }
    }
    let reasons: Vec<Result<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|k| {
                let name = format!("{}-{}-{k}", hostname(), std::process::id());
                s.spawn(move || worker_loop(path, &name, quiet))
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
    let mut first_reason = None;
    for r in reasons {
        first_reason.get_or_insert(r?);
    }
    let mut study = open_study(path)?;
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
    json!({
        "running": s.counts[0], "complete": s.counts[1], "failed": s.counts[2], "abandoned": s.counts[3],
        "total_cost": s.total_cost, "budget_spent": s.budget_spent, "lambda": s.lambda,
        "best": s.best.as_ref().map(|b| json!({"number": b.number, "objective": b.objective, "params": b.params})),
    })
}

/// `pandora ask CONFIG`: hands out one trial and prints `{"number", "params"}`.
pub fn ask(path: &str, worker: Option<&str>) -> Result<()> {
    let mut study = open_study(path)?;
    let w = worker.map_or_else(
        || format!("{}-{}", hostname(), std::process::id()),
        str::to_string,
    );
    match study.ask(&w).map_err(|e| anyhow!("{e}"))? {
        Ask::Trial(t) => println!("{}", json!({"number": t.number, "params": t.params})),
        Ask::Finished(f) => println!("{}", json!({"finished": f.to_string()})),
    }
    Ok(())
}

/// `pandora tell CONFIG NUMBER (--objective V [--cost C] | --failed REASON)`.
pub fn tell(
    path: &str,
    number: u64,
    objective: Option<f64>,
    cost: Option<f64>,
    failed: Option<String>,
) -> Result<()> {
    let mut study = open_study(path)?;
    let trials = study.trials().map_err(|e| anyhow!("{e}"))?;
    let trial = trials
        .iter()
        .find(|t| t.number == number)
        .ok_or_else(|| anyhow!("trial {number} does not exist"))?;
    let known = study.known_cost(&trial.x);
    let outcome = match (objective, failed) {
        (Some(_), Some(_)) => bail!("give either --objective or --failed"),
        (None, None) => bail!("give --objective V (and --cost C) or --failed REASON"),
        (Some(objective), None) => {
            let cost = match (cost, study.config().cost.kind) {
                (Some(c), _) => c,
                (None, CostKind::Uniform | CostKind::Known) => known.unwrap_or(1.0),
                (None, _) => bail!("--cost: required because cost.kind is reported or runtime"),
            };
            Outcome::Complete { objective, cost }
        }
        (None, Some(reason)) => Outcome::Failed { reason, cost },
    };
    let t = study.tell(number, &outcome).map_err(|e| anyhow!("{e}"))?;
    println!("{}", trial_json(&t));
    Ok(())
}

/// `pandora status CONFIG`.
pub fn status(path: &str) -> Result<()> {
    let mut study = open_study(path)?;
    let s = study.summary().map_err(|e| anyhow!("{e}"))?;
    println!("{}", serde_json::to_string_pretty(&summary_json(&s))?);
    Ok(())
}

/// `pandora best CONFIG`.
pub fn best(path: &str) -> Result<()> {
    let mut study = open_study(path)?;
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
pub fn export(path: &str, format: &str) -> Result<()> {
    let mut study = open_study(path)?;
    let trials = study.trials().map_err(|e| anyhow!("{e}"))?;
    match format {
        "json" => println!("{}", serde_json::to_string_pretty(&trials)?),
        "csv" => {
            let names: Vec<String> = study.space().names().map(str::to_string).collect();
            let mut header = vec![
                "number",
                "state",
                "objective",
                "cost",
                "worker",
                "created_at",
                "finished_at",
                "phase",
                "acquisition_value",
                "lambda",
                "error",
            ]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
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
            for t in &trials {
                let mut row = vec![
                    t.number.to_string(),
                    t.state.as_str().to_string(),
                    num(t.objective),
                    num(t.cost),
                    t.worker.clone().unwrap_or_default(),
                    format!("{}", t.created_at),
                    num(t.finished_at),
                    t.decision["phase"].as_str().unwrap_or("").to_string(),
                    num(t.decision["acquisition_value"].as_f64()),
                    num(t.decision["lambda"].as_f64()),
                    t.error.clone().unwrap_or_default(),
                ];
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
