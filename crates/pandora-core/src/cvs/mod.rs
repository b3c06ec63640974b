//! Bayesian optimization with cost-varying variable subsets (BOCVS; Tay et al., NeurIPS 2023).
//!
//! At every iteration the learner picks a *control set* `I_i ⊆ {0..d−1}` (at cost `c_i`) and
//! values `x^I` for its variables; the other variables `X^{−I}` are drawn from known independent
//! distributions, and `y = f([x^I, X^{−I}]) + ε` is observed. The goal is the control set and
//! values that maximize the expected objective `E f([x^I, X^{−I}])`.
//!
//! - [`dist`]: distributions of the random variables (truncated normals, uniform, discrete) and
//!   the truncated-normal scale for a target variance.
//! - [`problem`]: control sets, costs, the fixed scrambled-Sobol sample bank, expectations and the
//!   optimum of the expected objective.
//! - [`expected`]: expected UCB / path / EI / Gittins-index objectives with analytic gradients.
//! - [`policy`]: UCB-CVS with ε-schedules, ETC-50/100/Ada, UCB-/TS-/EI-PSQ, their naive
//!   per-unit-cost variants, a Gittins-index policy and random choice.
//! - [`driver`]: the one decision of a BOCVS loop ([`CvsRun`]), shared by studies and
//!   [`fn@run`]: budget gate, policy state (live or replayed), the studies' initial design.
//! - [`mod@run`]: an in-memory run loop ([`fn@run`]) returning a [`Trace`].
//!
//! See `docs/cvs.md` for the setting, the defaults and the differences from the reference code.

pub mod dist;
pub mod driver;
pub mod expected;
pub mod policy;
pub mod problem;
pub mod run;

pub use dist::{Distribution, bocvs_truncated_normal_scale, truncated_normal_scale};
pub use driver::{CvsRun, CvsVerdict};
pub use expected::{Expected, GittinsIndex, MixtureIndex, mixture_index};
pub use policy::{
    Context, CvsPolicy, Decision, EiPsq, EpsSchedule, Etc, EtcPlays, GittinsCvs, LambdaRule,
    POLICY_NAMES, Phase, RandomChoice, TsPsq, UcbCvs, UcbPsq, build_policy, per_cost_choose,
    ucb_cvs_choose,
};
pub use problem::{
    ControlSet, CostGroup, CvsProblem, DEFAULT_BANK_SIZE, Optimum, SampleBank, SetOptimizer,
};
pub use run::{RunConfig, Step, Trace, run};

/// An objective of full queries on `[0,1]^d` (maximized), for expectations and run loops.
pub trait CvsFunction: Sync {
    /// Input dimension `d`.
    fn dim(&self) -> usize;
    /// `f(x)`.
    fn value(&self, x: &[f64]) -> f64;
    /// `f(x)`, writing `∇f(x)` into `grad`. The default uses central differences with step
    /// `1e-6` (one-sided at the box edges); override it with the exact gradient when available.
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let h = 1e-6;
        let mut z = x.to_vec();
        for k in 0..x.len() {
            let lo = (x[k] - h).max(0.0);
            let hi = (x[k] + h).min(1.0);
            z[k] = hi;
            let fp = self.value(&z);
            z[k] = lo;
            let fm = self.value(&z);
            z[k] = x[k];
            grad[k] = if hi > lo { (fp - fm) / (hi - lo) } else { 0.0 };
        }
        self.value(x)
    }
}

impl<F: CvsFunction + ?Sized> CvsFunction for &F {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn value(&self, x: &[f64]) -> f64 {
        (**self).value(x)
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        (**self).value_grad(x, grad)
    }
}
