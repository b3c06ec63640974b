//! One run: a problem instance × a policy × a seed, driven until its budget is spent.
//!
//! Every decision is the BO driver's ([`pandora_core::run::driver::Run`], shared with studies);
//! this module adapts it to a problem instance and a trace. The loop follows the papers: the
//! initial design (scrambled Sobol, or explicit points) is evaluated first and its cost is **not**
//! charged to the budget; then BO steps run `while cumulative BO cost < budget` (the last
//! evaluation may overshoot and is kept) and/or until `max_evaluations` BO steps. Every step
//! warm-starts the fit from the previous model step's hyperparameters. PBGI-D's λ is replayed
//! from the trace (λ0, divided by β once at the start of the iteration after one whose maximal
//! index fell below the best value observed including that iteration's evaluation), so a partial
//! trace continues exactly.
//!
//! With a `[stopping]` section, the stopping statistics of `D_t` are computed at the start of
//! each iteration `t` (before the budget check, so the final `D_T` gets its line too) on the
//! posterior the step itself fitted (returned with its proposal, or fitted with the same seed and
//! warm start when no model step follows), and written before the step. A resumed
//! run keeps the lines already written and rebuilds `D_{t−1}`'s posterior (for SRGap) from the
//! hyperparameters stored in them.

use super::config::{CostSettingName, Plan, RunSpec, build_problem, step_seed};
use super::lock::{Acquired, RunLock};
use super::stopping::{RecordInputs, StatisticsSpec, record, statistics_seed};
use super::trace::{self, Appender, End, Header, Line, SecondsClock, Step, StoppingStats};
use crate::cpu_clock::{Stopwatch, exact_here};
use anyhow::{Context, Result, anyhow, bail};
use pandora_core::acquisition::{CostModel, KnownCost, fit_log_cost_model};
use pandora_core::gp::fit::FitOptions;
use pandora_core::gp::{GpModel, Transforms};
use pandora_core::policy::{CostSetting, Phase, StepConfig, StepModels};
use pandora_core::run::Finished;
use pandora_core::run::driver::{BudgetSpec, Entry, Outcome, Policy, Run, Verdict};
use pandora_core::stopping::CostInfo;
use pandora_problems::Problem;
use pandora_study::study::{params_from_json, params_to_json};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;

/// Version of the trace format written here.
pub const TRACE_VERSION: u32 = 1;

/// A safety cap on BO-phase evaluations when only a budget is set (costs near zero would
/// otherwise never exhaust it).
pub const EVALUATION_CAP: usize = 100_000;

/// What [`run_one`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// The trace was already complete.
    Skipped,
    /// The run was carried out (or continued) to its end.
    Completed {
        /// Evaluations done now (not replayed from the trace).
        new_evaluations: usize,
    },
    /// Another process is writing the trace (its [`super::lock`] holder line): not touched.
    Busy(String),
}

/// The header a run's trace must have.
pub fn header(plan: &Plan, r: &RunSpec, problem: &dyn Problem) -> Header {
    let p = &plan.problems[r.problem];
    let pol = &plan.policies[r.policy];
    Header {
        version: TRACE_VERSION,
        experiment: plan.name.clone(),
        problem: p.label.clone(),
        policy: pol.label.clone(),
        acquisition: pol.config.spec.name().to_string(),
        seed: r.seed,
        problem_seed: super::config::problem_seed(r.seed),
        dim: p.config.dim,
        optimum: problem.optimum(),
        regret_scale: p.regret_scale,
        budget: p.budget,
        max_evaluations: p.max_evaluations,
        cost_setting: match p.cost_setting {
            CostSettingName::Uniform => "uniform",
            CostSettingName::Known => "known",
            CostSettingName::Unknown => "unknown",
        }
        .into(),
        settings: plan.run_settings(r),
    }
}

/// Problem instances shared by the runs of an experiment: one per (problem, instance seed),
/// built once (building may be expensive, e.g. a GP sample's optimum search) and used by every
/// policy. Building is deterministic, so sharing does not change results.
pub struct Instances {
    built: HashMap<(usize, u64), std::result::Result<Box<dyn Problem>, String>>,
}

