//! [`PolicySpec`]: which acquisition a run uses and the settings that apply to it, as one typed
//! value shared by study TOML (`[policy]`), experiment TOML (`[[policy]]`) and Python.
//!
//! ## Definition
//!
//! A policy specification is an internally tagged enum: the key `acquisition` names the variant
//! (`acquisition = "pbgi_d"`), and each variant holds exactly the keys that mean something for
//! that acquisition:
//!
//! | acquisition                    | keys                                      |
//! |--------------------------------|-------------------------------------------|
//! | `pbgi`, `pbgi_plain`           | `lambda` (required)                       |
//! | `pbgi_d`                       | `lambda0` (default 0.1), `decay` (2)      |
//! | `ucb`, `lcb`                   | `beta` (default: the GP-UCB schedule)     |
//! | `eipc`, `log_eipc`             | `alpha` (cost exponent, default 1)        |
//! | `eicc`, `log_eicc`             | `alpha` (default: cost cooling)           |
//! | `b_ms_ei`                      | `tree`, `refill`, `warm_start`, `tree_budget` |
//! | `ms_ei`                        | `tree`, `warm_start`                      |
//! | every other name of the registry | none                                    |
//!
//! One name per idea: `decay` is PBGI-D's divisor, `beta` is UCB's β. The keys every policy has
//! (seed, initial design, stopping rule, label) belong to the surrounding table, which flattens
//! the spec into itself (`#[serde(flatten)]`).
//!
//! ## Algorithm
//!
//! Deserialization reads the tag, then the variant's fields with `deny_unknown_fields`: a key
//! that does not apply to the acquisition is an error naming it and listing the keys that do.
//! Keys that changed name (`ucb_beta` → `beta`, an experiment's `beta` for PBGI-D →
//! `decay`) get an error that says the new name ([`MOVED`]). [`PolicySpec::validate`] then checks
//! the values (finite, positive, a divisor above 1), naming the field.
//!
//! ## Degenerate cases
//!
//! - Unknown keys are refused even when the spec is flattened into a surrounding table: serde
//!   hands the flattened enum every key the surrounding struct does not name, and the variant
//!   refuses those it does not know (tested per variant).
//! - A missing `acquisition` is an error ("missing field `acquisition`"); a missing `[policy]`
//!   table is the [`Default`], PBGI-D with λ0 = 0.1 and divisor 2.
//!
//! The set of variants and the registry's [`AcquisitionName::ALL`] are the same set: both
//! [`PolicySpec::name`] and [`PolicySpec::bare`] are exhaustive matches, and a test checks the
//! round trip for every name.

use super::driver::DecaySpec;
use crate::acquisition::{AcquisitionName, AcquisitionParams, FantasyTree, PbgiDecay, TreeBudget};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Keys that changed name: (old key, a key that only the variant it moved in has, new key).
/// `ucb_beta` moved wherever it was used; an experiment's `beta` means the decay only next to
/// PBGI-D's keys.
pub const MOVED: [(&str, &str, &str); 2] = [("ucb_beta", "", "beta"), ("beta", "decay", "decay")];

