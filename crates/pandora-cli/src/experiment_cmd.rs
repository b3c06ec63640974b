//! `pandora experiment`: the command line of the experiment harness (`pandora_experiment`):
//! a grid of problems × policies × seeds run in parallel, one trace per run, resumable, with
//! summaries of regret against cumulative cost. See docs/experiments.md.

use crate::grid::{self, GridArgs, GridProgress};
use anyhow::{Result, bail};
use clap::Subcommand;
use pandora_experiment::{cluster, report};
use std::path::PathBuf;

/// Arguments of `pandora experiment`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<ExperimentCommand>,
    /// Experiment configuration (TOML).
    config: Option<String>,
    #[command(flatten)]
    grid: GridArgs,
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
    let outcome = pandora_experiment::execute::run_config(
        config,
        &args.grid.options()?,
        &GridProgress::new(),
    )?;
    grid::finish(&outcome, &args.grid)
}
