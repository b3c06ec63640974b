//! The BO loop's one decision: [`Run::step`].
//!
//! Studies (one decision per `ask`, under the storage's lock) and the experiment harness (a loop
//! over one problem instance) both decide the next evaluation here. What they share, and what
//! this module alone owns:
//!
//! - **the budget gates** ([`BudgetSpec`]): the number of trials or BO evaluations, the cost
//!   spent and committed to pending trials, and (in studies) whether the proposal's known or
//!   predicted cost still fits;
//! - **the initial design**: point `k` of one scrambled Sobol sequence (or of explicit points)
//!   for the `k`-th trial handed out, until enough evaluations are complete to fit a model;
//! - **λ**: fixed, or PBGI-D's decay replayed from the recorded steps
//!   ([`super::replay_pbgi_d`]), optionally starting from the automatic stopping λ
//!   `U/(B − C)`;
//! - **the stopping rule** (after-posterior-update semantics): checked on the posterior the step
//!   itself fitted, its moving window replayed from the checks recorded on earlier trials;
//! - **the carry**: the warm start of the next fit and B-MS-EI's refill state;
//! - **the refit schedule** ([`crate::policy::Refit`]): with `Refit::Warm` (the default), the
//!   step that hands out trial `k` may keep the carried hyperparameters (their gradient test) or
//!   fit from them alone unless a full refit is scheduled at `k` (then, and whenever no warm
//!   start is carried, the step fits in full; the warm fit's own gain test can still call for a
//!   full fit). The proposal says which ([`crate::policy::FitKind`]).
//!
//! ## Replay
//!
//! A [`Run`] holds no state that is not rebuilt from records: a front end creates it from its
//! [`Policy`], feeds every earlier trial to [`Run::record`] in the order the trials were handed
//! out (with the recorded phase, acquisition value and stopping check), restores the carry with
//! [`Run::carry`] and [`Run::set_auto_lambda`], and calls [`Run::step`]. A study does this on
//! every ask (any process may ask next); the experiment harness once per run, then alternates
//! `step` and `record`. Either way the same records give the same decisions.
//!
//! ## What a step returns
//!
//! [`Step`]: the [`Verdict`] (a proposal, or why the run is [`Finished`], never an error), the
//! models the step fitted (so that reports and statistics never refit), and the stopping check
//! it made. The front end turns it into its own record (a study's
//! [`DecisionRecord`](super::record::DecisionRecord), a trace line).
//!
//! ## Degenerate cases
//!
//! - Failed and abandoned trials are neither observations nor pending: their points may be
//!   proposed again, and their recorded costs still count toward the budget. A complete trial
//!   without a cost counts for PBGI-D's best value only.
//! - The initial design continues while fewer than its size of evaluations are complete, so a
//!   study whose first trials failed or are pending keeps handing out design points.
//! - A budget spent exactly (`spent + committed ≥ total`) finishes the run before any model is
//!   fitted; a proposal whose known cost does not fit finishes it after (studies only,
//!   [`BudgetSpec::must_fit`], with a relative tolerance of 1e-12).
//! - The automatic λ needs a total budget and `lambda = "auto"`; [`Run::new`] refuses the
//!   combinations that cannot work (start from the automatic λ without PBGI-D, or without a
//!   budget), so no step fails halfway for a configuration reason.

use super::record::{AutoLambda, StoppingCheck};
use super::{DecayStep, Finished, replay_pbgi_d};
use crate::acquisition::AcquisitionName;
use crate::acquisition::bmsei::BmseiCarry;
use crate::error::{Error, Result};
use crate::gp::{GpModel, GpParams};
use crate::policy::{
    CostSetting, History, Phase, Proposal, StepConfig, StepContext, StepModels, design_point,
    propose_fitted,
};
use crate::stopping::budget::{UEstimatorOptions, UReference, estimate_u, lambda_from_budget};
use crate::stopping::config::StoppingConfig;
use crate::stopping::step::supplied_from_proposal;
use crate::stopping::{CostInfo, Decision, RunState};

/// PBGI-D's λ schedule: `λ0`, divided by `decay` after every model step whose index fell below
/// the best value observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecaySpec {
    /// The starting λ (replaced by the automatic λ with [`StopLambda::Auto`]'s `start_pbgi_d`).
    pub lambda0: f64,
    /// The divisor (> 1).
    pub decay: f64,
}

/// How the stopping rule's λ is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopLambda {
    /// A given λ.
    Fixed(f64),
    /// `λ = U/(B − C)` at the first model step, with `U` estimated from `u_samples` prior paths
    /// of the fitted model (seeded by `seed`), `B` the budget and `C` the cost spent then.
    Auto {
        /// Prior paths in the `U` estimate.
        u_samples: usize,
        /// The estimate's seed.
        seed: u64,
        /// PBGI-D starts from this λ instead of [`DecaySpec::lambda0`] (chosen at the first
        /// model step, which is then proposed again with it).
        start_pbgi_d: bool,
    },
}

impl StopLambda {
    /// Whether PBGI-D starts from the automatic λ.
    fn starts_pbgi_d(&self) -> bool {
        matches!(
            self,
            StopLambda::Auto {
                start_pbgi_d: true,
                ..
            }
        )
    }
}

/// The cost-aware stopping rule a run checks at every model step.
#[derive(Debug, Clone, PartialEq)]
pub struct StopSpec {
    /// The rule (its own λ is replaced by the one [`StopSpec::lambda`] chooses).
    pub rule: StoppingConfig,
    /// How λ is chosen.
    pub lambda: StopLambda,
}

