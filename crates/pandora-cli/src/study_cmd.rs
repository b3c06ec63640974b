//! Study commands: `run`, `ask`, `tell`, `status`, `best`, `export`, `plot`.
//!
//! Every command names its study by a configuration file or by `--storage URL --study NAME`
//! ([`Target`]).

use crate::progress::Progress;
use crate::study_text as text;
use anyhow::{Context, Result, anyhow, bail};
use pandora_experiment::plot;
use pandora_study::config::MAX_DURATION_S;
use pandora_study::optimize::{ConfigObjective, OptimizeOptions, Optimized, hostname, optimize};
use pandora_study::shutdown;
use pandora_study::space::Direction;
use pandora_study::storage::Storage;
use pandora_study::{Ask, Study, StudyConfig, Trial};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that gives the storage URL when neither `--storage` nor the
/// configuration file's `[study] storage` does (so that a URL holding a password stays out of
/// the process list and of configuration files). See docs/postgres.md.
pub const STORAGE_ENV: &str = "PANDORA_STORAGE_URL";

/// The storage URL of [`STORAGE_ENV`], if set and not empty.
fn env_storage() -> Option<String> {
    std::env::var(STORAGE_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// Loads and validates a study configuration file. A file without `[study] storage` takes the
/// storage URL from [`STORAGE_ENV`] when it is set.
pub fn load_config(path: &str) -> Result<StudyConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut cfg = StudyConfig::from_toml(&text).with_context(|| path.to_string())?;
    let has_storage = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("study")?.get("storage").cloned())
        .is_some();
    if !has_storage && let Some(url) = env_storage() {
        cfg.study.storage = url;
    }
    Ok(cfg)
}

