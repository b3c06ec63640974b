//! The `pandora` command-line tool.

mod bench;
mod boxes;
mod eval;
mod experiment;
mod input;
mod study_cmd;

use clap::{Parser, Subcommand};

/// Pandora: cost-aware Bayesian optimization.
#[derive(Debug, Parser)]
#[command(name = "pandora", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a study: propose, evaluate and record trials until the budget or trial limit is
    /// reached. Running it again resumes the study. See docs/studies.md.
    Run {
        /// Study configuration (TOML).
        config: String,
        /// Worker threads evaluating trials in parallel.
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Do not print a line per trial.
        #[arg(long)]
        quiet: bool,
    },
    /// Hand out the next trial of a study (for loops driven by another program).
    Ask {
        /// Study configuration (TOML).
        config: String,
        /// Worker name recorded with the trial.
        #[arg(long)]
        worker: Option<String>,
    },
    /// Record the outcome of a trial.
    Tell {
        /// Study configuration (TOML).
        config: String,
        /// Trial number (from `pandora ask`).
        number: u64,
        /// Objective value.
        #[arg(long, allow_negative_numbers = true)]
        objective: Option<f64>,
        /// Cost of the evaluation (required for reported or runtime costs).
        #[arg(long)]
        cost: Option<f64>,
        /// Mark the trial failed with this reason.
        #[arg(long)]
        failed: Option<String>,
    },
    /// Summary of a study: trial counts, cost spent, best trial, current λ.
    Status {
        /// Study configuration (TOML).
        config: String,
    },
    /// The best complete trial of a study.
    Best {
        /// Study configuration (TOML).
        config: String,
    },
    /// Every trial of a study, as CSV (parameters in `param.NAME` columns) or JSON.
    Export {
        /// Study configuration (TOML).
        config: String,
        /// `csv` or `json`.
        #[arg(long, default_value = "csv")]
        format: String,
    },
    /// Evaluate a GP posterior and acquisition functions at given points (JSON in, JSON out).
    ///
    /// Reads the request from FILE, or from stdin when FILE is `-` or absent. See
    /// docs/eval.md for the format.
    Eval {
        /// Request file (`-` or absent: stdin).
        file: Option<String>,
    },
    /// Solve a Pandora's Box instance exactly: indices, Weitzman's order, expected utility.
    ///
    /// Reads the instance from FILE, or from stdin when FILE is `-` or absent. See
    /// docs/boxes.md for the format.
    Boxes {
        /// Instance file (`-` or absent: stdin).
        file: Option<String>,
        /// Also compute the brute-force DP optimum (discrete rewards, at most 12 boxes).
        #[arg(long)]
        verify: bool,
    },
    /// Time the numerical core on fixed workloads and print one JSON line per measurement.
    Bench {
        /// Run only the workloads whose name contains this string.
        #[arg(long)]
        filter: Option<String>,
        /// Fewer repetitions and sizes (for smoke tests).
        #[arg(long)]
        quick: bool,
        /// Minimum number of timed repetitions per workload.
        #[arg(long, default_value_t = 7)]
        reps: usize,
    },
    /// Run a grid of problems × policies × seeds with resumable traces and regret summaries
    /// (`pandora experiment CONFIG.toml`, `pandora experiment summarize DIR`). See
    /// docs/experiments.md.
    Experiment(experiment::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            config,
            workers,
            quiet,
        } => study_cmd::run(&config, workers, quiet),
        Command::Ask { config, worker } => study_cmd::ask(&config, worker.as_deref()),
        Command::Tell {
            config,
            number,
            objective,
            cost,
            failed,
        } => study_cmd::tell(&config, number, objective, cost, failed),
        Command::Status { config } => study_cmd::status(&config),
        Command::Best { config } => study_cmd::best(&config),
        Command::Export { config, format } => study_cmd::export(&config, &format),
        Command::Eval { file } => eval::main(file.as_deref()),
        Command::Boxes { file, verify } => boxes::main(file.as_deref(), verify),
        Command::Bench {
            filter,
            quick,
            reps,
        } => bench::main(filter.as_deref(), quick, reps),
        Command::Experiment(args) => experiment::main(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