impl Instances {
    /// Builds, in parallel, the instances the runs `runs` of `plan` need.
    pub fn build(plan: &Plan, runs: &[RunSpec]) -> Self {
        let mut keys: Vec<(usize, u64)> = runs.iter().map(|r| (r.problem, r.seed)).collect();
        keys.sort_unstable();
        keys.dedup();
        let built = keys
            .into_par_iter()
            .map(|(p, seed)| {
                let b = build_problem(&plan.problems[p].config, seed).map_err(|e| format!("{e:#}"));
                ((p, seed), b)
            })
            .collect();
        Self { built }
    }

    /// The instance of run `r`.
    pub fn get(&self, r: &RunSpec) -> Result<&dyn Problem> {
        match self.built.get(&(r.problem, r.seed)) {
            Some(Ok(p)) => Ok(p.as_ref()),
            Some(Err(e)) => Err(anyhow!("{e}")),
            None => Err(anyhow!("the problem instance of this run was not built")),
        }
    }
}

/// Whether run `r` has a complete trace in `dir` written with the current configuration.
pub fn is_complete(plan: &Plan, r: &RunSpec, dir: &Path) -> bool {
    let path = dir.join(plan.trace_name(r));
    path.exists()
        && trace::read(&path).is_ok_and(|t| {
            t.end.is_some()
                && t.header.version == TRACE_VERSION
                && t.header.experiment == plan.name
                && t.header.settings == plan.run_settings(r)
        })
}

/// Where the statistics of one iteration are computed.
struct StatContext<'a> {
    d: usize,
    n_initial: usize,
    /// The step seed of the observation count `n` of `D_t`.
    seed: u64,
    step_config: &'a StepConfig,
    problem_cost: CostSettingName,
    known: &'a dyn CostModel,
}

/// The stopping statistics of `D_t` = the run's observations (`t` = its BO steps).
///
/// The posterior is the one the step fitted (`models`), or, when no model step follows, fitted
/// with the step's seed and warm start (what the step would do). `D_{t−1}`'s posterior (SRGap) is
/// rebuilt from the hyperparameters of line `t − 1`.
fn stopping_line(
    spec: &StatisticsSpec,
    run: &Run<'_>,
    previous_lines: &[StoppingStats],
    models: Option<&StepModels>,
    ctx: StatContext<'_>,
) -> Result<StoppingStats> {
    if ctx.step_config.output_scale.is_some() {
        // PRB and the median rules sample or condition the stationary GP directly.
        bail!("[stopping] statistics are not supported with model.amplitude = true");
    }
    let t0 = Stopwatch::start();
    let StatContext { d, seed, .. } = ctx;
    let h = run.history();
    let n = h.y.len();
    let transforms = Transforms {
        normalize_inputs: None,
        standardize_outcomes: ctx.step_config.standardize,
        output_scale: ctx.step_config.output_scale.clone(),
    };
    let fitted;
    let model = match models {
        Some(m) => &m.model,
        None => {
            let opts = FitOptions {
                seed,
                ..ctx.step_config.fit.clone()
            };
            fitted = GpModel::fit(h.x, h.y, d, &transforms, &opts, run.warm_start())?;
            &fitted
        }
    };
    // Only SRGap and the before-update LogEIPC use `D_{t−1}`'s posterior.
    let needs_previous = spec.srgap || spec.log_eipc_before_update;
    let t_previous = Stopwatch::start();
    let previous = match previous_lines.last() {
        Some(l) if n >= 2 && needs_previous => match l.params.as_ref().and_then(params_from_json) {
            Some(params) => Some(GpModel::with_params(
                &h.x[..(n - 1) * d],
                &h.y[..n - 1],
                d,
                &transforms,
                params,
            )?),
            None => None,
        },
        _ => None,
    };
    let seconds_previous = previous.as_ref().map(|_| t_previous.wall());
    let cpu_previous = previous.as_ref().and_then(|_| t_previous.cpu());
    let fitted_cost;
    let cost_info = match ctx.problem_cost {
        CostSettingName::Uniform => CostInfo::Uniform,
        CostSettingName::Known => CostInfo::Known(ctx.known),
        CostSettingName::Unknown => match models.and_then(|m| m.cost_model.as_ref()) {
            Some(m) => CostInfo::Unknown(m),
            None => {
                let opts = FitOptions {
                    seed: seed ^ 0x636f_7374,
                    ..ctx.step_config.cost_fit.clone()
                };
                fitted_cost = fit_log_cost_model(h.x, h.cost, d, &opts)?;
                CostInfo::Unknown(&fitted_cost)
            }
        },
    };
    let mut line = record(
        spec,
        &RecordInputs {
            d,
            x: h.x,
            y: h.y,
            cost: h.cost,
            n_initial: ctx.n_initial,
            model,
            previous: previous.as_ref(),
            cost_info,
            seed: statistics_seed(seed),
        },
    )?;
    if line.iteration as u64 != run.bo_steps() {
        bail!(
            "internal: statistics for iteration {} at BO step {}",
            line.iteration,
            run.bo_steps()
        );
    }
    if let Some(secs) = line.statistic_seconds.as_mut() {
        secs.previous_posterior = match secs.clock {
            SecondsClock::Cpu => cpu_previous.or(seconds_previous),
            SecondsClock::Wall => seconds_previous,
        };
    }
    line.params = Some(params_to_json(model.params()));
    line.seconds = t0.wall();
    line.cpu_seconds = exact_here().then(|| t0.cpu()).flatten();
    Ok(line)
}