/// Opens the storage named by a URL (`sqlite:PATH`, relative paths from the current directory).
pub fn open_storage(url: &str) -> Result<Box<dyn Storage>> {
    // The URL may hold a password: messages show it redacted.
    pandora_study::storage::open(url).with_context(|| {
        format!(
            "study.storage: opening {}",
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
    /// Storage URL of an existing study (with --study), instead of CONFIG; default: the
    /// PANDORA_STORAGE_URL environment variable.
    #[arg(long, value_name = "URL")]
    pub storage: Option<String>,
    /// Name of the study in --storage.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
}

impl Target {
    /// Opens the study; also returns the storage URL (for a second connection).
    pub fn open(&self) -> Result<(Study, String)> {
        let storage = match (&self.config, &self.storage) {
            (None, None) => env_storage(),
            (_, s) => s.clone(),
        };
        match (&self.config, &storage, &self.study) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                bail!("give either a CONFIG file or --storage URL --study NAME, not both")
            }
            (Some(path), None, None) => {
                let cfg = load_config(path)?;
                let url = cfg.study.storage.clone();
                let storage = open_storage(&url)?;
                let study = Study::open(cfg, storage).with_context(|| path.clone())?;
                Ok((study, url))
            }
            (None, Some(url), Some(name)) => {
                if url.starts_with("sqlite:") {
                    // Opening a missing file would create an empty database.
                    let file = pandora_study::storage::sqlite::SqliteStorage::path_of_url(url)?;
                    if file != ":memory:" && !std::path::Path::new(file).exists() {
                        bail!("--storage {url}: no such database file '{file}'");
                    }
                }
                let storage = open_storage(url)?;
                let study = Study::load_at(name, storage, url)
                    .with_context(|| format!("--study {name}"))?;
                Ok((study, url.clone()))
            }
            (None, Some(_), None) => bail!("--storage URL needs --study NAME"),
            (None, None, Some(_)) => {
                bail!(
                    "--study NAME needs --storage URL (or the {STORAGE_ENV} environment variable)"
                )
            }
            (None, None, None) => {
                bail!("give a CONFIG file, or --storage URL --study NAME of an existing study")
            }
        }
    }

    /// The target as command-line arguments, for the commands a message suggests (a URL's
    /// password redacted).
    pub fn args(&self) -> String {
        match (&self.config, &self.storage, &self.study) {
            (Some(c), _, _) => c.clone(),
            (None, Some(url), Some(name)) => format!(
                "--storage {} --study {name}",
                pandora_study::storage::redact_url(url)
            ),
            (None, None, Some(name)) => format!("--study {name}"),
            _ => "CONFIG".to_string(),
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

/// The working directory of a command objective: the configuration file's directory (absolute),
/// or `None` (the current directory) for a study opened by `--storage`/`--study`.
fn command_dir(target: &Target) -> Result<Option<PathBuf>> {
    let Some(config) = &target.config else {
        return Ok(None);
    };
    let parent = Path::new(config)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = parent
        .canonicalize()
        .with_context(|| format!("{config}: finding the directory of the configuration file"))?;
    Ok(Some(dir))
}

pub use pandora_study::optimize::{HEARTBEAT_S, MIN_ABANDON_S, STALE_S};

/// Options of `pandora run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Worker threads evaluating trials in parallel (at least 1).
    pub workers: usize,
    /// No progress output.
    pub quiet: bool,
    /// Running trials without a heartbeat for this many seconds are marked abandoned at start.
    pub abandon_after_s: f64,
    /// End with the JSON summary instead of the summary in words.
    pub json: bool,
    /// Seconds the running evaluations may take to finish after `SIGTERM`/`SIGINT`.
    pub grace_s: f64,
}

/// `pandora run CONFIG [--workers K] [--quiet] [--abandon-after S] [--grace S]`.
///
/// Refuses (an error, exit code 2) a study whose objective is external
/// (`[objective] kind = "external"`), before changing anything; ends with an error when a worker
/// fails (storage error, panic) or trials keep failing the same way
/// ([`pandora_study::optimize::SAME_FAILURES_AT_START`], [`pandora_study::optimize::SAME_FAILURES`]).
/// The loop itself is [`pandora_study::optimize()`]; this adds the options, progress and summary.
///
/// On `SIGTERM` or `SIGINT` no trial is handed out any more; the running evaluations may finish
/// within `--grace` seconds, after which they are stopped and their trials abandoned (at once
/// on a second signal); the run then ends normally, saying so in one line on stderr
/// ([`pandora_study::shutdown`]).
pub fn run(target: &Target, opts: &RunOptions) -> Result<()> {
    if opts.workers == 0 {
        bail!("--workers: must be at least 1, got 0");
    }
    let grace = opts.grace_s;
    if !(grace.is_finite() && (0.0..=MAX_DURATION_S).contains(&grace)) {
        bail!("--grace: must be a number of seconds from 0 to {MAX_DURATION_S}, got {grace}");
    }
    let stale = opts.abandon_after_s;
    if !(stale.is_finite() && (MIN_ABANDON_S..=MAX_DURATION_S).contains(&stale)) {
        bail!(
            "--abandon-after: must be a number of seconds from {MIN_ABANDON_S} (ten heartbeats of \
             {HEARTBEAT_S} s) to {MAX_DURATION_S}, got {stale}"
        );
    }
    let (objective, progress) = {
        // Trials of workers that vanished (killed, machine lost) are marked abandoned, not lost.
        let (mut study, _) = target.open()?;
        let objective =
            ConfigObjective::new(&study, command_dir(target)?).context("pandora run")?;
        let gone = study.abandon_stale(stale)?;
        let budget = study.config().budget.clone();
        let progress = Progress::new(opts.quiet, budget.max_trials, budget.total);
        if !gone.is_empty() {
            progress.note(&format!(
                "marked abandoned (no heartbeat for {stale} s): trials {gone:?}"
            ));
        }
        progress.start(&study.summary()?);
        (objective, progress)
    };
    let shutdown = shutdown::listen(Duration::from_secs_f64(grace))
        .context("listening for SIGTERM and SIGINT")?;
    let options = OptimizeOptions {
        shutdown: Some(&shutdown),
        ..OptimizeOptions::new(opts.workers)
    };
    let open = || target.study().map_err(Into::into);
    let ended = optimize(&open, &objective, &progress, &options);
    progress.finish();
    let ended = ended?;
    let signal_line = ended.signal_line();
    if let Some(line) = &signal_line {
        eprintln!("{line}");
    }
    report_run(
        target,
        opts.json,
        signal_line.or(ended.finished.clone()),
        &ended,
    )
}

/// The end of `pandora run`: the JSON summary, or the summary in words with what to do next.
fn report_run(
    target: &Target,
    json: bool,
    stopped: Option<String>,
    ended: &Optimized,
) -> Result<()> {
    let mut study = target.study()?;
    let s = study.summary()?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "study": study.config().study.name,
                "stopped": stopped,
                "summary": summary_json(&s),
            }))?
        );
        return Ok(());
    }
    let trials = study.trials()?;
    print!("{}", text::summary(&text_context(&study, &trials), &s));
    let c = study.config();
    if s.stop_reason.is_none()
        && ended.after_signal.is_none()
        && let Some(r) = &ended.finished
    {
        println!("finished: {r}");
    }
    print!(
        "{}",
        text::next_steps(&target.args(), &format!("{}.png", c.study.name))
    );
    Ok(())
}

