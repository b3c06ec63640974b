//! `pandora experiment plan` and `pandora cvs plan`: what a grid will cost before it is run, and
//! the Slurm array that runs it.
//!
//! **One planner, two grids.** Everything below works on a [`Grid`]: runs with a shard weight
//! (the one the tasks balance on, so that the plan's shards are the tasks' shards), an amount of
//! work in units, a number of evaluations, a calibration group and, optionally, a set-up they
//! share (work done once per shard that has a run needing it). `pandora experiment` adapts to it
//! below ([`ExperimentGrid`]: groups are (problem, policy) pairs, work from [`super::estimate`]),
//! `pandora cvs` in `crate::cvs::plan` (groups are (setting, policy) pairs; the shared set-up is the
//! reference optimum of an (objective, variance, seed)).
//!
//! **Estimate.** A run's seconds are `a · units + b · evaluations`, with the rates `a` (seconds per
//! unit of work) and `b` (seconds per evaluation) measured per group: from the outputs already in
//! the output directory when it has some for that group (complete or not, for experiments;
//! complete run records, for CVS grids), otherwise by a calibration: the group's first seed run
//! for a few steps (`--calibration-steps`, default 4) in a temporary directory, on one thread, one
//! group at a time. The report says which source each group used. CPU-hours are the sum of the
//! runs' estimated seconds (one core per run) plus the set-ups every shard pays; the longest run
//! is the largest single estimate.
//!
//! **Array.** `N` shards (`--shards`, default `⌈runs / cpus-per-task⌉`, at most 1000) balanced by
//! [`super::shard`] on the grid's weights; a shard's wall time is estimated as its set-ups' time
//! (the larger of the longest and their total over `cpus-per-task`) plus its runs' (likewise).
//! The sbatch time limit is the largest shard's estimate × `--time-margin` (default 1.5) plus 10
//! minutes (problem instances, start-up), rounded up to a minute; a task that still hits it is
//! resubmitted and resumes (complete runs are skipped, unfinished experiment runs continued). The
//! script runs `pandora COMMAND CONFIG --out DIR --shard $SLURM_ARRAY_TASK_ID/N --jobs
//! $SLURM_CPUS_PER_TASK` with `--array=0-(N−1)%M` (`M = --max-parallel`, default N). `N` is
//! written into the script rather than read from `SLURM_ARRAY_TASK_COUNT`, so that resubmitting
//! some tasks only (`sbatch --array=3,7 FILE`, an array of 2) still runs shards 3 and 7 of `N`.
//!
//! **Degenerate cases.** A configuration whose every run is already complete reports 0 CPU-hours
//! to go (the total is also given). A group whose calibration fails is reported with its error and
//! left out of the totals, which say so.
//!
//! References: Slurm's `sbatch` manual (`--array` with the `%` throttle, `--time` as
//! `days-hours:minutes:seconds`, the `%A`/`%a` output patterns).

use super::config::{Plan, RunSpec};
use super::estimate::{Clock, Rate, Rates, mean_costs, run_work, run_work_at};
use super::report::completeness;
use super::run::{Instances, run_one};
use super::shard::assign;
use super::summary::read_traces;
use super::trace;
use crate::reporter::Reporter;
use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `pandora experiment plan` and `pandora cvs plan`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PlanArgs {
    /// Configuration (TOML).
    pub config: String,
    /// Use the sizes of the configuration's `[smoke]` section.
    #[cfg_attr(feature = "clap", arg(long))]
    pub smoke: bool,
    /// Output directory of the grid (default as when running it): its outputs calibrate the
    /// estimate, and the sbatch script writes there.
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: Option<PathBuf>,
    /// Steps (BO steps; decisions of a CVS run) of a calibration run, for groups without outputs.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4))]
    pub calibration_steps: usize,
    /// Write an sbatch script for a Slurm array to this file.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub slurm: Option<PathBuf>,
    /// Array tasks (shards); default ⌈runs / cpus-per-task⌉, at most 1000.
    #[cfg_attr(feature = "clap", arg(long))]
    pub shards: Option<usize>,
    /// CPUs per array task (runs in parallel within a task).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub cpus_per_task: usize,
    /// Memory per task, as sbatch takes it (`4G`, `1500M`).
    #[cfg_attr(feature = "clap", arg(long, default_value = "4G"))]
    pub mem: String,
    /// Array tasks running at once (`%M`); default all.
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_parallel: Option<usize>,
    /// Factor applied to the largest shard's estimated time for the time limit.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.5))]
    pub time_margin: f64,
    /// Slurm partition (`#SBATCH --partition`), if any.
    #[cfg_attr(feature = "clap", arg(long))]
    pub partition: Option<String>,
    /// The pandora executable the script calls (default: this one).
    #[cfg_attr(feature = "clap", arg(long))]
    pub bin: Option<PathBuf>,
}

