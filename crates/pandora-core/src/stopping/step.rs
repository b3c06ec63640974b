//! Checking a stopping rule from a BO step ([`crate::policy::propose`]).
//!
//! A step that has just called [`propose_fitted`](crate::policy::propose_fitted) on its history
//! has the posterior on all data (and the log-cost posterior) in hand, so it
//!
//! 1. reuses the acquisition maximum the proposal found when it *is* the rule's statistic
//!    ([`supplied_from_proposal`]): LogEIPC with `α = 1` (for the PBGI rule, the `expected`
//!    convention or known costs; for LogEIPC-med, the `inverse` convention or known costs) or
//!    fixed-λ PBGI at the rule's λ;
//! 2. fills a [`RunState`](super::RunState) and call [`StoppingRule::check`](super::StoppingRule::check).
//!    If it says stop, the proposal is discarded (after-posterior-update semantics).

use super::SuppliedStatistics;
use crate::acquisition::{AcquisitionName, CostConvention};
pub use crate::policy::StepModels;
use crate::policy::{History, Phase, Proposal, StepConfig};

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
        AcquisitionName::Pbgi | AcquisitionName::PbgiD | AcquisitionName::PbgiPlain
            if proposal.lambda.is_some() && proposal.lambda == rule_lambda =>
        {
            s.max_pbgi_index = Some(v);
        }
        _ => {}
    }
    s
}
