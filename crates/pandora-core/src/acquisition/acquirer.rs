//! The step recipe of an acquisition: [`Acquirer`].
//!
//! ## Definition
//!
//! A model step ([`crate::policy::propose_fitted`]) fits the objective GP to the history (with
//! the pending points' fantasies), fits a GP on the log costs when costs are unknown, and asks
//! the configured acquisition's acquirer for the next point. An acquirer is that last part: given
//! the fitted models and the step's inputs ([`StepInputs`]), it returns a point of the domain,
//! its acquisition value and what the next step of the same run needs ([`Acquired`]). What the
//! step must prepare beforehand is the acquirer's [`Needs`]:
//!
//! | needs | prepared | acquirers |
//! |---|---|---|
//! | [`Needs::Nothing`] | nothing (the point is recorded as phase `random`) | random search |
//! | [`Needs::Objective`] | the objective model | Thompson sampling |
//! | [`Needs::ObjectiveAndCost`] | both models, the cost model to divide by, the predicted cost | the others |
//!
//! ## The implementors
//!
//! Each acquisition that is more than a function of `μ`, `σ` and the log cost lives in its own
//! file with its recipe; the registry ([`super::registry`]) names them:
//!
//! | names | acquirer | file |
//! |---|---|---|
//! | `ei` … `pbgi_d`, `budgeted_ei` | `Pointwise`: [`super::build_pointwise`] on the model, maximized | `registry.rs` |
//! | `ts` | [`super::ts::ThompsonSampling`] | `ts.rs` |
//! | `random` | [`super::random::RandomSearch`] | `random.rs` |
//! | `mes`, `mes_cost` | [`super::mes::MesStep`] | `mes.rs` |
//! | `kg` | [`super::kg::KgStep`] | `kg.rs` |
//! | `one_shot_kg` | [`super::one_shot_kg::OneShotKgStep`] | `one_shot_kg.rs` |
//! | `b_ms_ei`, `ms_ei` | [`super::multi_step::BmseiStep`], [`super::multi_step::MseiStep`] | `multi_step.rs` |
//!
//! Adding an acquisition is one file (its acquirer) and one registry arm (its name and acquirer);
//! docs/acquisitions.md, "Adding an acquisition", walks through an example.
//!
//! ## Degenerate cases
//!
//! - An acquirer that needs a model and is handed none (only possible outside the policy step)
//!   returns an error naming `model`, not a panic.
//! - Acquirers that sample or condition the stationary GP directly refuse a variable-amplitude
//!   model ([`Acquirer::supports_output_scale`]); the step checks this before it fits.
//!
//! Every acquirer is a pure function of its inputs and `seed`, so a run is reproducible.

use super::analytic::CostConvention;
use super::bmsei::{BmseiCarry, FantasyTree, TreeBudget};
use super::cost::{CostModel, CostSetting};
use crate::error::{Error, Result};
use crate::gp::GpModel;
use crate::optim::domain::{Candidate, Domain};
use crate::optim::multistart::MultiStartOptions;

/// Parameters of an acquisition at one decision (what is not given is an error if needed).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AcquisitionParams {
    /// Incumbent value (EI, PI, EIPC families).
    pub best_f: Option<f64>,
    /// Fixed UCB/LCB β.
    pub beta: Option<f64>,
    /// UCB/LCB schedule index `t` (cumulative cost + 1); β = [`super::gp_ucb_beta`]`(d, t)`.
    pub t: Option<f64>,
    /// Cost exponent α of EIPC/LogEIPC (default 1).
    pub alpha: Option<f64>,
    /// Remaining budget (EICC).
    pub remaining_budget: Option<f64>,
    /// Total budget (EICC).
    pub total_budget: Option<f64>,
    /// λ of PBGI (for PBGI-D: its current λ).
    pub lambda: Option<f64>,
    /// Unknown-cost convention of LogEIPC/LogEICC (default inverse) and of cost-weighted MES
    /// (default expected: divide by `E[c]`).
    pub convention: Option<CostConvention>,
    /// B-MS-EI's scenario tree (fantasies per look-ahead stage; default `[1, 1, 1]`).
    pub tree: Option<FantasyTree>,
    /// B-MS-EI: apply the refill rule to the previous step's suggested budget when the step
    /// context carries one (default true, the reference's setting).
    pub refill: Option<bool>,
    /// B-MS-EI: warm-start the tree maximization from the previous step's trees when the step
    /// context carries them (default true, the reference's setting).
    pub warm_start: Option<bool>,
    /// B-MS-EI: the budget the tree plans for (default [`TreeBudget::Suggested`]).
    pub tree_budget: Option<TreeBudget>,
}

