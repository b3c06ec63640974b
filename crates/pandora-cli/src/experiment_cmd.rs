//! `pandora experiment`: the command line of the experiment harness (`pandora_experiment`):
//! a grid of problems × policies × seeds run in parallel, one trace per run, resumable, with
//! summaries of regret against cumulative cost. See docs/experiments.md.

use crate::grid_progress::GridProgress;
use anyhow::{Result, bail};
use clap::Subcommand;
use pandora_experiment::shard::Shard;
use pandora_experiment::{Options, cluster, report};
use std::path::PathBuf;

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
        Some(ExperimentCommand::Plan(plan)) => {
            print!("{}", cluster::plan_experiment(plan, &GridProgress::new())?);
            return Ok(());
        }
        None => {}
    }
    let Some(config) = &args.config else {
        bail!(
            "give a configuration file: pandora experiment CONFIG.toml (or `summarize DIR`, \
             `plan CONFIG`)"
        );
    };
    let options = Options {
        out: args.out.clone(),
        jobs: args.jobs,
        smoke: args.smoke,
        shard: Shard::resolve(args.shard.as_deref())?,
    };
    let outcome = pandora_experiment::execute::run_config(config, &options, &GridProgress::new())?;
    if let Some(table) = &outcome.table
        && !args.quiet
    {
        print!("{table}");
    }
    outcome.check()
}
