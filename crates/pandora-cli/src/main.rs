//! The `pandora` command-line tool.

mod bench;
mod boxes;
mod cvs_cmd;
mod eval;
mod experiment_cmd;
mod freeze_thaw;
mod ft_bench;
mod grid;
mod input;
mod progress;
mod serve_cmd;
mod study_cmd;
mod study_plot;
mod study_text;

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
        #[command(flatten)]
        target: study_cmd::Target,
        /// Worker threads evaluating trials in parallel (at least 1).
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// No progress output (no bar, no line per trial).
        #[arg(long)]
        quiet: bool,
        /// Mark running trials without a heartbeat for this many seconds abandoned when starting
        /// (trials of killed workers); at least 10 (every run heartbeats its trials each second).
        /// A late outcome of an abandoned trial is still recorded, its cost counted, with a
        /// warning.
        #[arg(long, value_name = "SECONDS", default_value_t = study_cmd::STALE_S)]
        abandon_after: f64,
        /// End with the summary as JSON (for scripts) instead of in words.
        #[arg(long)]
        json: bool,
        /// On SIGTERM/SIGINT, no new trial; the running evaluations get this many seconds to
        /// finish, then are stopped and their trials abandoned (at once on a second signal).
        /// The default fits Slurm's default KillWait of 30 s. See docs/studies.md.
        #[arg(long, value_name = "SECONDS", default_value_t = pandora_study::shutdown::DEFAULT_GRACE_S)]
        grace: f64,
    },
    /// Hand out the next trial of a study (for loops driven by another program).
    Ask {
        #[command(flatten)]
        target: study_cmd::Target,
        /// Worker name recorded with the trial.
        #[arg(long)]
        worker: Option<String>,
        /// Print JSON (for scripts) instead of words.
        #[arg(long)]
        json: bool,
    },
    /// Record the outcome of a trial: `tell CONFIG N ...` or `tell --storage URL --study NAME N ...`.
    Tell {
        /// CONFIG then trial NUMBER, or only the NUMBER with --storage/--study.
        #[arg(value_name = "CONFIG|NUMBER")]
        first: String,
        /// Trial number (from `pandora ask`) when CONFIG is given.
        #[arg(value_name = "NUMBER")]
        second: Option<String>,
        /// Storage URL of an existing study (with --study), instead of CONFIG; default: the
        /// PANDORA_STORAGE_URL environment variable.
        #[arg(long, value_name = "URL")]
        storage: Option<String>,
        /// Name of the study in --storage.
        #[arg(long, value_name = "NAME")]
        study: Option<String>,
        /// Objective value (negative values such as `-1.5` or `-inf` are values, not flags).
        #[arg(long, allow_hyphen_values = true)]
        objective: Option<f64>,
        /// Cost of the evaluation (required for reported or runtime costs).
        #[arg(long, allow_hyphen_values = true)]
        cost: Option<f64>,
        /// Mark the trial failed with this reason.
        #[arg(long)]
        failed: Option<String>,
        /// The realized value of a random parameter of a `[cvs]` study's trial, as NAME=VALUE;
        /// repeat for each random parameter the trial's control set leaves to chance.
        #[arg(long = "random", value_name = "NAME=VALUE")]
        random: Vec<String>,
        /// A `[fidelity]` study: the step (1-based) whose value --objective is. The trial pauses
        /// after the last step of its run and completes at max_steps.
        #[arg(long, value_name = "T")]
        step: Option<u32>,
        /// Print JSON (for scripts) instead of words.
        #[arg(long)]
        json: bool,
    },
    /// Summary of a study: trial counts, cost spent, best trial, current λ, and the stopping
    /// rule's statistic against its threshold (with the reason once it fired).
    Status {
        #[command(flatten)]
        target: study_cmd::Target,
        /// Print JSON (for scripts) instead of words.
        #[arg(long)]
        json: bool,
        /// The older form: `json` (the same as --json) or `text` (the default).
        #[arg(long, hide = true)]
        format: Option<String>,
    },
    /// The best complete trial of a study.
    Best {
        #[command(flatten)]
        target: study_cmd::Target,
        /// Print JSON (for scripts) instead of words.
        #[arg(long)]
        json: bool,
    },
    /// Every trial of a study, as CSV (parameters in `param.NAME` columns) or JSON.
    Export {
        #[command(flatten)]
        target: study_cmd::Target,
        /// `csv` or `json`.
        #[arg(long, default_value = "csv")]
        format: String,
    },
    /// Plot a study: best value so far against cumulative cost, and cost per trial.
    Plot {
        #[command(flatten)]
        target: study_cmd::Target,
        /// Output file, PNG or SVG by its extension (default: STUDY.png).
        #[arg(long, value_name = "FILE")]
        out: Option<String>,
        /// Print JSON (for scripts) instead of words.
        #[arg(long)]
        json: bool,
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
        /// Also compute the brute-force DP optimum (discrete rewards, at most 16 boxes).
        #[arg(long)]
        verify: bool,
    },
    /// Cost-aware freeze-thaw, discrete and exact: which training run to start, continue or
    /// keep, by Gittins indices.
    ///
    /// Reads the instance (runs as learning-curve Markov chains, an optional fallback) from FILE,
    /// or from stdin when FILE is `-` or absent; prints every run's index, the next action and
    /// the policy's exact expected utility. See docs/freeze-thaw.md for the format.
    FreezeThaw {
        /// Instance file (`-` or absent: stdin).
        file: Option<String>,
        /// Also compute the brute-force DP optimum over all policies (small instances).
        #[arg(long)]
        verify: bool,
    },
    /// Run the freeze-thaw benchmark (LCDB learning curves, a synthetic family; the Gittins
    /// policy against Hyperband, ASHA, the median rule, PBGI, LogEIPC and random search). See
    /// docs/freeze-thaw.md.
    FreezeThawBench(ft_bench::Args),
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
        /// `bo_step_scaling` (run only when `--filter` selects it): the dimensions, e.g. `16`
        /// (default 8,16).
        #[arg(long, value_delimiter = ',')]
        dims: Vec<usize>,
        /// `bo_step_scaling`: the numbers of observations, e.g. `300,600` (default
        /// 100,300,600,1000,2000).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        /// `bo_step_scaling`: also write each data set to DIR as JSON (`{"x": [[...]], "y": [...]}`,
        /// the input of `botorch_rs_scaling.py`).
        #[arg(long, value_name = "DIR")]
        write_data: Option<std::path::PathBuf>,
        /// `bo_step_scaling`: the hyperparameter fit's L-BFGS-B `factr` instead of the default
        /// 1e7 (to measure a looser fit; the study default is unchanged).
        #[arg(long)]
        fit_factr: Option<f64>,
    },
    /// Run a grid of problems × policies × seeds with resumable traces and regret summaries
    /// (`pandora experiment CONFIG.toml`, `pandora experiment summarize DIR`). See
    /// docs/experiments.md.
    Experiment(experiment_cmd::Args),
    /// Run a cost-varying-variable-subsets (BOCVS) experiment grid (`pandora cvs CONFIG.toml`,
    /// `pandora cvs summarize DIR`). See docs/cvs.md.
    Cvs(cvs_cmd::Args),
    /// Serve the studies of one storage as a JSON HTTP API (ask/tell from any language). See
    /// docs/serve.md.
    Serve(serve_cmd::Args),
}

