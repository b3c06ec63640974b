//! `pandora experiment`: a grid of problems × policies × seeds run in parallel, one trace per run,
//! resumable, with summaries of regret against cumulative cost. See docs/experiments.md.
//!
//! Modules, each importing only those listed before it: [`format`] (CSV cells and numbers),
//! [`lock`] (one writer per run's output),
//! [`shard`] (cost-balanced shares of a grid, from `--shard` or a Slurm array),
//! [`stopping::plan`] (the `[stopping]` table), [`policy`] (one `[[policy]]` table), [`legacy`]
//! (policies as earlier releases wrote them), [`config`] (the TOML file and its resolution into
//! runs), [`trace`] (the JSON-lines trace format), [`summary`] (statistics on a common cost
//! grid), [`stopping`] (recording the stopping statistics and replaying the rules offline),
//! [`figures`] (the plots), [`run`] (one BO run), [`estimate`] (the work of a run, and its
//! calibration in seconds), [`report`] (every summary file of an experiment directory) and
//! [`cluster`] (`pandora experiment plan` and its sbatch script).

pub mod cluster;
pub mod config;
pub mod estimate;
pub mod figures;
pub mod format;
pub mod legacy;
pub mod lock;
pub mod policy;
pub mod report;
pub mod run;
pub mod shard;
pub mod stopping;
pub mod summary;
pub mod trace;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arguments of `pandora experiment`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<ExperimentCommand>,
    /// Experiment configuration (TOML).
    config: Option<String>,
    /// Output directory (default `results/NAME`, `results/NAME-smoke` with --smoke).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runs in parallel (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Use the sizes of the configuration's [smoke] section.
    #[arg(long)]
    smoke: bool,
    /// Do not print the summary table.
    #[arg(long)]
    quiet: bool,
    /// Run only shard K of N (0-based, `0/4` … `3/4`); without it, taken from a Slurm array
    /// task's SLURM_ARRAY_TASK_ID / _COUNT / _MIN when set (`--shard 0/1` runs everything).
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
}

#[derive(Debug, Subcommand)]
enum ExperimentCommand {
    /// Write the summary CSVs of an experiment directory and print its table (refused, naming
    /// them, while some runs are missing or unfinished, unless --partial).
    Summarize {
        /// The experiment's output directory.
        dir: PathBuf,
        /// Summarize the complete runs even when others are missing or unfinished.
        #[arg(long)]
        partial: bool,
    },
    /// Estimate the runs, CPU-hours and longest run of a configuration, and write an sbatch
    /// script for a Slurm array.
    Plan(cluster::PlanArgs),
}

/// Entry point of `pandora experiment`.
pub fn main(args: Args) -> Result<()> {
    match &args.command {
        Some(ExperimentCommand::Summarize { dir, partial }) => {
            let (table, warning) = report::summarize_dir(dir, *partial)?;
            print!("{table}");
            if let Some(w) = warning {
                eprintln!("warning: {w}; summarized the complete runs only (--partial)");
            }
            return Ok(());
        }
        Some(ExperimentCommand::Plan(plan)) => return cluster::main(plan),
        None => {}
    }
    let Some(config) = &args.config else {
        bail!(
            "give a configuration file: pandora experiment CONFIG.toml (or `summarize DIR`, \
             `plan CONFIG`)"
        );
    };
    let shard = shard::Shard::resolve(args.shard.as_deref())?;
    let file = config::load(config)?;
    let plan = file
        .resolve(args.smoke)
        .with_context(|| format!("in {config}"))?;
    let out = args.out.clone().unwrap_or_else(|| {
        let name = config::file_component(&plan.name);
        PathBuf::from("results").join(if plan.smoke {
            format!("{name}-smoke")
        } else {
            name
        })
    });
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let Tally { failures, busy } = execute(&plan, &out, jobs, shard)?;
    if busy > 0 {
        bail!(
            "{busy} run(s) skipped because another process is writing them (see the messages \
             above); {failures} failed. Once that process has ended, rerun to finish them{}",
            if shard.is_some() {
                ""
            } else {
                " and write the summary"
            }
        );
    }
    if let Some(s) = shard {
        // Shards share the directory: the summary is written once, by `summarize`.
        eprintln!(
            "shard {s}: traces in {:?}; once every shard is done: pandora experiment summarize \
             {out:?}",
            out.join("traces")
        );
        if failures > 0 {
            bail!("{failures} run(s) failed (see the messages above); rerun to retry them");
        }
        return Ok(());
    }
    let table = report::write_summary(&out)?;
    if !args.quiet {
        print!("{table}");
    }
    eprintln!(
        "traces in {:?}, summaries in {:?}",
        out.join("traces"),
        out.join("summary")
    );
    if failures > 0 {
        bail!("{failures} run(s) failed (see the messages above); rerun to retry them");
    }
    Ok(())
}

