//! The `[[policy]]` table as experiments wrote it before [`PolicySpec`], for the two places
//! where earlier output directories are read back: a trace header's run settings (which decide
//! whether a run is resumed) and `experiment.json` (which `summarize` reads).
//!
//! ## Definition
//!
//! Before studies and experiments shared [`PolicySpec`], a policy was a bag of optional keys
//! (`acquisition`, `lambda`, `lambda0`, `beta` for PBGI-D's divisor, `ucb_beta`, `alpha`, and
//! `tree`/`refill`/`warm_start` when set), written with every key present (`null` when unset).
//!
//! ## Algorithm
//!
//! - [`LegacyPolicy::of`] writes a [`PolicyConfig`] in that form: a run's settings keep the
//!   JSON of earlier releases, so traces they wrote are resumed (not refused as "written by a
//!   different configuration") and headers stay bit-identical.
//! - [`policy_config`] reads `experiment.json`'s policies in the current form, or else the
//!   earlier one, keeping the keys that applied to the acquisition.
//!
//! ## Degenerate cases
//!
//! PBGI-D's defaults are filled in: an earlier trace of a `pbgi_d` policy that omitted
//! `lambda0` or `beta` (written as `null`) is not resumed but rerun. Every configuration in
//! `experiments/` gives both.

use super::policy::PolicyConfig;
use pandora_core::acquisition::{AcquisitionName, FantasyTree};
use pandora_core::run::spec::PolicySpec;
use serde::{Deserialize, Deserializer, Serialize};

/// A policy in the form of the releases before [`PolicySpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyPolicy {
    name: Option<String>,
    acquisition: AcquisitionName,
    lambda: Option<f64>,
    lambda0: Option<f64>,
    beta: Option<f64>,
    ucb_beta: Option<f64>,
    alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tree: Option<FantasyTree>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refill: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warm_start: Option<bool>,
}

impl LegacyPolicy {
    /// `p` in the earlier form.
    pub fn of(p: &PolicyConfig) -> Self {
        let a = p.spec.params();
        let decay = p.spec.decay();
        Self {
            name: p.name.clone(),
            acquisition: p.spec.name(),
            lambda: p.spec.fixed_lambda(),
            lambda0: decay.map(|d| d.lambda0),
            beta: decay.map(|d| d.decay),
            ucb_beta: a.beta,
            alpha: a.alpha,
            tree: a.tree,
            refill: a.refill,
            warm_start: a.warm_start,
        }
    }

    /// The current form, with the keys that applied to the acquisition.
    fn into_current(self) -> PolicyConfig {
        use AcquisitionName as N;
        let spec = match self.acquisition {
            N::Pbgi => PolicySpec::Pbgi {
                lambda: self.lambda.unwrap_or(f64::NAN),
            },
            N::PbgiD => PolicySpec::PbgiD {
                lambda0: self.lambda0.unwrap_or(0.1),
                decay: self.beta.unwrap_or(2.0),
            },
            N::Ucb => PolicySpec::Ucb {
                beta: self.ucb_beta,
            },
            N::Lcb => PolicySpec::Lcb {
                beta: self.ucb_beta,
            },
            N::Eipc => PolicySpec::Eipc { alpha: self.alpha },
            N::LogEipc => PolicySpec::LogEipc { alpha: self.alpha },
            N::Eicc => PolicySpec::Eicc { alpha: self.alpha },
            N::LogEicc => PolicySpec::LogEicc { alpha: self.alpha },
            N::BMsEi => PolicySpec::BMsEi {
                tree: self.tree,
                refill: self.refill,
                warm_start: self.warm_start,
                tree_budget: None,
            },
            N::MsEi => PolicySpec::MsEi {
                tree: self.tree,
                warm_start: self.warm_start,
            },
            other => PolicySpec::bare(other, f64::NAN),
        };
        PolicyConfig {
            name: self.name,
            spec,
        }
    }
}

/// Either form of a stored policy.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Current(PolicyConfig),
    Legacy(LegacyPolicy),
}

/// Reads a policy of `experiment.json` in the current or the earlier form.
pub fn policy_config<'de, D: Deserializer<'de>>(d: D) -> Result<PolicyConfig, D::Error> {
    Ok(match Stored::deserialize(d)? {
        Stored::Current(p) => p,
        Stored::Legacy(l) => l.into_current(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header's policy as the releases before `PolicySpec` wrote it (from a golden trace).
    const HEADER: &str = r#"{"acquisition":"pbgi_d","alpha":null,"beta":2.0,"lambda":null,
        "lambda0":0.1,"name":null,"ucb_beta":null}"#;

    #[test]
    fn the_earlier_form_is_written_and_read_back() {
        let then: serde_json::Value = serde_json::from_str(HEADER).unwrap();
        let legacy: LegacyPolicy = serde_json::from_value(then.clone()).unwrap();
        let current = policy_config(then.clone()).unwrap();
        assert_eq!(current.spec.decay().unwrap().decay, 2.0);
        // Written again, it is the very same JSON.
        assert_eq!(
            serde_json::to_value(LegacyPolicy::of(&current)).unwrap(),
            then
        );
        assert_eq!(LegacyPolicy::of(&current), legacy);
        // The current form reads as itself.
        let json = serde_json::to_value(&current).unwrap();
        assert_eq!(json["decay"], 2.0);
        assert_eq!(policy_config(json).unwrap(), current);
        // UCB's β moves between `ucb_beta` and `beta`.
        let ucb = PolicyConfig {
            name: Some("u".into()),
            spec: PolicySpec::Ucb { beta: Some(0.5) },
        };
        let old = serde_json::to_value(LegacyPolicy::of(&ucb)).unwrap();
        assert_eq!(
            (old["ucb_beta"].as_f64(), old["beta"].is_null()),
            (Some(0.5), true)
        );
        assert_eq!(policy_config(old).unwrap(), ucb);
    }
}
