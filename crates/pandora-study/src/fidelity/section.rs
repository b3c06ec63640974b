//! The `[fidelity]` section of a study configuration: trials that run in steps.

use crate::error::{Error, Result};
use pandora_core::freeze_thaw::Schedule;
use serde::{Deserialize, Serialize};

/// The longest schedule a study may have (each step of a run is a level of its Gittins chain).
pub const MAX_STEPS: u32 = 1000;

/// `[fidelity]`: every trial is a run of up to `max_steps` steps (epochs, growing training-set
/// sizes) that can be paused after any step and resumed later (see `docs/freeze-thaw.md`,
/// "Studies with steps").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FidelitySection {
    /// Steps of a complete run (1 to [`MAX_STEPS`]; with the default grid of 101 points per
    /// step, at most 198).
    pub max_steps: u32,
    /// The index policy's cost-scaling factor λ > 0: objective units per unit of cost.
    pub lambda: f64,
    /// Steps handed out by one ask (default 1: the policy decides again after every step).
    #[serde(default = "one")]
    pub steps_per_ask: u32,
    /// Relative cost of each step (`max_steps` values > 0; default 1 each). A step of trial `x`
    /// costs its configuration's cost (`[cost]`) times this weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_weights: Option<Vec<f64>>,
    /// Position of each step on the learning-curve model's time axis (`max_steps` increasing
    /// values ≥ 0; default `1, 2, …, max_steps`), e.g. training-set sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<Vec<f64>>,
    /// Grid values per step of each run's Gittins chain (odd, 3 to 1001; default 101).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_points: Option<usize>,
}

fn one() -> u32 {
    1
}

impl FidelitySection {
    /// The schedule of steps: positions and relative step costs, checked.
    pub fn schedule(&self) -> Result<Schedule> {
        let t = self.max_steps as usize;
        let positions = match &self.positions {
            Some(p) => p.clone(),
            None => (1..=t).map(|s| s as f64).collect(),
        };
        let weights = self.step_weights.clone().unwrap_or_else(|| vec![1.0; t]);
        for (field, len) in [
            ("fidelity.positions", positions.len()),
            ("fidelity.step_weights", weights.len()),
        ] {
            if len != t {
                return Err(Error::invalid(
                    field,
                    format!("needs max_steps = {t} values, got {len}"),
                ));
            }
        }
        Schedule::new(positions, weights).map_err(|e| Error::invalid("fidelity", e.to_string()))
    }

    /// The grid values per step.
    pub fn grid(&self) -> usize {
        self.grid_points.unwrap_or(101)
    }

    /// Checks the section's own keys (what it needs from the rest of the configuration is
    /// checked by [`crate::config::StudyConfig::validate`]).
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_STEPS).contains(&self.max_steps) {
            return Err(Error::invalid(
                "fidelity.max_steps",
                format!("must be between 1 and {MAX_STEPS}, got {}", self.max_steps),
            ));
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(Error::invalid(
                "fidelity.lambda",
                format!("must be finite and > 0, got {}", self.lambda),
            ));
        }
        if self.steps_per_ask == 0 {
            return Err(Error::invalid(
                "fidelity.steps_per_ask",
                "must be at least 1",
            ));
        }
        self.schedule()?;
        pandora_core::gittins::freeze_thaw::check_grid(
            "fidelity.grid_points",
            self.max_steps as usize,
            self.grid(),
        )?;
        Ok(())
    }
}
