//! `pandora freeze-thaw-bench`: the command line of the freeze-thaw benchmark
//! ([`pandora_experiment::freeze_thaw_bench`]). See docs/freeze-thaw.md.

use crate::grid::GridProgress;
use anyhow::Result;
use std::path::PathBuf;

/// Arguments of `pandora freeze-thaw-bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Benchmark configuration (TOML).
    config: String,
    /// Output directory (default: the configuration's `out`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Use the sizes of the configuration's `[smoke]` section.
    #[arg(long)]
    smoke: bool,
}

/// Runs the benchmark of `args` and prints its table of final regrets.
pub fn main(args: Args) -> Result<()> {
    let finals = pandora_experiment::freeze_thaw_bench::run_config(
        &args.config,
        args.out.as_deref(),
        args.smoke,
        &GridProgress::new(),
    )?;
    print!("{finals}");
    Ok(())
}
