//! One Bayesian-optimization step: initial design → fit the objective GP (and a log-cost GP when
//! costs are unknown) → the configured acquisition's step → a proposal.
//!
//! The step prepares what the acquisition's [`Acquirer`] needs ([`Needs`]: nothing for random
//! search, the objective model for Thompson sampling, both models for the others), hands it the
//! models and the step's inputs, and turns what it chose into a [`Proposal`]. The recipes
//! themselves (pointwise maximization, MES, KG, one-shot KG, the B-MS-EI and MSEI trees, TS,
//! random) live in [`crate::acquisition`], one file each; this module knows no acquisition by
//! name except to record PBGI's λ.
//!
//! Everything is on the unit cube `[0,1]^d` and maximizes; the study layer maps user parameters,
//! bounds and directions to and from it. The step is a pure function of the history, the
//! configuration, the run context and a seed, so a run is reproducible and can resume anywhere.

use crate::acquisition::bmsei::BmseiCarry;
use crate::acquisition::{
    Acquirer, AcquisitionName, AcquisitionParams, CostModel, Needs, OnModel, StepInputs,
    UnknownCost, build_pointwise, fit_log_cost_model,
};
use crate::error::{Error, Result};
use crate::gp::fit::FitOptions;
use crate::gp::{GpModel, GpParams, OutputScale, Transforms};
use crate::optim::mixed::MixedSpace;
use crate::optim::multistart::MultiStartOptions;

pub use crate::acquisition::CostSetting;
pub use crate::optim::domain::{Domain, PENDING_EXCLUSION_RADIUS};
pub use crate::optim::sobol::design_point;

/// Settings of a step that do not change during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// Which acquisition to maximize.
    pub acquisition: AcquisitionName,
    /// Its fixed parameters (β, α, convention, λ for fixed-λ PBGI); the incumbent, schedule
    /// indices, budgets and PBGI-D's λ come from the [`StepContext`].
    pub params: AcquisitionParams,
    /// Objective-model fit.
    pub fit: FitOptions,
    /// Log-cost-model fit (unknown costs).
    pub cost_fit: FitOptions,
    /// Acquisition maximization.
    pub multistart: MultiStartOptions,
    /// Standardize the objective values before fitting (the papers do, except for Bayesian regret).
    pub standardize: bool,
    /// Size of the initial scrambled-Sobol design (default `2(d + 1)`).
    pub initial_design: Option<usize>,
    /// Random Fourier features of Thompson-sampling paths.
    pub ts_features: usize,
    /// Seed of the initial design (the k-th observation gets point k of one scrambled Sobol
    /// sequence) and of random search.
    pub design_seed: u64,
    /// A known input-dependent amplitude of the objective's prior (the PBGI paper's
    /// variable-amplitude kernel; see [`OutputScale`]). Supported by the acquisitions that read
    /// the posterior mean and variance; Thompson sampling, KG and B-MS-EI refuse it.
    pub output_scale: Option<OutputScale>,
    /// The valid points of the cube (one-hot blocks of categorical parameters, grids of int and
    /// ordinal ones; see [`MixedSpace`]): every acquisition is maximized over them only and the
    /// pending-point exclusion holds between valid points. `None` (the default) or an
    /// all-continuous space: the whole cube, with exactly the continuous code path.
    pub space: Option<MixedSpace>,
    /// How the objective model's hyperparameters are fitted given the previous step's (see
    /// [`Refit`]; studies and experiments carry them through [`crate::run::driver::Run`]).
    pub refit: Refit,
}

/// How a model step fits the objective model's hyperparameters when the previous step's are
/// known (the driver's warm start, [`StepContext::warm_fit`]).
///
/// A full fit runs L-BFGS-B from the previous hyperparameters, the priors' modes and
/// [`FitOptions::restarts`] random starts (each evaluation an `O(n³)` factorization and inverse)
/// and keeps the best. One new observation rarely moves the posterior mode far, so a single
/// start from the previous hyperparameters, stopped by the same tolerances, lands on the same
/// mode in a fraction of the evaluations (d = 16, n = 600: 11 evaluations instead of 49, the
/// same log posterior to 2e-9; docs/bench.md). [`Refit::Warm`] fits so, and falls back to the
/// full fit
///
/// - when the warm start improved the log posterior by more than `max_gain` nats per
///   observation: the data moved the model, and another mode may now be better;
/// - on a schedule growing with the run: at trial `s_0 = 0` and `s_{i+1} = s_i + max(1,
///   ⌊growth · s_i⌋)` (every trial while `growth · s < 1`, then whenever the run grew by the
///   factor `1 + growth`), so a mode the single start cannot leave is abandoned, and the full
///   fits' `O(n³)` cost spread over the `growth · n` steps between them stays `O(n²)` per step.
///
/// Between full refits, the warm start is kept as it is when its projected log-posterior
/// gradient on the new data is at most `keep_grad` per observation (one likelihood evaluation
/// instead of an L-BFGS-B run; [`crate::gp::fit::fit_warm_or_keep`]), and a warm run stops at that
/// gradient.
///
/// All three rules read only the history, the warm start and the index of the trial handed out,
/// so a resumed run decides exactly as an uninterrupted one. What a step did is its [`FitKind`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refit {
    /// A full multi-start fit at every step (the previous hyperparameters one more start).
    Always,
    /// A single-start fit from the previous step's hyperparameters, with a full refit when due.
    Warm {
        /// Relative growth of the number of trials between scheduled full refits (> 0; 0.05:
        /// every trial up to trial 40, then every 5 %).
        growth: f64,
        /// A full refit when the warm fit's log-posterior gain per observation exceeds this.
        max_gain: f64,
        /// Keep the warm start when the infinity norm of its projected log-posterior gradient
        /// (with respect to the log-hyperparameters) is at most this times the number of
        /// observations; 0 never keeps it and runs the warm fit to the usual tolerances.
        keep_grad: f64,
    },
}

impl Refit {
    /// The default: [`Refit::Warm`] with a full refit at every 5 % of growth and above a gain of
    /// 0.01 nats per observation, the warm start kept while its projected gradient is at most
    /// 0.003 per observation. (At d = 16, n = 300–600, over one period of the schedule: 2–3× fewer
    /// likelihood evaluations than warm runs to the usual tolerances, the last log posterior
    /// within 0.02 nats of a full fit's; 0.01 saved little more and lost 0.03–0.16 nats;
    /// docs/bench.md.)
    pub const DEFAULT: Refit = Refit::Warm {
        growth: 0.05,
        max_gain: 0.01,
        keep_grad: 0.003,
    };

    /// Whether a full refit is due on the schedule at the step that hands out trial `trial`
    /// (0-based). Integer steps and one IEEE product per scheduled refit: the same on every
    /// platform.
    pub fn scheduled(&self, trial: usize) -> bool {
        let Refit::Warm { growth, .. } = *self else {
            return true;
        };
        if !(growth.is_finite() && growth > 0.0) {
            return true;
        }
        let mut s = 0usize;
        while s < trial {
            s += ((growth * s as f64) as usize).max(1);
        }
        s == trial
    }
}

/// The refit setting by name, as configuration files give it (`refit = "warm"` or `"always"`
/// in a study's `[policy]` and an experiment's `[problem.model]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefitName {
    /// [`Refit::DEFAULT`].
    #[default]
    Warm,
    /// [`Refit::Always`].
    Always,
}

