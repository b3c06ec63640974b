//! `pandora cvs`: experiments with cost-varying variable subsets (BOCVS, Tay et al. 2023).
//!
//! A grid of objectives × cost levels × variances × policies × seeds, run in parallel with
//! rayon. Every run is one call of [`pandora_core::cvs::run`](fn@pandora_core::cvs::run) and is stored as one JSON file under
//! `OUT/runs/`, written atomically when the run ends, so an interrupted experiment resumes by
//! skipping the runs whose file exists. The summary (`OUT/summary.csv` and a printed table) gives,
//! per setting and policy, the simple regret at the end of the budget and at fixed fractions of it
//! (mean ± 1 s.e., as the paper plots, and the median). See docs/cvs.md.
//!
//! **Shards.** `--shard K/N` (or a Slurm array task's variables, see
//! [`crate::shard`]) runs one cost-balanced share of the grid. A run's weight is
//! `Σ_{k<T} (10⁴ + m · S · B · (n² + 20 n d + 500 d))` at `n = n₀ + k` observations, with
//! `T = ⌈budget / c̄⌉` decisions (`c̄` the mean cost of the cost level's sets), `S` control sets,
//! a bank of `B` rows, `n₀` initial queries, dimension `d`, and `m = 0` for `random` (no model)
//! and 1 otherwise: each decision scores every set's bank against a GP on `n` points (a posterior
//! at one point costs `n²` for the solve, `20 n d` for the kernel column and `500 d` that does not
//! grow with `n`, as in [`crate::estimate`]). Only the relative sizes matter.
//! `OUT/expected_runs.json` lists every run's file, so that `summarize` names the runs still
//! missing (a run's file appears only when it ends) instead of averaging fewer seeds.
//!
//! **Plan.** `pandora cvs plan` ([`plan`]) is `pandora experiment plan`'s planner
//! ([`crate::cluster`]) on this grid: the weight above, in seconds by a rate per
//! (setting, policy) measured on the run records in the output directory or by a calibration,
//! and the reference optima (one per objective × variance × seed, computed by every shard that
//! has a run needing it) as the shards' shared set-up. A run takes its reference optimum from a
//! finished run of the grid with the same objective, variance and seed when one exists, so a
//! grid extended by policies or seeds searches only the optima it has not met.

use crate::config::file_component;
use crate::execute::{Options, Outcome, Tally};
use crate::figures::{Statistic, panel, render_png_svg};
use crate::lock::{Acquired, RunLock};
use crate::plot::{Figure, Legend, Panel};
use crate::reporter::Reporter;
use crate::shard::Shard;
use crate::summary::{PolicySummary, ProblemSummary, stats};
use anyhow::{Context, Result, bail};
use pandora_core::cvs::{
    CvsFunction, CvsProblem, DEFAULT_BANK_SIZE, POLICY_NAMES, RunConfig, SetOptimizer, Trace,
    build_policy, run,
};
use pandora_problems::cvs::{
    AirfoilGp, CostLevel, GpSample, PlantGrowth, airfoil_control_sets, bocvs_problem,
    control_sets_3d, plant_control_sets,
};
use pandora_problems::synthetic::Function;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub mod plan;

/// The configuration file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Config {
    experiment: Meta,
    problem: Vec<ProblemConfig>,
    policies: Policies,
    #[serde(default)]
    smoke: Option<Smoke>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Policies {
    /// Policy names (`pandora_core::cvs::POLICY_NAMES`).
    names: Vec<String>,
    /// λ of the Gittins policies (the start of `gittins-d`).
    #[serde(default = "default_lambda")]
    lambda: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    name: String,
    /// Seeds `0..seeds`.
    seeds: u64,
    /// Rows of the sample bank (default 1024, the paper's).
    #[serde(default)]
    bank_size: Option<usize>,
    /// Initial uniform full queries, not charged (default 5).
    #[serde(default)]
    n_init: Option<usize>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProblemConfig {
    /// `gp_sample`, `hartmann3`, `plant` or `airfoil`.
    objective: String,
    /// Cost levels: `cheap`, `moderate`, `expensive`.
    costs: Vec<String>,
    /// Truncated variances of the random variables (the paper: 0.02, 0.04, 0.08).
    variances: Vec<f64>,
    /// Budget (default: the paper's, 50 or 200 for plant).
    #[serde(default)]
    budget: Option<f64>,
}

/// The smoke size: fewer seeds, a small budget and bank, and only the first cost level and
/// variance of each problem.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Smoke {
    seeds: u64,
    budget: f64,
    #[serde(default)]
    bank_size: Option<usize>,
    /// Optimizer effort is reduced to this many raw samples (and 2 restarts) per set.
    #[serde(default)]
    raw_samples: Option<usize>,
}

