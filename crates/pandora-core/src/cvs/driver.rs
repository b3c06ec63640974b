//! The BOCVS loop's one decision: [`CvsRun::step`].
//!
//! Studies with a `[cvs]` section (one decision per `ask`, rebuilt from the stored trials) and
//! the experiment loop [`super::run()`] (one process from start to end) both decide the next
//! control set here. What they share, and what this module alone owns:
//!
//! - **the budget gate**: a control set is offered only while its cost fits what is left
//!   ([`fits`]), and a run with no set it can pay for is finished ([`CvsVerdict::OutOfBudget`]);
//! - **the policy's state**: the best observation so far and the number of model decisions,
//!   together with the policy's own state (UCB-CVS's ε position, ETC's play counters,
//!   Gittins-D's λ), advanced by [`CvsRun::observe`] in a live loop or rebuilt by
//!   [`CvsRun::replay`] from recorded decisions;
//! - **the initial design of studies** ([`CvsRun::design`]): the cheapest affordable set, its
//!   values from point `k` of one scrambled Sobol sequence over all parameters.
//!
//! ## Replay
//!
//! A front end that cannot keep the policy in memory (a study: any process may ask next) creates
//! a fresh [`CvsRun`], feeds it every observed trial in the order the trials were handed out —
//! [`CvsRun::replay`] for a model decision, [`CvsRun::observe_design`] for the rest — and calls
//! [`CvsRun::step`]. [`super::CvsPolicy::replay`] guarantees that a policy replayed this way is in
//! the state the original reached (optimizer warm starts aside), so the same records give the
//! same decisions.
//!
//! ## Degenerate cases
//!
//! - A cost equal to what is left, up to a relative and an absolute tolerance of `1e-12`, fits:
//!   a budget of 1.0 spent as ten costs of 0.1 (whose sum is 0.9999999999999999) still pays for
//!   the last one.
//! - With every set affordable (a loop that charges the budget only after the choice, as
//!   Algorithm 1 of Tay et al. does), [`CvsRun::step`] proposes whatever the policy picks; the
//!   caller stops when the pick does not [`fits`].
//! - Pending trials are the caller's: it conditions the model on them before the step.

use super::policy::{Context, CvsPolicy, Decision};
use super::problem::{CvsProblem, SetOptimizer};
use crate::error::Result;
use crate::gp::ExactGp;
use crate::policy::design_point;

pub use super::problem::fits;

/// What [`CvsRun::step`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum CvsVerdict {
    /// Play this decision.
    Propose(Decision),
    /// No control set is affordable: the run is finished.
    OutOfBudget,
}

/// A BOCVS run's policy and what it has observed (see the module documentation).
pub struct CvsRun<'p> {
    problem: &'p CvsProblem,
    policy: &'p mut dyn CvsPolicy,
    best: f64,
    model_steps: usize,
}

impl<'p> CvsRun<'p> {
    /// A run of `policy` on `problem` that has observed nothing yet.
    pub fn new(problem: &'p CvsProblem, policy: &'p mut dyn CvsPolicy) -> Self {
        Self {
            problem,
            policy,
            best: f64::NEG_INFINITY,
            model_steps: 0,
        }
    }

    /// The policy's name.
    pub fn policy_name(&self) -> String {
        self.policy.name()
    }

    /// The largest observation so far (`−∞` before any).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Model decisions observed so far (the policy's iteration counter).
    pub fn model_steps(&self) -> usize {
        self.model_steps
    }

    /// Which control sets fit in `remaining` ([`fits`]).
    pub fn affordable(&self, remaining: f64) -> Vec<bool> {
        self.problem
            .sets()
            .iter()
            .map(|s| fits(s.cost, remaining))
            .collect()
    }

    /// An observation that is not the outcome of a model decision (initial design).
    pub fn observe_design(&mut self, y: f64) {
        self.best = self.best.max(y);
    }

    /// The outcome `y` of the decision the last [`CvsRun::step`] returned (a live loop).
    pub fn observe(&mut self, decision: &Decision, y: f64) {
        self.policy.observed(decision, y);
        self.best = self.best.max(y);
        self.model_steps += 1;
    }

    /// The outcome `y` of a model decision recorded earlier, possibly by another process (needs
    /// the decision's `set`, `phase`, `lambda` and `scores[set]`).
    pub fn replay(&mut self, decision: &Decision, y: f64) {
        self.policy.replay(decision, self.best, y);
        self.best = self.best.max(y);
        self.model_steps += 1;
    }

    /// The `k`-th initial-design decision: the cheapest affordable set (ties: the one
    /// controlling the most parameters), its values from point `k` of the scrambled Sobol
    /// design over all `d` parameters. [`CvsVerdict::OutOfBudget`] if no set is affordable.
    pub fn design(&self, affordable: &[bool], k: u64, seed: u64) -> Result<CvsVerdict> {
        let sets = self.problem.sets();
        let cheapest = (0..sets.len()).filter(|&i| affordable[i]).min_by(|&a, &b| {
            let (sa, sb) = (&sets[a], &sets[b]);
            sa.cost
                .total_cmp(&sb.cost)
                .then(sb.vars.len().cmp(&sa.vars.len()))
        });
        let Some(set) = cheapest else {
            return Ok(CvsVerdict::OutOfBudget);
        };
        let u = design_point(self.problem.dim(), k, seed)?;
        Ok(CvsVerdict::Propose(Decision {
            set,
            x_ctrl: sets[set].vars.iter().map(|&v| u[v]).collect(),
            scores: vec![f64::NAN; sets.len()],
            epsilon: None,
            phase: None,
            lambda: None,
        }))
    }

    /// The next model decision on `gp` (conditioned on everything observed and pending), among
    /// the `affordable` sets, with the decision's own `seed`. [`CvsVerdict::OutOfBudget`] if no
    /// set is affordable.
    pub fn step(
        &mut self,
        gp: &ExactGp,
        affordable: &[bool],
        seed: u64,
        optimizer: &SetOptimizer,
    ) -> Result<CvsVerdict> {
        if !affordable.iter().any(|&a| a) {
            return Ok(CvsVerdict::OutOfBudget);
        }
        let ctx = Context {
            problem: self.problem,
            gp,
            affordable,
            iteration: self.model_steps,
            best_y: self.best,
            seed,
            optimizer,
        };
        Ok(CvsVerdict::Propose(self.policy.select(&ctx)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_spent_in_tenths_still_pays_for_the_last_one() {
        let spent: f64 = (0..9).map(|_| 0.1).sum();
        assert!(spent != 0.9);
        assert!(fits(0.1, 1.0 - spent));
        assert!(!fits(0.1 + 1e-9, 1.0 - spent));
        assert!(fits(0.0, 0.0));
        assert!(!fits(1.0, f64::NEG_INFINITY));
        assert!(fits(1e300, f64::INFINITY));
    }
}
