//! Checking a stopping rule from a BO step ([`crate::policy::propose`]).
//!
//! A study step that has just called `propose` on its history (the posterior on all data) can
//!
//! 1. rebuild the fitted objective model (and log-cost model) from the hyperparameters the
//!    proposal returned, without refitting ([`models_from_proposal`]);
//! 2. reuse the acquisition maximum the proposal found when it *is* the rule's statistic
//!    ([`supplied_from_proposal`]): LogEIPC with `α = 1` (for the PBGI rule, the `expected`
//!    convention or known costs; for LogEIPC-med, the `inverse` convention or known costs) or
//!    fixed-λ PBGI at the rule's λ;
//! 3. fill a [`RunState`](super::RunState) and call [`StoppingRule::check`](super::StoppingRule::check).
//!    If it says stop, the proposal is discarded (after-posterior-update semantics).

use super::SuppliedStatistics;
use crate::acquisition::{AcquisitionName, CostConvention};
use crate::error::{Error, Result};
use crate::gp::{GpModel, Transforms};
use crate::policy::{History, Phase, Proposal, StepConfig};

/// The models a step fitted.
#[derive(Debug, Clone)]
pub struct StepModels {
    /// The objective posterior on the history (without pending fantasies).
    pub model: GpModel,
    /// The log-cost posterior (unknown costs only).
    pub cost_model: Option<GpModel>,
}

/// Rebuilds the models `propose(d, history, config, …)` fitted, from the hyperparameters in
/// `proposal` (`None` if the proposal did not fit a model: initial design, random search).
pub fn models_from_proposal(
    d: usize,
    history: &History<'_>,
    config: &StepConfig,
    proposal: &Proposal,
) -> Result<Option<StepModels>> {
    let Some(params) = &proposal.params else {
        return Ok(None);
    };
    let t = Transforms {
        normalize_inputs: None,
        standardize_outcomes: config.standardize,
        output_scale: config.output_scale.clone(),
    };
    let model = GpModel::with_params(history.x, history.y, d, &t, params.clone())?;
    let cost_model = match &proposal.cost_params {
        Some(cp) => {
            if history.cost.len() != history.y.len() {
                return Err(Error::dim(
                    "history.cost",
                    history.y.len(),
                    history.cost.len(),
                ));
            }
            if history.cost.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
                return Err(Error::invalid(
                    "history.cost",
                    "costs must be finite and > 0",
                ));
            }
            let logc: Vec<f64> = history.cost.iter().map(|c| c.ln()).collect();
            let tc = Transforms {
                normalize_inputs: None,
                standardize_outcomes: true,
                output_scale: None,
            };
            Some(GpModel::with_params(history.x, &logc, d, &tc, cp.clone())?)
        }
        None => None,
    };
    Ok(Some(StepModels { model, cost_model }))
}

/// The statistics a proposal already computed (see the [module documentation](self)); empty
/// when the proposal's model had pending fantasies or was not a model step. `unknown_cost`:
/// whether costs are learned (then the two LogEIPC conventions differ). `rule_lambda`: the λ of
/// the PBGI stopping rule.
pub fn supplied_from_proposal(
    config: &StepConfig,
    history: &History<'_>,
    proposal: &Proposal,
    unknown_cost: bool,
    rule_lambda: Option<f64>,
) -> SuppliedStatistics {
    let mut s = SuppliedStatistics::default();
    if !history.pending.is_empty() || proposal.phase != Phase::Model {
        return s;
    }
    let v = proposal.acquisition_value;
    if !v.is_finite() {
        return s;
    }
    match config.acquisition {
        AcquisitionName::LogEipc if config.params.alpha.unwrap_or(1.0) == 1.0 => {
            let conv = config.params.convention.unwrap_or(CostConvention::Inverse);
            if !unknown_cost || conv == CostConvention::Expected {
                s.max_log_eipc_exp = Some(v);
            }
            if !unknown_cost || conv == CostConvention::Inverse {
                s.max_log_eipc_inv = Some(v);
            }
        }
        AcquisitionName::Pbgi | AcquisitionName::PbgiD
            if proposal.lambda.is_some() && proposal.lambda == rule_lambda =>
        {
            s.max_pbgi_index = Some(v);
        }
        _ => {}
    }
    s
}
