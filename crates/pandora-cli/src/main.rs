//! The `pandora` command-line tool.

mod bench;
mod boxes;
mod eval;

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
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval { file } => eval::main(file.as_deref()),
        Command::Boxes { file, verify } => boxes::main(file.as_deref(), verify),
        Command::Bench {
            filter,
            quick,
            reps,
        } => bench::main(filter.as_deref(), quick, reps),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