/// The acquisition of a run and the settings that apply to it (see the module docs).
//
// `remote = "Self"` makes the derives inherent functions, which the trait impls below call: the
// deserializer adds the hints of [`MOVED`] to serde's unknown-field errors. Callers outside this
// module go through the trait (`<PolicySpec as Deserialize>::deserialize`, serde's derives and
// `from_str` do), not the inherent function, which has no hints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", tag = "acquisition", deny_unknown_fields)]
pub enum PolicySpec {
    /// Expected improvement.
    #[serde(rename = "ei")]
    Ei {},
    /// Log expected improvement.
    #[serde(rename = "log_ei")]
    LogEi {},
    /// `log(EI + 1e-6)` (the PBGI paper's App. D.1 ablation).
    #[serde(rename = "log_vanilla_ei")]
    LogVanillaEi {},
    /// Probability of improvement.
    #[serde(rename = "pi")]
    Pi {},
    /// Log probability of improvement.
    #[serde(rename = "log_pi")]
    LogPi {},
    /// Upper confidence bound.
    #[serde(rename = "ucb")]
    Ucb {
        /// A fixed β (default: the GP-UCB schedule in the cumulative cost).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        beta: Option<f64>,
    },
    /// Lower confidence bound.
    #[serde(rename = "lcb")]
    Lcb {
        /// A fixed β (default: the GP-UCB schedule in the cumulative cost).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        beta: Option<f64>,
    },
    /// EI per unit cost.
    #[serde(rename = "eipc")]
    Eipc {
        /// Cost exponent α (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alpha: Option<f64>,
    },
    /// Log EI per unit cost.
    #[serde(rename = "log_eipc")]
    LogEipc {
        /// Cost exponent α (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alpha: Option<f64>,
    },
    /// EI with cost cooling.
    #[serde(rename = "eicc")]
    Eicc {
        /// A fixed cost exponent α (default: remaining / total budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alpha: Option<f64>,
    },
    /// Log EI with cost cooling.
    #[serde(rename = "log_eicc")]
    LogEicc {
        /// A fixed cost exponent α (default: remaining / total budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alpha: Option<f64>,
    },
    /// PBGI with a fixed λ.
    #[serde(rename = "pbgi")]
    Pbgi {
        /// λ (objective units per cost unit).
        lambda: f64,
    },
    /// PBGI computed as the reference code's plain version (App. D.1 ablation; reproduction
    /// only).
    #[serde(rename = "pbgi_plain")]
    PbgiPlain {
        /// λ (objective units per cost unit).
        lambda: f64,
    },
    /// PBGI with λ divided by `decay` whenever the Gittins stopping rule fires.
    #[serde(rename = "pbgi_d")]
    PbgiD {
        /// The initial λ (default 0.1).
        #[serde(default = "default_lambda0")]
        lambda0: f64,
        /// The divisor (> 1, default 2).
        #[serde(default = "default_decay")]
        decay: f64,
    },
    /// Thompson sampling.
    #[serde(rename = "ts")]
    Ts {},
    /// Uniformly random points.
    #[serde(rename = "random")]
    Random {},
    /// Budget-constrained EI.
    #[serde(rename = "budgeted_ei")]
    BudgetedEi {},
    /// Max-value entropy search.
    #[serde(rename = "mes")]
    Mes {},
    /// MES per unit cost.
    #[serde(rename = "mes_cost")]
    MesCost {},
    /// Knowledge gradient.
    #[serde(rename = "kg")]
    Kg {},
    /// One-shot knowledge gradient.
    #[serde(rename = "one_shot_kg")]
    OneShotKg {},
    /// Budgeted multi-step EI.
    #[serde(rename = "b_ms_ei")]
    BMsEi {
        /// The scenario tree (default `[1, 1, 1]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree: Option<FantasyTree>,
        /// The refill rule for the suggested budget (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refill: Option<bool>,
        /// Warm start from the previous step's trees (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warm_start: Option<bool>,
        /// The budget the tree plans for (default `"suggested"`, the B-MS-EI paper's rollout
        /// and refill rule; `"recent_costs"`: the PBGI repository's BMSEI).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree_budget: Option<TreeBudget>,
    },
    /// Multi-step lookahead EI (uniform costs).
    #[serde(rename = "ms_ei")]
    MsEi {
        /// The scenario tree (default `[1, 1, 1]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree: Option<FantasyTree>,
        /// Warm start from the previous step's trees (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warm_start: Option<bool>,
    },
}

impl Serialize for PolicySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        PolicySpec::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        PolicySpec::deserialize(d).map_err(|e| {
            let text = e.to_string();
            match moved_hint(&text) {
                Some(hint) => serde::de::Error::custom(format!("{text}; {hint}")),
                None => e,
            }
        })
    }
}

/// The hint for an unknown-field error about a key of [`MOVED`], if it is one.
fn moved_hint(error: &str) -> Option<String> {
    MOVED.iter().find_map(|(old, marker, new)| {
        let about_old = error.contains(&format!("unknown field `{old}`"));
        let in_variant = marker.is_empty() || error.contains(&format!("`{marker}`"));
        (about_old && in_variant).then(|| format!("`{old}` is now called `{new}`"))
    })
}

fn default_lambda0() -> f64 {
    0.1
}

fn default_decay() -> f64 {
    2.0
}

impl Default for PolicySpec {
    /// PBGI-D with λ0 = 0.1 and divisor 2.
    fn default() -> Self {
        PolicySpec::PbgiD {
            lambda0: default_lambda0(),
            decay: default_decay(),
        }
    }
}

impl PolicySpec {
    /// The registry name of the acquisition.
    pub fn name(&self) -> AcquisitionName {
        use AcquisitionName as N;
        match self {
            Self::Ei {} => N::Ei,
            Self::LogEi {} => N::LogEi,
            Self::LogVanillaEi {} => N::LogVanillaEi,
            Self::Pi {} => N::Pi,
            Self::LogPi {} => N::LogPi,
            Self::Ucb { .. } => N::Ucb,
            Self::Lcb { .. } => N::Lcb,
            Self::Eipc { .. } => N::Eipc,
            Self::LogEipc { .. } => N::LogEipc,
            Self::Eicc { .. } => N::Eicc,
            Self::LogEicc { .. } => N::LogEicc,
            Self::Pbgi { .. } => N::Pbgi,
            Self::PbgiD { .. } => N::PbgiD,
            Self::PbgiPlain { .. } => N::PbgiPlain,
            Self::Ts {} => N::Ts,
            Self::Random {} => N::Random,
            Self::BudgetedEi {} => N::BudgetedEi,
            Self::Mes {} => N::Mes,
            Self::MesCost {} => N::MesCost,
            Self::Kg {} => N::Kg,
            Self::OneShotKg {} => N::OneShotKg,
            Self::BMsEi { .. } => N::BMsEi,
            Self::MsEi { .. } => N::MsEi,
        }
    }