/// When a run is out of budget.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetSpec {
    /// Total cost budget.
    pub total: Option<f64>,
    /// The budget the acquisitions' schedules (cost cooling) plan against: usually `total`; a
    /// run limited by its number of evaluations plans against that number.
    pub horizon: Option<f64>,
    /// Trials handed out in all (initial design included, failed ones too).
    pub max_trials: Option<u64>,
    /// Completed evaluations after the initial design.
    pub max_bo_steps: Option<u64>,
    /// Whether the initial design's costs are charged to the budget.
    pub charge_initial: bool,
    /// Refuse a proposal whose known cost does not fit beside the cost spent and committed to
    /// pending trials (studies). Without it, the last evaluation may overshoot (the papers'
    /// loop: `while spent < B`).
    pub must_fit: bool,
    /// With unknown costs, refuse a proposal whose predicted cost does not fit.
    pub predicted_must_fit: bool,
}

/// The cost of a point known before its evaluation.
pub type KnownCostFn<'a> = dyn Fn(&[f64]) -> f64 + Sync + 'a;

/// What does not change during a run: the step configuration and how costs, λ, the stopping
/// rule and the budget work.
#[derive(Clone)]
pub struct Policy<'a> {
    /// Dimension of the unit cube.
    pub d: usize,
    /// The BO step's configuration.
    pub step: StepConfig,
    /// How costs are known to the acquisitions.
    pub cost: CostSetting<'a>,
    /// The cost of a point known before its evaluation (uniform or known costs): commits pending
    /// trials to the budget and gates proposals ([`BudgetSpec::must_fit`]).
    pub known_cost: Option<&'a KnownCostFn<'a>>,
    /// PBGI-D's schedule (`None`: λ is the step configuration's, if any).
    pub decay: Option<DecaySpec>,
    /// The stopping rule.
    pub stopping: Option<StopSpec>,
    /// The budget.
    pub budget: BudgetSpec,
    /// Explicit initial-design points (in the unit cube); the scrambled Sobol design otherwise.
    pub initial_points: Option<&'a [Vec<f64>]>,
}

impl Policy<'_> {
    /// The initial design's size (default `2(d + 1)`).
    pub fn n_initial(&self) -> usize {
        self.step.initial_design.unwrap_or(2 * (self.d + 1))
    }
}

/// How a trial handed out earlier has turned out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Evaluated: objective (maximization convention) and cost. A complete trial without a cost
    /// counts for PBGI-D's best value but is not an observation.
    Complete {
        /// Objective value, maximized.
        y: f64,
        /// Observed cost.
        cost: Option<f64>,
    },
    /// Handed out and not evaluated yet.
    Pending,
    /// Failed or abandoned.
    Failed,
}

/// A trial handed out earlier, as [`Run::record`] needs it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'r> {
    /// Its point in the unit cube.
    pub x: &'r [f64],
    /// How it was chosen.
    pub phase: Phase,
    /// How it turned out.
    pub outcome: Outcome,
    /// The cost recorded for it (charged to the budget whatever the outcome, if its phase
    /// counts).
    pub cost: Option<f64>,
    /// The acquisition value its step recorded.
    pub acquisition_value: Option<f64>,
    /// The stopping check its step recorded.
    pub check: Option<&'r StoppingCheck>,
}

/// Why a step stops the run or what it proposes.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Evaluate this point next.
    Propose(Proposal),
    /// No further trial, and why.
    Finished(Finished),
}

/// The outcome of [`Run::step`].
#[derive(Debug, Clone)]
pub struct Step {
    /// The proposal, or why the run is finished.
    pub verdict: Verdict,
    /// The models the step fitted (model steps only).
    pub models: Option<StepModels>,
    /// The stopping rule's check at this step (model steps of a run with a rule).
    pub check: Option<StoppingCheck>,
}

impl Step {
    fn finished(f: Finished) -> Self {
        Self {
            verdict: Verdict::Finished(f),
            models: None,
            check: None,
        }
    }
}

/// A run's state, rebuilt from its records (see the [module documentation](self)).
pub struct Run<'p> {
    policy: &'p Policy<'p>,
    /// Complete observations: points (row-major), objective values (maximized), costs.
    x: Vec<f64>,
    y: Vec<f64>,
    c: Vec<f64>,
    /// Points of pending trials (row-major).
    pending: Vec<f64>,
    /// Trials handed out in all.
    handed_out: usize,
    /// Complete evaluations after the initial design.
    bo_steps: u64,
    /// Cost charged to the budget.
    spent: f64,
    /// Known costs of the pending trials that will be charged.
    pending_cost: f64,
    /// PBGI-D's replay input.
    decay_steps: Vec<DecayStep>,
    /// Stopping checks recorded on earlier trials.
    checks: Vec<StoppingCheck>,
    warm: Option<GpParams>,
    bmsei: Option<BmseiCarry>,
    auto: Option<AutoLambda>,
}