/// What a step prepares before it calls an [`Acquirer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// No model: the acquirer continues the design sequence (random search).
    Nothing,
    /// The objective model only (costs are ignored: no cost model, no predicted cost).
    Objective,
    /// The objective model and, with unknown costs, the log-cost model; the step reports the
    /// proposal's predicted cost.
    ObjectiveAndCost,
}

/// What an acquirer sees at one step.
#[derive(Clone, Copy)]
pub struct StepInputs<'a> {
    /// The dimension of the (unit-cube) input space.
    pub d: usize,
    /// The objective posterior with the pending points' fantasies (`None` for
    /// [`Needs::Nothing`]).
    pub model: Option<&'a GpModel>,
    /// The fitted log-cost model (unknown costs, [`Needs::ObjectiveAndCost`]).
    pub cost_model: Option<&'a GpModel>,
    /// How costs are known.
    pub cost: CostSetting<'a>,
    /// The cost model acquisitions divide by (`None`: uniform costs).
    pub cost_ref: Option<&'a dyn CostModel>,
    /// The acquisition's parameters with the step's values filled in (incumbent, UCB schedule
    /// index, budgets, λ).
    pub params: AcquisitionParams,
    /// The best observed value (maximization).
    pub best_f: f64,
    /// Options of the multi-start maximization.
    pub ms: &'a MultiStartOptions,
    /// The step's seed.
    pub seed: u64,
    /// Where the step may propose.
    pub domain: Domain<'a>,
    /// The observed points (row-major, without the pending ones).
    pub train_x: &'a [f64],
    /// The cost of the last real evaluation (B-MS-EI's refill rule).
    pub last_cost: Option<f64>,
    /// The observed costs, in order (B-MS-EI's [`TreeBudget::RecentCosts`]; empty when the run
    /// records none).
    pub costs: &'a [f64],
    /// The previous step's carry in the same run (B-MS-EI, MSEI).
    pub carry: Option<&'a BmseiCarry>,
    /// Random Fourier features of Thompson-sampling paths.
    pub ts_features: usize,
    /// Seed of the design sequence (random search continues it).
    pub design_seed: u64,
    /// Index of the trial handed out in the design sequence (observed plus pending trials).
    pub design_index: u64,
}

impl<'a> StepInputs<'a> {
    /// The objective model, or an error naming `model` if the step prepared none.
    pub fn model(&self) -> Result<&'a GpModel> {
        self.model
            .ok_or_else(|| Error::invalid("model", "this acquisition needs a fitted model"))
    }
}

/// What an acquirer chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Acquired {
    /// The point, in `[0,1]^d`.
    pub x: Vec<f64>,
    /// Its acquisition value (NaN without a model).
    pub value: f64,
    /// What the next step of the same run needs (B-MS-EI, MSEI).
    pub carry: Option<BmseiCarry>,
    /// Other points the maximization scored, best first ([`crate::optim::runners_up`]; empty
    /// where the acquirer keeps none): alternatives for a caller whose point is taken meanwhile.
    pub runners_up: Vec<Candidate>,
}

impl Acquired {
    /// A point and its value, with no carry.
    pub fn point(x: Vec<f64>, value: f64) -> Self {
        Self {
            x,
            value,
            carry: None,
            runners_up: Vec::new(),
        }
    }
}

/// The step recipe of an acquisition (see the module docs).
pub trait Acquirer {
    /// What the step prepares (default: both models).
    fn needs(&self) -> Needs {
        Needs::ObjectiveAndCost
    }

    /// Whether it supports a variable-amplitude model ([`crate::gp::OutputScale`]; default
    /// true).
    fn supports_output_scale(&self) -> bool {
        true
    }

    /// Whether it is a pointwise acquisition ([`super::build_pointwise`] builds it; default
    /// false).
    fn is_pointwise(&self) -> bool {
        false
    }

    /// Chooses the step's point.
    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired>;
}
