//! `pandora cvs`: the command line of the cost-varying variable subsets grid
//! ([`pandora_experiment::cvs`]). See docs/cvs.md.

use crate::grid_progress::GridProgress;
use anyhow::{Result, bail};
use pandora_experiment::shard::Shard;
use pandora_experiment::{Options, cvs};
use std::path::PathBuf;

/// Arguments of `pandora cvs`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<CvsCommand>,
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
    /// Run only shard K of N (0-based); without it, taken from a Slurm array task's
    /// SLURM_ARRAY_TASK_ID / _COUNT / _MIN when set (`--shard 0/1` runs everything).
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum CvsCommand {
    /// Write the summary and figures of an output directory and print its table (refused, naming
    /// them, while some runs of the grid are missing, unless --partial).
    Summarize {
        /// The output directory.
        dir: PathBuf,
        /// Summarize the runs there even when others of the grid are missing.
        #[arg(long)]
        partial: bool,
    },
    /// Estimate the runs, CPU-hours and longest run of a configuration, and write an sbatch
    /// script for a Slurm array (as `pandora experiment plan`).
    Plan(pandora_experiment::cluster::PlanArgs),
}

/// Entry point of `pandora cvs`.
pub fn main(args: Args) -> Result<()> {
    let reporter = GridProgress::new();
    match &args.command {
        Some(CvsCommand::Summarize { dir, partial }) => {
            print!("{}", cvs::summarize_checked(dir, *partial, &reporter)?);
            return Ok(());
        }
        Some(CvsCommand::Plan(p)) => {
            print!("{}", cvs::plan::plan(p, &reporter)?);
            return Ok(());
        }
        None => {}
    }
    let Some(config) = &args.config else {
        bail!(
            "give a configuration file: pandora cvs CONFIG.toml (or `summarize DIR`, `plan \
             CONFIG`)"
        );
    };
    let options = Options {
        out: args.out.clone(),
        jobs: args.jobs,
        smoke: args.smoke,
        shard: Shard::resolve(args.shard.as_deref())?,
    };
    let outcome = cvs::run_config(config, &options, &reporter)?;
    if let Some(table) = &outcome.table
        && !args.quiet
    {
        print!("{table}");
    }
    outcome.check()
}
