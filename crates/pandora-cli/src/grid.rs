//! What the grid commands (`pandora experiment`, `pandora cvs`, `pandora freeze-thaw-bench`)
//! share: the options of a grid run ([`GridArgs`]), how its outcome is shown ([`finish`]), and
//! the command line's [`pandora_experiment::Reporter`] ([`GridProgress`]).
//!
//! On a terminal, an `indicatif` bar counts the runs done and the lines are printed above it; on
//! anything else (CI logs, files) the lines go to stderr and there is no bar, so logs never
//! contain control sequences.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pandora_experiment::shard::Shard;
use pandora_experiment::{Options, Outcome};
use std::io::IsTerminal;
use std::path::PathBuf;

/// The options of `pandora experiment CONFIG` and `pandora cvs CONFIG`.
#[derive(Debug, clap::Args)]
pub struct GridArgs {
    /// Output directory (default `results/NAME`, `results/NAME-smoke` with --smoke).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runs in parallel (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Use the sizes of the configuration's `[smoke]` section.
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

impl GridArgs {
    /// The library's options (the shard resolved from `--shard` or a Slurm array task).
    pub fn options(&self) -> Result<Options> {
        Ok(Options {
            out: self.out.clone(),
            jobs: self.jobs,
            smoke: self.smoke,
            shard: Shard::resolve(self.shard.as_deref())?,
        })
    }
}

/// Prints the outcome's summary table (unless `--quiet`), then fails if runs failed or were
/// busy ([`Outcome::check`]).
pub fn finish(outcome: &Outcome, args: &GridArgs) -> Result<()> {
    if let Some(table) = &outcome.table
        && !args.quiet
    {
        print!("{table}");
    }
    outcome.check()
}

/// The command line's reporter: a bar on a terminal while runs run, lines on stderr.
pub struct GridProgress {
    bar: ProgressBar,
    terminal: bool,
}

impl GridProgress {
    /// A reporter whose bar is drawn only when stderr is a terminal, and only between
    /// [`Reporter::start`](pandora_experiment::Reporter::start) and `finish` (a plan's
    /// calibration lines and the closing lines print without one).
    pub fn new() -> Self {
        let bar = ProgressBar::hidden();
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta} {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        GridProgress {
            bar,
            terminal: std::io::stderr().is_terminal(),
        }
    }
}

impl pandora_experiment::Reporter for GridProgress {
    fn note(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    fn start(&self, runs: usize) {
        self.bar.set_length(runs as u64);
        self.bar.set_position(0);
        if self.terminal {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn status(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    fn run_done(&self) {
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
    }
}
