//! `pandora experiment plan`: what a grid will cost before it is run, and the Slurm array that
//! runs it.
//!
//! **Estimate.** Every run's work comes from [`super::estimate`] (steps × a per-step cost growing
//! as `n²` and `n³`); seconds per unit of work and per evaluation are measured per (problem,
//! policy) pair, from the traces already in the output directory when it has some for that pair
//! (complete or not), otherwise by a calibration: the pair's first seed run for a few BO steps
//! (`--calibration-steps`, default 4; the first, whose fit starts cold, is not counted) in a temporary directory, on one thread. The report says
//! which source each pair used. CPU-hours are the sum of the runs' estimated seconds (one core per
//! run); the longest run is the largest single estimate.
//!
//! **Array.** `N` shards (`--shards`, default `⌈runs / cpus-per-task⌉`, at most 1000) balanced by
//! [`super::shard`]; a shard's wall time is estimated as the larger of its longest run and its
//! total over `cpus-per-task` parallel runs. The sbatch time limit is the largest shard's
//! estimate × `--time-margin` (default 1.5) plus 10 minutes (problem instances, start-up),
//! rounded up to a minute; a task that still hits it is resubmitted and resumes (complete traces
//! are skipped, the unfinished one is continued). The script runs
//! `pandora experiment CONFIG --out DIR --shard $SLURM_ARRAY_TASK_ID/N --jobs
//! $SLURM_CPUS_PER_TASK` with `--array=0-(N−1)%M` (`M = --max-parallel`, default N). `N` is
//! written into the script rather than read from `SLURM_ARRAY_TASK_COUNT`, so that resubmitting
//! some tasks only (`sbatch --array=3,7 FILE`, an array of 2) still runs shards 3 and 7 of `N`.
//!
//! **Degenerate cases.** A configuration whose every run already has a complete trace reports 0
//! CPU-hours to go (the total is also given). A pair whose calibration fails is reported with its
//! error and left out of the totals, which say so.
//!
//! References: Slurm's `sbatch` manual (`--array` with the `%` throttle, `--time` as
//! `days-hours:minutes:seconds`, the `%A`/`%a` output patterns).

use super::config::{Plan, RunSpec};
use super::estimate::{Rates, RunWork, mean_costs, run_work};
use super::report::completeness;
use super::run::{Instances, run_one};
use super::shard::assign;
use super::summary::read_traces;
use super::trace;
use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `pandora experiment plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Experiment configuration (TOML).
    config: String,
    /// Use the sizes of the configuration's [smoke] section.
    #[arg(long)]
    smoke: bool,
    /// Output directory of the experiment (default as `pandora experiment`): its traces calibrate
    /// the estimate, and the sbatch script writes there.
    #[arg(long)]
    out: Option<PathBuf>,
    /// BO steps of a calibration run, for pairs without traces.
    #[arg(long, default_value_t = 4)]
    calibration_steps: usize,
    /// Write an sbatch script for a Slurm array to this file.
    #[arg(long, value_name = "FILE")]
    slurm: Option<PathBuf>,
    /// Array tasks (shards); default ⌈runs / cpus-per-task⌉, at most 1000.
    #[arg(long)]
    shards: Option<usize>,
    /// CPUs per array task (runs in parallel within a task).
    #[arg(long, default_value_t = 1)]
    cpus_per_task: usize,
    /// Memory per task, as sbatch takes it (`4G`, `1500M`).
    #[arg(long, default_value = "4G")]
    mem: String,
    /// Array tasks running at once (`%M`); default all.
    #[arg(long)]
    max_parallel: Option<usize>,
    /// Factor applied to the largest shard's estimated time for the time limit.
    #[arg(long, default_value_t = 1.5)]
    time_margin: f64,
    /// Slurm partition (`#SBATCH --partition`), if any.
    #[arg(long)]
    partition: Option<String>,
    /// The pandora executable the script calls (default: this one).
    #[arg(long)]
    bin: Option<PathBuf>,
}

/// Where the seconds of a pair come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Traces in the output directory.
    Traces,
    /// A calibration run of this many BO steps.
    Calibration(usize),
    /// The calibration failed.
    Failed(String),
}

/// The estimate of one run.
#[derive(Debug, Clone)]
pub struct RunEstimate {
    /// The run.
    pub run: RunSpec,
    /// Its work.
    pub work: RunWork,
    /// Estimated seconds (None: not calibrated).
    pub seconds: Option<f64>,
    /// Whether its trace is complete already.
    pub done: bool,
}

