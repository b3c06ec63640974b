//! A simple in-memory BOCVS run loop for experiments: initial design, then at every iteration a
//! GP conditioned on all data, a policy decision ([`super::driver::CvsRun::step`], shared with
//! studies), fresh draws of the random variables, a noisy observation and its cost, until the
//! budget is spent.

use super::CvsFunction;
use super::driver::{CvsRun, CvsVerdict, fits};
use super::policy::{CvsPolicy, Phase};
use super::problem::{CvsProblem, Optimum, SetOptimizer};
use crate::error::{Error, Result};
use crate::gp::{ExactGp, GpParams, Kernel, KernelKind};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Settings of [`run`].
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Total cost budget `C` (the initial design is not charged).
    pub budget: f64,
    /// Number of uniformly random full queries before the policy starts (default 5).
    pub n_init: usize,
    /// Standard deviation of the Gaussian observation noise (default 0.01).
    pub noise_sd: f64,
    /// Fixed GP hyperparameters (default: squared exponential, every lengthscale 0.1, outputscale
    /// 1, mean 0, noise variance 1e-4; never refitted, as in the BOCVS experiments).
    pub gp: GpParams,
    /// How acquisitions (and the reference optimum) are maximized.
    pub optimizer: SetOptimizer,
    /// The optimum of the expected objective, if known; otherwise computed with
    /// [`CvsProblem::optimum`] (on the same bank).
    pub optimum: Option<f64>,
    /// Offer the policy only the sets the remaining budget can pay for and stop when none is
    /// left (default). If false, the run stops at the first unaffordable choice, as Algorithm 1
    /// and the reference code do.
    pub restrict_to_affordable: bool,
    /// Stop after this many budgeted iterations even if budget is left (`None`, the default: the
    /// budget alone ends the run). A planner's calibration uses it to time a few decisions with
    /// a budget large enough for any set.
    pub max_decisions: Option<usize>,
}

impl RunConfig {
    /// Defaults for a `d`-dimensional problem with SE lengthscale `lengthscale` and budget `budget`.
    pub fn new(d: usize, lengthscale: f64, budget: f64) -> Result<Self> {
        Ok(Self {
            budget,
            n_init: 5,
            noise_sd: 0.01,
            gp: GpParams {
                kernel: Kernel::new(KernelKind::Rbf, vec![lengthscale; d], 1.0)?,
                mean: 0.0,
                noise: 1e-4,
            },
            optimizer: SetOptimizer::default(),
            optimum: None,
            restrict_to_affordable: true,
            max_decisions: None,
        })
    }
}

/// One budgeted iteration of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Iteration number (0-based).
    pub iteration: usize,
    /// Chosen control set.
    pub set: usize,
    /// Chosen values of the controlled variables.
    pub x_ctrl: Vec<f64>,
    /// The full query that was evaluated (controlled values plus the realized random values).
    pub x: Vec<f64>,
    /// The noisy observation.
    pub y: f64,
    /// Cost paid.
    pub cost: f64,
    /// Cost paid so far, this step included.
    pub cumulative_cost: f64,
    /// The expected objective of the chosen partial query, `E f([x^I, X^{−I}])` (bank estimate;
    /// `f(x)` for a full query).
    pub value: f64,
    /// Best `value` so far (the recommended partial query is the best one played).
    pub best_value: f64,
    /// `optimum − best_value`.
    pub simple_regret: f64,
    /// ε of the decision (UCB-CVS).
    pub epsilon: Option<f64>,
    /// ETC phase of the decision.
    pub phase: Option<Phase>,
    /// λ of the decision (Gittins).
    pub lambda: Option<f64>,
}

/// The record of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Policy name.
    pub policy: String,
    /// Seed of the run.
    pub seed: u64,
    /// Optimum of the expected objective used for the regret.
    pub optimum: f64,
    /// The per-set optima if the optimum was computed by the run.
    pub per_set_optima: Vec<Optimum>,
    /// Initial design (row-major `n_init × d`).
    pub init_x: Vec<f64>,
    /// Initial observations.
    pub init_y: Vec<f64>,
    /// The budgeted iterations.
    pub steps: Vec<Step>,
}

impl Trace {
    /// Simple regret after spending at most `cost` (the regret before any step is `+∞`).
    pub fn regret_at_cost(&self, cost: f64) -> f64 {
        self.steps
            .iter()
            .take_while(|s| s.cumulative_cost <= cost + 1e-12)
            .last()
            .map_or(f64::INFINITY, |s| s.simple_regret)
    }

