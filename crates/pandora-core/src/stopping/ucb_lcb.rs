//! UCB-LCB (Makarova et al. 2022): stop when the upper bound on the simple regret of the
//! incumbent,
//!
//! ```text
//! κ_t = max_x UCB_t(x) − max_{x ∈ X_obs} LCB_t(x),   UCB/LCB = μ ± √β_t σ,
//! ```
//!
//! is at most θ (default `θ = 0.01`, absolute, in objective units). `β_t` is the papers'
//! schedule [`gp_ucb_beta`]`(d, t + 1)` with `t` the number of BO evaluations so far; the
//! posterior is the one on all data (the reference code used the previous posterior and logged the
//! value one index late). An optional moving-average `window` (arithmetic mean of `κ` over the last
//! `w` checks; the paper's 8-D runs use 20) smooths optimizer noise; no stop before `w` values.

use super::optimizer::OptimizerConfig;
use super::search::maximize_pointwise;
use super::{
    Comparison, Decision, Guard, GuardState, RunState, Statistic, StoppingRule, check_positive,
    decide,
};
use crate::acquisition::{UpperConfidenceBound, gp_ucb_beta};
use crate::error::Result;

/// The UCB-LCB rule (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct UcbLcb {
    threshold: f64,
    window: usize,
    guard: Guard,
    optimizer: OptimizerConfig,
    history: Vec<f64>,
    state: GuardState,
}

impl UcbLcb {
    /// The rule with threshold `θ > 0` and moving-average window `window ≥ 1`.
    pub fn new(
        threshold: f64,
        window: usize,
        guard: Guard,
        optimizer: OptimizerConfig,
    ) -> Result<Self> {
        check_positive("ucb-lcb threshold", threshold)?;
        Ok(Self {
            threshold,
            window: window.max(1),
            guard,
            optimizer,
            history: Vec::new(),
            state: GuardState::default(),
        })
    }

    /// `κ_t` on the posterior of `state`.
    pub fn statistic(&self, state: &RunState<'_>) -> Result<f64> {
        let model = state.require_model(self.name())?;
        let beta = gp_ucb_beta(state.d, state.iteration() as f64 + 1.0);
        let s = beta.max(0.0).sqrt();
        let plain = RunState {
            cost_info: super::CostInfo::Uniform,
            ..*state
        };
        let (max_ucb, _) = maximize_pointwise(
            &plain,
            model,
            UpperConfidenceBound { beta },
            &self.optimizer,
            state.seed,
            false,
        )?;
        let post = model.posterior(state.x, false)?;
        let max_lcb = post
            .mean
            .iter()
            .zip(&post.var)
            .map(|(m, v)| m - s * v.sqrt())
            .fold(f64::NEG_INFINITY, f64::max);
        Ok(max_ucb - max_lcb)
    }
}

impl StoppingRule for UcbLcb {
    fn name(&self) -> &'static str {
        "ucb-lcb"
    }

    fn check(&mut self, state: &RunState<'_>) -> Result<Decision> {
        state.validate()?;
        let value = match state.supplied.ucb_lcb {
            Some(v) => v,
            None => self.statistic(state)?,
        };
        self.history.push(value);
        let mut stats = vec![Statistic::new(
            "ucb_minus_lcb",
            value,
            self.threshold,
            Comparison::AtMost,
        )];
        let triggered = if self.window > 1 {
            let full = self.history.len() >= self.window;
            let tail = &self.history[self.history.len().saturating_sub(self.window)..];
            let avg = if full {
                tail.iter().sum::<f64>() / tail.len() as f64
            } else {
                f64::NAN
            };
            stats.insert(
                0,
                Statistic::new(
                    "ucb_minus_lcb_window",
                    avg,
                    self.threshold,
                    Comparison::AtMost,
                ),
            );
            full && avg <= self.threshold
        } else {
            value <= self.threshold
        };
        Ok(decide(
            self.name(),
            &self.guard,
            &mut self.state,
            state.iteration(),
            stats,
            triggered,
        ))
    }

    fn reset(&mut self) {
        self.history.clear();
        self.state = GuardState::default();
    }
}