fn default_lambda() -> f64 {
    0.01
}

/// One run of the grid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct RunSpec {
    objective: String,
    cost_level: String,
    variance: f64,
    policy: String,
    seed: u64,
    budget: f64,
    /// Rows of the sample bank (absent in records written before it was stored).
    #[serde(default)]
    bank_size: Option<usize>,
}

impl RunSpec {
    fn file_name(&self) -> String {
        format!(
            "{}_{}_var{}_{}_seed{}.json",
            self.objective, self.cost_level, self.variance, self.policy, self.seed
        )
    }

    fn setting(&self) -> String {
        format!(
            "{} {} var={}",
            self.objective, self.cost_level, self.variance
        )
    }
}

/// What is stored per run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunRecord {
    spec: RunSpec,
    optimum: f64,
    wall_seconds: f64,
    /// The run's CPU seconds, when its thread did all of its work (see
    /// [`crate::cpu_clock::exact_here`]: `--jobs 1`); absent otherwise and in records of
    /// earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_seconds: Option<f64>,
    steps: Vec<StepRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StepRecord {
    set: usize,
    x_ctrl: Vec<f64>,
    y: f64,
    cost: f64,
    cumulative_cost: f64,
    value: f64,
    simple_regret: f64,
    lambda: Option<f64>,
}

/// The resolved plan.
struct Plan {
    name: String,
    runs: Vec<RunSpec>,
    bank_size: usize,
    n_init: usize,
    lambda: f64,
    optimizer: SetOptimizer,
    /// How the reference optimum is searched: far more starts than an acquisition gets (with the
    /// acquisition's settings, the search missed the global maximum of an ℓ = 0.1 GP sample by
    /// 0.13 and runs reached negative regret); the smoke size keeps its reduced effort.
    optimum_optimizer: SetOptimizer,
}

fn cost_level(name: &str) -> Result<CostLevel> {
    Ok(match name {
        "cheap" => CostLevel::Cheap,
        "moderate" => CostLevel::Moderate,
        "expensive" => CostLevel::Expensive,
        other => bail!("unknown cost level {other:?} (expected cheap, moderate or expensive)"),
    })
}

/// Dimension, control sets, GP lengthscale and default budget of an objective (notes B10).
fn objective_setup(name: &str) -> Result<(usize, Vec<Vec<usize>>, f64, f64)> {
    Ok(match name {
        "gp_sample" | "hartmann3" => (3, control_sets_3d(), 0.1, 50.0),
        "plant" => (5, plant_control_sets(), 0.2, 200.0),
        "airfoil" => (5, airfoil_control_sets()?, 0.2, 50.0),
        other => bail!(
            "unknown CVS objective {other:?} (expected gp_sample, hartmann3, plant or airfoil)"
        ),
    })
}

/// Hartmann-3, maximized, as a CVS objective.
struct Hartmann3;

impl CvsFunction for Hartmann3 {
    fn dim(&self) -> usize {
        3
    }
    fn value(&self, x: &[f64]) -> f64 {
        Function::Hartmann3.eval(x)
    }
}

fn objective(name: &str, seed: u64) -> Result<Box<dyn CvsFunction + Send>> {
    Ok(match name {
        "gp_sample" => Box::new(GpSample::paper_3d(
            pandora_core::gp::paths::DEFAULT_NUM_FEATURES,
            seed,
        )?),
        "hartmann3" => Box::new(Hartmann3),
        "plant" => Box::new(PlantGrowth::builtin()?),
        "airfoil" => Box::new(AirfoilGp::builtin()?),
        other => bail!("unknown CVS objective {other:?}"),
    })
}