/// The file an unfinished run of trace `path` is written to (`NAME.jsonl.part`); it is renamed
/// to `path` once the run has ended.
pub fn part_path(path: &Path) -> std::path::PathBuf {
    trace::with_suffix(path, ".part")
}

/// The trace (if any) of run `r` to continue: `None` if missing, an error if written by another
/// configuration, [`RunStatus::Skipped`] if complete. A complete trace is `path`; an unfinished
/// one is `path.part` (or, written by an older version, `path` without an end line).
fn existing_trace(
    plan: &Plan,
    r: &RunSpec,
    path: &Path,
) -> Result<std::result::Result<Option<trace::Trace>, RunStatus>> {
    let part = part_path(path);
    let source = if path.exists() {
        path.to_path_buf()
    } else if part.exists() {
        part
    } else {
        return Ok(Ok(None));
    };
    let path = source.as_path();
    let t = trace::read(path)?;
    // Compare the configuration before building the problem: complete runs are skipped without
    // building their instance.
    if t.header.version != TRACE_VERSION
        || t.header.experiment != plan.name
        || t.header.settings != plan.run_settings(r)
    {
        return Err(mismatch(path));
    }
    if t.end.is_some() {
        return Ok(Err(RunStatus::Skipped));
    }
    Ok(Ok(Some(t)))
}

fn mismatch(path: &Path) -> anyhow::Error {
    anyhow!(
        "{path:?} was written by a different configuration; delete it or use another --out \
         directory"
    )
}

/// The driver's policy of run `r` on `problem` (`known` is the problem's cost as a cost model).
fn run_policy<'a>(
    plan: &Plan,
    r: &RunSpec,
    problem: &dyn Problem,
    known: &'a dyn CostModel,
) -> Result<Policy<'a>> {
    let p = &plan.problems[r.problem];
    let mut step = plan.step_config(r)?;
    if p.config.model.amplitude == Some(true) {
        step.output_scale = Some(problem.output_scale().ok_or_else(|| {
            anyhow!(
                "model.amplitude: problem '{}' has no known amplitude (only the counterexamples do)",
                problem.name()
            )
        })?);
    }
    let pol = &plan.policies[r.policy].config;
    let cost = match p.cost_setting {
        _ if !step.acquisition.is_cost_aware() => CostSetting::Uniform,
        CostSettingName::Uniform => CostSetting::Uniform,
        CostSettingName::Known => CostSetting::Known(known),
        CostSettingName::Unknown => CostSetting::Unknown,
    };
    let decay = pol.spec.decay();
    let cap = EVALUATION_CAP as u64;
    Ok(Policy {
        d: problem.dim(),
        step,
        cost,
        known_cost: None,
        decay,
        stopping: None,
        budget: BudgetSpec {
            total: p.budget,
            horizon: p.budget.or(p.max_evaluations.map(|m| m as f64)),
            max_bo_steps: Some(p.max_evaluations.map_or(cap, |m| (m as u64).min(cap))),
            ..BudgetSpec::default()
        },
        initial_points: None,
    })
}

/// The trace's name for why a run ended.
fn end_reason(f: &Finished, max_evaluations: Option<usize>, bo_steps: u64) -> Result<&'static str> {
    match f {
        Finished::Budget { .. } => Ok("budget"),
        Finished::MaxEvaluations(_) if max_evaluations.is_some_and(|m| bo_steps >= m as u64) => {
            Ok("max_evaluations")
        }
        Finished::MaxEvaluations(_) => Ok("evaluation_cap"),
        other => bail!("internal: an experiment run cannot finish by {other}"),
    }
}