/// Commands that only print (no objective processes, no pipes of their own): when their reader
/// goes away (`pandora export ... | head`), they end quietly on SIGPIPE, like other Unix tools,
/// instead of panicking on the write error.
fn default_sigpipe(command: &Command) {
    let printing = !matches!(
        command,
        Command::Run { .. }
            | Command::Experiment(_)
            | Command::Cvs(_)
            | Command::FreezeThawBench(_)
            | Command::Bench { .. }
            | Command::Serve(_)
    );
    // SAFETY: called before any other thread exists; restores the default disposition that the
    // Rust runtime changed to "ignore".
    #[cfg(unix)]
    if printing {
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    #[cfg(not(unix))]
    let _ = printing;
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A usage error may quote an argument, e.g. a misplaced storage URL.
        Err(e) if e.use_stderr() => {
            eprint!(
                "{}",
                pandora_study::redact::redact_text(&e.render().to_string())
            );
            std::process::exit(e.exit_code());
        }
        Err(e) => e.exit(),
    };
    default_sigpipe(&cli.command);
    let result = match cli.command {
        Command::Run {
            target,
            workers,
            quiet,
            abandon_after,
            json,
            grace,
        } => study_cmd::run(
            &target,
            &study_cmd::RunOptions {
                workers,
                quiet,
                abandon_after_s: abandon_after,
                json,
                grace_s: grace,
            },
        ),
        Command::Ask {
            target,
            worker,
            json,
        } => study_cmd::ask(&target, worker.as_deref(), json),
        Command::Tell {
            first,
            second,
            storage,
            study,
            objective,
            cost,
            failed,
            random,
            step,
            json,
        } => {
            let (config, number) = match second {
                Some(n) => (Some(first), n),
                None => (None, first),
            };
            let target = study_cmd::Target {
                config,
                storage,
                study,
            };
            match number.parse::<u64>() {
                Ok(n) => study_cmd::tell(
                    &target,
                    n,
                    study_cmd::TellArgs {
                        objective,
                        cost,
                        failed,
                        random,
                        step,
                        json,
                    },
                ),
                Err(_) => Err(anyhow::anyhow!(
                    "NUMBER: expected a trial number, got '{number}'"
                )),
            }
        }
        Command::Status {
            target,
            json,
            format,
        } => study_cmd::status(&target, format.as_deref(), json),
        Command::Best { target, json } => study_cmd::best(&target, json),
        Command::Export { target, format } => study_cmd::export(&target, &format),
        Command::Plot { target, out, json } => study_cmd::plot(&target, out.as_deref(), json),
        Command::Eval { file } => eval::main(file.as_deref()),
        Command::Boxes { file, verify } => boxes::main(file.as_deref(), verify),
        Command::FreezeThaw { file, verify } => freeze_thaw::main(file.as_deref(), verify),
        Command::Bench {
            filter,
            quick,
            reps,
            dims,
            sizes,
            write_data,
            fit_factr,
        } => bench::main(
            filter.as_deref(),
            quick,
            reps,
            &bench::ScalingArgs {
                dims,
                sizes,
                write_data,
                fit_factr,
            },
        ),
        Command::Experiment(args) => experiment_cmd::main(args),
        Command::Cvs(args) => cvs_cmd::main(args),
        Command::FreezeThawBench(args) => ft_bench::main(args),
        Command::Serve(args) => serve_cmd::main(args),
    };
    if let Err(e) = result {
        // A last line of defence: whatever a driver or parser echoed, no password is printed.
        eprintln!(
            "error: {}",
            pandora_study::redact::redact_text(&format!("{e:#}"))
        );
        std::process::exit(2);
    }
}