fn load(path: &str, smoke: bool) -> Result<Plan> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let cfg: Config = toml::from_str(&text)
        .map_err(crate::plain)
        .with_context(|| format!("parsing {path}"))?;
    if cfg.policies.names.is_empty() || cfg.problem.is_empty() {
        bail!("{path}: give at least one policy and one [[problem]]");
    }
    if !(cfg.policies.lambda.is_finite() && cfg.policies.lambda > 0.0) {
        bail!("{path}: lambda must be finite and > 0");
    }
    for p in &cfg.policies.names {
        build_policy(p, 1.0, cfg.policies.lambda)
            .with_context(|| format!("{path}: policy {p:?}"))?;
    }
    for prob in &cfg.problem {
        objective_setup(&prob.objective)?;
        for c in &prob.costs {
            cost_level(c)?;
        }
        for &v in &prob.variances {
            if !(v > 0.0 && v < 1.0 / 12.0) {
                bail!("{path}: variance {v} must lie in (0, 1/12)");
            }
        }
        if prob.costs.is_empty() || prob.variances.is_empty() {
            bail!("{path}: {} needs cost levels and variances", prob.objective);
        }
    }
    let small = if smoke {
        Some(
            cfg.smoke
                .clone()
                .with_context(|| format!("{path}: --smoke needs a [smoke] section"))?,
        )
    } else {
        None
    };
    let seeds = small.as_ref().map_or(cfg.experiment.seeds, |s| s.seeds);
    let bank_size = small
        .as_ref()
        .and_then(|s| s.bank_size)
        .or(cfg.experiment.bank_size)
        .unwrap_or(DEFAULT_BANK_SIZE);
    let mut runs = Vec::new();
    for prob in &cfg.problem {
        let (_, _, _, default_budget) = objective_setup(&prob.objective)?;
        let budget = small
            .as_ref()
            .map(|s| s.budget)
            .or(prob.budget)
            .unwrap_or(default_budget);
        if !(budget.is_finite() && budget > 0.0) {
            bail!("{path}: budget of {} must be > 0", prob.objective);
        }
        // The smoke size keeps the first cost level and the first variance of each problem.
        let keep = if smoke { 1 } else { usize::MAX };
        for c in prob.costs.iter().take(keep) {
            for &v in prob.variances.iter().take(keep) {
                for pol in &cfg.policies.names {
                    for seed in 0..seeds {
                        runs.push(RunSpec {
                            objective: prob.objective.clone(),
                            cost_level: c.clone(),
                            variance: v,
                            policy: pol.clone(),
                            seed,
                            budget,
                            bank_size: Some(bank_size),
                        });
                    }
                }
            }
        }
    }
    let mut optimizer = SetOptimizer::default();
    let mut optimum_optimizer = SetOptimizer {
        raw_partial: 1024,
        restarts_partial: 16,
        raw_full: 1 << 15,
        restarts_full: 64,
        max_iter: 200,
    };
    if let Some(raw) = small.as_ref().and_then(|s| s.raw_samples) {
        optimizer.raw_partial = raw;
        optimizer.raw_full = raw;
        optimizer.restarts_partial = 2;
        optimizer.restarts_full = 2;
        optimum_optimizer = optimizer.clone();
    }
    Ok(Plan {
        name: if smoke {
            format!("{}-smoke", cfg.experiment.name)
        } else {
            cfg.experiment.name.clone()
        },
        runs,
        bank_size,
        n_init: cfg.experiment.n_init.unwrap_or(5),
        lambda: cfg.policies.lambda,
        optimizer,
        optimum_optimizer,
    })
}

/// The problem of a run: the objective's control sets with the run's costs and variance, and a
/// bank seeded by the run's seed (the same for every policy, so policies face the same problem).
fn problem_of(plan: &Plan, r: &RunSpec) -> Result<CvsProblem> {
    let (d, sets, _, _) = objective_setup(&r.objective)?;
    let costs = cost_level(&r.cost_level)?.costs();
    Ok(bocvs_problem(
        d,
        sets,
        &costs,
        r.variance,
        plan.bank_size,
        r.seed.wrapping_mul(0x9e37_79b9).wrapping_add(17),
    )?)
}

/// The mean cost `c̄` of run `r`'s control sets.
fn mean_cost(r: &RunSpec) -> Result<f64> {
    let costs = cost_level(&r.cost_level)?.costs();
    Ok(costs.iter().sum::<f64>() / costs.len() as f64)
}