    /// Simple regret at the end of the run.
    pub fn final_regret(&self) -> f64 {
        self.steps.last().map_or(f64::INFINITY, |s| s.simple_regret)
    }
}

fn mix(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs `policy` on `problem` with objective `f` until the budget is spent; deterministic for a
/// given seed.
///
/// Errors on a non-positive or non-finite budget, a negative noise level, a GP or objective whose
/// dimension differs from the problem's, and on any numerical failure of the policy.
pub fn run(
    problem: &CvsProblem,
    f: &dyn CvsFunction,
    policy: &mut dyn CvsPolicy,
    cfg: &RunConfig,
    seed: u64,
) -> Result<Trace> {
    let d = problem.dim();
    if !(cfg.budget.is_finite() && cfg.budget > 0.0) {
        return Err(Error::invalid("budget", "must be finite and > 0"));
    }
    if !(cfg.noise_sd.is_finite() && cfg.noise_sd >= 0.0) {
        return Err(Error::invalid("noise_sd", "must be finite and >= 0"));
    }
    if f.dim() != d {
        return Err(Error::dim("objective dimension", d, f.dim()));
    }
    if cfg.gp.kernel.dim() != d {
        return Err(Error::dim("GP kernel dimension", d, cfg.gp.kernel.dim()));
    }
    let (optimum, per_set_optima) = match cfg.optimum {
        Some(v) => (v, Vec::new()),
        None => {
            let (best, per) = problem.optimum(f, &cfg.optimizer, mix(seed, 1))?;
            (best.value, per)
        }
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let noisy = |x: &[f64], rng: &mut Xoshiro256PlusPlus| {
        let e: f64 = rng.sample(StandardNormal);
        f.value(x) + cfg.noise_sd * e
    };
    let mut init_x = Vec::with_capacity(cfg.n_init * d);
    let mut init_y = Vec::with_capacity(cfg.n_init);
    for _ in 0..cfg.n_init {
        let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
        init_y.push(noisy(&x, &mut rng));
        init_x.extend_from_slice(&x);
    }
    let mut gp = ExactGp::new(init_x.clone(), init_y.clone(), cfg.gp.clone())?;
    let mut driver = CvsRun::new(problem, policy);
    for &y in &init_y {
        driver.observe_design(y);
    }
    let mut spent = 0.0;
    let mut best_value = f64::NEG_INFINITY;
    let mut steps = Vec::new();
    loop {
        if cfg.max_decisions.is_some_and(|m| steps.len() >= m) {
            break;
        }
        let remaining = cfg.budget - spent;
        let affordable = if cfg.restrict_to_affordable {
            driver.affordable(remaining)
        } else {
            vec![true; problem.num_sets()]
        };
        let iteration = driver.model_steps();
        let seed_k = mix(seed, 1000 + iteration as u64);
        let dec = match driver.step(&gp, &affordable, seed_k, &cfg.optimizer)? {
            CvsVerdict::Propose(dec) => dec,
            CvsVerdict::OutOfBudget => break,
        };
        let cost = problem.sets()[dec.set].cost;
        if !fits(cost, remaining) {
            break;
        }
        let rest = problem.draw_random(dec.set, &mut rng);
        let x = problem.assemble(dec.set, &dec.x_ctrl, &rest);
        let y = noisy(&x, &mut rng);
        if !y.is_finite() {
            return Err(Error::Numerical(format!(
                "objective is not finite at {x:?}"
            )));
        }
        spent += cost;
        let value = problem.expected_value(f, dec.set, &dec.x_ctrl)?;
        best_value = best_value.max(value);
        gp = gp.condition_on(&x, &[y])?;
        driver.observe(&dec, y);
        steps.push(Step {
            iteration,
            set: dec.set,
            x_ctrl: dec.x_ctrl.clone(),
            x,
            y,
            cost,
            cumulative_cost: spent,
            value,
            best_value,
            simple_regret: optimum - best_value,
            epsilon: dec.epsilon,
            phase: dec.phase,
            lambda: dec.lambda,
        });
    }
    Ok(Trace {
        policy: driver.policy_name(),
        seed,
        optimum,
        per_set_optima,
        init_x,
        init_y,
        steps,
    })
}