impl PlanArgs {
    /// The plan of the grid configured in `config`, with the command line's defaults (4
    /// calibration steps, 1 CPU and 4G per task, a time margin of 1.5, no script).
    pub fn new(config: impl Into<String>) -> Self {
        PlanArgs {
            config: config.into(),
            smoke: false,
            out: None,
            calibration_steps: 4,
            slurm: None,
            shards: None,
            cpus_per_task: 1,
            mem: "4G".into(),
            max_parallel: None,
            time_margin: 1.5,
            partition: None,
            bin: None,
        }
    }
}

/// Where the seconds of a group come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Outputs in the output directory, read on this clock.
    Outputs(Clock),
    /// A calibration run of this many steps.
    Calibration(usize),
    /// The calibration of another group with the same [`Grid::calibration_key`] (that group).
    Shared(Group),
    /// The calibration failed.
    Failed(String),
}

/// A calibration group: a (problem or setting, policy) index pair.
pub type Group = (usize, usize);

/// One run as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    /// The run's output file name (for the report).
    pub name: String,
    /// Its calibration group.
    pub group: Group,
    /// Its shard weight, as the array tasks compute it.
    pub weight: f64,
    /// Its work in the units the group's rate is measured in.
    pub units: f64,
    /// Its evaluations (initial design included).
    pub evaluations: usize,
    /// Whether its output is complete already.
    pub done: bool,
    /// The index of the set-up it needs (see [`Grid::setups`]), if any.
    pub setup: Option<usize>,
}

/// A grid that `plan` can estimate and launch: the adapter of one kind of experiment.
pub trait Grid: Sync {
    /// The pandora subcommand that runs the grid (`experiment`, `cvs`).
    fn command(&self) -> &'static str;
    /// What its outputs are called in the report (`traces`, `run records`).
    fn outputs(&self) -> &'static str;
    /// The grid's name (the job name).
    fn name(&self) -> String;
    /// The first line of the report.
    fn headline(&self, runs: usize, done: usize) -> String;
    /// The two columns naming a group in the report.
    fn group_label(&self, group: Group) -> (String, String);
    /// Every run, `out` being the output directory (whose complete outputs are done).
    fn runs(&self, out: &Path) -> Result<Vec<PlannedRun>>;
    /// Rates measured on the outputs already in `out`.
    fn measured(&self, out: &Path) -> Result<Rates>;
    /// The rate of `group` from a calibration run of `steps` steps, timed on the calling
    /// thread's CPU clock ([`crate::cpu_clock`]; the planner calls it on a rayon pool of one
    /// thread).
    fn calibrate(&self, group: Group, steps: usize) -> Result<Rate>;
    /// Groups with the same key share one calibration: the key of `group`, by default the group
    /// itself.
    fn calibration_key(&self, group: Group) -> Group {
        group
    }
    /// `run`'s work and evaluations as its group's measured `rate` says (its weight unchanged:
    /// the shards must follow from the configuration); by default as they are.
    fn at_rate(&self, run: PlannedRun, _rate: &Rate) -> PlannedRun {
        run
    }
    /// Among the groups of a key, the one calibrated is the one of lowest rank (the first of
    /// them on ties); by default all rank 0.
    fn calibration_rank(&self, _group: Group) -> f64 {
        0.0
    }
    /// Estimated seconds of every shared set-up needed by a run of `runs` still to do (indexed
    /// as [`PlannedRun::setup`]), and a line for the report; none by default. Timing a set-up
    /// is told to `reporter`.
    fn setups(
        &self,
        _runs: &[PlannedRun],
        _reporter: &dyn Reporter,
    ) -> Result<(Vec<f64>, Option<String>)> {
        Ok((Vec::new(), None))
    }
}