    /// The spec of `name` with every optional key unset (and defaults for PBGI-D; `pbgi`'s
    /// required λ is `lambda`).
    pub fn bare(name: AcquisitionName, lambda: f64) -> Self {
        use AcquisitionName as N;
        match name {
            N::Ei => Self::Ei {},
            N::LogEi => Self::LogEi {},
            N::LogVanillaEi => Self::LogVanillaEi {},
            N::Pi => Self::Pi {},
            N::LogPi => Self::LogPi {},
            N::Ucb => Self::Ucb { beta: None },
            N::Lcb => Self::Lcb { beta: None },
            N::Eipc => Self::Eipc { alpha: None },
            N::LogEipc => Self::LogEipc { alpha: None },
            N::Eicc => Self::Eicc { alpha: None },
            N::LogEicc => Self::LogEicc { alpha: None },
            N::Pbgi => Self::Pbgi { lambda },
            N::PbgiD => Self::default(),
            N::PbgiPlain => Self::PbgiPlain { lambda },
            N::Ts => Self::Ts {},
            N::Random => Self::Random {},
            N::BudgetedEi => Self::BudgetedEi {},
            N::Mes => Self::Mes {},
            N::MesCost => Self::MesCost {},
            N::Kg => Self::Kg {},
            N::OneShotKg => Self::OneShotKg {},
            N::BMsEi => Self::BMsEi {
                tree: None,
                refill: None,
                warm_start: None,
                tree_budget: None,
            },
            N::MsEi => Self::MsEi {
                tree: None,
                warm_start: None,
            },
        }
    }

    /// The static parameters of the acquisition (the per-step ones, such as the incumbent, are
    /// filled in by the step).
    pub fn params(&self) -> AcquisitionParams {
        let mut p = AcquisitionParams::default();
        match *self {
            Self::Ucb { beta } | Self::Lcb { beta } => p.beta = beta,
            Self::Eipc { alpha }
            | Self::LogEipc { alpha }
            | Self::Eicc { alpha }
            | Self::LogEicc { alpha } => p.alpha = alpha,
            Self::Pbgi { lambda } | Self::PbgiPlain { lambda } => p.lambda = Some(lambda),
            Self::BMsEi {
                tree,
                refill,
                warm_start,
                tree_budget,
            } => {
                (p.tree, p.refill, p.warm_start) = (tree, refill, warm_start);
                p.tree_budget = tree_budget;
            }
            Self::MsEi { tree, warm_start } => (p.tree, p.warm_start) = (tree, warm_start),
            _ => {}
        }
        p
    }

    /// PBGI-D's λ schedule (`None` for other acquisitions).
    pub fn decay(&self) -> Option<DecaySpec> {
        match *self {
            Self::PbgiD { lambda0, decay } => Some(DecaySpec { lambda0, decay }),
            _ => None,
        }
    }

    /// The λ of fixed-λ PBGI (`None` for other acquisitions).
    pub fn fixed_lambda(&self) -> Option<f64> {
        match *self {
            Self::Pbgi { lambda } | Self::PbgiPlain { lambda } => Some(lambda),
            _ => None,
        }
    }

    /// Checks the values; errors name the field (`lambda`, `lambda0`, `decay`, `beta`, `alpha`).
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::Pbgi { lambda } | Self::PbgiPlain { lambda }
                if !(lambda.is_finite() && lambda > 0.0) =>
            {
                Err(Error::invalid(
                    "lambda",
                    format!("must be finite and > 0, got {lambda}"),
                ))
            }
            Self::PbgiD { lambda0, decay } => PbgiDecay::new(lambda0, decay).map(|_| ()),
            Self::Ucb { beta: Some(b) } | Self::Lcb { beta: Some(b) }
                if !(b.is_finite() && b >= 0.0) =>
            {
                Err(Error::invalid(
                    "beta",
                    format!("must be finite and >= 0, got {b}"),
                ))
            }
            Self::Eipc { alpha: Some(a) }
            | Self::LogEipc { alpha: Some(a) }
            | Self::Eicc { alpha: Some(a) }
            | Self::LogEicc { alpha: Some(a) }
                if !a.is_finite() =>
            {
                Err(Error::invalid("alpha", format!("must be finite, got {a}")))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