impl<'p> Run<'p> {
    /// A run with no trials yet.
    pub fn new(policy: &'p Policy<'p>) -> Result<Self> {
        if policy.d == 0 {
            return Err(Error::invalid("d", "the dimension must be at least 1"));
        }
        if let Some(d) = &policy.decay {
            // Refuse bad parameters now, not at the first model step.
            replay_pbgi_d(d.lambda0, d.decay, [])?;
        }
        if let Some(sc) = &policy.stopping {
            if sc.lambda.starts_pbgi_d() && policy.decay.is_none() {
                return Err(Error::invalid(
                    "stopping.start_pbgi_d",
                    "needs the pbgi_d acquisition",
                ));
            }
            if matches!(sc.lambda, StopLambda::Auto { .. }) && policy.budget.total.is_none() {
                return Err(Error::invalid(
                    "stopping.lambda",
                    "\"auto\" chooses λ from the budget: it needs a total budget",
                ));
            }
        }
        Ok(Self {
            policy,
            x: Vec::new(),
            y: Vec::new(),
            c: Vec::new(),
            pending: Vec::new(),
            handed_out: 0,
            bo_steps: 0,
            spent: 0.0,
            pending_cost: 0.0,
            decay_steps: Vec::new(),
            checks: Vec::new(),
            warm: None,
            bmsei: None,
            auto: None,
        })
    }

    /// Adds a trial handed out earlier, in the order the trials were handed out.
    pub fn record(&mut self, e: Entry<'_>) -> Result<()> {
        let d = self.policy.d;
        if e.x.len() != d {
            return Err(Error::dim("trial x", d, e.x.len()));
        }
        let charged = self.policy.budget.charge_initial || e.phase != Phase::InitialDesign;
        if charged {
            self.spent += e.cost.unwrap_or(0.0);
        }
        match e.outcome {
            Outcome::Complete { y, cost } => {
                if let Some(c) = cost {
                    self.x.extend_from_slice(e.x);
                    self.y.push(y);
                    self.c.push(c);
                    if e.phase != Phase::InitialDesign {
                        self.bo_steps += 1;
                    }
                }
                self.decay_steps.push(DecayStep {
                    phase: e.phase,
                    acquisition_value: e.acquisition_value,
                    y,
                });
            }
            Outcome::Pending => {
                self.pending.extend_from_slice(e.x);
                if charged && let Some(k) = self.policy.known_cost {
                    self.pending_cost += k(e.x);
                }
            }
            Outcome::Failed => {}
        }
        if let Some(c) = e.check {
            self.checks.push(c.clone());
        }
        self.handed_out += 1;
        Ok(())
    }

    /// Restores what the last step carried to the next: the warm start of the fit and
    /// B-MS-EI's state (each only if given).
    pub fn carry(&mut self, warm: Option<GpParams>, bmsei: Option<BmseiCarry>) {
        if warm.is_some() {
            self.warm = warm;
        }
        if bmsei.is_some() {
            self.bmsei = bmsei;
        }
    }

    /// Restores the automatic stopping λ chosen earlier.
    pub fn set_auto_lambda(&mut self, auto: Option<AutoLambda>) {
        self.auto = auto;
    }

    /// The automatic stopping λ, once chosen.
    pub fn auto_lambda(&self) -> Option<&AutoLambda> {
        self.auto.as_ref()
    }

