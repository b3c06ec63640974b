//! How a model-based stopping rule maximizes its statistic.
//!
//! PBGI, UCB-LCB, the median rules and PRB each look for the best point of a statistic over the
//! unit cube by multi-start L-BFGS-B. [`OptimizerConfig`] is the one knob they share: how many
//! Sobol points to screen and how many restarts to run. It is a leaf: the rules and the
//! serializable [`StoppingConfig`](super::StoppingConfig) import it, and it imports none of them.

use crate::optim::multistart::MultiStartOptions;
use serde::{Deserialize, Serialize};

/// How model-based rules maximize their statistic over `[0,1]^d` (multi-start L-BFGS-B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OptimizerConfig {
    /// Sobol points screened for starts (default `200·d`; PRB path maxima: `100·d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_samples: Option<usize>,
    /// L-BFGS-B restarts (default `10·d`; PRB path maxima: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_restarts: Option<usize>,
}

impl OptimizerConfig {
    /// The multi-start options (unset values take the optimizer's defaults).
    pub fn multistart(&self) -> MultiStartOptions {
        MultiStartOptions {
            raw_samples: self.raw_samples,
            num_restarts: self.num_restarts,
            ..MultiStartOptions::default()
        }
    }

    /// The multi-start options with the given defaults for unset values.
    pub fn multistart_or(&self, _d: usize, raw: usize, restarts: usize) -> MultiStartOptions {
        MultiStartOptions {
            raw_samples: Some(self.raw_samples.unwrap_or(raw)),
            num_restarts: Some(self.num_restarts.unwrap_or(restarts)),
            ..MultiStartOptions::default()
        }
    }
}