/// The estimate of one run.
#[derive(Debug, Clone)]
pub struct RunEstimate {
    /// The run.
    pub run: PlannedRun,
    /// Estimated seconds (None: not calibrated).
    pub seconds: Option<f64>,
}

/// The rates of every group of `runs`: measured on the outputs in `out`, else calibrated, once
/// per [`Grid::calibration_key`]. Calibrations run one at a time on a rayon pool of one thread
/// (so that the thread's CPU clock sees all of their work), with a line to `reporter` each.
fn rates(
    grid: &impl Grid,
    runs: &[PlannedRun],
    out: &Path,
    steps: usize,
    reporter: &dyn Reporter,
) -> Result<(Rates, BTreeMap<Group, Source>)> {
    let mut rates = grid.measured(out)?;
    let mut sources: BTreeMap<Group, Source> = rates
        .by_pair
        .iter()
        .map(|(k, r)| (*k, Source::Outputs(r.clock())))
        .collect();
    let groups: BTreeSet<Group> = runs.iter().map(|r| r.group).collect();
    let todo: Vec<Group> = groups
        .into_iter()
        .filter(|g| !sources.contains_key(g))
        .collect();
    // The lowest-ranked (then first) group of each key is calibrated; the others share its
    // result.
    let mut first: BTreeMap<Group, Group> = BTreeMap::new();
    for &g in &todo {
        let f = first.entry(grid.calibration_key(g)).or_insert(g);
        if grid.calibration_rank(g) < grid.calibration_rank(*f) {
            *f = g;
        }
    }
    for &group in &todo {
        let calibrated = first[&grid.calibration_key(group)];
        if calibrated != group {
            continue;
        }
        let (a, b) = grid.group_label(group);
        let sharing = todo
            .iter()
            .filter(|&&g| grid.calibration_key(g) == grid.calibration_key(group))
            .count();
        let shared = if sharing > 1 {
            format!(", for {sharing} groups")
        } else {
            String::new()
        };
        reporter.note(&format!("calibrating {a} × {b} ({steps} steps{shared})"));
        match crate::cpu_clock::on_one_thread(|| grid.calibrate(group, steps)).and_then(|r| r) {
            Ok(rate) => {
                rates.by_pair.insert(group, rate);
                sources.insert(group, Source::Calibration(steps));
            }
            Err(e) => {
                sources.insert(group, Source::Failed(format!("{e:#}")));
            }
        }
    }
    for &group in &todo {
        let calibrated = first[&grid.calibration_key(group)];
        if calibrated == group {
            continue;
        }
        match (
            rates.by_pair.get(&calibrated).copied(),
            &sources[&calibrated],
        ) {
            (Some(rate), _) => {
                rates.by_pair.insert(group, rate);
                sources.insert(group, Source::Shared(calibrated));
            }
            (None, failed) => {
                let failed = failed.clone();
                sources.insert(group, failed);
            }
        }
    }
    Ok((rates, sources))
}

/// The estimate of every run of `runs` with `rates`.
pub fn estimate_runs(grid: &impl Grid, runs: Vec<PlannedRun>, rates: &Rates) -> Vec<RunEstimate> {
    runs.into_iter()
        .map(|run| match rates.by_pair.get(&run.group) {
            Some(rate) => {
                let run = grid.at_rate(run, rate);
                RunEstimate {
                    seconds: Some(rate.seconds(run.units, run.evaluations)),
                    run,
                }
            }
            None => RunEstimate { seconds: None, run },
        })
        .collect()
}

/// A duration in Slurm's `D-HH:MM:SS` form, rounded up to a whole minute.
pub fn slurm_time(seconds: f64) -> String {
    let minutes = (seconds.max(60.0) / 60.0).ceil() as u64;
    let (d, h, m) = (minutes / 1440, (minutes / 60) % 24, minutes % 60);
    format!("{d}-{h:02}:{m:02}:00")
}

/// A duration for people: seconds, minutes or hours.
fn human(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{seconds:.3} s")
    } else if seconds < 120.0 {
        format!("{seconds:.1} s")
    } else if seconds < 7200.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{:.2} h", seconds / 3600.0)
    }
}

