//! A whole experiment grid: its runs in parallel, then its summary.
//!
//! [`run_config`] is `pandora experiment CONFIG` without the command line: it loads and
//! resolves the configuration, writes `OUT/experiment.json`, runs the runs still to do (of one
//! shard, when given) on a rayon pool of `jobs` threads ([`execute`]), and, without a shard,
//! writes every summary file ([`crate::report::write_summary`]). It returns an [`Outcome`]
//! rather than failing when runs fail, so that the caller can show the summary of the runs that
//! did complete first; [`Outcome::check`] then turns failed or busy runs into the error the
//! command exits with.
//!
//! Runs that fail, and runs another process holds the lock of, are each named in one line to
//! the [`Reporter`], as is the closing count.

use crate::config::{Plan, RunSpec};
use crate::reporter::Reporter;
use crate::shard::Shard;
use crate::{config, estimate, report, run};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// How to run a grid (the options of `pandora experiment` and `pandora cvs`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Output directory (default `results/NAME`, `results/NAME-smoke` with `smoke`).
    pub out: Option<PathBuf>,
    /// Runs in parallel (default: the number of CPUs).
    pub jobs: Option<usize>,
    /// Use the sizes of the configuration's `[smoke]` section.
    pub smoke: bool,
    /// Run only this share of the grid (every run without one).
    pub shard: Option<Shard>,
}

impl Options {
    /// The number of threads: `jobs`, or the number of CPUs; refused when 0.
    pub fn threads(&self) -> Result<usize> {
        let jobs = self.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        if jobs == 0 {
            bail!("--jobs must be at least 1");
        }
        Ok(jobs)
    }
}

/// What running a grid did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The grid's output directory.
    pub out: PathBuf,
    /// The share that was run, if any (then no summary is written).
    pub shard: Option<Shard>,
    /// Runs that failed, and runs another process is writing.
    pub tally: Tally,
    /// The printed summary table (`None` with a shard, or when busy runs kept it from being
    /// written).
    pub table: Option<String>,
}

impl Outcome {
    /// `Ok` when every run of the share completed; otherwise the error naming what is left to
    /// do (the runs themselves were named to the reporter).
    pub fn check(&self) -> Result<()> {
        let Tally { failures, busy } = self.tally;
        if busy > 0 {
            bail!(
                "{busy} run(s) skipped because another process is writing them (see the \
                 messages above); {failures} failed. Once that process has ended, rerun to \
                 finish them{}",
                if self.shard.is_some() {
                    ""
                } else {
                    " and write the summary"
                }
            );
        }
        if failures > 0 {
            bail!("{failures} run(s) failed (see the messages above); rerun to retry them");
        }
        Ok(())
    }
}

/// Runs the experiment configured in the TOML file `config` with `options`; see the module
/// documentation.
pub fn run_config(config: &str, options: &Options, reporter: &dyn Reporter) -> Result<Outcome> {
    let file = config::load(config)?;
    let plan = file
        .resolve(options.smoke)
        .with_context(|| format!("in {config}"))?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| crate::cluster::default_out(&plan.name, plan.smoke));
    let jobs = options.threads()?;
    let tally = execute(&plan, &out, jobs, options.shard, reporter)?;
    let mut outcome = Outcome {
        out,
        shard: options.shard,
        tally,
        table: None,
    };
    if tally.busy > 0 {
        return Ok(outcome);
    }
    let out = &outcome.out;
    if let Some(s) = options.shard {
        // Shards share the directory: the summary is written once, by `summarize`.
        reporter.note(&format!(
            "shard {s}: traces in {:?}; once every shard is done: pandora experiment summarize \
             {out:?}",
            out.join("traces")
        ));
        return Ok(outcome);
    }
    outcome.table = Some(report::write_summary(out)?);
    reporter.note(&format!(
        "traces in {:?}, summaries in {:?}",
        out.join("traces"),
        out.join("summary")
    ));
    Ok(outcome)
}

/// The runs of `plan` in `shard` (every run without one), in [`Plan::runs`] order.
pub fn shard_runs(plan: &Plan, shard: Option<Shard>) -> Result<Vec<RunSpec>> {
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
/// runs that failed and those another process is writing (each named to `reporter`).
pub fn execute(
    plan: &Plan,
    out: &Path,
    jobs: usize,
    shard: Option<Shard>,
    reporter: &dyn Reporter,
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
        reporter.note(&format!(
            "experiment '{}', shard {s}: {} of {} run(s)",
            plan.name,
            runs.len(),
            plan.runs().len()
        ));
    }
    reporter.start(runs.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("building the thread pool")?;
    let results: Vec<(RunSpec, Result<run::RunStatus>)> = pool.install(|| {
        // Build the instances of the runs still to do first (one per problem and seed, shared by
        // the policies), then run.
        let todo: Vec<RunSpec> = runs
            .par_iter()
            .filter(|r| !run::is_complete(plan, r, &traces))
            .copied()
            .collect();
        reporter.status("(building problem instances)");
        let instances = run::Instances::build(plan, &todo);
        reporter.status("");
        runs.par_iter()
            .map(|r| {
                let res = run::run_one(plan, r, &traces, &instances);
                reporter.run_done();
                (*r, res)
            })
            .collect()
    });
    reporter.finish();
    Ok(tally(plan, results, reporter))
}

/// Counts the outcomes of a grid's runs, naming each failed or busy run to `reporter`, and
/// reports the closing count.
fn tally(
    plan: &Plan,
    results: Vec<(RunSpec, Result<run::RunStatus>)>,
    reporter: &dyn Reporter,
) -> Tally {
    let mut failures = 0;
    let (mut skipped, mut done, mut busy) = (0, 0, 0);
    for (r, res) in results {
        match res {
            Ok(run::RunStatus::Skipped) => skipped += 1,
            Ok(run::RunStatus::Completed { .. }) => done += 1,
            Ok(run::RunStatus::Busy(holder)) => {
                busy += 1;
                reporter.note(&format!(
                    "run {} skipped: another process is writing it ({holder})",
                    plan.trace_name(&r)
                ));
            }
            Err(e) => {
                failures += 1;
                reporter.note(&format!("run {} failed: {e:#}", plan.trace_name(&r)));
            }
        }
    }
    let busy_note = if busy > 0 {
        format!(", {busy} skipped (another process is writing them)")
    } else {
        String::new()
    };
    reporter.note(&format!(
        "experiment '{}': {done} run(s) carried out, {skipped} already complete, {failures} \
         failed{busy_note}",
        plan.name
    ));
    Tally { failures, busy }
}