/// What the summary in words needs from `study` besides its summary.
fn text_context<'a>(study: &'a Study, trials: &'a [Trial]) -> text::Context<'a> {
    let c = study.config();
    // Builtin problems have a known maximum (the optimum of a study that maximizes them).
    let optimum = match c.study.direction {
        Direction::Maximize => c.builtin_problem().ok().flatten().and_then(|p| p.optimum()),
        Direction::Minimize => None,
    };
    text::Context {
        name: &c.study.name,
        budget: c.budget.total,
        optimum,
        trials,
    }
}

fn trial_json(t: &Trial) -> serde_json::Value {
    serde_json::to_value(t).unwrap_or(serde_json::Value::Null)
}

fn summary_json(s: &pandora_study::Summary) -> serde_json::Value {
    s.to_json()
}

/// `pandora ask CONFIG`: hands out one trial and prints `{"number", "params"}`.
pub fn ask(target: &Target, worker: Option<&str>, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    let w = worker.map_or_else(
        || format!("{}-{}", hostname(), std::process::id()),
        str::to_string,
    );
    match study.ask(&w)? {
        ask @ Ask::Trial(_) if as_json => println!("{}", ask.to_json()),
        Ask::Trial(t) => println!("{}", asked_text(target, &t)),
        ask @ Ask::Finished(_) if as_json => println!("{}", ask.to_json()),
        Ask::Finished(f) => println!("no trial: the study is finished ({f})"),
    }
    Ok(())
}