/// The array's shape: tasks, and the estimated seconds of its shards.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrayShape {
    /// Array tasks `N`.
    pub shards: usize,
    /// The largest shard's estimated wall seconds with `cpus` parallel runs.
    pub wall_seconds: f64,
    /// The CPU seconds of the set-ups, summed over the shards that pay them.
    pub setup_seconds: f64,
}

/// The wall seconds of jobs of `total` seconds, the longest `longest`, on `cpus` CPUs.
fn wall(total: f64, longest: f64, cpus: usize) -> f64 {
    (total / cpus.max(1) as f64).max(longest)
}

/// The array for `estimates` in `shards` shards (balanced on the runs' weights, as the tasks will
/// do) with `cpus` runs in parallel per task; `setups` are the seconds of the shared set-ups
/// ([`Grid::setups`]), paid once by each shard with a run to do that needs one.
pub fn array_shape(
    estimates: &[RunEstimate],
    setups: &[f64],
    shards: usize,
    cpus: usize,
) -> ArrayShape {
    let weights: Vec<f64> = estimates.iter().map(|e| e.run.weight).collect();
    let owner = assign(&weights, shards);
    let mut runs = vec![(0.0f64, 0.0f64); shards];
    let mut needed: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); shards];
    for (e, s) in estimates.iter().zip(owner) {
        if e.run.done {
            continue;
        }
        let secs = e.seconds.unwrap_or(0.0);
        runs[s].0 += secs;
        runs[s].1 = runs[s].1.max(secs);
        needed[s].extend(e.run.setup);
    }
    let mut setup_seconds = 0.0;
    let mut wall_seconds = 0.0f64;
    for (s, (total, longest)) in runs.into_iter().enumerate() {
        let secs: Vec<f64> = needed[s]
            .iter()
            .map(|&k| setups.get(k).copied().unwrap_or(0.0))
            .collect();
        let setup_total: f64 = secs.iter().sum();
        setup_seconds += setup_total;
        let setup_wall = wall(setup_total, secs.iter().copied().fold(0.0, f64::max), cpus);
        wall_seconds = wall_seconds.max(setup_wall + wall(total, longest, cpus));
    }
    ArrayShape {
        shards,
        wall_seconds,
        setup_seconds,
    }
}

/// What the sbatch script needs.
#[derive(Debug, Clone)]
pub struct ScriptSpec {
    /// The pandora subcommand running the grid (`experiment`, `cvs`).
    pub command: &'static str,
    /// Job name.
    pub name: String,
    /// Array tasks `N`.
    pub shards: usize,
    /// `%M`.
    pub max_parallel: usize,
    /// CPUs per task.
    pub cpus_per_task: usize,
    /// Memory per task.
    pub mem: String,
    /// Time limit in seconds (before rounding up to a minute).
    pub time_seconds: f64,
    /// Partition.
    pub partition: Option<String>,
    /// The pandora executable.
    pub bin: PathBuf,
    /// The configuration file.
    pub config: PathBuf,
    /// Whether `--smoke` is passed.
    pub smoke: bool,
    /// The output directory.
    pub out: PathBuf,
    /// A comment line on the estimate.
    pub comment: String,
}

/// Quotes a value for a POSIX shell (single quotes).
fn sh(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The sbatch script of `spec`.
pub fn sbatch_script(spec: &ScriptSpec) -> String {
    let out = spec.out.to_string_lossy();
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name={}", sh(&spec.name));
    let _ = writeln!(
        s,
        "#SBATCH --array=0-{}%{}",
        spec.shards - 1,
        spec.max_parallel
    );
    let _ = writeln!(s, "#SBATCH --cpus-per-task={}", spec.cpus_per_task);
    let _ = writeln!(s, "#SBATCH --mem={}", spec.mem);
    let _ = writeln!(s, "#SBATCH --time={}", slurm_time(spec.time_seconds));
    if let Some(p) = &spec.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    let _ = writeln!(
        s,
        "#SBATCH --output={}",
        sh(&format!("{out}/slurm/%A_%a.out"))
    );
    let _ = writeln!(s, "#\n# {}", spec.comment);
    let _ = writeln!(
        s,
        "# Task K runs shard K/{n}. Resubmitting resumes (complete runs are skipped, unfinished\n\
         # ones continued), also for some tasks only: sbatch --array=K,... FILE.\n\
         # When every task is done: pandora {command} summarize {out}",
        n = spec.shards,
        command = spec.command,
        out = sh(&out)
    );
    s += "set -euo pipefail\n";
    let smoke = if spec.smoke { " --smoke" } else { "" };
    let _ = writeln!(
        s,
        "{} {} {}{smoke} --quiet --out {} --shard \"${{SLURM_ARRAY_TASK_ID:?submit with \
         sbatch}}/{}\" --jobs \"${{SLURM_CPUS_PER_TASK:-1}}\"",
        sh(&spec.bin.to_string_lossy()),
        spec.command,
        sh(&spec.config.to_string_lossy()),
        sh(&out),
        spec.shards
    );
    s
}

/// An absolute form of `p` (joined to the current directory; not resolving links).
fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// How the report names a clock.
fn clock_name(c: Clock) -> &'static str {
    match c {
        Clock::Cpu => "CPU time",
        Clock::Wall => "wall time",
        Clock::Mixed => "CPU time, wall time where none was recorded",
    }
}

