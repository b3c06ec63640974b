//! `pandora cvs`: the command line of the cost-varying variable subsets grid
//! ([`pandora_experiment::cvs`]). See docs/cvs.md.

use crate::grid::{self, GridArgs, GridProgress};
use anyhow::{Result, bail};
use pandora_experiment::cvs;
use std::path::PathBuf;

/// Arguments of `pandora cvs`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<CvsCommand>,
    /// Experiment configuration (TOML).
    config: Option<String>,
    #[command(flatten)]
    grid: GridArgs,
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
    let outcome = cvs::run_config(config, &args.grid.options()?, &reporter)?;
    grid::finish(&outcome, &args.grid)
}