/// Carries out run `r` of `plan`, writing its trace into `dir`: skips a complete trace,
/// continues a partial one and starts a missing one, holding the run's [`super::lock`] meanwhile
/// (a run whose lock another process holds is left alone: [`RunStatus::Busy`]).
pub fn run_one(plan: &Plan, r: &RunSpec, dir: &Path, instances: &Instances) -> Result<RunStatus> {
    let path = dir.join(plan.trace_name(r));
    // A complete trace is never written again: skipped without taking the lock.
    if path.exists()
        && let Err(status) = existing_trace(plan, r, &path)?
    {
        return Ok(status);
    }
    let _lock = match RunLock::acquire(&path)? {
        Acquired::Held(l) => l,
        Acquired::Busy(holder) => return Ok(RunStatus::Busy(holder)),
    };
    // Read under the lock: another writer may have advanced or finished the run meanwhile.
    let existing = match existing_trace(plan, r, &path)? {
        Ok(t) => t,
        Err(status) => return Ok(status),
    };
    let problem = instances.get(r)?;
    let head = header(plan, r, problem);
    let (steps, stop_lines) = match existing {
        Some(t) if t.header != head => return Err(mismatch(&path)),
        Some(t) => (t.steps, t.stopping),
        None => (Vec::new(), Vec::new()),
    };
    if plan.stopping.is_none() && !stop_lines.is_empty() {
        return Err(mismatch(&path));
    }
    // (Re)write the valid prefix atomically: this drops a torn last line.
    let mut lines = vec![Line::Header(Box::new(head.clone()))];
    lines.extend(trace::body_lines(&steps, &stop_lines));
    let part = part_path(&path);
    trace::write_atomic(&part, &lines)?;
    let known = KnownCost(|x: &[f64], g: &mut [f64]| problem.cost_grad(x, g));
    let mut policy = run_policy(plan, r, problem, &known)?;
    let p = &plan.problems[r.problem];
    policy.initial_points = p.config.initial_points.as_deref();
    let mut run = Run::new(&policy)?;
    let mut totals = Totals::default();
    for s in &steps {
        if s.x.len() != policy.d {
            bail!(
                "{part:?} step {}: x has {} coordinates, not {}",
                s.k,
                s.x.len(),
                policy.d
            );
        }
        totals.observe(&mut run, s.phase, &s.x, s.y, s.cost, s.acquisition_value)?;
        run.carry(
            s.params.as_ref().and_then(params_from_json),
            s.bmsei.clone(),
        );
    }
    let mut out = Appender::open(&part)?;
    let mut looping = Loop {
        plan,
        r,
        policy: &policy,
        problem,
        head: &head,
        known: &known,
        stop_lines,
        out: &mut out,
    };
    let (reason, new_evaluations) = looping.drive(&mut run, &mut totals)?;
    out.push(&Line::End(End {
        reason: reason.into(),
        evaluations: run.handed_out(),
        cumulative_cost: run.spent(),
    }))?;
    out.finish(&part, &path)?;
    Ok(RunStatus::Completed { new_evaluations })
}

/// What the trace records beside the driver's state.
#[derive(Default)]
struct Totals {
    /// Cost of every evaluation, the initial design's included.
    total_cost: f64,
    /// The best value so far.
    best: Option<f64>,
}

impl Totals {
    /// Records one evaluation with the driver and in the totals.
    fn observe(
        &mut self,
        run: &mut Run<'_>,
        phase: Phase,
        x: &[f64],
        y: f64,
        cost: f64,
        acquisition_value: Option<f64>,
    ) -> Result<()> {
        run.record(Entry {
            x,
            phase,
            outcome: Outcome::Complete {
                y,
                cost: Some(cost),
            },
            cost: Some(cost),
            acquisition_value,
            check: None,
        })?;
        self.total_cost += cost;
        self.best = Some(self.best.map_or(y, |b| b.max(y)));
        Ok(())
    }
}

/// The evaluation loop of one run.
struct Loop<'a, 'o> {
    plan: &'a Plan,
    r: &'a RunSpec,
    policy: &'a Policy<'a>,
    problem: &'a dyn Problem,
    head: &'a Header,
    known: &'a dyn CostModel,
    stop_lines: Vec<StoppingStats>,
    out: &'o mut Appender,
}