    /// The complete observations and the pending points.
    pub fn history(&self) -> History<'_> {
        History {
            x: &self.x,
            y: &self.y,
            cost: &self.c,
            pending: &self.pending,
        }
    }

    /// Cost charged to the budget so far.
    pub fn spent(&self) -> f64 {
        self.spent
    }

    /// Trials handed out so far.
    pub fn handed_out(&self) -> usize {
        self.handed_out
    }

    /// Complete evaluations after the initial design.
    pub fn bo_steps(&self) -> u64 {
        self.bo_steps
    }

    /// Pending trials.
    pub fn pending(&self) -> usize {
        self.pending.len() / self.policy.d
    }

    /// The warm start the next fit will use.
    pub fn warm_start(&self) -> Option<&GpParams> {
        self.warm.as_ref()
    }

    /// Decides the next trial: the budget gates, then the initial design or a model step, whose
    /// point `snap` moves to the nearest point the caller can evaluate, then the gates on its
    /// cost and the stopping rule. A proposal updates the carry (warm start, B-MS-EI's state)
    /// for the next step; the caller records the trial with [`Run::record`].
    pub fn step(&mut self, seed: u64, snap: &dyn Fn(&[f64]) -> Vec<f64>) -> Result<Step> {
        if let Some(f) = self.budget_left() {
            return Ok(Step::finished(f));
        }
        let (mut prop, models) = self.propose(seed)?;
        prop.x = snap(&prop.x);
        for r in &mut prop.runners_up {
            r.x = snap(&r.x);
        }
        if let Some(f) = self.cost_fits(&prop) {
            return Ok(Step::finished(f));
        }
        let check = match &models {
            Some(m) if prop.phase == Phase::Model => self.check_stopping(&prop, m, seed)?,
            _ => None,
        };
        if let Some((check, Some(reason))) = check {
            let f = Finished::Stopped {
                rule: check.rule.clone(),
                reason,
            };
            return Ok(Step {
                verdict: Verdict::Finished(f),
                models,
                check: Some(check),
            });
        }
        self.carry(prop.params.clone(), prop.bmsei.clone());
        Ok(Step {
            verdict: Verdict::Propose(prop),
            models,
            check: check.map(|(c, _)| c),
        })
    }

    /// Whether a proposal decided earlier, on fewer trials, may still be handed out now: the
    /// budget gates of [`Run::step`] on the trials recorded now (trials and budget left, then the
    /// proposal's known or predicted cost), `None` if it may. A caller that decides on a snapshot
    /// and claims the trial later (`pandora-study`'s claim) keeps the budget exactly this way.
    pub fn still_admits(&self, prop: &Proposal) -> Option<Finished> {
        self.budget_left().or_else(|| self.cost_fits(prop))
    }

    /// Why no trial can be handed out before proposing: the number of trials or BO steps, or a
    /// budget spent (with the pending trials' known costs).
    fn budget_left(&self) -> Option<Finished> {
        let b = &self.policy.budget;
        if let Some(m) = b.max_trials
            && self.handed_out as u64 >= m
        {
            return Some(Finished::MaxTrials(m));
        }
        if let Some(total) = b.total
            && self.spent + self.pending_cost >= total
        {
            return Some(Finished::Budget {
                spent: self.spent,
                total,
            });
        }
        if let Some(m) = b.max_bo_steps
            && self.bo_steps >= m
        {
            return Some(Finished::MaxEvaluations(m));
        }
        None
    }

    /// Why the proposal does not fit the budget ([`BudgetSpec::must_fit`],
    /// [`BudgetSpec::predicted_must_fit`]).
    fn cost_fits(&self, prop: &Proposal) -> Option<Finished> {
        let b = &self.policy.budget;
        let total = b.total?;
        let committed = self.spent + self.pending_cost;
        let done = Some(Finished::Budget {
            spent: self.spent,
            total,
        });
        let charged = b.charge_initial || prop.phase != Phase::InitialDesign;
        if b.must_fit
            && charged
            && let Some(k) = self.policy.known_cost
            && committed + k(&prop.x) > total * (1.0 + 1e-12)
        {
            return done;
        }
        if b.predicted_must_fit
            && matches!(self.policy.cost, CostSetting::Unknown)
            && let Some(pc) = prop.predicted_cost
            && committed + pc > total
        {
            return done;
        }
        None
    }

    /// The initial design's next point, or the BO step (twice at the first model step of PBGI-D
    /// started from the automatic λ: once to fit the model λ is chosen on, once with that λ).
    fn propose(&mut self, seed: u64) -> Result<(Proposal, Option<StepModels>)> {
        let p = self.policy;
        let n_init = p.n_initial();
        if self.handed_out < n_init || self.y.len() < n_init {
            // The initial design continues over pending (and failed) trials too: the k-th trial
            // gets design point k until enough evaluations are complete to fit a model.
            let k = self.handed_out;
            let x = match p.initial_points.and_then(|pts| pts.get(k)) {
                Some(x) => x.clone(),
                None => design_point(p.d, k as u64, p.step.design_seed)?,
            };
            return Ok((Proposal::without_model(x, Phase::InitialDesign), None));
        }
        let start = p.stopping.as_ref().filter(|s| s.lambda.starts_pbgi_d());
        let mut ctx = StepContext {
            cumulative_cost: self.spent,
            remaining_budget: p.budget.horizon.map(|b| b - self.spent),
            total_budget: p.budget.horizon,
            lambda: self.lambda()?,
            bmsei: self.bmsei.clone(),
            warm_fit: !p.step.refit.scheduled(self.handed_out),
        };
        let (prop, models) = self.propose_with(&ctx, seed)?;
        if let (Some(sc), Some(m), None) = (start, &models, &self.auto) {
            self.auto = Some(self.auto_lambda_from(&m.model, sc)?);
            ctx.lambda = self.lambda()?;
            return self.propose_with(&ctx, seed);
        }
        Ok((prop, models))
    }

    fn propose_with(&self, ctx: &StepContext, seed: u64) -> Result<(Proposal, Option<StepModels>)> {
        let p = self.policy;
        let warm = self.warm.as_ref();
        propose_fitted(p.d, self.history(), &p.step, ctx, p.cost, seed, warm)
    }

    /// The λ of the next model step: PBGI's fixed λ, PBGI-D's replayed λ; `None` for other
    /// acquisitions.
    pub fn next_lambda(&self) -> Result<Option<f64>> {
        let step = &self.policy.step;
        match self.lambda()? {
            Some(l) => Ok(Some(l)),
            None if matches!(
                step.acquisition,
                AcquisitionName::Pbgi | AcquisitionName::PbgiPlain
            ) =>
            {
                Ok(step.params.lambda)
            }
            None => Ok(None),
        }
    }

    /// PBGI-D's λ for the next step, replayed from the recorded steps (from the automatic λ if
    /// the run starts from it and it has been chosen).
    fn lambda(&self) -> Result<Option<f64>> {
        let Some(d) = &self.policy.decay else {
            return Ok(None);
        };
        let from_auto = self
            .policy
            .stopping
            .as_ref()
            .is_some_and(|s| s.lambda.starts_pbgi_d());
        let start = match (&self.auto, from_auto) {
            (Some(a), true) => a.lambda,
            _ => d.lambda0,
        };
        let mut state = replay_pbgi_d(start, d.decay, self.decay_steps.iter().copied())?;
        Ok(Some(state.begin_iteration()))
    }

    /// `λ = U/(B − C)` from the fitted model (prior paths).
    fn auto_lambda_from(&self, model: &GpModel, sc: &StopSpec) -> Result<AutoLambda> {
        let (
            StopLambda::Auto {
                u_samples, seed, ..
            },
            Some(total),
        ) = (sc.lambda, self.policy.budget.total)
        else {
            return Err(Error::invalid(
                "stopping.lambda",
                "the automatic λ needs lambda = \"auto\" and a total budget",
            ));
        };
        // U over exactly the points the run can propose (its categorical and discrete
        // parameters), like the stopping statistic.
        let est = estimate_u(
            model,
            UReference::Prior,
            None,
            self.policy.step.space.as_ref(),
            &UEstimatorOptions {
                samples: u_samples,
                seed,
                ..UEstimatorOptions::default()
            },
        )?;
        Ok(AutoLambda {
            lambda: lambda_from_budget(est.u, total, self.spent)?,
            u: est.u,
            u_std_error: est.std_error.is_finite().then_some(est.std_error),
            u_samples: est.samples,
            budget: total,
            spent: self.spent,
            at_trial: self.handed_out,
        })
    }

    /// The stopping rule's check on the posterior of all complete data, and the reason if it
    /// fired. Chooses the automatic λ at the first check that needs it.
    fn check_stopping(
        &mut self,
        prop: &Proposal,
        models: &StepModels,
        seed: u64,
    ) -> Result<Option<(StoppingCheck, Option<String>)>> {
        let p = self.policy;
        let Some(sc) = &p.stopping else {
            return Ok(None);
        };
        let lambda = match (sc.lambda, &self.auto) {
            (StopLambda::Fixed(l), _) => l,
            (StopLambda::Auto { .. }, Some(a)) => a.lambda,
            (StopLambda::Auto { .. }, None) => {
                let a = self.auto_lambda_from(&models.model, sc)?;
                let l = a.lambda;
                self.auto = Some(a);
                l
            }
        };
        let mut rule = sc.rule.build(Some(lambda))?;
        // The rule's moving window and debounce counter continue from the checks recorded at
        // the same λ (the rule is rebuilt on every step).
        for v in self
            .checks
            .iter()
            .filter(|c| c.lambda == lambda)
            .filter_map(|c| c.max_log_eipc.map(|v| (c.iteration, v)))
        {
            // A stand-in run with the recorded iteration count; only the supplied value is used.
            let zeros = vec![0.0; v.0 + 1];
            let mut run = RunState::new(1, &zeros, &zeros, &[], 1);
            run.supplied.max_log_eipc_exp = Some(v.1);
            rule.check(&run)?;
        }
        let history = self.history();
        let unknown = models.cost_model.is_some();
        let mut supplied = supplied_from_proposal(&p.step, &history, prop, unknown, Some(lambda));
        // Always the LogEIPC form, so every trial records the same statistic.
        supplied.max_pbgi_index = None;
        let cost_info = match (&models.cost_model, p.cost) {
            (Some(cm), _) => CostInfo::Unknown(cm),
            (None, CostSetting::Known(c)) => CostInfo::Known(c),
            _ => CostInfo::Uniform,
        };
        let run = RunState {
            d: p.d,
            x: &self.x,
            y: &self.y,
            cost: &self.c,
            n_initial: p.n_initial().min(self.y.len()),
            model: Some(&models.model),
            previous_model: None,
            cost_info,
            candidates: None,
            // The stopping statistic over exactly the points the run can propose.
            space: p.step.space.as_ref(),
            supplied,
            seed,
        };
        let dec = rule.check(&run)?;
        let check = StoppingCheck::new(dec.report(), lambda, dec.is_stop());
        let reason = match dec {
            Decision::Stop { reason, .. } => Some(reason),
            Decision::Continue(_) => None,
        };
        Ok(Some((check, reason)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::LinearMeanCost;
    use crate::optim::MultiStartOptions;
    use crate::policy::{FitKind, Refit};

    /// A keep tolerance that keeps some steps and not others on the 2-D test function.
    const KEEP_IN_TEST: f64 = 0.05;
    use crate::run::record::HyperRecord;

    /// A smooth 2-D objective with its maximum 0 at (0.3, 0.7).
    fn f(x: &[f64]) -> f64 {
        -((x[0] - 0.3).powi(2) + (x[1] - 0.7).powi(2))
    }

    fn step_config(acquisition: AcquisitionName) -> StepConfig {
        StepConfig {
            acquisition,
            multistart: MultiStartOptions {
                raw_samples: Some(64),
                num_restarts: Some(2),
                ..MultiStartOptions::default()
            },
            initial_design: Some(4),
            ..StepConfig::default()
        }
    }

    fn policy<'a>(step: StepConfig, cost: CostSetting<'a>, budget: BudgetSpec) -> Policy<'a> {
        Policy {
            d: 2,
            step,
            cost,
            known_cost: None,
            decay: None,
            stopping: None,
            budget,
            initial_points: None,
        }
    }

    fn id(x: &[f64]) -> Vec<f64> {
        x.to_vec()
    }

    /// Runs until finished (or `limit` trials), evaluating `f` at cost `cost(x)`: the trials'
    /// entries (x, phase, y, cost, acquisition value, check) and why it finished.
    #[allow(clippy::type_complexity)]
    fn drive(
        policy: &Policy<'_>,
        cost: &dyn Fn(&[f64]) -> f64,
        limit: usize,
    ) -> (
        Vec<(
            Vec<f64>,
            Phase,
            f64,
            f64,
            Option<f64>,
            Option<StoppingCheck>,
        )>,
        Option<Finished>,
    ) {
        let mut run = Run::new(policy).unwrap();
        let mut trials = Vec::new();
        for k in 0..limit {
            let step = run.step(k as u64, &id).unwrap();
            let prop = match step.verdict {
                Verdict::Propose(p) => p,
                Verdict::Finished(f) => return (trials, Some(f)),
            };
            assert_eq!(step.models.is_some(), prop.phase == Phase::Model);
            let (y, c) = (f(&prop.x), cost(&prop.x));
            let acq = prop
                .acquisition_value
                .is_finite()
                .then_some(prop.acquisition_value);
            run.record(Entry {
                x: &prop.x,
                phase: prop.phase,
                outcome: Outcome::Complete { y, cost: Some(c) },
                cost: Some(c),
                acquisition_value: acq,
                check: step.check.as_ref(),
            })
            .unwrap();
            trials.push((prop.x, prop.phase, y, c, acq, step.check));
        }
        (trials, None)
    }

    #[test]
    fn a_resumed_run_makes_the_same_next_decision() {
        let cost = LinearMeanCost {
            offset: 1.0,
            slope: 4.0,
        };
        let mut p = policy(
            step_config(AcquisitionName::PbgiD),
            CostSetting::Known(&cost),
            BudgetSpec {
                total: Some(40.0),
                horizon: Some(40.0),
                ..BudgetSpec::default()
            },
        );
        p.decay = Some(DecaySpec {
            lambda0: 0.1,
            decay: 2.0,
        });
        let c = |x: &[f64]| 1.0 + 4.0 * (x[0] + x[1]) / 2.0;
        let (trials, _) = drive(&p, &c, 9);
        assert_eq!(trials.len(), 9);
        // Replay the first 8 trials into a fresh run (as a study does on every ask) and step: the
        // 9th decision is bit-identical, including its λ.
        let mut run = Run::new(&p).unwrap();
        for (x, phase, y, cost, acq, check) in &trials[..8] {
            run.record(Entry {
                x,
                phase: *phase,
                outcome: Outcome::Complete {
                    y: *y,
                    cost: Some(*cost),
                },
                cost: Some(*cost),
                acquisition_value: *acq,
                check: check.as_ref(),
            })
            .unwrap();
        }
        assert!(trials[..8].iter().any(|t| t.1 == Phase::Model));
        // The warm start is carried by the front end (a study's state, a trace's last model
        // step): give the live run's last hyperparameters back.
        let mut live = Run::new(&p).unwrap();
        let mut carried = None;
        for (k, t) in trials[..8].iter().enumerate() {
            let s = live.step(k as u64, &id).unwrap();
            if let Verdict::Propose(prop) = &s.verdict {
                assert_eq!(prop.x, t.0, "step {k}");
                carried = prop.params.clone().or(carried);
            }
            live.record(Entry {
                x: &t.0,
                phase: t.1,
                outcome: Outcome::Complete {
                    y: t.2,
                    cost: Some(t.3),
                },
                cost: Some(t.3),
                acquisition_value: t.4,
                check: None,
            })
            .unwrap();
        }
        run.carry(carried, None);
        let a = run.step(8, &id).unwrap();
        let b = live.step(8, &id).unwrap();
        let (Verdict::Propose(a), Verdict::Propose(b)) = (a.verdict, b.verdict) else {
            panic!("both propose");
        };
        assert_eq!(a, b);
        assert_eq!(a.x, trials[8].0);
        assert_eq!(run.next_lambda().unwrap(), live.next_lambda().unwrap());
    }

    /// The proposals of `steps` model steps with [`Refit::Warm`], uninterrupted or resumed after
    /// `k1` trials from the records (the trials and the last model step's hyperparameters as a
    /// study stores them, through JSON).
    fn warm_refit_proposals(p: &Policy<'_>, steps: usize, k1: Option<usize>) -> Vec<Proposal> {
        let mut run = Run::new(p).unwrap();
        let mut out: Vec<Proposal> = Vec::new();
        let mut entries: Vec<(Vec<f64>, Phase, f64, Option<f64>)> = Vec::new();
        for k in 0..steps {
            if Some(k) == k1 {
                run = Run::new(p).unwrap();
                for (x, phase, y, acq) in &entries {
                    run.record(Entry {
                        x,
                        phase: *phase,
                        outcome: Outcome::Complete {
                            y: *y,
                            cost: Some(1.0),
                        },
                        cost: Some(1.0),
                        acquisition_value: *acq,
                        check: None,
                    })
                    .unwrap();
                }
                let last = out.iter().rev().find_map(|q| q.params.as_ref());
                let stored = last.map(|q| serde_json::to_string(&HyperRecord::from(q)).unwrap());
                let read = stored.map(|j| {
                    serde_json::from_str::<HyperRecord>(&j)
                        .unwrap()
                        .to_params()
                        .unwrap()
                });
                run.carry(read, None);
            }
            let Verdict::Propose(prop) = run.step(k as u64, &id).unwrap().verdict else {
                panic!("no budget limit");
            };
            let y = f(&prop.x) + 0.05 * (17.0 * prop.x[0]).sin();
            let acq = Some(prop.acquisition_value).filter(|v| v.is_finite());
            run.record(Entry {
                x: &prop.x,
                phase: prop.phase,
                outcome: Outcome::Complete { y, cost: Some(1.0) },
                cost: Some(1.0),
                acquisition_value: acq,
                check: None,
            })
            .unwrap();
            entries.push((prop.x.clone(), prop.phase, y, acq));
            out.push(prop);
        }
        out
    }

    #[test]
    fn warm_refits_replay_from_the_records() {
        let mut step = step_config(AcquisitionName::LogEi);
        // Scheduled full refits at trials 0–4, 6, 9, 13 (growth 0.5); warm fits at 5, 7, 8, …
        step.refit = Refit::Warm {
            growth: 0.5,
            max_gain: 0.05,
            keep_grad: 0.0,
        };
        let p = policy(step, CostSetting::Uniform, BudgetSpec::default());
        let live = warm_refit_proposals(&p, 16, None);
        assert!(
            !Refit::Warm {
                growth: 0.5,
                max_gain: 0.0,
                keep_grad: 0.0,
            }
            .scheduled(7)
        );
        // Interrupted after 7 and after 10 trials (both warm steps, after a full refit at 6 and
        // at 9): every later proposal is bit-identical, hyperparameters included (compared as
        // bits: the initial design's acquisition value is NaN).
        let bits = |v: &[Proposal]| -> Vec<(Vec<u64>, u64, Option<GpParams>)> {
            v.iter()
                .map(|q| {
                    let x = q.x.iter().map(|c| c.to_bits()).collect();
                    (x, q.acquisition_value.to_bits(), q.params.clone())
                })
                .collect()
        };
        for k1 in [7, 10] {
            let resumed = warm_refit_proposals(&p, 16, Some(k1));
            assert_eq!(bits(&resumed), bits(&live), "resumed at {k1}");
        }
        // The warm fits did change the decisions (so the replay above is a real check), and a
        // resumed run that lost the warm start decides differently.
        let mut always = p.clone();
        always.step.refit = Refit::Always;
        assert_ne!(bits(&warm_refit_proposals(&always, 16, None)), bits(&live));
        let lost = {
            let mut run = Run::new(&p).unwrap();
            for q in &live[..10] {
                let y = f(&q.x) + 0.05 * (17.0 * q.x[0]).sin();
                run.record(Entry {
                    x: &q.x,
                    phase: q.phase,
                    outcome: Outcome::Complete { y, cost: Some(1.0) },
                    cost: Some(1.0),
                    acquisition_value: Some(q.acquisition_value).filter(|v| v.is_finite()),
                    check: None,
                })
                .unwrap();
            }
            match run.step(10, &id).unwrap().verdict {
                Verdict::Propose(q) => q,
                Verdict::Finished(f) => panic!("{f}"),
            }
        };
        assert_ne!(lost.params, live[10].params);
    }

    #[test]
    fn kept_hyperparameters_replay_from_the_records() {
        let mut step = step_config(AcquisitionName::LogEi);
        step.refit = Refit::Warm {
            growth: 0.5,
            max_gain: 0.05,
            keep_grad: KEEP_IN_TEST,
        };
        let p = policy(step, CostSetting::Uniform, BudgetSpec::default());
        let live = warm_refit_proposals(&p, 20, None);
        let kinds: Vec<Option<FitKind>> = live.iter().map(|q| q.fit).collect();
        // Full fits where the schedule says so (and before: the design has no fit), kept and
        // warm steps between.
        for (k, q) in live.iter().enumerate() {
            match q.fit {
                None => assert_eq!(q.phase, Phase::InitialDesign, "step {k}"),
                Some(FitKind::Full) => {}
                Some(_) => assert!(!p.step.refit.scheduled(k), "step {k}: {kinds:?}"),
            }
        }
        assert!(kinds.contains(&Some(FitKind::Kept)), "{kinds:?}");
        assert!(kinds.contains(&Some(FitKind::Warm)), "{kinds:?}");
        // A kept step has the previous step's kernel hyperparameters to the bit.
        for w in live.windows(2) {
            if w[1].fit == Some(FitKind::Kept) {
                let (a, b) = (w[0].params.as_ref().unwrap(), w[1].params.as_ref().unwrap());
                assert_eq!((&a.kernel, a.noise), (&b.kernel, b.noise));
            }
        }
        // Resumed from the records after each kept or warm step: the same decisions.
        type Decision = (Vec<u64>, u64, Option<GpParams>, Option<FitKind>);
        let bits = |v: &[Proposal]| -> Vec<Decision> {
            v.iter()
                .map(|q| {
                    let x = q.x.iter().map(|c| c.to_bits()).collect();
                    (x, q.acquisition_value.to_bits(), q.params.clone(), q.fit)
                })
                .collect()
        };
        let resume_at: Vec<usize> = (1..20)
            .filter(|&k| matches!(kinds[k - 1], Some(FitKind::Kept | FitKind::Warm)))
            .take(4)
            .collect();
        assert!(resume_at.len() >= 2, "{kinds:?}");
        for k1 in resume_at {
            let resumed = warm_refit_proposals(&p, 20, Some(k1));
            assert_eq!(bits(&resumed), bits(&live), "resumed at {k1}: {kinds:?}");
        }
        // Keeping changed decisions (the tolerance is not vacuous).
        let mut warm = p.clone();
        warm.step.refit = Refit::Warm {
            growth: 0.5,
            max_gain: 0.05,
            keep_grad: 0.0,
        };
        let runs = warm_refit_proposals(&warm, 20, None);
        assert!(!runs.iter().any(|q| q.fit == Some(FitKind::Kept)));
        assert_ne!(bits(&runs), bits(&live));
    }

    #[test]
    fn budget_gates_refuse_or_allow_the_last_overshoot() {
        let c = |x: &[f64]| 1.0 + 4.0 * (x[0] + x[1]) / 2.0;
        let cost = LinearMeanCost {
            offset: 1.0,
            slope: 4.0,
        };
        let known = |x: &[f64]| c(x);
        let budget = BudgetSpec {
            total: Some(12.0),
            horizon: Some(12.0),
            ..BudgetSpec::default()
        };
        // The papers' loop: BO steps while spent < B, the last may overshoot; the initial design
        // is free.
        let p = policy(
            step_config(AcquisitionName::Ei),
            CostSetting::Uniform,
            budget,
        );
        let (trials, fin) = drive(&p, &c, 100);
        let spent: f64 = trials
            .iter()
            .filter(|t| t.1 != Phase::InitialDesign)
            .map(|t| t.3)
            .sum();
        let before_last = spent - trials.last().unwrap().3;
        assert!(spent >= 12.0 && before_last < 12.0, "{spent} {before_last}");
        assert!(matches!(fin, Some(Finished::Budget { total, .. }) if total == 12.0));
        // A study's gate: the known cost must fit, initial design charged.
        let mut q = policy(
            step_config(AcquisitionName::Ei),
            CostSetting::Known(&cost),
            BudgetSpec {
                must_fit: true,
                charge_initial: true,
                ..budget
            },
        );
        q.known_cost = Some(&known);
        let (trials, fin) = drive(&q, &c, 100);
        let spent: f64 = trials.iter().map(|t| t.3).sum();
        assert!(spent <= 12.0 * (1.0 + 1e-12), "{spent}");
        assert!(matches!(fin, Some(Finished::Budget { .. })));
        // Counts: max_trials counts every trial, max_bo_steps those after the initial design.
        let counts = |b: BudgetSpec| {
            let p = policy(
                step_config(AcquisitionName::Random),
                CostSetting::Uniform,
                b,
            );
            let (t, fin) = drive(&p, &c, 100);
            (t.len(), fin)
        };
        let by_trials = counts(BudgetSpec {
            max_trials: Some(6),
            ..BudgetSpec::default()
        });
        assert_eq!(by_trials, (6, Some(Finished::MaxTrials(6))));
        let by_steps = counts(BudgetSpec {
            max_bo_steps: Some(6),
            ..BudgetSpec::default()
        });
        assert_eq!(by_steps, (10, Some(Finished::MaxEvaluations(6))));
    }

    #[test]
    fn a_pending_trial_gets_the_next_design_point_and_commits_its_known_cost() {
        let known = |_: &[f64]| 3.0;
        let mut p = policy(
            step_config(AcquisitionName::Ei),
            CostSetting::Uniform,
            BudgetSpec {
                total: Some(5.0),
                must_fit: true,
                charge_initial: true,
                ..BudgetSpec::default()
            },
        );
        p.known_cost = Some(&known);
        let mut run = Run::new(&p).unwrap();
        let first = design_point(2, 0, 0).unwrap();
        run.record(Entry {
            x: &first,
            phase: Phase::InitialDesign,
            outcome: Outcome::Pending,
            cost: None,
            acquisition_value: None,
            check: None,
        })
        .unwrap();
        // 3 committed + 3 for the next does not fit in 5.
        let s = run.step(1, &id).unwrap();
        assert!(
            matches!(s.verdict, Verdict::Finished(Finished::Budget { spent, .. }) if spent == 0.0)
        );
        p.budget.total = Some(6.0);
        let mut run = Run::new(&p).unwrap();
        run.record(Entry {
            x: &first,
            phase: Phase::InitialDesign,
            outcome: Outcome::Pending,
            cost: None,
            acquisition_value: None,
            check: None,
        })
        .unwrap();
        let Verdict::Propose(prop) = run.step(1, &id).unwrap().verdict else {
            panic!("6 fits 3 + 3");
        };
        assert_eq!(prop.x, design_point(2, 1, 0).unwrap());
    }

    #[test]
    fn the_stopping_rule_fires_on_the_steps_own_model_and_auto_lambda_starts_pbgi_d() {
        // A huge fixed λ: evaluating is never worth its cost, so the rule stops at the first
        // model step, with its check.
        let mut p = policy(
            step_config(AcquisitionName::LogEi),
            CostSetting::Uniform,
            BudgetSpec::default(),
        );
        p.stopping = Some(StopSpec {
            rule: StoppingConfig::default(),
            lambda: StopLambda::Fixed(1e6),
        });
        let (trials, fin) = drive(&p, &|_| 1.0, 50);
        assert_eq!(trials.len(), 4, "only the initial design");
        let Some(Finished::Stopped { rule, reason }) = fin else {
            panic!("stopped: {fin:?}");
        };
        assert_eq!(rule, "pbgi");
        assert!(!reason.is_empty());
        // PBGI-D from the automatic λ: chosen once at the first model step, from the budget, and
        // the step proposes with it.
        let mut q = policy(
            step_config(AcquisitionName::PbgiD),
            CostSetting::Uniform,
            BudgetSpec {
                total: Some(30.0),
                horizon: Some(30.0),
                ..BudgetSpec::default()
            },
        );
        q.decay = Some(DecaySpec {
            lambda0: 0.1,
            decay: 2.0,
        });
        q.stopping = Some(StopSpec {
            rule: StoppingConfig::default(),
            lambda: StopLambda::Auto {
                u_samples: 8,
                seed: 1,
                start_pbgi_d: true,
            },
        });
        let mut run = Run::new(&q).unwrap();
        let mut first_model = None;
        for k in 0..6u64 {
            let s = run.step(k, &id).unwrap();
            let Verdict::Propose(prop) = s.verdict else {
                panic!("budget left");
            };
            if prop.phase == Phase::Model && first_model.is_none() {
                first_model = Some(prop.lambda);
            }
            let y = f(&prop.x);
            run.record(Entry {
                x: &prop.x,
                phase: prop.phase,
                outcome: Outcome::Complete { y, cost: Some(1.0) },
                cost: Some(1.0),
                acquisition_value: Some(prop.acquisition_value).filter(|v| v.is_finite()),
                check: s.check.as_ref(),
            })
            .unwrap();
        }
        let auto = run
            .auto_lambda()
            .expect("chosen at the first model step")
            .clone();
        assert_eq!(auto.at_trial, 4);
        assert_eq!(first_model, Some(Some(auto.lambda)));
        // Without a budget the automatic λ is refused when the run is created.
        q.budget.total = None;
        assert!(Run::new(&q).is_err());
    }
}