/// The report's lines on the clocks the rates were read on and on the calibrations run.
fn clock_lines(grid: &impl Grid, rates: &Rates, sources: &BTreeMap<Group, Source>) -> String {
    let mut s = String::new();
    let not_cpu: Vec<Group> = rates
        .by_pair
        .iter()
        .filter(|(_, r)| r.clock() != Clock::Cpu)
        .map(|(g, _)| *g)
        .collect();
    if not_cpu.is_empty() {
        s += "clock: CPU time (of the thread running each timed step)\n";
    } else {
        let _ = writeln!(
            s,
            "clock: CPU time, but wall time for {} group(s) whose {} record none (written by an \
             earlier version, or by runs sharing a process with --jobs > 1): a loaded machine \
             inflates those",
            not_cpu.len(),
            grid.outputs()
        );
    }
    let calibrations = sources
        .values()
        .filter(|x| matches!(x, Source::Calibration(_)))
        .count();
    let shared = sources
        .values()
        .filter(|x| matches!(x, Source::Shared(_)))
        .count();
    if calibrations + shared > 0 {
        let _ = writeln!(
            s,
            "calibrations run: {calibrations}, for {} group(s)",
            calibrations + shared
        );
    }
    s
}

/// The printed estimate: a line per group, the clocks, the CPU time and the longest run.
fn report(
    grid: &impl Grid,
    estimates: &[RunEstimate],
    (rates, sources): (&Rates, &BTreeMap<Group, Source>),
    setups: (f64, Option<&str>),
) -> String {
    let mut s = String::new();
    let done = estimates.iter().filter(|e| e.run.done).count();
    let _ = writeln!(s, "{}", grid.headline(estimates.len(), done));
    let _ = writeln!(
        s,
        "\n{:<32} {:<24} {:>6} {:>12}  source",
        "problem", "policy", "steps", "per run"
    );
    for (group, source) in sources {
        let Some(e) = estimates.iter().find(|e| e.run.group == *group) else {
            continue;
        };
        let clock = rates
            .by_pair
            .get(group)
            .map_or("", |r| clock_name(r.clock()));
        let source = match source {
            Source::Outputs(_) => format!("{} in the output directory, {clock}", grid.outputs()),
            Source::Calibration(k) => format!("calibration ({k} steps), {clock}"),
            Source::Shared(g) => {
                let (a, b) = grid.group_label(*g);
                format!("calibration of {a} × {b}")
            }
            Source::Failed(err) => format!("calibration failed: {err}"),
        };
        let (a, b) = grid.group_label(*group);
        let _ = writeln!(
            s,
            "{a:<32} {b:<24} {:>6} {:>12}  {source}",
            e.run.evaluations,
            e.seconds.map_or("-".into(), human)
        );
    }
    s += "\n";
    s += &clock_lines(grid, rates, sources);
    // `+ 0.0`: an empty float sum is −0.
    let total: f64 = estimates.iter().filter_map(|e| e.seconds).sum::<f64>() + 0.0;
    let remaining: f64 = estimates
        .iter()
        .filter(|e| !e.run.done)
        .filter_map(|e| e.seconds)
        .sum::<f64>()
        + 0.0;
    let (setup_seconds, setup_note) = setups;
    let _ = writeln!(
        s,
        "estimated CPU time: {:.2} CPU-hours to go ({:.2} for the whole grid, one core per run)",
        (remaining + setup_seconds) / 3600.0,
        (total + setup_seconds) / 3600.0
    );
    if let Some(note) = setup_note {
        let _ = writeln!(
            s,
            "  of which {:.2} CPU-hours of {note}",
            setup_seconds / 3600.0
        );
    }
    let longest = estimates
        .iter()
        .filter_map(|e| Some((e.seconds?, e)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((secs, e)) = longest {
        let _ = writeln!(s, "longest run: {} ({})", human(secs), e.run.name);
    }
    let uncalibrated = estimates.iter().filter(|e| e.seconds.is_none()).count();
    if uncalibrated > 0 {
        let _ = writeln!(
            s,
            "{uncalibrated} run(s) could not be calibrated and are not in these totals"
        );
    }
    s
}

/// The default output directory of a grid named `name` (`results/NAME`, `-smoke` appended with
/// `smoke`), as `pandora experiment` and `pandora cvs` take it.
pub fn default_out(name: &str, smoke: bool) -> PathBuf {
    let name = super::config::file_component(name);
    PathBuf::from("results").join(if smoke { format!("{name}-smoke") } else { name })
}

/// Checks the numeric options of `args`.
fn check(args: &PlanArgs) -> Result<()> {
    if args.cpus_per_task == 0 {
        bail!("--cpus-per-task must be at least 1");
    }
    if !(args.time_margin.is_finite() && args.time_margin >= 1.0) {
        bail!("--time-margin must be a number ≥ 1");
    }
    if args.shards == Some(0) {
        bail!("--shards must be at least 1");
    }
    if args.max_parallel == Some(0) {
        bail!("--max-parallel must be at least 1");
    }
    Ok(())
}

/// `plan` for any grid: estimates `grid` (output directory `out`), writes the sbatch script when
/// `args.slurm` asks for one, and returns the report (the estimate, the array, the script
/// written).
pub fn plan_grid(
    grid: &impl Grid,
    args: &PlanArgs,
    out: &Path,
    reporter: &dyn Reporter,
) -> Result<String> {
    check(args)?;
    let runs = grid.runs(out)?;
    let (rates, sources) = rates(grid, &runs, out, args.calibration_steps.max(1), reporter)?;
    let todo: Vec<PlannedRun> = runs.iter().filter(|r| !r.done).cloned().collect();
    let (setups, setup_note) = grid.setups(&todo, reporter)?;
    let estimates = estimate_runs(grid, runs, &rates);
    let n = estimates.len();
    let shards = args
        .shards
        .unwrap_or_else(|| n.div_ceil(args.cpus_per_task).clamp(1, 1000));
    let shape = array_shape(&estimates, &setups, shards, args.cpus_per_task);
    let setup_note = setup_note.map(|t| format!("{t} over the {shards} shard(s)"));
    let mut text = report(
        grid,
        &estimates,
        (&rates, &sources),
        (shape.setup_seconds, setup_note.as_deref()),
    );
    let time_seconds = shape.wall_seconds * args.time_margin + 600.0;
    let _ = writeln!(
        text,
        "array: {shards} task(s) × {} CPU(s); largest shard ≈ {} of CPU time; time limit {} (×{} \
         + 10 min: room for a busy node, where wall time exceeds CPU time)",
        args.cpus_per_task,
        human(shape.wall_seconds),
        slurm_time(time_seconds),
        args.time_margin
    );
    let Some(script) = &args.slurm else {
        return Ok(text);
    };
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("locating the pandora executable")?,
    };
    let out_abs = absolute(out)?;
    std::fs::create_dir_all(out_abs.join("slurm"))
        .with_context(|| format!("creating {:?}", out_abs.join("slurm")))?;
    let total = estimates.iter().filter_map(|e| e.seconds).sum::<f64>() + shape.setup_seconds;
    let spec = ScriptSpec {
        command: grid.command(),
        name: super::config::file_component(&grid.name()),
        shards,
        max_parallel: args.max_parallel.map_or(shards, |m| m.min(shards)),
        cpus_per_task: args.cpus_per_task,
        mem: args.mem.clone(),
        time_seconds,
        partition: args.partition.clone(),
        bin,
        config: absolute(Path::new(&args.config))?,
        smoke: args.smoke,
        out: out_abs,
        comment: format!(
            "{n} runs, estimated {:.2} CPU-hours; largest shard ≈ {} (pandora {} plan)",
            total / 3600.0,
            human(shape.wall_seconds),
            grid.command()
        ),
    };
    std::fs::write(script, sbatch_script(&spec)).with_context(|| format!("writing {script:?}"))?;
    let _ = writeln!(
        text,
        "wrote {script:?}: submit with `sbatch {}`",
        script.display()
    );
    Ok(text)
}

/// `pandora experiment`'s grid: groups are (problem, policy) pairs, work is
/// [`super::estimate`]'s, rates come from traces.
pub struct ExperimentGrid<'a> {
    plan: &'a Plan,
    /// The mean cost `c̄` of every problem ([`mean_costs`]).
    costs: Vec<f64>,
}