impl RefitName {
    /// The step configuration's setting.
    pub fn refit(self) -> Refit {
        match self {
            RefitName::Warm => Refit::DEFAULT,
            RefitName::Always => Refit::Always,
        }
    }
}

/// How a model step obtained the objective model's hyperparameters (recorded with the step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitKind {
    /// A full multi-start fit.
    Full,
    /// A single L-BFGS-B run from the previous step's hyperparameters.
    Warm,
    /// The previous step's hyperparameters, kept (their gradient was within the tolerance; the
    /// constant mean is still profiled on the new data).
    Kept,
}

impl Default for StepConfig {
    /// PBGI with λ = 1e-3 on the papers' model (Matérn-5/2 ARD, Gamma priors, noise 1e-4,
    /// standardized outcomes), 200·d raw samples and 10·d restarts.
    fn default() -> Self {
        Self {
            acquisition: AcquisitionName::Pbgi,
            params: AcquisitionParams {
                lambda: Some(1e-3),
                ..AcquisitionParams::default()
            },
            fit: FitOptions::default(),
            cost_fit: FitOptions::default(),
            multistart: MultiStartOptions::default(),
            standardize: true,
            initial_design: None,
            ts_features: 1024,
            design_seed: 0,
            output_scale: None,
            space: None,
            refit: Refit::DEFAULT,
        }
    }
}

/// What a step needs to know about the run so far beyond the observations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepContext {
    /// Cumulative cost of the BO phase so far (UCB schedule: `t = cost + 1`).
    pub cumulative_cost: f64,
    /// Remaining budget (cost cooling).
    pub remaining_budget: Option<f64>,
    /// Total budget (cost cooling).
    pub total_budget: Option<f64>,
    /// PBGI-D's current λ (overrides the configured λ).
    pub lambda: Option<f64>,
    /// B-MS-EI: the previous step's [`Proposal::bmsei`] in the same run (refill rule and warm
    /// start); `None` recomputes the suggested budget and starts cold.
    pub bmsei: Option<BmseiCarry>,
    /// The warm start may be used alone ([`Refit::Warm`] and no full refit scheduled at this
    /// step; set by the driver). Otherwise, and without a warm start, the step fits in full.
    pub warm_fit: bool,
}

/// Observations so far on the unit cube: `x` row-major `n × d`, `y` maximized, `cost` > 0.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    /// Points, row-major.
    pub x: &'a [f64],
    /// Objective values (maximization).
    pub y: &'a [f64],
    /// Observed costs (used when costs are unknown).
    pub cost: &'a [f64],
    /// Points handed out but not yet evaluated (row-major): the model is conditioned on its own
    /// posterior mean there, so parallel workers do not pile onto one point.
    pub pending: &'a [f64],
}

/// How the proposal was made (recorded as `"initial"`, `"random"` or `"model"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// A point of the initial design.
    #[serde(rename = "initial")]
    InitialDesign,
    /// A uniformly random point (`random` acquisition).
    Random,
    /// The maximizer of the acquisition on the fitted model.
    Model,
}

impl Phase {
    /// The name recorded with decisions: `"initial"`, `"random"` or `"model"`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::InitialDesign => "initial",
            Phase::Random => "random",
            Phase::Model => "model",
        }
    }
}

/// The outcome of a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The point to evaluate next, in `[0,1]^d`.
    pub x: Vec<f64>,
    /// How it was chosen.
    pub phase: Phase,
    /// The acquisition value at `x` (NaN outside the model phase).
    pub acquisition_value: f64,
    /// Objective-model hyperparameters (internal, standardized space).
    pub params: Option<GpParams>,
    /// Log-cost-model hyperparameters (unknown costs).
    pub cost_params: Option<GpParams>,
    /// λ used (PBGI, PBGI-D).
    pub lambda: Option<f64>,
    /// The expected cost `E[c(x)]` of the proposal under the cost setting (model phase only):
    /// 1 for uniform costs, `c(x)` for known costs, `exp(m + v/2)` under the log-cost GP.
    pub predicted_cost: Option<f64>,
    /// B-MS-EI: what the next step of the same run needs (pass it as [`StepContext::bmsei`]).
    pub bmsei: Option<BmseiCarry>,
    /// How the objective model's hyperparameters were obtained (model phase only).
    pub fit: Option<FitKind>,
    /// Other points the acquisition maximization scored (its other local optima and best raw
    /// samples, pairwise apart), best first (at most [`crate::optim::domain::RUNNERS_UP`]; empty
    /// outside the model phase and for acquisitions that keep none, see
    /// [`crate::optim::runners_up`]): where a worker that decided on a snapshot may go instead
    /// when `x` was handed out meanwhile. Extra data: they never change `x`.
    pub runners_up: Vec<RunnerUp>,
}

/// A point a model step's maximization scored, other than its proposal
/// ([`Proposal::runners_up`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerUp {
    /// The point, in `[0,1]^d`.
    pub x: Vec<f64>,
    /// The acquisition value at `x`, on the step's model (pending points fantasized).
    pub acquisition_value: f64,
    /// The expected cost `E[c(x)]`, as [`Proposal::predicted_cost`].
    pub predicted_cost: Option<f64>,
}

impl Proposal {
    /// A point chosen without a model (initial design or random search): no acquisition value,
    /// no model data.
    pub fn without_model(x: Vec<f64>, phase: Phase) -> Self {
        Self {
            x,
            phase,
            acquisition_value: f64::NAN,
            params: None,
            cost_params: None,
            lambda: None,
            predicted_cost: None,
            bmsei: None,
            runners_up: Vec::new(),
            fit: None,
        }
    }
}

/// The models a model step fitted, returned with its proposal so that nothing is refitted to
/// report on the step or to check a stopping rule.
#[derive(Debug, Clone)]
pub struct StepModels {
    /// The objective posterior on the history (without the pending points' fantasies).
    pub model: GpModel,
    /// The log-cost posterior (unknown costs only; `None` for Thompson sampling, which ignores
    /// costs).
    pub cost_model: Option<GpModel>,
    /// What [`StepModels::rescore`] needs besides the models (pointwise acquisitions only).
    scoring: Option<Scoring>,
}

/// The step's acquisition with its filled-in parameters and the pending points it fantasized.
#[derive(Debug, Clone)]
struct Scoring {
    name: AcquisitionName,
    params: AcquisitionParams,
    uses_cost: bool,
    pending: Vec<f64>,
}

impl StepModels {
    /// The step's acquisition values at the rows of `points` (row-major, `[0,1]^d`) on the
    /// step's model with `extra_pending` fantasized too, after the step's own pending points:
    /// the same kriging-believer fantasies, incumbent, λ, schedule index and cost model as the
    /// step's maximization. With `extra_pending` empty the values are those the maximization
    /// scored ([`RunnerUp::acquisition_value`]). Where a worker that decided on a snapshot
    /// meets points handed out meanwhile, this ranks its runner-ups as a decision that saw
    /// those points pending would have.
    ///
    /// `cost` must be the step's cost setting. `Ok(None)` for acquisitions that are not a
    /// function of the posterior at a point (MES, KG, TS, the look-ahead trees): they keep no
    /// runner-ups to re-score.
    pub fn rescore(
        &self,
        cost: CostSetting<'_>,
        extra_pending: &[f64],
        points: &[f64],
    ) -> Result<Option<Vec<f64>>> {
        let Some(s) = &self.scoring else {
            return Ok(None);
        };
        let d = crate::gp::Posterior::dim(&self.model);
        for (field, v) in [("extra_pending", extra_pending), ("points", points)] {
            if !v.len().is_multiple_of(d) {
                return Err(Error::invalid(
                    field,
                    format!("length {} is not a multiple of d = {d}", v.len()),
                ));
            }
        }
        if points.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let pending = [s.pending.as_slice(), extra_pending].concat();
        let model = self.model.with_fantasies(&pending)?;
        let unknown = self.cost_model.as_ref().map(UnknownCost);
        let acq = build_pointwise(s.name, &s.params, d)?;
        let values = match cost_model_of(cost, s.uses_cost, unknown.as_ref()) {
            Some(c) => OnModel::with_cost(&model, acq, c).evaluate(points, false)?,
            None => OnModel::new(&model, acq).evaluate(points, false)?,
        };
        Ok(Some(values.0))
    }
}

