//! Reading a study configuration back from storage, in the current form or the one stored by
//! releases before [`PolicySpec`].
//!
//! ## Definition
//!
//! A study stores its configuration as JSON when it is created ([`crate::Study::open`]). Until
//! the policy became a tagged [`PolicySpec`], `[policy]` was stored with every key of every
//! acquisition (`"lambda": null, "lambda0": 0.1, "decay": 2.0, "beta": null, …`), which the
//! current form refuses (a key that does not apply to the acquisition is an error).
//!
//! ## Algorithm
//!
//! [`from_stored_json`] reads the current form; if that fails, the stored form of the earlier
//! releases (`LegacyStudyConfig`), keeping of its policy only the keys that applied to its
//! acquisition — the ones the earlier releases used: `lambda` for `pbgi`, `lambda0`/`decay` for
//! `pbgi_d`, `beta` for `ucb`/`lcb`, `tree`/`refill`/`warm_start` for `b_ms_ei`/`ms_ei`. The
//! others were ignored by those releases, so the study decides exactly as before.
//!
//! ## Degenerate cases
//!
//! A text that is neither form reports the current form's error. A legacy `pbgi` policy without
//! `lambda` (which the earlier releases refused to create) is an error naming `policy.lambda`.

use super::{
    BudgetSection, CostSection, ObjectiveSection, PolicySection, StudyConfig, StudySection,
    StudyStopping,
};
use crate::error::{Error, Result};
use crate::space::Param;
use pandora_core::acquisition::{AcquisitionName, FantasyTree};
use pandora_core::run::spec::PolicySpec;
use serde::Deserialize;

/// Parses a configuration stored by [`crate::Study::open`], in the current or the earlier form.
pub fn from_stored_json(text: &str) -> Result<StudyConfig> {
    match serde_json::from_str::<StudyConfig>(text) {
        Ok(c) => Ok(c),
        Err(current) => match serde_json::from_str::<LegacyStudyConfig>(text) {
            Ok(legacy) => legacy.into_current(),
            Err(_) => Err(current.into()),
        },
    }
}

/// A configuration as the releases before [`PolicySpec`] stored it.
#[derive(Debug, Deserialize)]
struct LegacyStudyConfig {
    study: StudySection,
    objective: ObjectiveSection,
    #[serde(default)]
    space: Option<Vec<Param>>,
    #[serde(default)]
    cost: CostSection,
    #[serde(default)]
    budget: BudgetSection,
    policy: LegacyPolicy,
    #[serde(default)]
    cvs: Option<crate::cvs::section::CvsSection>,
    #[serde(default)]
    fidelity: Option<crate::fidelity::FidelitySection>,
}

/// The earlier `[policy]`: every acquisition's keys side by side (and no others).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyPolicy {
    acquisition: AcquisitionName,
    lambda: Option<f64>,
    lambda0: f64,
    decay: f64,
    beta: Option<f64>,
    initial_design: Option<usize>,
    seed: u64,
    #[serde(default)]
    stopping: Option<StudyStopping>,
    #[serde(default)]
    tree: Option<FantasyTree>,
    #[serde(default)]
    refill: Option<bool>,
    #[serde(default)]
    warm_start: Option<bool>,
}

impl LegacyPolicy {
    /// The spec of the keys that applied to the acquisition.
    fn spec(&self) -> Result<PolicySpec> {
        use AcquisitionName as N;
        let (beta, tree, warm_start) = (self.beta, self.tree, self.warm_start);
        Ok(match self.acquisition {
            N::Pbgi => PolicySpec::Pbgi {
                lambda: self.lambda.ok_or_else(|| {
                    Error::invalid("policy.lambda", "required by acquisition = \"pbgi\"")
                })?,
            },
            N::PbgiD => PolicySpec::PbgiD {
                lambda0: self.lambda0,
                decay: self.decay,
            },
            N::Ucb => PolicySpec::Ucb { beta },
            N::Lcb => PolicySpec::Lcb { beta },
            N::BMsEi => PolicySpec::BMsEi {
                tree,
                refill: self.refill,
                warm_start,
                tree_budget: None,
            },
            N::MsEi => PolicySpec::MsEi { tree, warm_start },
            other => PolicySpec::bare(other, 0.0),
        })
    }
}

impl LegacyStudyConfig {
    fn into_current(self) -> Result<StudyConfig> {
        let policy = PolicySection {
            spec: self.policy.spec()?,
            initial_design: self.policy.initial_design,
            seed: self.policy.seed,
            stopping: self.policy.stopping,
            refit: None,
        };
        Ok(StudyConfig {
            study: self.study,
            objective: self.objective,
            space: self.space,
            cost: self.cost,
            budget: self.budget,
            policy,
            cvs: self.cvs,
            fidelity: self.fidelity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[policy]` of a `pbgi_d` study as the earlier releases stored it.
    const LEGACY: &str = r#"{"study":{"name":"s","storage":"sqlite:x.db","direction":"maximize"},
        "objective":{"builtin":"ackley","dim":3,"command":null,"timeout_s":null},"space":null,
        "cost":{"kind":"uniform","formula":null,"offset":1.0,"slope":20.0},
        "budget":{"total":20.0,"max_trials":null,"count_initial":true,
                  "predicted_cost_must_fit":true},
        "policy":{"acquisition":"ACQ","lambda":LAMBDA,"lambda0":0.05,"decay":3.0,"beta":0.5,
                  "initial_design":null,"seed":4}}"#;

    fn legacy(acq: &str, lambda: &str) -> Result<StudyConfig> {
        from_stored_json(&LEGACY.replace("ACQ", acq).replace("LAMBDA", lambda))
    }

    #[test]
    fn the_earlier_stored_form_keeps_the_keys_that_applied() {
        let c = legacy("pbgi_d", "null").unwrap();
        assert_eq!(
            c.policy.spec,
            PolicySpec::PbgiD {
                lambda0: 0.05,
                decay: 3.0
            }
        );
        assert_eq!(c.policy.seed, 4);
        let c = legacy("ucb", "null").unwrap();
        assert_eq!(c.policy.spec, PolicySpec::Ucb { beta: Some(0.5) });
        let c = legacy("pbgi", "0.02").unwrap();
        assert_eq!(c.policy.spec, PolicySpec::Pbgi { lambda: 0.02 });
        let c = legacy("log_ei", "0.02").unwrap();
        assert_eq!(c.policy.spec, PolicySpec::LogEi {});
        let e = legacy("pbgi", "null").unwrap_err().to_string();
        assert!(e.contains("policy.lambda"), "{e}");
    }

    #[test]
    fn the_current_form_reads_back_and_its_errors_are_reported() {
        let c = legacy("pbgi_d", "null").unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("lambda\":null"), "{json}");
        assert_eq!(from_stored_json(&json).unwrap(), c);
        let e = from_stored_json(&json.replace("\"seed\":4", "\"seed\":4,\"bogus\":1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
    }
}