/// The cost of the most expensive set of run `r`'s cost level.
fn max_cost(r: &RunSpec) -> Result<f64> {
    let costs = cost_level(&r.cost_level)?.costs();
    Ok(costs.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

/// The estimated decisions `T = ⌈budget / c̄⌉` of run `r` (at least 1).
fn run_steps(r: &RunSpec) -> Result<usize> {
    Ok((r.budget / mean_cost(r)?).ceil().max(1.0) as usize)
}

/// The work of `steps` decisions of run `r` (see the module doc).
fn run_units(plan: &Plan, r: &RunSpec, steps: usize) -> Result<f64> {
    let (d, sets, _, _) = objective_setup(&r.objective)?;
    let m = if r.policy == "random" { 0.0 } else { 1.0 };
    let per_point = m * sets.len() as f64 * plan.bank_size as f64;
    let d = d as f64;
    Ok((0..steps)
        .map(|k| {
            let n = (plan.n_init + k) as f64;
            1e4 + per_point * (n * n + 20.0 * n * d + 500.0 * d)
        })
        .sum())
}

/// The shard weight of run `r`: the work of its estimated decisions.
fn run_weight(plan: &Plan, r: &RunSpec) -> Result<f64> {
    run_units(plan, r, run_steps(r)?)
}

/// The output directory: `out`, or `results/NAME` (`NAME` ends in `-smoke` at the smoke size).
fn default_out(plan: &Plan, out: Option<&PathBuf>) -> PathBuf {
    out.cloned()
        .unwrap_or_else(|| PathBuf::from("results").join(&plan.name))
}

/// The key of the reference optimum run `r` needs: (objective, variance, seed).
fn optimum_key(r: &RunSpec) -> (String, String, u64) {
    (r.objective.clone(), r.variance.to_string(), r.seed)
}

/// The reference optimum of `key`'s problem (computed with the plan's optimum search).
fn reference_optimum(plan: &Plan, r: &RunSpec) -> Result<f64> {
    let problem = problem_of(plan, r)?;
    let f = objective(&r.objective, r.seed)?;
    let (best, _) = problem.optimum(f.as_ref(), &plan.optimum_optimizer, r.seed ^ 0x006f_7074)?;
    Ok(best.value)
}

/// The record of run `r` in `runs_dir` if the run is finished (its file exists), `None` if not.
/// A run file counts only if it was made with the same settings (a changed budget or bank size
/// must not be mixed silently into the summary): otherwise an error naming both; older records
/// without a bank size are compared on the rest.
fn finished_record(runs_dir: &Path, r: &RunSpec) -> Result<Option<RunRecord>> {
    let path = runs_dir.join(r.file_name());
    if !path.exists() {
        return Ok(None);
    }
    let old: RunRecord =
        serde_json::from_slice(&std::fs::read(&path).with_context(|| format!("reading {path:?}"))?)
            .with_context(|| format!("parsing {path:?}"))?;
    let same = RunSpec {
        bank_size: old.spec.bank_size.or(r.bank_size),
        ..old.spec.clone()
    } == *r;
    if !same {
        bail!(
            "{path:?} was made with other settings ({:?}) than this configuration asks for \
             ({r:?}): use another --out directory or remove the old runs",
            old.spec
        );
    }
    Ok(Some(old))
}

/// The reference optima the runs `todo` need, by [`optimum_key`]. The optimum of the expected
/// objective depends on the objective, the variance and the seed (function and bank), not on the
/// costs or the policy, so each is computed once, and not at all when a finished run of the grid
/// in `runs_dir` with the same key already holds it (same settings, so the same search: a grid
/// extended by a policy or a seed does not search its optima again, and every policy of a setting
/// is measured against the same number). Call it inside the run pool: the searches run on it.
fn reference_optima(
    plan: &Plan,
    todo: &[&RunSpec],
    runs_dir: &Path,
    reporter: &dyn Reporter,
) -> Result<BTreeMap<(String, String, u64), f64>> {
    let mut needed: BTreeMap<(String, String, u64), &RunSpec> = BTreeMap::new();
    for r in todo {
        needed.entry(optimum_key(r)).or_insert(r);
    }
    let mut optimum = BTreeMap::new();
    for r in &plan.runs {
        let key = optimum_key(r);
        if !needed.contains_key(&key) || optimum.contains_key(&key) {
            continue;
        }
        // Runs of other shards are not this process's to refuse: one made with other settings
        // is only not used.
        if let Ok(Some(rec)) = finished_record(runs_dir, r) {
            optimum.insert(key, rec.optimum);
        }
    }
    let reused = optimum.len();
    let search: Vec<(&(String, String, u64), &&RunSpec)> = needed
        .iter()
        .filter(|(k, _)| !optimum.contains_key(*k))
        .collect();
    let found: Vec<Result<f64>> = search
        .par_iter()
        .map(|(_, r)| reference_optimum(plan, r))
        .collect();
    for ((k, _), o) in search.iter().zip(found) {
        optimum.insert((*k).clone(), o?);
    }
    if !needed.is_empty() {
        reporter.note(&format!(
            "reference optima: {} searched, {reused} taken from finished runs in {runs_dir:?}",
            needed.len() - reused
        ));
    }
    Ok(optimum)
}

/// The runs of `plan` in `shard` (all without one).
fn shard_runs(plan: &Plan, shard: Option<Shard>) -> Result<Vec<&RunSpec>> {
    let Some(s) = shard else {
        return Ok(plan.runs.iter().collect());
    };
    let weights = plan
        .runs
        .iter()
        .map(|r| run_weight(plan, r))
        .collect::<Result<Vec<f64>>>()?;
    Ok(s.select(&weights)
        .into_iter()
        .map(|i| &plan.runs[i])
        .collect())
}

/// The file listing every run of the grid, for `summarize`.
const EXPECTED: &str = "expected_runs.json";

/// Writes `out/expected_runs.json` (atomically, one temporary name per process).
fn write_expected(plan: &Plan, out: &Path) -> Result<()> {
    let names: Vec<String> = plan.runs.iter().map(RunSpec::file_name).collect();
    let tmp = out.join(format!("{EXPECTED}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&names)?)
        .with_context(|| format!("writing {tmp:?}"))?;
    std::fs::rename(&tmp, out.join(EXPECTED))?;
    Ok(())
}

/// The runs listed in `dir/expected_runs.json` without a file in `dir/runs/` (none when the
/// list is absent, as in directories written before it existed).
fn missing_runs(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join(EXPECTED);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = serde_json::from_slice(&std::fs::read(&path)?)
        .with_context(|| format!("parsing {path:?}"))?;
    Ok(names
        .into_iter()
        .filter(|n| !dir.join("runs").join(n).exists())
        .collect())
}

/// What [`run_one`] did.
enum Done {
    /// The run was carried out.
    Ran,
    /// Its record appeared meanwhile (another process wrote it).
    Complete,
    /// Another process is carrying it out (its lock's holder line).
    Busy(String),
}

/// Carries out run `r` and writes its record into `dir`, holding the record's
/// [`crate::lock`] meanwhile.
fn run_one(plan: &Plan, r: &RunSpec, optimum: f64, dir: &Path) -> Result<Done> {
    let path = dir.join(r.file_name());
    let _lock = match RunLock::acquire(&path)? {
        Acquired::Held(l) => l,
        Acquired::Busy(holder) => return Ok(Done::Busy(holder)),
    };
    if path.exists() {
        return Ok(Done::Complete);
    }
    let start = crate::cpu_clock::Stopwatch::start();
    let problem = problem_of(plan, r)?;
    let f = objective(&r.objective, r.seed)?;
    let (d, _, lengthscale, _) = objective_setup(&r.objective)?;
    let mut cfg = RunConfig::new(d, lengthscale, r.budget)?;
    cfg.n_init = plan.n_init;
    cfg.optimizer = plan.optimizer.clone();
    cfg.optimum = Some(optimum);
    let mut policy = build_policy(&r.policy, r.budget, plan.lambda)?;
    let trace: Trace = run(&problem, f.as_ref(), policy.as_mut(), &cfg, r.seed)?;
    let record = RunRecord {
        spec: r.clone(),
        optimum,
        wall_seconds: start.wall(),
        cpu_seconds: crate::cpu_clock::exact_here()
            .then(|| start.cpu())
            .flatten(),
        steps: trace
            .steps
            .iter()
            .map(|s| StepRecord {
                set: s.set,
                x_ctrl: s.x_ctrl.clone(),
                y: s.y,
                cost: s.cost,
                cumulative_cost: s.cumulative_cost,
                value: s.value,
                simple_regret: s.simple_regret,
                lambda: s.lambda,
            })
            .collect(),
    };
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&record)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(Done::Ran)
}

/// `pandora cvs summarize DIR`: [`summarize`], refused while runs of the grid are missing unless
/// `partial` (then the missing runs are named to `reporter`); returns the printed table.
pub fn summarize_checked(dir: &Path, partial: bool, reporter: &dyn Reporter) -> Result<String> {
    let missing = missing_runs(dir)?;
    if !missing.is_empty() {
        let mut names = missing
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n    ");
        if missing.len() > 20 {
            names += &format!("\n    … and {} more", missing.len() - 20);
        }
        let what = format!(
            "{} run(s) of the grid are missing:\n    {names}",
            missing.len()
        );
        if !partial {
            bail!(
                "{what}\nno summary written: finish them (rerun the missing shards; runs \
                 resume), or summarize the others anyway with `--partial`"
            );
        }
        reporter.note(&format!(
            "warning: {what}\nsummarizing the others only (--partial)"
        ));
    }
    summarize(dir, reporter)
}

/// `pandora cvs CONFIG`: runs the grid configured in the TOML file `config` with `options` (the
/// runs still to do, of one shard when given), then, without a shard, writes the summary and
/// figures. Failed and busy runs are named to `reporter` and counted in the [`Outcome`] (see
/// [`Outcome::check`]).
pub fn run_config(config: &str, options: &Options, reporter: &dyn Reporter) -> Result<Outcome> {
    let plan = load(config, options.smoke)?;
    let shard = options.shard;
    let out = default_out(&plan, options.out.as_ref());
    let runs_dir = out.join("runs");
    std::fs::create_dir_all(&runs_dir).with_context(|| format!("creating {runs_dir:?}"))?;
    write_expected(&plan, &out)?;
    let selected = shard_runs(&plan, shard)?;
    if let Some(s) = shard {
        reporter.note(&format!(
            "cvs experiment '{}', shard {s}: {} of {} run(s)",
            plan.name,
            selected.len(),
            plan.runs.len()
        ));
    }
    let jobs = options.threads()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("building the thread pool")?;
    let mut todo: Vec<&RunSpec> = Vec::new();
    for r in selected.iter().copied() {
        if finished_record(&runs_dir, r)?.is_none() {
            todo.push(r);
        }
    }
    let failures = pool.install(|| -> Result<Tally> {
        let optimum = reference_optima(&plan, &todo, &runs_dir, reporter)?;
        let results: Vec<(&RunSpec, Result<Done>)> = todo
            .par_iter()
            .map(|r| (*r, run_one(&plan, r, optimum[&optimum_key(r)], &runs_dir)))
            .collect();
        Ok(tally(results, reporter))
    })?;
    let Tally { failures, busy } = failures;
    reporter.note(&format!(
        "cvs experiment '{}': {} run(s) carried out, {} already complete, {failures} failed{}",
        plan.name,
        todo.len() - failures - busy,
        selected.len() - todo.len(),
        if busy > 0 {
            format!(", {busy} skipped (another process is writing them)")
        } else {
            String::new()
        }
    ));
    let mut outcome = Outcome {
        out,
        shard,
        tally: Tally { failures, busy },
        table: None,
    };
    if busy > 0 {
        return Ok(outcome);
    }
    if shard.is_some() {
        // Shards share the directory: the summary is written once, by `summarize`.
        reporter.note(&format!(
            "once every shard is done: pandora cvs summarize {:?}",
            outcome.out
        ));
        return Ok(outcome);
    }
    outcome.table = Some(summarize(&outcome.out, reporter)?);
    Ok(outcome)
}

/// Counts and names (to `reporter`) the runs that failed or that another process is writing.
fn tally(results: Vec<(&RunSpec, Result<Done>)>, reporter: &dyn Reporter) -> Tally {
    let mut t = Tally {
        failures: 0,
        busy: 0,
    };
    for (r, res) in results {
        match res {
            Ok(Done::Ran | Done::Complete) => {}
            Ok(Done::Busy(holder)) => {
                t.busy += 1;
                reporter.note(&format!(
                    "run {} skipped: another process is writing it ({holder})",
                    r.file_name()
                ));
            }
            Err(e) => {
                t.failures += 1;
                reporter.note(&format!("run {} failed: {e:#}", r.file_name()));
            }
        }
    }
    t
}

/// Simple regret of a run once `cost` has been spent (the last step within it; the first step's
/// regret before any step, which is the worst the run reports).
fn regret_at(rec: &RunRecord, cost: f64) -> f64 {
    rec.steps
        .iter()
        .take_while(|s| s.cumulative_cost <= cost + 1e-9)
        .last()
        .or(rec.steps.first())
        .map_or(f64::NAN, |s| s.simple_regret)
}

/// Budget fractions at which the summary reports the regret.
const FRACTIONS: [f64; 4] = [0.25, 0.5, 0.75, 1.0];

/// Reads every run of `dir`, writes `dir/summary.csv` and the figures (`dir/figures/`, see
/// `write_figures`; their number is told to `reporter`) and returns the printed table.
pub fn summarize(dir: &Path, reporter: &dyn Reporter) -> Result<String> {
    let runs_dir = dir.join("runs");
    let mut records = Vec::new();
    for entry in std::fs::read_dir(&runs_dir).with_context(|| format!("reading {runs_dir:?}"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let rec: RunRecord = serde_json::from_slice(&std::fs::read(&path)?)
                .with_context(|| format!("parsing {path:?}"))?;
            records.push(rec);
        }
    }
    // (setting, policy) -> records
    let mut groups: BTreeMap<(String, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in &records {
        groups
            .entry((r.spec.setting(), r.spec.policy.clone()))
            .or_default()
            .push(r);
    }
    let mut csv =
        String::from("setting,policy,runs,fraction,cost,mean,se,median,mean_steps,mean_seconds\n");
    let mut table = String::new();
    let mut last_setting = String::new();
    for ((setting, policy), recs) in &groups {
        if *setting != last_setting {
            let _ = writeln!(
                table,
                "\n{setting}\n  {:<14} {:>4}  {:>22}  {:>10}  {:>7}  {:>8}",
                "policy", "runs", "final regret mean±se", "median", "steps", "s/run"
            );
            last_setting = setting.clone();
        }
        let budget = recs[0].spec.budget;
        let steps = recs.iter().map(|r| r.steps.len() as f64).sum::<f64>() / recs.len() as f64;
        let secs = recs.iter().map(|r| r.wall_seconds).sum::<f64>() / recs.len() as f64;
        for &frac in &FRACTIONS {
            let vals: Vec<f64> = recs.iter().map(|r| regret_at(r, frac * budget)).collect();
            let st = stats(&vals);
            let (mean, se, median) = (st.mean, 0.5 * st.se2, st.median);
            let _ = writeln!(
                csv,
                "{},{},{},{frac},{},{mean},{se},{median},{steps},{secs}",
                pandora_study::csv::field(setting),
                pandora_study::csv::field(policy),
                recs.len(),
                frac * budget
            );
            if frac == 1.0 {
                let _ = writeln!(
                    table,
                    "  {policy:<14} {:>4}  {:>12.4} ± {:<7.4}  {median:>10.4}  {steps:>7.1}  {secs:>8.2}",
                    recs.len(),
                    mean,
                    se
                );
            }
        }
    }
    std::fs::write(dir.join("summary.csv"), csv)?;
    let fdir = dir.join("figures");
    let written = write_figures(&fdir, &records)?;
    reporter.note(&format!(
        "{} figure file(s) in {}",
        written.len(),
        fdir.display()
    ));
    Ok(table)
}

/// Points of the figures' cost grid, from 0 to the budget.
const FIGURE_GRID: usize = 201;

/// Rank of a policy in the figures (the order of `POLICY_NAMES`, unknown names last).
fn policy_rank(name: &str) -> usize {
    POLICY_NAMES
        .iter()
        .position(|p| *p == name)
        .unwrap_or(POLICY_NAMES.len())
}

/// Rank of a cost level (cheap, moderate, expensive, then anything else).
fn cost_rank(name: &str) -> usize {
    ["cheap", "moderate", "expensive"]
        .iter()
        .position(|c| *c == name)
        .unwrap_or(3)
}

/// The statistics of one setting's runs, per policy of `policies` that has runs, on a grid of
/// [`FIGURE_GRID`] costs from 0 to the budget: at every cost, the simple regret of each run (a
/// step function of the cost, [`regret_at`]) gives the mean, its standard error and the quartiles.
fn setting_summary(title: String, policies: &[String], recs: &[&RunRecord]) -> ProblemSummary {
    let budget = recs.iter().map(|r| r.spec.budget).fold(0.0, f64::max);
    let grid: Vec<f64> = (0..FIGURE_GRID)
        .map(|i| budget * i as f64 / (FIGURE_GRID - 1) as f64)
        .collect();
    let policies = policies
        .iter()
        .filter_map(|p| {
            let mine: Vec<&RunRecord> = recs
                .iter()
                .copied()
                .filter(|r| &r.spec.policy == p)
                .collect();
            if mine.is_empty() {
                return None;
            }
            let steps: usize = mine.iter().map(|r| r.steps.len()).sum();
            let seconds: f64 = mine.iter().map(|r| r.wall_seconds).sum();
            Some(PolicySummary {
                policy: p.clone(),
                stats: grid
                    .iter()
                    .map(|&c| stats(&mine.iter().map(|r| regret_at(r, c)).collect::<Vec<_>>()))
                    .collect(),
                mean_evaluations: steps as f64 / mine.len() as f64,
                mean_seconds_per_step: seconds / steps.max(1) as f64,
            })
        })
        .collect();
    ProblemSummary {
        problem: title,
        grid,
        reference: crate::summary::Reference::Optimum,
        optimum_missed: 0,
        instances: recs.len(),
        policies,
        incomplete: 0,
    }
}

/// The mean ± 1 s.e. panel of a setting, each policy in its color of `policies`.
fn setting_panel(s: &ProblemSummary, policies: &[String], title: String) -> Panel {
    let mut p = panel(s, Statistic::MeanSe, title);
    for series in &mut p.series {
        series.color = policies.iter().position(|q| *q == series.name);
    }
    p
}

/// Writes the figures of the runs into `fdir` and returns the paths written: per setting
/// (objective × cost level × variance) `OBJECTIVE_COST_varV.png|svg`, the simple regret against
/// cumulative cost per policy as the mean ± 1 standard error over the seeds (the paper's
/// Figure 2), and per objective `OBJECTIVE.png|svg` with a panel per setting (cost levels
/// cheap, moderate, expensive, then variances in increasing order; three panels a row). Every
/// policy keeps one color throughout.
fn write_figures(fdir: &Path, records: &[RunRecord]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(fdir).with_context(|| format!("creating {fdir:?}"))?;
    let mut policies: Vec<String> = records.iter().map(|r| r.spec.policy.clone()).collect();
    policies.sort_by(|a, b| policy_rank(a).cmp(&policy_rank(b)).then(a.cmp(b)));
    policies.dedup();
    let mut settings: Vec<(String, String, f64)> = records
        .iter()
        .map(|r| {
            (
                r.spec.objective.clone(),
                r.spec.cost_level.clone(),
                r.spec.variance,
            )
        })
        .collect();
    settings.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(cost_rank(&a.1).cmp(&cost_rank(&b.1)))
            .then(a.1.cmp(&b.1))
            .then(a.2.total_cmp(&b.2))
    });
    settings.dedup();
    let label = Statistic::MeanSe.label();
    let mut written = Vec::new();
    let mut write = |fig: &Figure, stem: String| -> Result<()> {
        render_png_svg(fig, fdir, &file_component(&stem), &mut written)
    };
    let mut overview: BTreeMap<&str, Vec<Panel>> = BTreeMap::new();
    for (objective, cost, variance) in &settings {
        let recs: Vec<&RunRecord> = records
            .iter()
            .filter(|r| {
                &r.spec.objective == objective
                    && &r.spec.cost_level == cost
                    && r.spec.variance == *variance
            })
            .collect();
        let seeds = recs
            .iter()
            .map(|r| r.spec.seed)
            .collect::<BTreeSet<_>>()
            .len();
        let s = setting_summary(format!("{cost}, var = {variance}"), &policies, &recs);
        let fig = Figure {
            title: format!("{objective}, {cost} costs, variance {variance}"),
            panels: vec![setting_panel(
                &s,
                &policies,
                format!("simple regret, {label} over {seeds} seed(s)"),
            )],
        };
        write(&fig, format!("{objective}_{cost}_var{variance}"))?;
        let panels = overview.entry(objective.as_str()).or_default();
        let mut p = setting_panel(&s, &policies, s.problem.clone());
        if !panels.is_empty() {
            p.legend = Legend::Hidden;
        }
        panels.push(p);
    }
    for (objective, panels) in overview {
        let fig = Figure {
            title: format!("{objective}: simple regret against cumulative cost ({label})"),
            panels,
        };
        write(&fig, objective.to_string())?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(costs: &[f64], regrets: &[f64]) -> RunRecord {
        RunRecord {
            spec: RunSpec {
                objective: "hartmann3".into(),
                cost_level: "cheap".into(),
                variance: 0.02,
                policy: "random".into(),
                seed: 0,
                budget: 1.0,
                bank_size: Some(16),
            },
            optimum: 0.0,
            wall_seconds: 0.0,
            cpu_seconds: None,
            steps: costs
                .iter()
                .zip(regrets)
                .map(|(&c, &r)| StepRecord {
                    set: 0,
                    x_ctrl: vec![],
                    y: 0.0,
                    cost: 0.0,
                    cumulative_cost: c,
                    value: 0.0,
                    simple_regret: r,
                    lambda: None,
                })
                .collect(),
        }
    }

    #[test]
    fn regret_at_is_a_step_function_of_cost() {
        let r = rec(&[0.1, 0.3, 0.6], &[5.0, 2.0, 1.0]);
        assert_eq!(regret_at(&r, 0.05), 5.0);
        assert_eq!(regret_at(&r, 0.1), 5.0);
        assert_eq!(regret_at(&r, 0.29), 5.0);
        assert_eq!(regret_at(&r, 0.3), 2.0);
        assert_eq!(regret_at(&r, 10.0), 1.0);
    }

    #[test]
    fn setting_panels_show_the_mean_and_one_standard_error_in_fixed_colors() {
        let mut a = rec(&[0.5, 1.0], &[4.0, 2.0]);
        let mut b = rec(&[0.25, 1.0], &[6.0, 0.0]);
        a.spec.policy = "ucb-cvs".into();
        b.spec.policy = "ucb-cvs".into();
        b.spec.seed = 1;
        let policies = vec!["etc-50".to_string(), "ucb-cvs".to_string()];
        let s = setting_summary("toy".into(), &policies, &[&a, &b]);
        // Only policies with runs; the grid runs from 0 to the budget.
        assert_eq!(s.policies.len(), 1);
        assert_eq!(s.grid.len(), FIGURE_GRID);
        assert_eq!((s.grid[0], s.grid[FIGURE_GRID - 1]), (0.0, 1.0));
        let p = setting_panel(&s, &policies, "t".into());
        let series = &p.series[0];
        assert_eq!(series.color, Some(1));
        // At cost 1: regrets 2 and 0, mean 1, standard error 1 (sample sd √2, n = 2).
        let last = FIGURE_GRID - 1;
        assert_eq!(series.y[last], 1.0);
        let (lo, hi) = series.band.as_ref().unwrap();
        assert!((lo[last] - 0.0).abs() < 1e-12 && (hi[last] - 2.0).abs() < 1e-12);
        // At cost 0.5 (step functions): 4 and 6.
        assert_eq!(series.y[(FIGURE_GRID - 1) / 2], 5.0);
        assert!(!p.log_y, "a band reaching 0 cannot be drawn on a log axis");
    }
}
