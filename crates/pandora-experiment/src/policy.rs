//! One `[[policy]]` table of an experiment, shared by the configuration ([`super::config`]) and
//! the reader of earlier output ([`super::legacy`]).

use pandora_core::run::spec::PolicySpec;
use serde::{Deserialize, Serialize};

/// One `[[policy]]` table: a label and the acquisition with its settings ([`PolicySpec`],
/// flattened: `acquisition = "pbgi_d"` selects the keys that apply, and every other key is
/// refused, naming it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// Label in traces and summaries (default: the acquisition with its parameters).
    #[serde(default)]
    pub name: Option<String>,
    /// The acquisition and its settings.
    #[serde(flatten)]
    pub spec: PolicySpec,
}