/// Runs pair `(problem, policy)`'s first seed for `steps` BO steps in a temporary directory and
/// returns its trace.
fn calibration_trace(plan: &Plan, pair: Group, steps: usize) -> Result<trace::Trace> {
    let mut small = plan.clone();
    let p = &mut small.problems[pair.0];
    p.budget = None;
    p.max_evaluations = Some(steps);
    let dir = std::env::temp_dir().join(format!(
        "pandora-plan-{}-{}-{}",
        std::process::id(),
        pair.0,
        pair.1
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {dir:?}"))?;
    let r = RunSpec {
        problem: pair.0,
        policy: pair.1,
        seed: plan.seeds[0],
    };
    let result = (|| {
        let instances = Instances::build(&small, &[r]);
        run_one(&small, &r, &dir, &instances)?;
        trace::read(&dir.join(small.trace_name(&r)))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

impl Grid for ExperimentGrid<'_> {
    fn command(&self) -> &'static str {
        "experiment"
    }

    fn outputs(&self) -> &'static str {
        "traces"
    }

    fn name(&self) -> String {
        self.plan.name.clone()
    }

    fn headline(&self, runs: usize, done: usize) -> String {
        let p = self.plan;
        format!(
            "experiment '{}': {runs} run(s) ({} problem(s) × {} policy(ies) × {} seed(s)), \
             {done} complete already",
            p.name,
            p.problems.len(),
            p.policies.len(),
            p.seeds.len()
        )
    }

    fn group_label(&self, g: Group) -> (String, String) {
        (
            self.plan.problems[g.0].label.clone(),
            self.plan.policies[g.1].label.clone(),
        )
    }

    fn runs(&self, out: &Path) -> Result<Vec<PlannedRun>> {
        let plan = self.plan;
        let costs = &self.costs;
        let c = completeness(plan, &out.join("traces"));
        let not_done: BTreeSet<&String> = c.missing.iter().chain(&c.unfinished).collect();
        Ok(plan
            .runs()
            .into_iter()
            .map(|r| {
                let work = run_work(plan, &r, costs[r.problem]);
                let name = plan.trace_name(&r);
                PlannedRun {
                    done: !not_done.contains(&name),
                    name,
                    group: (r.problem, r.policy),
                    weight: work.total,
                    units: work.model,
                    evaluations: work.initial + work.bo_steps,
                    setup: None,
                }
            })
            .collect())
    }

    fn at_rate(&self, run: PlannedRun, rate: &Rate) -> PlannedRun {
        let plan = self.plan;
        let r = RunSpec {
            problem: run.group.0,
            policy: run.group.1,
            seed: plan.seeds[0],
        };
        let work = run_work_at(plan, &r, self.costs[r.problem], rate);
        PlannedRun {
            units: work.model,
            evaluations: work.initial + work.bo_steps,
            ..run
        }
    }

    fn measured(&self, out: &Path) -> Result<Rates> {
        let dir = out.join("traces");
        if !dir.is_dir() {
            return Ok(Rates::default());
        }
        Ok(Rates::from_traces(self.plan, &read_traces(&dir)?))
    }

    fn calibrate(&self, group: Group, steps: usize) -> Result<Rate> {
        let t = calibration_trace(self.plan, group, steps)?;
        let measured = Rates::from_traces(self.plan, std::slice::from_ref(&t));
        match measured.by_pair.get(&group) {
            Some(r) => Ok(*r),
            None => bail!("the calibration run's trace measured no step"),
        }
    }
}

/// `pandora experiment plan`: the plan of the experiment configured in `args.config` (see
/// [`plan_grid`]).
pub fn plan_experiment(args: &PlanArgs, reporter: &dyn Reporter) -> Result<String> {
    let file = super::config::load(&args.config)?;
    let plan = file
        .resolve(args.smoke)
        .with_context(|| format!("in {}", args.config))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&plan.name, plan.smoke));
    let costs = mean_costs(&plan)?;
    plan_grid(&ExperimentGrid { plan: &plan, costs }, args, &out, reporter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_times_round_up_to_minutes() {
        assert_eq!(slurm_time(0.0), "0-00:01:00");
        assert_eq!(slurm_time(61.0), "0-00:02:00");
        assert_eq!(slurm_time(3600.0), "0-01:00:00");
        assert_eq!(slurm_time(26.5 * 3600.0), "1-02:30:00");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(sh("/a/b-c.toml"), "/a/b-c.toml");
        assert_eq!(sh("a b"), "'a b'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh("$(x)"), "'$(x)'");
    }

    /// A grid of 4 settings × 2 policies whose settings pair up for calibration (0 and 1, 2 and
    /// 3): it counts its calibrations and whether each ran where the thread clock sees it all.
    struct Paired {
        calls: std::sync::Mutex<Vec<(Group, bool)>>,
    }

    impl Grid for Paired {
        fn command(&self) -> &'static str {
            "experiment"
        }
        fn outputs(&self) -> &'static str {
            "traces"
        }
        fn name(&self) -> String {
            "paired".into()
        }
        fn headline(&self, runs: usize, _: usize) -> String {
            format!("{runs} runs")
        }
        fn group_label(&self, g: Group) -> (String, String) {
            (format!("setting {}", g.0), format!("policy {}", g.1))
        }
        fn runs(&self, _: &Path) -> Result<Vec<PlannedRun>> {
            Ok((0..4)
                .flat_map(|s| (0..2).map(move |p| (s, p)))
                .map(|g| PlannedRun {
                    name: format!("{g:?}"),
                    group: g,
                    weight: 1.0,
                    units: 1.0,
                    evaluations: 1,
                    done: false,
                    setup: None,
                })
                .collect())
        }
        fn measured(&self, _: &Path) -> Result<Rates> {
            Ok(Rates::default())
        }
        fn calibrate(&self, group: Group, _: usize) -> Result<Rate> {
            let exact = crate::cpu_clock::exact_here();
            self.calls.lock().unwrap().push((group, exact));
            Ok(Rate {
                per_unit: 1.0 + group.0 as f64 + 10.0 * group.1 as f64,
                timings: 1,
                ..Rate::default()
            })
        }
        fn calibration_key(&self, g: Group) -> Group {
            (g.0 / 2, g.1)
        }
        fn calibration_rank(&self, g: Group) -> f64 {
            // Setting 3 before setting 2; 0 and 1 tie.
            if g.0 == 3 { -1.0 } else { 0.0 }
        }
    }

    #[test]
    fn groups_sharing_a_key_share_one_calibration_on_one_thread() {
        let grid = Paired {
            calls: std::sync::Mutex::new(Vec::new()),
        };
        let runs = grid.runs(Path::new("")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (rates, sources) = rates(&grid, &runs, dir.path(), 4, &crate::Quiet).unwrap();
        let calls = grid.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                ((0, 0), true),
                ((0, 1), true),
                ((3, 0), true),
                ((3, 1), true)
            ]
        );
        assert_eq!(rates.by_pair.len(), 8);
        for (g, r) in &rates.by_pair {
            let first = (if g.0 < 2 { 0 } else { 3 }, g.1);
            assert_eq!(r.per_unit, rates.by_pair[&first].per_unit, "{g:?}");
            let want = if first == *g {
                Source::Calibration(4)
            } else {
                Source::Shared(first)
            };
            assert_eq!(sources[g], want);
        }
        let text = clock_lines(&grid, &rates, &sources);
        assert!(
            text.contains("calibrations run: 4, for 8 group(s)"),
            "{text}"
        );
        assert!(text.starts_with("clock: CPU time"), "{text}");
    }
}
