//! One run: a problem instance × a policy × a seed, driven until its budget is spent.
//!
//! The loop follows the papers (and `pandora-study`): the initial design (scrambled Sobol, or
//! explicit points) is evaluated first and its cost is **not** charged to the budget; then BO
//! steps run `while cumulative BO cost < budget` (the last evaluation may overshoot and is kept)
//! and/or until `max_evaluations` BO steps. Every step warm-starts the fit from the previous
//! model step's hyperparameters. PBGI-D's λ is replayed from the trace (λ0, divided by β once at
//! the start of the iteration after one whose maximal index fell below the best value observed
//! including that iteration's evaluation), so a partial trace continues exactly.
//!
//! With a `[stopping]` section, the stopping statistics of `D_t` are computed at the start of
//! each iteration `t` (before the budget check, so the final `D_T` gets its line too) on the
//! posterior the step itself fits (rebuilt from the proposal's hyperparameters, or fitted with
//! the same seed and warm start when no proposal follows), and written before the step. A resumed
//! run keeps the lines already written and rebuilds `D_{t−1}`'s posterior (for SRGap) from the
//! hyperparameters stored in them.

use super::config::{CostSettingName, Plan, RunSpec, build_problem, step_seed};
use super::stopping::{RecordInputs, record, statistics_seed};
use super::trace::{self, Appender, End, Header, Line, Step, StoppingStats};
use anyhow::{Context, Result, anyhow, bail};
use pandora_core::acquisition::bmsei::BmseiCarry;
use pandora_core::acquisition::{AcquisitionName, KnownCost, PbgiDecay, fit_log_cost_model};
use pandora_core::gp::fit::FitOptions;
use pandora_core::gp::{GpModel, GpParams, Transforms};
use pandora_core::policy::{
    CostSetting, History, Phase, Proposal, StepConfig, StepContext, design_point, propose,
};
use pandora_core::stopping::CostInfo;
use pandora_problems::Problem;
use pandora_study::study::{params_from_json, params_to_json};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Version of the trace format written here.
pub const TRACE_VERSION: u32 = 1;

/// A safety cap on BO-phase evaluations when only a budget is set (costs near zero would
/// otherwise never exhaust it).
pub const EVALUATION_CAP: usize = 100_000;

/// What [`run_one`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The trace was already complete.
    Skipped,
    /// The run was carried out (or continued) to its end.
    Completed {
        /// Evaluations done now (not replayed from the trace).
        new_evaluations: usize,
    },
}

/// The state of a run, rebuilt from its steps.
struct State {
    x: Vec<f64>,
    y: Vec<f64>,
    c: Vec<f64>,
    bo_cost: f64,
    total_cost: f64,
    bo_steps: usize,
    best: f64,
    warm: Option<GpParams>,
    decay: Option<PbgiDecay>,
    /// B-MS-EI's carry from the last model step.
    bmsei: Option<BmseiCarry>,
}

/// What a model step produced besides its point (what the next steps build on).
struct StepOutputs {
    /// The acquisition value (PBGI-D's decay).
    acq: Option<f64>,
    /// The objective model's hyperparameters (the next fit's warm start).
    params: Option<GpParams>,
    /// B-MS-EI's carry.
    bmsei: Option<BmseiCarry>,
}

