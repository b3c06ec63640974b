//! PBGI-D: PBGI whose λ decays when the Gittins stopping rule fires.
//!
//! Timing (PBGI paper; reference notes §1.8): λ starts at `λ0` (default 0.1). In every iteration,
//! a decay that is pending is applied first (`λ ← λ/β`, β = 2 by default, at most once per
//! iteration); the iteration then maximizes PBGI(λ), evaluates the chosen point and updates the
//! best observed value *including* that evaluation. If the largest index found in the round is
//! below that best value (the Gittins stopping rule would stop), a decay becomes pending and
//! takes effect at the next iteration.

use crate::error::{Error, Result};

/// The state of PBGI-D across the iterations of one run. Record [`PbgiDecay::lambda`] and
/// [`PbgiDecay::decays`] with every decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PbgiDecay {
    lambda0: f64,
    divisor: f64,
    lambda: f64,
    pending: bool,
    decays: u32,
}

impl Default for PbgiDecay {
    /// The paper's default: λ0 = 0.1, β = 2.
    fn default() -> Self {
        Self::new(0.1, 2.0).expect("valid defaults")
    }
}

impl PbgiDecay {
    /// Starts with `λ = lambda0 > 0`, decaying by `divisor > 1`.
    pub fn new(lambda0: f64, divisor: f64) -> Result<Self> {
        if !(lambda0.is_finite() && lambda0 > 0.0) {
            return Err(Error::invalid(
                "lambda0",
                format!("must be finite and > 0, got {lambda0}"),
            ));
        }
        if !(divisor.is_finite() && divisor > 1.0) {
            return Err(Error::invalid(
                "decay",
                format!("the decay divisor must be > 1, got {divisor}"),
            ));
        }
        Ok(Self {
            lambda0,
            divisor,
            lambda: lambda0,
            pending: false,
            decays: 0,
        })
    }

    /// Restores a saved state (e.g. when a study resumes).
    pub fn restore(
        lambda0: f64,
        divisor: f64,
        lambda: f64,
        pending: bool,
        decays: u32,
    ) -> Result<Self> {
        let mut s = Self::new(lambda0, divisor)?;
        if !(lambda.is_finite() && lambda > 0.0) {
            return Err(Error::invalid("lambda", "must be finite and > 0"));
        }
        s.lambda = lambda;
        s.pending = pending;
        s.decays = decays;
        Ok(s)
    }

    /// Starts an iteration: applies a pending decay and returns the λ to use in this iteration.
    pub fn begin_iteration(&mut self) -> f64 {
        if self.pending {
            self.lambda /= self.divisor;
            self.decays += 1;
            self.pending = false;
        }
        self.lambda
    }

    /// Ends an iteration (maximization): `max_index` is the largest PBGI value the optimizer found
    /// this round and `best_observed` the best value observed including this round's evaluation.
    /// Returns whether a decay is now pending.
    pub fn end_iteration(&mut self, max_index: f64, best_observed: f64) -> bool {
        if max_index < best_observed {
            self.pending = true;
        }
        self.pending
    }

    /// The current λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// The initial λ.
    pub fn lambda0(&self) -> f64 {
        self.lambda0
    }

    /// The decay divisor β.
    pub fn divisor(&self) -> f64 {
        self.divisor
    }

    /// How many times λ has been divided.
    pub fn decays(&self) -> u32 {
        self.decays
    }

    /// Whether a decay will be applied at the start of the next iteration.
    pub fn pending(&self) -> bool {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_applies_at_the_next_iteration_at_most_once() {
        let mut s = PbgiDecay::default();
        assert_eq!(s.begin_iteration(), 0.1);
        // Index above the best: no decay.
        assert!(!s.end_iteration(2.0, 1.0));
        assert_eq!(s.begin_iteration(), 0.1);
        // The rule fires: λ is unchanged for the rest of this round…
        assert!(s.end_iteration(0.5, 1.0));
        assert_eq!(s.lambda(), 0.1);
        // …and halves once at the next iteration, however often it fired.
        assert!(s.end_iteration(0.4, 1.0));
        assert_eq!(s.begin_iteration(), 0.05);
        assert_eq!(s.decays(), 1);
        assert!(!s.pending());
        // Equality does not fire (strict comparison).
        assert!(!s.end_iteration(1.0, 1.0));
        assert_eq!(s.begin_iteration(), 0.05);
        s.end_iteration(0.0, 1.0);
        assert_eq!(s.begin_iteration(), 0.025);
        assert_eq!(s.decays(), 2);
    }

    #[test]
    fn state_round_trips_and_bad_settings_are_errors() {
        let mut s = PbgiDecay::new(1e-4, 10.0).unwrap();
        s.end_iteration(0.0, 1.0);
        let r = PbgiDecay::restore(
            s.lambda0(),
            s.divisor(),
            s.lambda(),
            s.pending(),
            s.decays(),
        )
        .unwrap();
        assert_eq!(r, s);
        assert!(PbgiDecay::new(0.0, 2.0).is_err());
        assert!(PbgiDecay::new(0.1, 1.0).is_err());
        assert!(PbgiDecay::new(f64::NAN, 2.0).is_err());
    }
}