/// The cost model a step's acquisition divides by: none when it ignores costs or costs are
/// uniform, the known cost function, or the log-cost GP (`unknown`) when costs are unknown.
fn cost_model_of<'a>(
    cost: CostSetting<'a>,
    uses_cost: bool,
    unknown: Option<&'a UnknownCost<'a, GpModel>>,
) -> Option<&'a dyn CostModel> {
    match cost {
        _ if !uses_cost => None,
        CostSetting::Uniform => None,
        CostSetting::Known(c) => Some(c),
        CostSetting::Unknown => unknown.map(|u| u as &dyn CostModel),
    }
}

/// Proposes the next point. `warm` is the previous step's [`Proposal::params`] (a warm start for
/// the fit). Deterministic for a given history, configuration, context and `seed`. The same step
/// as [`propose_fitted`], without its models.
pub fn propose(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    cost: CostSetting<'_>,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<Proposal> {
    propose_fitted(d, history, config, ctx, cost, seed, warm).map(|(p, _)| p)
}

/// Proposes the next point and returns the models the step fitted (`None` for the initial
/// design and random search). See [`propose`].
pub fn propose_fitted(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    cost: CostSetting<'_>,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<(Proposal, Option<StepModels>)> {
    let n = history.y.len();
    if d == 0 || history.x.len() != n * d {
        return Err(Error::dim("history.x", n * d, history.x.len()));
    }
    if matches!(cost, CostSetting::Unknown) && history.cost.len() != n {
        return Err(Error::dim("history.cost", n, history.cost.len()));
    }
    let n_init = config.initial_design.unwrap_or(2 * (d + 1)).max(1);
    // The initial design is one seeded Sobol sequence, point k for the k-th trial handed out
    // (observed or pending), so parallel workers get distinct points; random search continues
    // the same sequence.
    let k = (n + history.pending.len() / d) as u64;
    if n < n_init {
        let x = design_point(d, k, config.design_seed)?;
        return Ok((Proposal::without_model(x, Phase::InitialDesign), None));
    }
    let acquirer = config.acquisition.acquirer();
    let step = Prepared {
        d,
        history,
        config,
        ctx,
        cost,
        seed,
        design_index: k,
    };
    if acquirer.needs() == Needs::Nothing {
        let a = acquirer.acquire(&step.inputs(None, None, None))?;
        return Ok((Proposal::without_model(a.x, Phase::Random), None));
    }
    // Checked before the (costlier) fit.
    if config.output_scale.is_some() && !acquirer.supports_output_scale() {
        return Err(Error::invalid(
            "output_scale",
            format!(
                "{} samples or conditions the stationary GP directly and does not support a \
                 variable-amplitude model",
                config.acquisition.as_str()
            ),
        ));
    }
    model_step(&step, acquirer.as_ref(), warm)
}

/// A model step's fixed inputs, before the fits.
struct Prepared<'a> {
    d: usize,
    history: History<'a>,
    config: &'a StepConfig,
    ctx: &'a StepContext,
    cost: CostSetting<'a>,
    seed: u64,
    design_index: u64,
}

impl<'a> Prepared<'a> {
    /// The acquirer's inputs with the step's values filled into the configured parameters: the
    /// incumbent, the UCB schedule index `t = cumulative cost + 1`, the budgets and λ (PBGI-D's
    /// current λ over the configured one).
    fn inputs(
        &self,
        model: Option<&'a GpModel>,
        cost_model: Option<&'a GpModel>,
        cost_ref: Option<&'a dyn CostModel>,
    ) -> StepInputs<'a> {
        let (config, ctx, history) = (self.config, self.ctx, self.history);
        let best_f = history.y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let params = AcquisitionParams {
            best_f: Some(best_f),
            t: config.params.t.or(Some(ctx.cumulative_cost.max(0.0) + 1.0)),
            remaining_budget: ctx.remaining_budget.or(config.params.remaining_budget),
            total_budget: ctx.total_budget.or(config.params.total_budget),
            lambda: self.lambda(),
            ..config.params
        };
        StepInputs {
            d: self.d,
            model,
            cost_model,
            cost: self.cost,
            cost_ref,
            params,
            best_f,
            ms: &config.multistart,
            seed: self.seed,
            domain: Domain {
                space: config.space.as_ref(),
                pending: history.pending,
            },
            train_x: history.x,
            last_cost: history.cost.last().copied(),
            costs: history.cost,
            carry: ctx.bmsei.as_ref(),
            ts_features: config.ts_features,
            design_seed: config.design_seed,
            design_index: self.design_index,
        }
    }

    /// λ of the step: PBGI-D's current λ, else the configured one.
    fn lambda(&self) -> Option<f64> {
        self.ctx.lambda.or(self.config.params.lambda)
    }
}

/// The model phase: fit the objective model (and, if the acquirer needs it and costs are
/// unknown, the log-cost model), let the acquirer choose, and record the proposal with its
/// predicted cost (for acquirers that use costs) and λ (PBGI, PBGI-D).
fn model_step(
    step: &Prepared<'_>,
    acquirer: &dyn Acquirer,
    warm: Option<&GpParams>,
) -> Result<(Proposal, Option<StepModels>)> {
    let (d, history, config, seed) = (step.d, step.history, step.config, step.seed);
    let (fitted, fit_kind) = fit_objective_model(d, history, config, step.ctx, seed, warm)?;
    if !history.pending.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "history.pending",
            "length is not a multiple of d",
        ));
    }
    let model = fitted.with_fantasies(history.pending)?;
    let uses_cost = acquirer.needs() == Needs::ObjectiveAndCost;
    let cost_model = match step.cost {
        CostSetting::Unknown if uses_cost => {
            let cost_opts = FitOptions {
                seed: seed ^ 0x636f_7374,
                ..config.cost_fit.clone()
            };
            Some(fit_log_cost_model(history.x, history.cost, d, &cost_opts)?)
        }
        _ => None,
    };
    let unknown = cost_model.as_ref().map(UnknownCost);
    let cost_ref = cost_model_of(step.cost, uses_cost, unknown.as_ref());
    let inputs = step.inputs(Some(&model), cost_model.as_ref(), cost_ref);
    let a = acquirer.acquire(&inputs)?;
    let scoring = acquirer.is_pointwise().then(|| Scoring {
        name: config.acquisition,
        params: inputs.params,
        uses_cost,
        pending: history.pending.to_vec(),
    });
    let predicted = |x: &[f64]| -> Result<Option<f64>> {
        Ok(match cost_ref {
            _ if !uses_cost => None,
            Some(c) => {
                let lc = c.log_cost(x, d, false)?;
                Some((lc.mean[0] + 0.5 * lc.var[0]).exp())
            }
            None => Some(1.0),
        })
    };
    let predicted_cost = predicted(&a.x)?;
    // A runner-up whose cost cannot be predicted is dropped (it is only an alternative).
    let runners_up = (a.runners_up.into_iter())
        .filter_map(|c| {
            let predicted_cost = predicted(&c.x).ok()?;
            Some(RunnerUp {
                x: c.x,
                acquisition_value: c.value,
                predicted_cost,
            })
        })
        .collect();
    let proposal = Proposal {
        x: a.x,
        phase: Phase::Model,
        acquisition_value: a.value,
        params: Some(fitted.params().clone()),
        cost_params: cost_model.as_ref().map(|m| m.params().clone()),
        lambda: step.lambda().filter(|_| config.acquisition.uses_lambda()),
        predicted_cost,
        bmsei: a.carry,
        runners_up,
        fit: Some(fit_kind),
    };
    let models = StepModels {
        model: fitted,
        cost_model,
        scoring,
    };
    Ok((proposal, Some(models)))
}