impl State {
    /// Adds one evaluation. `acq` and `params` matter only for model steps.
    fn observe(&mut self, phase: &str, x: &[f64], y: f64, cost: f64, out: StepOutputs) {
        let StepOutputs { acq, params, bmsei } = out;
        self.x.extend_from_slice(x);
        self.y.push(y);
        self.c.push(cost);
        self.total_cost += cost;
        if phase != "initial" {
            self.bo_cost += cost;
            self.bo_steps += 1;
        }
        self.best = self.best.max(y);
        if phase == "model" {
            if params.is_some() {
                self.warm = params;
            }
            if bmsei.is_some() {
                self.bmsei = bmsei;
            }
            if let Some(d) = self.decay.as_mut() {
                d.begin_iteration();
                if let Some(a) = acq {
                    d.end_iteration(a, self.best);
                }
            }
        }
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::InitialDesign => "initial",
        Phase::Random => "random",
        Phase::Model => "model",
    }
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
        acquisition: pol.config.acquisition.clone(),
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

/// The next BO step's proposal on the data so far.
fn next_proposal(
    state: &State,
    step_config: &StepConfig,
    cost_setting: CostSetting<'_>,
    total_budget: Option<f64>,
    seed: u64,
    d: usize,
    k: usize,
) -> Result<Proposal> {
    let lambda = state.decay.map(|mut dcy| dcy.begin_iteration());
    let ctx = StepContext {
        cumulative_cost: state.bo_cost,
        remaining_budget: total_budget.map(|b| b - state.bo_cost),
        total_budget,
        lambda,
        bmsei: state.bmsei.clone(),
    };
    let history = History {
        x: &state.x,
        y: &state.y,
        cost: &state.c,
        pending: &[],
    };
    propose(
        d,
        history,
        step_config,
        &ctx,
        cost_setting,
        seed,
        state.warm.as_ref(),
    )
    .with_context(|| format!("step {k}"))
}

/// Where the statistics of one iteration are computed.
struct StatContext {
    d: usize,
    n_initial: usize,
    /// The step seed of the observation count `n` of `D_t`.
    seed: u64,
}

/// The stopping statistics of `D_t` = the observations in `state` (`t = state.bo_steps`).
///
/// The posterior is the one the step fits: rebuilt from the proposal's hyperparameters when the
/// policy fitted one, otherwise fitted with the step's seed and warm start (what `propose` would
/// do). `D_{t−1}`'s posterior (SRGap) is rebuilt from the hyperparameters of line `t − 1`.
#[allow(clippy::too_many_arguments)]
fn stopping_line(
    spec: &super::stopping::StatisticsSpec,
    state: &State,
    previous_lines: &[StoppingStats],
    step_config: &StepConfig,
    problem_cost: CostSettingName,
    known: &dyn pandora_core::acquisition::CostModel,
    prop: Option<&Proposal>,
    ctx: StatContext,
) -> Result<StoppingStats> {
    if step_config.output_scale.is_some() {
        // PRB and the median rules sample or condition the stationary GP directly.
        bail!("[stopping] statistics are not supported with model.amplitude = true");
    }
    let t0 = Instant::now();
    let StatContext { d, n_initial, seed } = ctx;
    let n = state.y.len();
    let transforms = Transforms {
        normalize_inputs: None,
        standardize_outcomes: step_config.standardize,
        output_scale: step_config.output_scale.clone(),
    };
    let model = match prop.and_then(|p| p.params.clone()) {
        Some(params) => GpModel::with_params(&state.x, &state.y, d, &transforms, params)?,
        None => GpModel::fit(
            &state.x,
            &state.y,
            d,
            &transforms,
            &FitOptions {
                seed,
                ..step_config.fit.clone()
            },
            state.warm.as_ref(),
        )?,
    };
    let previous = match previous_lines.last() {
        Some(l) if n >= 2 => match l.params.as_ref().and_then(params_from_json) {
            Some(params) => Some(GpModel::with_params(
                &state.x[..(n - 1) * d],
                &state.y[..n - 1],
                d,
                &transforms,
                params,
            )?),
            None => None,
        },
        _ => None,
    };
    let cost_model = match problem_cost {
        CostSettingName::Unknown => Some(match prop.and_then(|p| p.cost_params.clone()) {
            Some(cp) => {
                let logc: Vec<f64> = state.c.iter().map(|c| c.ln()).collect();
                GpModel::with_params(
                    &state.x,
                    &logc,
                    d,
                    &Transforms {
                        normalize_inputs: None,
                        standardize_outcomes: true,
                        output_scale: None,
                    },
                    cp,
                )?
            }
            None => fit_log_cost_model(
                &state.x,
                &state.c,
                d,
                &FitOptions {
                    seed: seed ^ 0x636f_7374,
                    ..step_config.cost_fit.clone()
                },
            )?,
        }),
        _ => None,
    };
    let cost_info = match (problem_cost, &cost_model) {
        (CostSettingName::Uniform, _) => CostInfo::Uniform,
        (CostSettingName::Known, _) => CostInfo::Known(known),
        (CostSettingName::Unknown, Some(m)) => CostInfo::Unknown(m),
        (CostSettingName::Unknown, None) => unreachable!("fitted above"),
    };
    let mut line = record(
        spec,
        &RecordInputs {
            d,
            x: &state.x,
            y: &state.y,
            cost: &state.c,
            n_initial,
            model: &model,
            previous: previous.as_ref(),
            cost_info,
            seed: statistics_seed(seed),
        },
    )?;
    if line.iteration != state.bo_steps {
        bail!(
            "internal: statistics for iteration {} at BO step {}",
            line.iteration,
            state.bo_steps
        );
    }
    line.params = Some(params_to_json(model.params()));
    line.seconds = t0.elapsed().as_secs_f64();
    Ok(line)
}

/// Carries out run `r` of `plan`, writing its trace into `dir`: skips a complete trace,
/// continues a partial one and starts a missing one.
pub fn run_one(plan: &Plan, r: &RunSpec, dir: &Path, instances: &Instances) -> Result<RunStatus> {
    let path = dir.join(plan.trace_name(r));
    let p = &plan.problems[r.problem];
    let mismatch = || {
        anyhow!(
            "{path:?} was written by a different configuration; delete it or use another \
             --out directory"
        )
    };
    let existing = if path.exists() {
        let t = trace::read(&path)?;
        // Compare the configuration before building the problem: complete runs are skipped
        // without building their instance.
        if t.header.version != TRACE_VERSION
            || t.header.experiment != plan.name
            || t.header.settings != plan.run_settings(r)
        {
            return Err(mismatch());
        }
        if t.end.is_some() {
            return Ok(RunStatus::Skipped);
        }
        Some(t)
    } else {
        None
    };
    let problem = instances.get(r)?;
    let d = problem.dim();
    let head = header(plan, r, problem);
    let mut steps: Vec<Step> = Vec::new();
    let mut stop_lines: Vec<StoppingStats> = Vec::new();
    if let Some(t) = existing {
        if t.header != head {
            return Err(mismatch());
        }
        steps = t.steps;
        stop_lines = t.stopping;
    }
    if plan.stopping.is_none() && !stop_lines.is_empty() {
        return Err(mismatch());
    }
    // (Re)write the valid prefix atomically: this drops a torn last line.
    let mut lines = vec![Line::Header(Box::new(head.clone()))];
    lines.extend(trace::body_lines(&steps, &stop_lines));
    trace::write_atomic(&path, &lines)?;
    let mut out = Appender::open(&path)?;

    let mut step_config = plan.step_config(r)?;
    if plan.problems[r.problem].config.model.amplitude == Some(true) {
        step_config.output_scale = Some(problem.output_scale().ok_or_else(|| {
            anyhow!(
                "model.amplitude: problem '{}' has no known amplitude (only the counterexamples do)",
                problem.name()
            )
        })?);
    }
    let pol = &plan.policies[r.policy].config;
    let acquisition = step_config.acquisition;
    let decay = if acquisition == AcquisitionName::PbgiD {
        Some(PbgiDecay::new(
            pol.lambda0.unwrap_or(0.1),
            pol.beta.unwrap_or(2.0),
        )?)
    } else {
        None
    };
    let mut state = State {
        x: Vec::new(),
        y: Vec::new(),
        c: Vec::new(),
        bo_cost: 0.0,
        total_cost: 0.0,
        bo_steps: 0,
        best: f64::NEG_INFINITY,
        warm: None,
        decay,
        bmsei: None,
    };
    for s in &steps {
        if s.x.len() != d {
            bail!(
                "{path:?} step {}: x has {} coordinates, not {d}",
                s.k,
                s.x.len()
            );
        }
        let params = s.params.as_ref().and_then(params_from_json);
        let out = StepOutputs {
            acq: s.acquisition_value,
            params,
            bmsei: s.bmsei.clone(),
        };
        state.observe(&s.phase, &s.x, s.y, s.cost, out);
    }
    let known = KnownCost(|x: &[f64], g: &mut [f64]| problem.cost_grad(x, g));
    let cost_setting = if !acquisition.is_cost_aware() {
        CostSetting::Uniform
    } else {
        match p.cost_setting {
            CostSettingName::Uniform => CostSetting::Uniform,
            CostSettingName::Known => CostSetting::Known(&known),
            CostSettingName::Unknown => CostSetting::Unknown,
        }
    };
    let total_budget = p.budget.or(p.max_evaluations.map(|m| m as f64));
    let mut new_evaluations = 0;
    let reason = loop {
        let k = state.y.len();
        let t0 = Instant::now();
        let mut stat_seconds = 0.0;
        let prop: Proposal = if k < p.initial_design {
            let x = match &p.config.initial_points {
                Some(pts) => pts[k].clone(),
                None => design_point(d, k as u64, step_config.design_seed)?,
            };
            Proposal::without_model(x, Phase::InitialDesign)
        } else {
            let done = if p.budget.is_some_and(|b| state.bo_cost >= b) {
                Some("budget")
            } else if p.max_evaluations.is_some_and(|m| state.bo_steps >= m) {
                Some("max_evaluations")
            } else if state.bo_steps >= EVALUATION_CAP {
                Some("evaluation_cap")
            } else {
                None
            };
            let seed = step_seed(r.seed, k);
            let prop = match done {
                Some(_) => None,
                None => Some(next_proposal(
                    &state,
                    &step_config,
                    cost_setting,
                    total_budget,
                    seed,
                    d,
                    k,
                )?),
            };
            if let Some(spec) = plan.stopping.as_ref().map(|s| &s.statistics) {
                let t = state.bo_steps;
                if stop_lines.len() != t {
                    // Already written before an interruption (and identical when recomputed).
                    debug_assert!(stop_lines.len() == t + 1);
                } else {
                    let line = stopping_line(
                        spec,
                        &state,
                        &stop_lines,
                        &step_config,
                        p.cost_setting,
                        &known,
                        prop.as_ref(),
                        StatContext {
                            d,
                            n_initial: p.initial_design,
                            seed,
                        },
                    )
                    .with_context(|| format!("stopping statistics at step {k}"))?;
                    stat_seconds = line.seconds;
                    out.push(&Line::Stopping(Box::new(line.clone())))?;
                    stop_lines.push(line);
                }
            }
            match (done, prop) {
                (Some(reason), _) => break reason,
                (None, Some(prop)) => prop,
                (None, None) => unreachable!("a proposal is made when the run continues"),
            }
        };
        let seconds_propose = (t0.elapsed().as_secs_f64() - stat_seconds).max(0.0);
        let t1 = Instant::now();
        let y = problem.eval(&prop.x);
        let cost = problem.cost(&prop.x);
        let seconds_eval = t1.elapsed().as_secs_f64();
        if !y.is_finite() {
            bail!("step {k}: the objective is {y} at {:?}", prop.x);
        }
        if !(cost.is_finite() && cost > 0.0) {
            bail!(
                "step {k}: the cost must be finite and > 0, got {cost} at {:?}",
                prop.x
            );
        }
        let phase = phase_name(prop.phase);
        let acq = prop
            .acquisition_value
            .is_finite()
            .then_some(prop.acquisition_value);
        let params_json = prop.params.as_ref().map(params_to_json);
        let outputs = StepOutputs {
            acq,
            params: prop.params.clone(),
            bmsei: prop.bmsei.clone(),
        };
        state.observe(phase, &prop.x, y, cost, outputs);
        let step = Step {
            k,
            phase: phase.into(),
            regret: head.optimum.map(|o| p.regret_scale * (o - state.best)),
            x: prop.x,
            y,
            cost,
            cumulative_cost: state.bo_cost,
            total_cost: state.total_cost,
            best: state.best,
            acquisition_value: acq,
            lambda: prop.lambda,
            predicted_cost: if acquisition.is_cost_aware() {
                prop.predicted_cost
            } else {
                None
            },
            params: params_json,
            seconds_propose,
            seconds_eval,
            bmsei: prop.bmsei,
        };
        out.push(&Line::Step(Box::new(step)))?;
        new_evaluations += 1;
    };
    out.push(&Line::End(End {
        reason: reason.into(),
        evaluations: state.y.len(),
        cumulative_cost: state.bo_cost,
    }))?;
    Ok(RunStatus::Completed { new_evaluations })
}