/// Runs pair `(problem, policy)`'s first seed for `steps` BO steps in a temporary directory and
/// returns its trace.
fn calibrate(plan: &Plan, pair: (usize, usize), steps: usize) -> Result<trace::Trace> {
    let mut small = plan.clone();
    let p = &mut small.problems[pair.0];
    p.budget = None;
    p.max_evaluations = Some(steps);
    let dir = std::env::temp_dir().join(format!(
        "pandora-plan-{}-{}-{}",
        std::process::id(),
        pair.0,
        pair.1
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {dir:?}"))?;
    let r = RunSpec {
        problem: pair.0,
        policy: pair.1,
        seed: plan.seeds[0],
    };
    let result = (|| {
        let instances = Instances::build(&small, &[r]);
        run_one(&small, &r, &dir, &instances)?;
        trace::read(&dir.join(small.trace_name(&r)))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The rates of every pair: from `traces`, else calibrated. Calibrations run one at a time (so
/// that they measure one core), with a line on stderr each.
fn rates(
    plan: &Plan,
    traces: &[trace::Trace],
    steps: usize,
) -> (Rates, BTreeMap<(usize, usize), Source>) {
    let mut rates = Rates::from_traces(plan, traces);
    let mut sources: BTreeMap<(usize, usize), Source> =
        rates.by_pair.keys().map(|k| (*k, Source::Traces)).collect();
    let pairs: BTreeSet<(usize, usize)> =
        plan.runs().iter().map(|r| (r.problem, r.policy)).collect();
    for pair in pairs {
        if sources.contains_key(&pair) {
            continue;
        }
        let label = format!(
            "{} × {}",
            plan.problems[pair.0].label, plan.policies[pair.1].label
        );
        eprintln!("calibrating {label} ({steps} BO steps)");
        match calibrate(plan, pair, steps) {
            Ok(t) => {
                let measured = Rates::from_traces(plan, std::slice::from_ref(&t));
                if let Some(r) = measured.by_pair.get(&pair) {
                    rates.by_pair.insert(pair, *r);
                }
                sources.insert(pair, Source::Calibration(steps));
            }
            Err(e) => {
                sources.insert(pair, Source::Failed(format!("{e:#}")));
            }
        }
    }
    (rates, sources)
}

/// The estimate of every run of `plan` (`out`: the output directory, whose complete traces count
/// as done).
pub fn estimate_runs(plan: &Plan, rates: &Rates, out: &Path) -> Result<Vec<RunEstimate>> {
    let costs = mean_costs(plan)?;
    let c = completeness(plan, &out.join("traces"));
    let not_done: BTreeSet<&String> = c.missing.iter().chain(&c.unfinished).collect();
    Ok(plan
        .runs()
        .into_iter()
        .map(|r| {
            let work = run_work(plan, &r, costs[r.problem]);
            RunEstimate {
                run: r,
                work,
                seconds: rates.seconds((r.problem, r.policy), &work),
                done: !not_done.contains(&plan.trace_name(&r)),
            }
        })
        .collect())
}

/// A duration in Slurm's `D-HH:MM:SS` form, rounded up to a whole minute.
pub fn slurm_time(seconds: f64) -> String {
    let minutes = (seconds.max(60.0) / 60.0).ceil() as u64;
    let (d, h, m) = (minutes / 1440, (minutes / 60) % 24, minutes % 60);
    format!("{d}-{h:02}:{m:02}:00")
}

/// A duration for people: seconds, minutes or hours.
fn human(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{seconds:.3} s")
    } else if seconds < 120.0 {
        format!("{seconds:.1} s")
    } else if seconds < 7200.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{:.2} h", seconds / 3600.0)
    }
}

/// The array's shape: tasks, and the estimated wall seconds of its largest shard.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrayShape {
    /// Array tasks `N`.
    pub shards: usize,
    /// The largest shard's estimated wall seconds with `cpus` parallel runs.
    pub wall_seconds: f64,
}

/// The array for `estimates` in `shards` shards (balanced on the runs' work, as the tasks will
/// do) with `cpus` runs in parallel per task.
pub fn array_shape(estimates: &[RunEstimate], shards: usize, cpus: usize) -> ArrayShape {
    let work: Vec<f64> = estimates.iter().map(|e| e.work.total).collect();
    let owner = assign(&work, shards);
    let mut total = vec![0.0f64; shards];
    let mut longest = vec![0.0f64; shards];
    for (e, s) in estimates.iter().zip(owner) {
        if e.done {
            continue;
        }
        let secs = e.seconds.unwrap_or(0.0);
        total[s] += secs;
        longest[s] = longest[s].max(secs);
    }
    let wall_seconds = total
        .iter()
        .zip(&longest)
        .map(|(t, l)| (t / cpus.max(1) as f64).max(*l))
        .fold(0.0, f64::max);
    ArrayShape {
        shards,
        wall_seconds,
    }
}

/// What the sbatch script needs.
#[derive(Debug, Clone)]
pub struct ScriptSpec {
    /// Job name.
    pub name: String,
    /// Array tasks `N`.
    pub shards: usize,
    /// `%M`.
    pub max_parallel: usize,
    /// CPUs per task.
    pub cpus_per_task: usize,
    /// Memory per task.
    pub mem: String,
    /// Time limit in seconds (before rounding up to a minute).
    pub time_seconds: f64,
    /// Partition.
    pub partition: Option<String>,
    /// The pandora executable.
    pub bin: PathBuf,
    /// The configuration file.
    pub config: PathBuf,
    /// Whether `--smoke` is passed.
    pub smoke: bool,
    /// The output directory.
    pub out: PathBuf,
    /// A comment line on the estimate.
    pub comment: String,
}

/// Quotes a value for a POSIX shell (single quotes).
fn sh(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The sbatch script of `spec`.
pub fn sbatch_script(spec: &ScriptSpec) -> String {
    let out = spec.out.to_string_lossy();
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name={}", sh(&spec.name));
    let _ = writeln!(
        s,
        "#SBATCH --array=0-{}%{}",
        spec.shards - 1,
        spec.max_parallel
    );
    let _ = writeln!(s, "#SBATCH --cpus-per-task={}", spec.cpus_per_task);
    let _ = writeln!(s, "#SBATCH --mem={}", spec.mem);
    let _ = writeln!(s, "#SBATCH --time={}", slurm_time(spec.time_seconds));
    if let Some(p) = &spec.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    let _ = writeln!(
        s,
        "#SBATCH --output={}",
        sh(&format!("{out}/slurm/%A_%a.out"))
    );
    let _ = writeln!(s, "#\n# {}", spec.comment);
    let _ = writeln!(
        s,
        "# Task K runs shard K/{n}. Resubmitting resumes (complete runs are skipped, unfinished\n\
         # ones continued), also for some tasks only: sbatch --array=K,... FILE.\n\
         # When every task is done: pandora experiment summarize {out}",
        n = spec.shards,
        out = sh(&out)
    );
    s += "set -euo pipefail\n";
    let smoke = if spec.smoke { " --smoke" } else { "" };
    let _ = writeln!(
        s,
        "{} experiment {}{smoke} --quiet --out {} --shard \"${{SLURM_ARRAY_TASK_ID:?submit with \
         sbatch}}/{}\" --jobs \"${{SLURM_CPUS_PER_TASK:-1}}\"",
        sh(&spec.bin.to_string_lossy()),
        sh(&spec.config.to_string_lossy()),
        sh(&out),
        spec.shards
    );
    s
}

/// An absolute form of `p` (joined to the current directory; not resolving links).
fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// The printed plan.
fn report(
    plan: &Plan,
    estimates: &[RunEstimate],
    sources: &BTreeMap<(usize, usize), Source>,
) -> String {
    let mut s = String::new();
    let done = estimates.iter().filter(|e| e.done).count();
    let _ = writeln!(
        s,
        "experiment '{}': {} run(s) ({} problem(s) × {} policy(ies) × {} seed(s)), {done} complete \
         already",
        plan.name,
        estimates.len(),
        plan.problems.len(),
        plan.policies.len(),
        plan.seeds.len()
    );
    let _ = writeln!(
        s,
        "\n{:<32} {:<24} {:>6} {:>12}  source",
        "problem", "policy", "steps", "per run"
    );
    for (pair, source) in sources {
        let e = estimates
            .iter()
            .find(|e| (e.run.problem, e.run.policy) == *pair)
            .expect("a run per pair");
        let source = match source {
            Source::Traces => "traces in the output directory".to_string(),
            Source::Calibration(k) => format!("calibration ({k} BO steps)"),
            Source::Failed(err) => format!("calibration failed: {err}"),
        };
        let _ = writeln!(
            s,
            "{:<32} {:<24} {:>6} {:>12}  {source}",
            plan.problems[pair.0].label,
            plan.policies[pair.1].label,
            e.work.initial + e.work.bo_steps,
            e.seconds.map_or("-".into(), human)
        );
    }
    let todo: Vec<&RunEstimate> = estimates.iter().filter(|e| !e.done).collect();
    // `+ 0.0`: an empty float sum is −0.
    let total: f64 = estimates.iter().filter_map(|e| e.seconds).sum::<f64>() + 0.0;
    let remaining: f64 = todo.iter().filter_map(|e| e.seconds).sum::<f64>() + 0.0;
    let uncalibrated = estimates.iter().filter(|e| e.seconds.is_none()).count();
    let _ = writeln!(
        s,
        "\nestimated CPU time: {:.2} CPU-hours to go ({:.2} for the whole grid, one core per run)",
        remaining / 3600.0,
        total / 3600.0
    );
    if let Some(longest) = estimates
        .iter()
        .filter(|e| e.seconds.is_some())
        .max_by(|a, b| {
            a.seconds
                .unwrap_or(0.0)
                .total_cmp(&b.seconds.unwrap_or(0.0))
        })
    {
        let _ = writeln!(
            s,
            "longest run: {} ({})",
            human(longest.seconds.unwrap_or(0.0)),
            plan.trace_name(&longest.run)
        );
    }
    if uncalibrated > 0 {
        let _ = writeln!(
            s,
            "{uncalibrated} run(s) could not be calibrated and are not in these totals"
        );
    }
    s
}

/// Entry point of `pandora experiment plan`.
pub fn main(args: &PlanArgs) -> Result<()> {
    let file = super::config::load(&args.config)?;
    let plan = file
        .resolve(args.smoke)
        .with_context(|| format!("in {}", args.config))?;
    let out = args.out.clone().unwrap_or_else(|| {
        let name = super::config::file_component(&plan.name);
        PathBuf::from("results").join(if plan.smoke {
            format!("{name}-smoke")
        } else {
            name
        })
    });
    if args.cpus_per_task == 0 {
        bail!("--cpus-per-task must be at least 1");
    }
    if !(args.time_margin.is_finite() && args.time_margin >= 1.0) {
        bail!("--time-margin must be a number ≥ 1");
    }
    let traces = if out.join("traces").is_dir() {
        read_traces(&out.join("traces"))?
    } else {
        Vec::new()
    };
    let (rates, sources) = rates(&plan, &traces, args.calibration_steps.max(1));
    let estimates = estimate_runs(&plan, &rates, &out)?;
    print!("{}", report(&plan, &estimates, &sources));
    let runs = estimates.len();
    let shards = match args.shards {
        Some(0) => bail!("--shards must be at least 1"),
        Some(n) => n,
        None => runs.div_ceil(args.cpus_per_task).clamp(1, 1000),
    };
    let shape = array_shape(&estimates, shards, args.cpus_per_task);
    let time_seconds = shape.wall_seconds * args.time_margin + 600.0;
    println!(
        "array: {shards} task(s) × {} CPU(s); largest shard ≈ {}; time limit {} (×{} + 10 min)",
        args.cpus_per_task,
        human(shape.wall_seconds),
        slurm_time(time_seconds),
        args.time_margin
    );
    let Some(script) = &args.slurm else {
        return Ok(());
    };
    let max_parallel = match args.max_parallel {
        Some(0) => bail!("--max-parallel must be at least 1"),
        Some(m) => m.min(shards),
        None => shards,
    };
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("locating the pandora executable")?,
    };
    let out_abs = absolute(&out)?;
    std::fs::create_dir_all(out_abs.join("slurm"))
        .with_context(|| format!("creating {:?}", out_abs.join("slurm")))?;
    let total: f64 = estimates.iter().filter_map(|e| e.seconds).sum();
    let spec = ScriptSpec {
        name: super::config::file_component(&plan.name),
        shards,
        max_parallel,
        cpus_per_task: args.cpus_per_task,
        mem: args.mem.clone(),
        time_seconds,
        partition: args.partition.clone(),
        bin,
        config: absolute(Path::new(&args.config))?,
        smoke: args.smoke,
        out: out_abs,
        comment: format!(
            "{runs} runs, estimated {:.2} CPU-hours; largest shard ≈ {} (pandora experiment plan)",
            total / 3600.0,
            human(shape.wall_seconds)
        ),
    };
    std::fs::write(script, sbatch_script(&spec)).with_context(|| format!("writing {script:?}"))?;
    println!(
        "wrote {script:?}: submit with `sbatch {}`",
        script.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_times_round_up_to_minutes() {
        assert_eq!(slurm_time(0.0), "0-00:01:00");
        assert_eq!(slurm_time(61.0), "0-00:02:00");
        assert_eq!(slurm_time(3600.0), "0-01:00:00");
        assert_eq!(slurm_time(26.5 * 3600.0), "1-02:30:00");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(sh("/a/b-c.toml"), "/a/b-c.toml");
        assert_eq!(sh("a b"), "'a b'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh("$(x)"), "'$(x)'");
    }
}