/// The objective model a model step fits on `history` (without the pending points), and how:
/// with [`Refit::Warm`], a warm start `warm` and no full refit due ([`StepContext::warm_fit`]),
/// the warm start kept or a single run from it unless its gain exceeds the threshold; the full
/// fit otherwise. What [`propose`] does before the acquisition; public so that benchmarks time
/// exactly that.
pub fn fit_objective_model(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<(GpModel, FitKind)> {
    let transforms = Transforms {
        normalize_inputs: None,
        standardize_outcomes: config.standardize,
        output_scale: config.output_scale.clone(),
    };
    let opts = FitOptions {
        seed,
        ..config.fit.clone()
    };
    let (x, y) = (history.x, history.y);
    if let (Refit::Warm { max_gain, keep_grad, .. }, true, Some(w)) = (config.refit, ctx.warm_fit, warm)
        && w.kernel.dim() == d
        // A warm start that cannot be evaluated falls back to the full fit.
        && let Ok((model, out)) = GpModel::fit_warm_or_keep(x, y, d, &transforms, &opts, w, keep_grad)
        && out.gain_per_point <= max_gain
    {
        let kind = if out.kept {
            FitKind::Kept
        } else {
            FitKind::Warm
        };
        model.inner().prepare();
        return Ok((model, kind));
    }
    let model = GpModel::fit(x, y, d, &transforms, &opts, warm)?;
    // L⁻¹ on all cores now, rather than on one inside the maximization's first parallel batch.
    model.inner().prepare();
    Ok((model, FitKind::Full))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::mes::mes_for_step;
    use crate::acquisition::{
        LinearMeanCost, OnModel, PbgiDecay, UpperConfidenceBound, build_pointwise,
    };
    use crate::optim::multistart::{Objective, maximize};
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A smooth 2-D test function with its maximum 0 at (0.3, 0.7).
    fn f(x: &[f64]) -> f64 {
        -((x[0] - 0.3).powi(2) + (x[1] - 0.7).powi(2))
    }

    fn small_config(acq: AcquisitionName) -> StepConfig {
        StepConfig {
            acquisition: acq,
            params: AcquisitionParams {
                lambda: Some(1e-4),
                beta: Some(2.0),
                ..AcquisitionParams::default()
            },
            multistart: MultiStartOptions {
                raw_samples: Some(200),
                num_restarts: Some(6),
                ..MultiStartOptions::default()
            },
            ..StepConfig::default()
        }
    }

    fn run(acq: AcquisitionName, steps: usize, cost: CostSetting<'_>, seed: u64) -> Vec<Proposal> {
        let d = 2;
        let config = small_config(acq);
        let mut x = Vec::new();
        let mut y = Vec::new();
        let mut c = Vec::new();
        let mut out = Vec::new();
        let mut warm = None;
        let mut decay = PbgiDecay::default();
        for k in 0..steps {
            let lambda = (acq == AcquisitionName::PbgiD).then(|| decay.begin_iteration());
            let ctx = StepContext {
                cumulative_cost: c.iter().sum(),
                lambda,
                ..StepContext::default()
            };
            let hist = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &[],
            };
            let p = propose(d, hist, &config, &ctx, cost, seed + k as u64, warm.as_ref()).unwrap();
            assert!(p.x.iter().all(|v| (0.0..=1.0).contains(v)));
            let v = f(&p.x);
            x.extend_from_slice(&p.x);
            y.push(v);
            c.push(1.0 + 20.0 * (p.x[0] + p.x[1]) / 2.0);
            if p.phase == Phase::Model {
                let best = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                decay.end_iteration(p.acquisition_value, best);
            }
            warm = p.params.clone();
            out.push(p);
        }
        out
    }

    /// With a known amplitude, posterior-based acquisitions use it (the proposal differs from
    /// the stationary model's), and the acquisitions that sample the stationary GP refuse it.
    #[test]
    fn the_refit_schedule_grows_with_the_run() {
        let due = |r: Refit, upto: usize| -> Vec<usize> {
            (0..upto).filter(|&k| r.scheduled(k)).collect()
        };
        assert_eq!(due(Refit::Always, 5), vec![0, 1, 2, 3, 4]);
        let half = Refit::Warm {
            growth: 0.5,
            max_gain: 0.01,
            keep_grad: 0.0,
        };
        assert_eq!(due(half, 30), vec![0, 1, 2, 3, 4, 6, 9, 13, 19, 28]);
        // The default: every trial up to 40, then every 5 %: 31 trials apart near trial 626.
        let d = due(Refit::DEFAULT, 2001);
        assert_eq!(d[..41], (0..41).collect::<Vec<_>>()[..]);
        assert_eq!(d[41..44], [42, 44, 46]);
        let near = d.windows(2).find(|w| w[0] >= 600).unwrap();
        assert_eq!(near[1] - near[0], near[0] / 20);
        assert!(d.len() < 130, "{}", d.len());
        // A growth that is not positive means a full fit at every step.
        let never = Refit::Warm {
            growth: 0.0,
            max_gain: 0.01,
            keep_grad: 0.0,
        };
        assert_eq!(due(never, 5), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn an_output_scale_changes_the_step_and_is_refused_by_path_based_acquisitions() {
        let d = 2;
        let x: Vec<f64> = (0..8)
            .flat_map(|i| {
                let t = i as f64 / 8.0;
                [t, (0.37 + 0.61 * t) % 1.0]
            })
            .collect();
        let y: Vec<f64> = x.chunks(2).map(|r| (3.0 * r[0]).sin() + r[1]).collect();
        let hist = History {
            x: &x,
            y: &y,
            cost: &[],
            pending: &[],
        };
        // A large amplitude near (0.9, 0.9) pulls the step there.
        let scale = OutputScale::new(|x: &[f64], g: &mut [f64]| {
            let r2 = (x[0] - 0.9).powi(2) + (x[1] - 0.9).powi(2);
            let e = 20.0 * (-r2 / 0.02).exp();
            g[0] = e * (-2.0 * (x[0] - 0.9) / 0.02);
            g[1] = e * (-2.0 * (x[1] - 0.9) / 0.02);
            1.0 + e
        });
        let ctx = StepContext::default();
        let plain = small_config(AcquisitionName::LogEi);
        let scaled = StepConfig {
            output_scale: Some(scale.clone()),
            ..plain.clone()
        };
        let a = propose(d, hist, &plain, &ctx, CostSetting::Uniform, 1, None).unwrap();
        let b = propose(d, hist, &scaled, &ctx, CostSetting::Uniform, 1, None).unwrap();
        let dist = |p: &[f64]| ((p[0] - 0.9).powi(2) + (p[1] - 0.9).powi(2)).sqrt();
        assert!(dist(&b.x) < 0.15, "{:?}", b.x);
        assert!(dist(&a.x) > dist(&b.x), "{:?} {:?}", a.x, b.x);
        for acq in [
            AcquisitionName::Ts,
            AcquisitionName::Kg,
            AcquisitionName::BMsEi,
        ] {
            let cfg = StepConfig {
                output_scale: Some(scale.clone()),
                ..small_config(acq)
            };
            let e = propose(d, hist, &cfg, &ctx, CostSetting::Uniform, 1, None).unwrap_err();
            assert!(e.to_string().contains("variable-amplitude"), "{e}");
        }
    }

    #[test]
    fn every_acquisition_finds_the_optimum_of_a_smooth_function() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        for (acq, cost) in [
            (AcquisitionName::LogEi, CostSetting::Uniform),
            (AcquisitionName::Pbgi, CostSetting::Known(&linear)),
            (AcquisitionName::PbgiD, CostSetting::Unknown),
            (AcquisitionName::LogEipc, CostSetting::Unknown),
            (AcquisitionName::Ucb, CostSetting::Uniform),
            (AcquisitionName::Ts, CostSetting::Uniform),
        ] {
            let props = run(acq, 20, cost, 11);
            assert_eq!(props[0].phase, Phase::InitialDesign);
            assert_eq!(props[6].phase, Phase::Model);
            let best = props
                .iter()
                .map(|p| f(&p.x))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(best > -2e-3, "{}: best {best}", acq.as_str());
        }
    }

    #[test]
    fn predicted_costs_follow_the_cost_setting() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let truth = |x: &[f64]| 1.0 + 20.0 * (x[0] + x[1]) / 2.0;
        for cost in [CostSetting::Known(&linear), CostSetting::Unknown] {
            let props = run(AcquisitionName::Pbgi, 16, cost, 2);
            let model: Vec<&Proposal> = props.iter().filter(|p| p.phase == Phase::Model).collect();
            for (k, p) in model.iter().enumerate() {
                let pc = p.predicted_cost.unwrap();
                assert!(pc.is_finite() && pc > 0.0);
                match cost {
                    CostSetting::Known(_) => assert!((pc - truth(&p.x)).abs() < 1e-12),
                    // Once the log-cost GP has ten or more observations its E[c] is within 5 %
                    // (early extrapolations to corners are inflated by the variance term).
                    _ if k + 5 >= model.len() => {
                        let t = truth(&p.x);
                        assert!((pc / t - 1.0).abs() < 0.05, "{pc} vs {t}");
                    }
                    _ => {}
                }
            }
        }
        let uniform = run(AcquisitionName::LogEi, 8, CostSetting::Uniform, 2);
        assert_eq!(uniform[7].predicted_cost, Some(1.0));
        assert_eq!(uniform[0].predicted_cost, None);
    }

    #[test]
    fn pending_points_are_not_proposed_again() {
        let d = 2;
        let config = small_config(AcquisitionName::LogEi);
        let x: Vec<f64> = (0..8)
            .flat_map(|i| [i as f64 / 8.0 + 0.05, (i * 3 % 8) as f64 / 8.0])
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        let first = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &[],
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let second = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &first.x,
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let dist = ((first.x[0] - second.x[0]).powi(2) + (first.x[1] - second.x[1]).powi(2)).sqrt();
        assert!(
            dist > 1e-3,
            "the pending point {:?} was proposed again",
            first.x
        );
    }

    /// The known cost `1 + 20·mean(x)` (cheap near the origin).
    fn cheap_corner() -> LinearMeanCost {
        LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        }
    }

    /// Eight points spread over `[0,1]^2` and their values of `f`.
    fn spread_history() -> (Vec<f64>, Vec<f64>) {
        let x: Vec<f64> = (0..8)
            .flat_map(|i| [i as f64 / 8.0 + 0.05, (i * 3 % 8) as f64 / 8.0])
            .collect();
        let y = x.chunks(2).map(f).collect();
        (x, y)
    }

    /// With a cheap corner (c(x) = 1 + 20·mean(x)), PBGI's index at a fantasized pending point
    /// stays about its posterior mean and used to remain the maximum: a second worker received
    /// the same point. Every model acquisition must now keep `PENDING_EXCLUSION_RADIUS` away.
    #[test]
    fn model_steps_keep_away_from_pending_points() {
        let d = 2;
        let cost = cheap_corner();
        let (x, y) = spread_history();
        for acq in [
            AcquisitionName::Pbgi,
            AcquisitionName::PbgiD,
            AcquisitionName::LogEi,
            AcquisitionName::LogEipc,
            AcquisitionName::Ucb,
            AcquisitionName::Ts,
        ] {
            let config = small_config(acq);
            let mut pending: Vec<f64> = Vec::new();
            for _ in 0..3 {
                let p = propose(
                    d,
                    History {
                        x: &x,
                        y: &y,
                        cost: &[],
                        pending: &pending,
                    },
                    &config,
                    &StepContext::default(),
                    CostSetting::Known(&cost),
                    5,
                    None,
                )
                .unwrap();
                for q in pending.chunks(d) {
                    let dist = ((q[0] - p.x[0]).powi(2) + (q[1] - p.x[1]).powi(2)).sqrt();
                    assert!(
                        dist >= PENDING_EXCLUSION_RADIUS * (1.0 - 1e-12),
                        "{acq:?}: proposed {:?} at distance {dist} of pending {q:?}",
                        p.x
                    );
                }
                pending.extend_from_slice(&p.x);
            }
        }
    }

    /// Issue 27: a step's models re-score points as the step scored them (its runner-ups'
    /// values, with nothing more pending), and with more points pending exactly as a step that
    /// had those points pending scores them; a point just fantasized loses value. Acquisitions
    /// that are not pointwise re-score nothing.
    #[test]
    fn step_models_rescore_points_as_a_step_with_those_points_pending() {
        let d = 2;
        let linear = cheap_corner();
        let (x, y) = spread_history();
        let c: Vec<f64> = x
            .chunks(2)
            .map(|p| 1.0 + 20.0 * (p[0] + p[1]) / 2.0)
            .collect();
        let pending = vec![0.31, 0.62];
        let cases = [
            (AcquisitionName::LogEi, CostSetting::Uniform),
            (AcquisitionName::Ucb, CostSetting::Uniform),
            (AcquisitionName::Pbgi, CostSetting::Known(&linear)),
            (AcquisitionName::LogEipc, CostSetting::Unknown),
        ];
        for (acq, cost) in cases {
            let config = small_config(acq);
            let step = |pending: &[f64]| {
                let hist = History {
                    x: &x,
                    y: &y,
                    cost: &c,
                    pending,
                };
                let ctx = StepContext::default();
                let (p, m) = propose_fitted(d, hist, &config, &ctx, cost, 7, None).unwrap();
                (p, m.unwrap())
            };
            let (a, models_a) = step(&pending);
            assert!(!a.runners_up.is_empty(), "{acq:?} kept no runner-ups");
            let points: Vec<f64> = (a.runners_up.iter()).flat_map(|r| r.x.clone()).collect();
            // Nothing more pending: the maximization's own values.
            let same = models_a.rescore(cost, &[], &points).unwrap().unwrap();
            for (r, v) in a.runners_up.iter().zip(&same) {
                let tol = 1e-12 * r.acquisition_value.abs().max(1.0);
                assert!(
                    (v - r.acquisition_value).abs() <= tol,
                    "{acq:?}: re-scored {v}, scored {}",
                    r.acquisition_value
                );
            }
            // The proposal pending too: what a step with it pending scores, bit for bit.
            let more = models_a.rescore(cost, &a.x, &points).unwrap().unwrap();
            let (_, models_b) = step(&[pending.as_slice(), &a.x].concat());
            let fresh = models_b.rescore(cost, &[], &points).unwrap().unwrap();
            assert_eq!(more, fresh, "{acq:?}");
            assert_ne!(more, same, "{acq:?}: the new pending point changed nothing");
            // The fantasized point itself is worth less than before.
            let at_x = models_a.rescore(cost, &a.x, &a.x).unwrap().unwrap()[0];
            assert!(
                at_x < a.acquisition_value,
                "{acq:?}: {at_x} >= {}",
                a.acquisition_value
            );
            let err = models_a.rescore(cost, &[0.5], &points).unwrap_err();
            assert!(err.to_string().contains("extra_pending"), "{err}");
        }
        let config = small_config(AcquisitionName::Ts);
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let ctx = StepContext::default();
        let (p, m) = propose_fitted(d, hist, &config, &ctx, CostSetting::Uniform, 7, None).unwrap();
        assert!(p.runners_up.is_empty());
        let none = m.unwrap().rescore(CostSetting::Uniform, &[], &p.x).unwrap();
        assert_eq!(none, None);
    }

    /// When the pending balls cover the whole cube, the step still proposes (without the
    /// restriction) instead of failing.
    #[test]
    fn pending_points_covering_the_cube_do_not_block_a_step() {
        let d = 1;
        let config = small_config(AcquisitionName::LogEi);
        let x = [0.1, 0.4, 0.6, 0.9];
        let y: Vec<f64> = x.iter().map(|v| -(v - 0.3f64).powi(2)).collect();
        let pending: Vec<f64> = (0..=10).map(|i| i as f64 / 10.0).collect();
        let p = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &pending,
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            1,
            None,
        )
        .unwrap();
        assert!(p.x[0].is_finite() && (0.0..=1.0).contains(&p.x[0]));
        assert!(p.acquisition_value.is_finite());
    }

    /// One continuous coordinate and a categorical parameter with 3 choices (one-hot, d = 4).
    fn cat3_space() -> MixedSpace {
        use crate::optim::mixed::OneHotBlock;
        MixedSpace::new(4, vec![OneHotBlock { start: 1, len: 3 }], Vec::new()).unwrap()
    }

    /// Observations at valid points only (one-hot vertices): the posterior variance is largest
    /// inside the block, where no trial can be.
    fn cat3_history(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let x0 = (i as f64 * 0.37 + 0.05) % 1.0;
            let mut p = [x0, 0.0, 0.0, 0.0];
            p[1 + i % 3] = 1.0;
            y.push(-(x0 - 0.3f64).powi(2) + [0.0, 0.1, -0.2][i % 3]);
            x.extend_from_slice(&p);
        }
        (x, y)
    }

    /// Issue 20.1: UCB's maximum over the relaxed cube lies inside the one-hot block (not a
    /// valid point); with the space the proposal is valid, and its acquisition value (the value
    /// at that valid point) is at least the best valid value found by brute force on a grid.
    #[test]
    fn mixed_proposals_are_valid_and_reach_the_brute_force_valid_maximum() {
        let d = 4;
        let space = cat3_space();
        let (x, y) = cat3_history(12);
        let hist = History {
            x: &x,
            y: &y,
            cost: &[],
            pending: &[],
        };
        let ctx = StepContext::default();
        let relaxed_config = small_config(AcquisitionName::Ucb);
        let relaxed = propose(
            d,
            hist,
            &relaxed_config,
            &ctx,
            CostSetting::Uniform,
            2,
            None,
        )
        .unwrap();
        assert!(!space.is_valid(&relaxed.x), "premise: {:?}", relaxed.x);
        let config = StepConfig {
            space: Some(space.clone()),
            ..relaxed_config
        };
        let p = propose(d, hist, &config, &ctx, CostSetting::Uniform, 2, None).unwrap();
        assert!(space.is_valid(&p.x), "{:?}", p.x);
        let t = Transforms {
            normalize_inputs: None,
            standardize_outcomes: true,
            output_scale: None,
        };
        let model = GpModel::with_params(&x, &y, d, &t, p.params.clone().unwrap()).unwrap();
        let ucb = OnModel::new(&model, UpperConfidenceBound { beta: 2.0 });
        let mut grid = Vec::new();
        for k in 0..3 {
            for i in 0..=1000 {
                let mut q = [i as f64 / 1000.0, 0.0, 0.0, 0.0];
                q[1 + k] = 1.0;
                grid.extend_from_slice(&q);
            }
        }
        let mut vals = vec![0.0; grid.len() / d];
        ucb.values(&grid, &mut vals);
        let brute = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut at = [0.0];
        ucb.values(&p.x, &mut at);
        assert!((at[0] - p.acquisition_value).abs() <= 1e-9 * at[0].abs().max(1.0));
        assert!(
            p.acquisition_value >= brute - 1e-6 * brute.abs().max(1.0),
            "{} < brute force {brute}",
            p.acquisition_value
        );
        // The relaxed value was larger: it was scored at a point no trial can have.
        assert!(relaxed.acquisition_value > p.acquisition_value);
    }

    /// Issue 21.4: with pending trials on a categorical space, every acquisition keeps its
    /// proposal (a valid point) at least `PENDING_EXCLUSION_RADIUS` away from every pending
    /// point in the space the study proposes from.
    #[test]
    fn pending_exclusion_holds_between_projected_points() {
        let d = 4;
        let space = cat3_space();
        let (x, y) = cat3_history(12);
        let c: Vec<f64> = x.chunks(d).map(|p| 1.0 + p[0]).collect();
        let ctx = StepContext {
            remaining_budget: Some(50.0),
            total_budget: Some(60.0),
            ..StepContext::default()
        };
        for acq in [
            AcquisitionName::Pbgi,
            AcquisitionName::LogEi,
            AcquisitionName::Ucb,
            AcquisitionName::Ts,
            AcquisitionName::Mes,
            AcquisitionName::Kg,
            AcquisitionName::OneShotKg,
            AcquisitionName::MsEi,
            AcquisitionName::BMsEi,
        ] {
            let mut config = small_config(acq);
            config.space = Some(space.clone());
            if matches!(
                acq,
                AcquisitionName::OneShotKg | AcquisitionName::MsEi | AcquisitionName::BMsEi
            ) {
                config.multistart.raw_samples = Some(32);
                config.multistart.num_restarts = Some(2);
            }
            let steps = if config.multistart.raw_samples == Some(32) {
                3
            } else {
                6
            };
            let mut pending: Vec<f64> = Vec::new();
            for k in 0..steps {
                let hist = History {
                    x: &x,
                    y: &y,
                    cost: &c,
                    pending: &pending,
                };
                let cost = if acq == AcquisitionName::BMsEi {
                    CostSetting::Unknown
                } else {
                    CostSetting::Uniform
                };
                let p = propose(d, hist, &config, &ctx, cost, 5 + k, None).unwrap();
                assert!(space.is_valid(&p.x), "{acq:?}: {:?}", p.x);
                for q in pending.chunks(d) {
                    let dist = q
                        .iter()
                        .zip(&p.x)
                        .map(|(a, b)| (a - b).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    assert!(
                        dist >= PENDING_EXCLUSION_RADIUS,
                        "{acq:?}: proposed {:?} at distance {dist} of pending {q:?}",
                        p.x
                    );
                }
                pending.extend_from_slice(&p.x);
            }
        }
    }

    /// Measures the mixed strategies (docs/studies.md, "Mixed spaces"): on GPs fitted to random
    /// valid points of four mixed spaces, the acquisition value each strategy reaches at its
    /// (valid) point, relative to the best of them, and its evaluations and time. Run with
    /// `cargo test -p pandora-core --lib measure_mixed_strategies -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn measure_mixed_strategies() {
        use crate::optim::mixed::{DiscreteCoord, MixedStrategy, OneHotBlock, maximize_mixed_with};
        let block = |start, len| OneHotBlock { start, len };
        let int8 = |index| DiscreteCoord {
            index,
            values: (0..8).map(|i| (i as f64 + 0.5) / 8.0).collect(),
        };
        let spaces = [
            (
                "float+cat3",
                MixedSpace::new(4, vec![block(1, 3)], vec![]).unwrap(),
            ),
            (
                "2float+cat3+int8",
                MixedSpace::new(6, vec![block(2, 3)], vec![int8(5)]).unwrap(),
            ),
            (
                "float+3cat3",
                MixedSpace::new(10, vec![block(1, 3), block(4, 3), block(7, 3)], vec![]).unwrap(),
            ),
            (
                "2float+cat5+cat4+cat4+int8",
                MixedSpace::new(
                    16,
                    vec![block(2, 5), block(7, 4), block(11, 4)],
                    vec![int8(15)],
                )
                .unwrap(),
            ),
        ];
        let strategies = [
            MixedStrategy::Relax,
            MixedStrategy::LocalSearch,
            MixedStrategy::Seeded,
            MixedStrategy::Enumerate,
        ];
        for (name, space) in &spaces {
            let d = space.dim();
            let mut gap = [0.0f64; 4];
            let mut worst = [0.0f64; 4];
            let mut wins = [0usize; 4];
            let mut evals = [0usize; 4];
            let mut secs = [0.0f64; 4];
            let cases = 12;
            for case in 0..cases {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(case as u64);
                let n = 3 * d;
                let mut x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
                space.project_rows(&mut x);
                let w: Vec<f64> = (0..d).map(|_| rng.random::<f64>() * 4.0 - 2.0).collect();
                let y: Vec<f64> = x
                    .chunks(d)
                    .map(|p| p.iter().zip(&w).map(|(a, b)| (3.0 * a * b).sin()).sum())
                    .collect();
                let t = Transforms {
                    normalize_inputs: None,
                    standardize_outcomes: true,
                    output_scale: None,
                };
                let fit = FitOptions {
                    seed: case as u64,
                    ..FitOptions::default()
                };
                let model = GpModel::fit(&x, &y, d, &t, &fit, None).unwrap();
                let best_f = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let acq_name = if case % 2 == 0 {
                    AcquisitionName::LogEi
                } else {
                    AcquisitionName::Ucb
                };
                let params = AcquisitionParams {
                    best_f: Some(best_f),
                    beta: Some(2.0),
                    ..AcquisitionParams::default()
                };
                let obj = OnModel::new(&model, build_pointwise(acq_name, &params, d).unwrap());
                let ms = MultiStartOptions::default();
                let mut vals = [0.0; 4];
                for (k, &st) in strategies.iter().enumerate() {
                    let t0 = std::time::Instant::now();
                    let r = maximize_mixed_with(&obj, space, &ms, case as u64, st).unwrap();
                    secs[k] += t0.elapsed().as_secs_f64();
                    assert!(space.is_valid(&r.x));
                    vals[k] = r.value;
                    evals[k] += r.evaluations;
                }
                let top = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for k in 0..4 {
                    let g = (top - vals[k]) / top.abs().max(1e-12);
                    gap[k] += g / cases as f64;
                    worst[k] = worst[k].max(g);
                    if vals[k] >= top - 1e-9 * top.abs().max(1.0) {
                        wins[k] += 1;
                    }
                }
            }
            for (k, st) in strategies.iter().enumerate() {
                println!(
                    "{name:28} {st:12?} best-in-{wins:2}/{cases} mean-rel-gap {:.2e} worst {:.2e} \
                     evals/case {:8} ms/case {:7.1}",
                    gap[k],
                    worst[k],
                    evals[k] / cases,
                    1e3 * secs[k] / cases as f64,
                    wins = wins[k],
                );
            }
        }
    }

    #[test]
    fn steps_are_deterministic_and_the_initial_design_is_one_sobol_sequence() {
        let key = |ps: Vec<Proposal>| -> Vec<(Vec<f64>, u64, Option<GpParams>)> {
            ps.into_iter()
                .map(|p| (p.x, p.acquisition_value.to_bits(), p.params))
                .collect()
        };
        let a = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        let b = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        assert_eq!(a, b);
        // Random search proposes distinct points and no model.
        let r = run(AcquisitionName::Random, 8, CostSetting::Uniform, 1);
        assert!(
            r.iter()
                .skip(6)
                .all(|p| p.phase == Phase::Random && p.params.is_none())
        );
        let bad = propose(
            2,
            History {
                x: &[0.1],
                y: &[1.0],
                cost: &[],
                pending: &[],
            },
            &StepConfig::default(),
            &StepContext::default(),
            CostSetting::Uniform,
            0,
            None,
        );
        assert!(bad.is_err());
    }

    fn lookahead_history() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let x: Vec<f64> = (0..10)
            .flat_map(|i| {
                [
                    (i as f64 * 0.37 + 0.05) % 1.0,
                    (i as f64 * 0.61 + 0.1) % 1.0,
                ]
            })
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        let c: Vec<f64> = x.chunks(2).map(|p| 1.0 + 3.0 * p[0]).collect();
        (x, y, c)
    }

    #[test]
    fn bmsei_carry_drives_the_refill_rule_and_the_warm_start() {
        let (x, y, c) = lookahead_history();
        let config = small_config(AcquisitionName::BMsEi);
        let ctx = StepContext {
            remaining_budget: Some(15.0),
            total_budget: Some(20.0),
            ..StepContext::default()
        };
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let first = propose(2, hist, &config, &ctx, CostSetting::Unknown, 3, None).unwrap();
        let carry = first.bmsei.clone().unwrap();
        // A fresh rollout of K + 1 = 4 steps: B_s ≥ 4 × its cheapest fantasized cost.
        assert!(carry.suggested_budget >= 4.0 * carry.lower_bound * (1.0 - 1e-12));
        assert!(carry.lower_bound > 0.0);
        // One tree per restart plus the heuristic start, each of 4 points × d = 2.
        assert_eq!(carry.trees.len(), 6 + 1);
        assert!(carry.trees.iter().all(|t| t.len() == 8));
        assert!(carry.trees.iter().any(|t| t[..2] == first.x[..]));

        // The next step with the carry: B_s drops by the last real cost while it stays above the
        // lower bound, and no rollout is done.
        let mut x2 = x.clone();
        x2.extend_from_slice(&first.x);
        let mut y2 = y.clone();
        y2.push(f(&first.x));
        let last = carry.lower_bound * 0.5;
        let mut c2 = c.clone();
        c2.push(last);
        let hist2 = History {
            x: &x2,
            y: &y2,
            cost: &c2,
            pending: &[],
        };
        let ctx2 = StepContext {
            remaining_budget: Some(15.0 - last),
            bmsei: Some(carry.clone()),
            ..ctx.clone()
        };
        let second = propose(2, hist2, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        let next = second.bmsei.clone().unwrap();
        assert_eq!(next.suggested_budget, carry.suggested_budget - last);
        assert_eq!(next.lower_bound, carry.lower_bound);
        // Warm-started and deterministic.
        let again = propose(2, hist2, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_eq!(second, again);
        // Without the refill rule (or when the leftover falls to the lower bound) a rollout runs.
        let mut no_refill = config.clone();
        no_refill.params.refill = Some(false);
        let fresh = propose(2, hist2, &no_refill, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_ne!(fresh.bmsei.unwrap().suggested_budget, next.suggested_budget);
        let mut spent = c.clone();
        spent.push(carry.suggested_budget - carry.lower_bound);
        let hist3 = History {
            cost: &spent,
            ..hist2
        };
        let rolled = propose(2, hist3, &config, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_ne!(
            rolled.bmsei.unwrap().suggested_budget,
            carry.suggested_budget - (carry.suggested_budget - carry.lower_bound)
        );
        // The warm start changes the maximization's raw candidates; turning it off does too.
        let mut cold = config.clone();
        cold.params.warm_start = Some(false);
        let c3 = propose(2, hist2, &cold, &ctx2, CostSetting::Unknown, 4, None).unwrap();
        assert_eq!(c3.bmsei.unwrap().suggested_budget, next.suggested_budget);
    }

    /// The PBGI repository's BMSEI budget: `min(B − C_t, sum of the last four observed costs)`
    /// at every step, the carry and the refill rule ignored; an error naming `cost` without
    /// observed costs.
    #[test]
    fn bmsei_recent_costs_budget_is_the_sum_of_the_last_four_costs() {
        use crate::acquisition::TreeBudget;
        let (x, y, c) = lookahead_history();
        let mut config = small_config(AcquisitionName::BMsEi);
        config.params.tree_budget = Some(TreeBudget::RecentCosts);
        let last4: f64 = c[c.len() - 4..].iter().sum();
        let cheapest = c[c.len() - 4..]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        for (remaining, want) in [(15.0, last4.min(15.0)), (0.5 * last4, 0.5 * last4)] {
            let ctx = StepContext {
                remaining_budget: Some(remaining),
                total_budget: Some(20.0),
                ..StepContext::default()
            };
            let p = propose(2, hist, &config, &ctx, CostSetting::Unknown, 3, None).unwrap();
            let carry = p.bmsei.clone().unwrap();
            assert_eq!(carry.suggested_budget, want);
            assert_eq!(carry.lower_bound, cheapest);
            // A carry (which the refill rule would use) changes nothing about the budget.
            let carried = StepContext {
                bmsei: Some(BmseiCarry {
                    suggested_budget: 100.0,
                    lower_bound: 0.0,
                    trees: Vec::new(),
                }),
                ..ctx.clone()
            };
            let q = propose(2, hist, &config, &carried, CostSetting::Unknown, 3, None).unwrap();
            assert_eq!(q.bmsei.unwrap().suggested_budget, want);
        }
        let ctx = StepContext {
            remaining_budget: Some(15.0),
            total_budget: Some(20.0),
            ..StepContext::default()
        };
        let default = propose(
            2,
            hist,
            &small_config(AcquisitionName::BMsEi),
            &ctx,
            CostSetting::Unknown,
            3,
            None,
        )
        .unwrap();
        assert_ne!(default.bmsei.unwrap().suggested_budget, last4.min(15.0));
        let known = crate::acquisition::LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let no_costs = History { cost: &[], ..hist };
        let err = propose(
            2,
            no_costs,
            &config,
            &ctx,
            CostSetting::Known(&known),
            3,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("cost"), "{err}");
    }

    #[test]
    fn lookahead_and_entropy_acquisitions_propose_in_bounds_and_deterministically() {
        let (x, y, c) = lookahead_history();
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 3.0,
        };
        let ctx = StepContext {
            remaining_budget: Some(5.0),
            total_budget: Some(20.0),
            ..StepContext::default()
        };
        for (acq, cost) in [
            (AcquisitionName::BudgetedEi, CostSetting::Unknown),
            (AcquisitionName::BudgetedEi, CostSetting::Known(&linear)),
            (AcquisitionName::Mes, CostSetting::Uniform),
            (AcquisitionName::MesCost, CostSetting::Unknown),
            (AcquisitionName::MesCost, CostSetting::Known(&linear)),
            (AcquisitionName::Kg, CostSetting::Uniform),
            (AcquisitionName::OneShotKg, CostSetting::Uniform),
            (AcquisitionName::BMsEi, CostSetting::Unknown),
            (AcquisitionName::BMsEi, CostSetting::Known(&linear)),
            (AcquisitionName::MsEi, CostSetting::Uniform),
        ] {
            let config = small_config(acq);
            let hist = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &[],
            };
            let a = propose(2, hist, &config, &ctx, cost, 7, None).unwrap();
            let b = propose(2, hist, &config, &ctx, cost, 7, None).unwrap();
            assert_eq!(a.phase, Phase::Model);
            assert!(a.x.iter().all(|v| (0.0..=1.0).contains(v)), "{acq}");
            assert!(
                a.acquisition_value.is_finite() && a.acquisition_value > 0.0,
                "{acq}: {}",
                a.acquisition_value
            );
            assert!(a.predicted_cost.unwrap() > 0.0);
            assert_eq!(a, b, "{acq} is not deterministic");
        }
        // BEI needs a remaining budget.
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let config = small_config(AcquisitionName::BudgetedEi);
        let e = propose(
            2,
            hist,
            &config,
            &StepContext::default(),
            CostSetting::Unknown,
            7,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("remaining_budget"), "{e}");
    }

    #[test]
    fn mes_max_values_are_drawn_once_per_step_and_shared_by_the_restarts() {
        let (x, y, c) = lookahead_history();
        let config = small_config(AcquisitionName::Mes);
        let hist = History {
            x: &x,
            y: &y,
            cost: &c,
            pending: &[],
        };
        let seed = 13;
        let p = propose(
            2,
            hist,
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            seed,
            None,
        )
        .unwrap();
        // Rebuild the step's model and its one set of max values.
        let fit_opts = FitOptions {
            seed,
            ..config.fit.clone()
        };
        let t = Transforms {
            normalize_inputs: None,
            standardize_outcomes: true,
            output_scale: None,
        };
        let model = GpModel::fit(&x, &y, 2, &t, &fit_opts, None).unwrap();
        let mes = mes_for_step(&model, &x, 2, seed).unwrap();
        assert_eq!(mes.max_values.len(), 10);
        let again = mes_for_step(&model, &x, 2, seed).unwrap();
        assert_eq!(mes, again);
        let other = mes_for_step(&model, &x, 2, seed + 1).unwrap();
        assert_ne!(mes, other);
        // Every restart's end value is the value of that same MES at its end point.
        let obj = OnModel::new(&model, mes.clone());
        let r = maximize(&obj, &config.multistart, seed).unwrap();
        assert_eq!(r.x, p.x);
        assert_eq!(r.value.to_bits(), p.acquisition_value.to_bits());
        for (xr, vr) in &r.restarts {
            let (v, _) = obj.evaluate(xr, false).unwrap();
            assert_eq!(v[0].to_bits(), vr.to_bits());
        }
    }
}