impl Loop<'_, '_> {
    /// Steps, evaluates and writes until the driver says the run is finished: why, and the
    /// number of evaluations done now.
    fn drive(&mut self, run: &mut Run<'_>, totals: &mut Totals) -> Result<(&'static str, usize)> {
        let p = &self.plan.problems[self.r.problem];
        let mut new_evaluations = 0;
        loop {
            let k = run.handed_out();
            let t0 = Stopwatch::start();
            let seed = step_seed(self.r.seed, k);
            let step = run
                .step(seed, &|x| x.to_vec())
                .with_context(|| format!("step {k}"))?;
            let mut stat = (0.0, None);
            if k >= p.initial_design {
                stat = self.statistics(run, step.models.as_ref(), k, seed)?;
            }
            let prop = match step.verdict {
                Verdict::Propose(prop) => prop,
                Verdict::Finished(f) => {
                    let reason = end_reason(&f, p.max_evaluations, run.bo_steps())?;
                    return Ok((reason, new_evaluations));
                }
            };
            // CPU time only where the thread clock sees the whole step (see `cpu_clock`).
            let exact = exact_here();
            let seconds_propose = (t0.wall() - stat.0).max(0.0);
            let cpu_seconds_propose = exact
                .then(|| Some((t0.cpu()? - stat.1.unwrap_or(0.0)).max(0.0)))
                .flatten();
            let t1 = Stopwatch::start();
            let y = self.problem.eval(&prop.x);
            let cost = self.problem.cost(&prop.x);
            let seconds_eval = t1.wall();
            let cpu_seconds_eval = exact.then(|| t1.cpu()).flatten();
            if !y.is_finite() {
                bail!("step {k}: the objective is {y} at {:?}", prop.x);
            }
            if !(cost.is_finite() && cost > 0.0) {
                bail!(
                    "step {k}: the cost must be finite and > 0, got {cost} at {:?}",
                    prop.x
                );
            }
            let acq = (prop.acquisition_value.is_finite()).then_some(prop.acquisition_value);
            totals.observe(run, prop.phase, &prop.x, y, cost, acq)?;
            let best = totals.best.unwrap_or(y);
            let step = Step {
                k,
                phase: prop.phase,
                regret: self.head.optimum.map(|o| p.regret_scale * (o - best)),
                x: prop.x,
                y,
                cost,
                cumulative_cost: run.spent(),
                total_cost: totals.total_cost,
                best,
                acquisition_value: acq,
                lambda: prop.lambda,
                predicted_cost: if self.policy.step.acquisition.is_cost_aware() {
                    prop.predicted_cost
                } else {
                    None
                },
                params: prop.params.as_ref().map(params_to_json),
                seconds_propose,
                seconds_eval,
                cpu_seconds_propose,
                cpu_seconds_eval,
                bmsei: prop.bmsei,
            };
            self.out.push(&Line::Step(Box::new(step)))?;
            new_evaluations += 1;
        }
    }

    /// Writes the stopping statistics of the current iteration (with a `[stopping]` section, once
    /// per iteration); returns the seconds they took (wall, and CPU when measured).
    fn statistics(
        &mut self,
        run: &Run<'_>,
        models: Option<&StepModels>,
        k: usize,
        seed: u64,
    ) -> Result<(f64, Option<f64>)> {
        let Some(spec) = self.plan.stopping.as_ref().map(|s| &s.statistics) else {
            return Ok((0.0, None));
        };
        let t = run.bo_steps() as usize;
        if self.stop_lines.len() != t {
            // Already written before an interruption (and identical when recomputed).
            debug_assert!(self.stop_lines.len() == t + 1);
            return Ok((0.0, None));
        }
        let p = &self.plan.problems[self.r.problem];
        let ctx = StatContext {
            d: self.policy.d,
            n_initial: p.initial_design,
            seed,
            step_config: &self.policy.step,
            problem_cost: p.cost_setting,
            known: self.known,
        };
        let line = stopping_line(spec, run, &self.stop_lines, models, ctx)
            .with_context(|| format!("stopping statistics at step {k}"))?;
        let seconds = (line.seconds, line.cpu_seconds);
        self.out.push(&Line::Stopping(Box::new(line.clone())))?;
        self.stop_lines.push(line);
        Ok(seconds)
    }
}
