//! Pandora's experiment harness: the library behind `pandora experiment`, `pandora cvs` and
//! `pandora freeze-thaw-bench`, which the command-line tool and the Python package both call.
//!
//! An experiment is a grid of problems × policies × seeds. Each run is one BO loop on the
//! driver of [`pandora_core::run`], written as a JSON-lines trace that survives a kill and
//! resumes; the summaries put every policy's regret on a common grid of cumulative cost, with
//! standard errors, tables, markdown and figures. See docs/experiments.md (and docs/cvs.md,
//! docs/freeze-thaw.md for the other two grids).
//!
//! # Modules
//! Each imports only those listed before it (no circles):
//! - [`plot`]: figures as data, rendered to PNG and SVG with plotters;
//! - [`reporter`]: where the harness tells a person what it does (progress, notes);
//! - [`format`](mod@format): CSV cells and numbers as text;
//! - [`cpu_clock`]: the CPU time of a thread and of the process;
//! - [`lock`]: one writer per run's output;
//! - [`shard`]: cost-balanced shares of a grid, from `--shard` or a Slurm array;
//! - [`stopping::plan`] (the `[stopping]` table), [`policy`] (one `[[policy]]` table),
//!   [`legacy`] (policies as earlier releases wrote them), [`config`] (the TOML file and its
//!   resolution into runs);
//! - [`trace`]: the JSON-lines trace format; [`summary`]: statistics on a common cost grid;
//!   [`stopping`]: the stopping statistics recorded and the rules replayed offline;
//!   [`figures`]: the plots;
//! - [`run`]: one BO run; [`estimate`]: the work of a run and its calibration in seconds;
//!   [`report`]: every summary file of an experiment directory;
//! - [`cluster`]: plans (CPU-hours, the longest run) and Slurm array scripts, for any grid;
//! - [`execute`]: a whole experiment grid, in parallel, with its summary;
//! - [`cvs`]: the cost-varying variable subsets grid (BOCVS), with its planner;
//! - [`freeze_thaw_bench`]: the freeze-thaw benchmark (LCDB and synthetic learning curves).

pub mod cluster;
pub mod config;
pub mod cpu_clock;
pub mod cvs;
pub mod estimate;
pub mod execute;
pub mod figures;
pub mod format;
pub mod freeze_thaw_bench;
pub mod legacy;
pub mod lock;
pub mod plot;
pub mod policy;
pub mod report;
pub mod reporter;
pub mod run;
pub mod shard;
pub mod stopping;
pub mod summary;
pub mod trace;

pub use execute::{Options, Outcome, Tally};
pub use reporter::{Quiet, Reporter, Stderr};

/// A deserialization error (TOML, JSON) as an error whose message names types in user words:
/// "expected a whole number >= 0" instead of "expected usize" (see
/// [`pandora_study::error::plain_words`]).
pub(crate) fn plain(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::msg(pandora_study::error::plain_words(&e.to_string()))
}