/// `pandora ask`'s words: the trial, its control set (`[cvs]` studies) and the `tell` to run.
fn asked_text(target: &Target, t: &Trial) -> String {
    let mut out = format!("trial {}: {}", t.number, text::params(&t.params));
    let mut random = String::new();
    if let Some(c) = t.decision.cvs() {
        out.push_str(&format!(
            "\ncontrol set {}{}: set {}; left to chance: {}; cost {}",
            c.control_set,
            c.name.as_ref().map_or(String::new(), |n| format!(" ({n})")),
            c.controlled.join(", "),
            if c.random.is_empty() {
                "nothing".to_string()
            } else {
                c.random.join(", ")
            },
            text::num(c.cost)
        ));
        random = c
            .random
            .iter()
            .map(|r| format!(" --random {r}=V"))
            .collect();
    }
    if let (Some(from), Some(to)) = (t.step_from(), t.step_to) {
        let how = if from > 1 {
            format!("resume from the checkpoint after step {}", from - 1)
        } else {
            "start".to_string()
        };
        out.push_str(&format!(
            "\nsteps {from} to {to}: {how}; after each step T:\n  pandora tell {} {} --step T \
             --objective V",
            target.args(),
            t.number
        ));
        return out;
    }
    out.push_str(&format!(
        "\nthen: pandora tell {} {} --objective V{random}   (--json for scripts)",
        target.args(),
        t.number
    ));
    out
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
    /// `--step T`.
    pub step: Option<u32>,
    /// `--json`: print the trial as JSON.
    pub json: bool,
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
        step,
        json: as_json,
    } = args;
    let random = parse_random(&random)?;
    // The flags' combinations in the flags' words; `Study::report` checks them again (for the
    // HTTP API) and does the rest.
    if !random.is_empty() && failed.is_some() {
        bail!("--random: only with --objective (a failed trial has no realized values)");
    }
    match (objective, &failed) {
        (Some(_), Some(_)) => bail!("give either --objective or --failed"),
        (None, None) => bail!("give --objective V (and --cost C) or --failed REASON"),
        (None, Some(_)) if step.is_some() => {
            bail!("--step: a failure ends the whole trial; give --failed without --step")
        }
        _ => {}
    }
    let mut study = target.study()?;
    let report = pandora_study::Report {
        objective,
        cost,
        failed,
        random,
        step,
    };
    let t = study.report(number, &report).map_err(|e| match e {
        pandora_study::Error::NotFound(what) => anyhow!("{what} does not exist"),
        pandora_study::Error::Invalid { what, reason }
            if matches!(
                what.as_str(),
                "objective" | "cost" | "failed" | "random" | "step"
            ) =>
        {
            anyhow!("--{what}: {reason}")
        }
        e => e.into(),
    })?;
    if let Some(late) = &t.late {
        eprintln!("warning: {late}");
    }
    if as_json {
        println!("{}", trial_json(&t.trial));
    } else {
        println!("{}", text::trial(&t.trial));
    }
    Ok(())
}

/// `pandora status CONFIG [--json]` (or the older `--format json|text`): the summary in words,
/// or as JSON.
pub fn status(target: &Target, format: Option<&str>, as_json: bool) -> Result<()> {
    let as_json = match format {
        None => as_json,
        Some("json") => true,
        Some("text") if !as_json => false,
        Some("text") => bail!("--format text: contradicts --json"),
        Some(other) => bail!("--format: expected json or text, got '{other}'"),
    };
    let mut study = target.study()?;
    let s = study.summary()?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&summary_json(&s))?);
    } else {
        let trials = study.trials()?;
        print!("{}", text::summary(&text_context(&study, &trials), &s));
    }
    Ok(())
}

/// `pandora best CONFIG [--json]`.
pub fn best(target: &Target, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    match study.best()? {
        Some(t) if as_json => println!("{}", serde_json::to_string_pretty(&trial_json(&t))?),
        Some(t) => println!("{}", text::trial(&t)),
        None => bail!("no complete trial yet"),
    }
    Ok(())
}

/// `pandora export CONFIG --format csv|json`: every trial, parameters flattened into columns for
/// CSV (`param.NAME`); cells that a spreadsheet would run as formulas are neutralized
/// ([`pandora_study::csv::field`]).
pub fn export(target: &Target, format: &str) -> Result<()> {
    if !matches!(format, "csv" | "json") {
        bail!("--format: expected csv or json, got '{format}'");
    }
    let mut study = target.study()?;
    let trials = study.trials()?;
    match format {
        "json" => println!("{}", pandora_study::export::json(&trials)?),
        _ => print!("{}", pandora_study::export::csv(&study, &trials)),
    }
    Ok(())
}

/// `pandora plot CONFIG [--out FILE]`: writes the study's figure (PNG or SVG by extension;
/// default `<study>.png`) and says so (with `--json`: `{"figure": FILE, "trials": N}`).
pub fn plot(target: &Target, out: Option<&str>, as_json: bool) -> Result<()> {
    let mut study = target.study()?;
    let trials = study.trials()?;
    let out = out.map_or_else(
        || format!("{}.png", study.config().study.name),
        str::to_string,
    );
    let c = study.config();
    let fig = crate::study_plot::study_figure(&c.study.name, c.study.direction, &trials);
    plot::render(&fig, std::path::Path::new(&out))?;
    if as_json {
        println!("{}", json!({"figure": out, "trials": trials.len()}));
    } else {
        println!("wrote {out} ({} trials)", trials.len());
    }
    Ok(())
}