/// The runs of `plan` in `shard` (every run without one), in [`config::Plan::runs`] order.
pub fn shard_runs(
    plan: &config::Plan,
    shard: Option<shard::Shard>,
) -> Result<Vec<config::RunSpec>> {
    let runs = plan.runs();
    let Some(s) = shard else {
        return Ok(runs);
    };
    let weights = estimate::weights(plan, &runs)?;
    Ok(s.select(&weights).into_iter().map(|i| runs[i]).collect())
}

/// What [`execute`] could not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Runs that failed.
    pub failures: usize,
    /// Runs left alone because another process holds their lock.
    pub busy: usize,
}

/// Runs every run of `plan` (of `shard`, when given) into `out` with `jobs` threads; returns the
/// runs that failed and those another process is writing (each named on stderr).
pub fn execute(
    plan: &config::Plan,
    out: &Path,
    jobs: usize,
    shard: Option<shard::Shard>,
) -> Result<Tally> {
    let traces = out.join("traces");
    std::fs::create_dir_all(&traces).with_context(|| format!("creating {traces:?}"))?;
    let plan_json = serde_json::to_string_pretty(plan)?;
    // One temporary name per process: the tasks of an array write the same file concurrently.
    let tmp = out.join(format!("experiment.json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, plan_json)?;
    std::fs::rename(&tmp, out.join("experiment.json"))?;
    let runs = shard_runs(plan, shard)?;
    if let Some(s) = shard {
        eprintln!(
            "experiment '{}', shard {s}: {} of {} run(s)",
            plan.name,
            runs.len(),
            plan.runs().len()
        );
    }
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new(runs.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta} {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("building the thread pool")?;
    let results: Vec<(config::RunSpec, Result<run::RunStatus>)> = pool.install(|| {
        // Build the instances of the runs still to do first (one per problem and seed, shared by
        // the policies), then run.
        let todo: Vec<config::RunSpec> = runs
            .par_iter()
            .filter(|r| !run::is_complete(plan, r, &traces))
            .copied()
            .collect();
        bar.set_message("(building problem instances)");
        let instances = run::Instances::build(plan, &todo);
        bar.set_message("");
        runs.par_iter()
            .map(|r| {
                let res = run::run_one(plan, r, &traces, &instances);
                bar.inc(1);
                (*r, res)
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut failures = 0;
    let (mut skipped, mut done, mut busy) = (0, 0, 0);
    for (r, res) in results {
        match res {
            Ok(run::RunStatus::Skipped) => skipped += 1,
            Ok(run::RunStatus::Completed { .. }) => done += 1,
            Ok(run::RunStatus::Busy(holder)) => {
                busy += 1;
                eprintln!(
                    "run {} skipped: another process is writing it ({holder})",
                    plan.trace_name(&r)
                );
            }
            Err(e) => {
                failures += 1;
                eprintln!("run {} failed: {e:#}", plan.trace_name(&r));
            }
        }
    }
    let busy_note = if busy > 0 {
        format!(", {busy} skipped (another process is writing them)")
    } else {
        String::new()
    };
    eprintln!(
        "experiment '{}': {done} run(s) carried out, {skipped} already complete, {failures} \
         failed{busy_note}",
        plan.name
    );
    Ok(Tally { failures, busy })
}
