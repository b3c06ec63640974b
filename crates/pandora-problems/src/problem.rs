//! The one interface every benchmark problem implements, and the registry that builds problems
//! by name.
//!
//! A problem is an objective on the unit cube `[0,1]^d` (maximized) together with the cost of
//! evaluating it. Problems that depend on randomness (GP prior samples, random cost families)
//! are built from an explicit seed, so a seed identifies one instance.

use std::collections::BTreeMap;
use std::fmt;

use crate::costs::{Bump, Cosine, CostFn, Linear, Uniform};
use crate::counterexamples::{AmplitudeScaling, Counterexample, Variant};
use crate::error::ProblemError;
use crate::gp_sample::{GpSample, GpSampleSpec};
use crate::lda::Lda;
use crate::lunar::LunarLanderProblem;
use crate::pest::PestControl;
use crate::robot::{RobotCost, RobotPush};
use crate::synthetic::Function;
use pandora_core::gp::{KernelKind, OutputScale};
use std::sync::Arc;

/// A benchmark objective with its evaluation cost, on `[0,1]^d`, maximized.
pub trait Problem: Send + Sync {
    /// A short name, e.g. `"ackley"`.
    fn name(&self) -> &str;

    /// The input dimension `d`.
    fn dim(&self) -> usize;

    /// The objective at `x ∈ [0,1]^d` (maximization).
    fn eval(&self, x: &[f64]) -> f64;

    /// The evaluation cost at `x` (> 0). Uniform-cost problems return 1.
    fn cost(&self, x: &[f64]) -> f64;

    /// The cost and its gradient (written into `grad`, length `d`), for policies that treat
    /// the cost as known. The default differentiates [`Problem::cost`] by central differences;
    /// problems with a closed-form gradient override it.
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let mut z = x.to_vec();
        for i in 0..x.len() {
            let h = 1e-6;
            let lo = (x[i] - h).max(0.0);
            let hi = (x[i] + h).min(1.0);
            z[i] = hi;
            let fh = self.cost(&z);
            z[i] = lo;
            let fl = self.cost(&z);
            z[i] = x[i];
            grad[i] = (fh - fl) / (hi - lo);
        }
        self.cost(x)
    }

    /// Whether every evaluation costs the same (the policy then uses the uniform setting).
    fn uniform_cost(&self) -> bool {
        false
    }

    /// The maximum of the objective, when known (for regret).
    fn optimum(&self) -> Option<f64>;

    /// A maximizer in `[0,1]^d`, when known (for problems whose optimum was found by search, the
    /// point the search found). Defaults to `None`.
    fn argmax(&self) -> Option<Vec<f64>> {
        None
    }

    /// The factor by which the objective was divided relative to its unscaled definition (100 for
    /// Levy, 1e5 for Rosenbrock, 1 otherwise): multiply a regret by it to report it in the
    /// original function's units, as the PBGI paper does.
    fn regret_scale(&self) -> f64 {
        1.0
    }

    /// The objective's known prior amplitude `s(x)` (`f = s·g` with `g` a stationary GP sample),
    /// for models that should use the variable-amplitude kernel: the 1-D counterexamples. `None`
    /// for every other problem.
    fn output_scale(&self) -> Option<OutputScale> {
        None
    }
}

/// Which problem to build: an objective name, a dimension, a cost name and a seed. Construct it
/// with `..Default::default()` so that options added later keep your code compiling.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProblemSpec {
    /// Objective name, e.g. `"ackley"` (see [`names`]).
    pub objective: String,
    /// Input dimension.
    pub dim: usize,
    /// Cost name (see [`cost_names`]), e.g. `"uniform"` or `"linear_mean"` (`1 + 20·mean(x)`).
    pub cost: String,
    /// Seed of the instance (GP samples, random cost families).
    pub seed: u64,
    /// Problem-specific options as `key = value` strings (e.g. `kernel = "matern32"`,
    /// `lengthscale = "0.5"` for `gp_sample`); unknown keys are an error. See `docs/problems.md`.
    pub options: BTreeMap<String, String>,
}

/// Objective names accepted by [`build`].
pub const OBJECTIVES: [&str; 18] = [
    "ackley",
    "levy",
    "rosenbrock",
    "dropwave",
    "alpine1",
    "shekel5",
    "hartmann3",
    "hartmann6",
    "branin",
    "gp_sample",
    "counterexample_eipc",
    "counterexample_ei",
    "pest_control",
    "lda",
    "robot_push_3d",
    "robot_push_4d",
    "robot_push_14d",
    "lunar_lander",
];

/// Cost names accepted by [`build`].
pub const COSTS: [&str; 7] = [
    "uniform",
    "linear_mean",
    "linear",
    "periodic",
    "cosine",
    "bump",
    "native",
];

/// The objective names [`build`] accepts (for error messages and documentation).
pub fn names() -> Vec<&'static str> {
    OBJECTIVES.to_vec()
}

/// The cost names [`build`] accepts.
pub fn cost_names() -> Vec<&'static str> {
    COSTS.to_vec()
}

/// The objective part of a built problem.
enum Objective {
    Synthetic(Function),
    GpSample(GpSample),
    Counterexample(Counterexample),
    Pest(PestControl),
    Lda(Arc<Lda>),
    Robot(Arc<RobotPush>),
    Lunar(Arc<LunarLanderProblem>),
}

impl Objective {
    fn eval(&self, x: &[f64]) -> f64 {
        match self {
            Self::Synthetic(f) => f.eval(x),
            Self::GpSample(g) => g.eval(x),
            Self::Counterexample(c) => c.eval(x[0]),
            Self::Pest(p) => p.eval(x),
            Self::Lda(l) => l.eval(x),
            Self::Robot(r) => r.eval(x),
            Self::Lunar(l) => l.eval(x),
        }
    }

    fn optimum(&self) -> Option<f64> {
        match self {
            Self::Synthetic(f) => Some(f.optimum()),
            Self::GpSample(g) => Some(g.optimum()),
            Self::Counterexample(c) => Some(c.optimum()),
            Self::Pest(_) | Self::Robot(_) | Self::Lunar(_) => None,
            Self::Lda(l) => Some(l.optimum()),
        }
    }

    fn argmax(&self, d: usize) -> Option<Vec<f64>> {
        match self {
            Self::Synthetic(f) => Some(f.argmax(d)),
            Self::GpSample(g) => Some(g.argmax().to_vec()),
            Self::Counterexample(c) => Some(vec![c.argmax()]),
            Self::Pest(_) | Self::Robot(_) | Self::Lunar(_) => None,
            Self::Lda(l) => Some(l.argmax().to_vec()),
        }
    }
}

/// Pest Control's price as a cost (piecewise constant: zero gradient).
#[derive(Debug)]
struct PestPrice(PestControl);

impl CostFn for PestPrice {
    fn cost(&self, x: &[f64]) -> f64 {
        self.0.price(x)
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(0.0);
        self.0.price(x)
    }
}

/// The LDA surrogate's training-time cost.
#[derive(Debug)]
struct LdaCost(Arc<Lda>);

impl CostFn for LdaCost {
    fn cost(&self, x: &[f64]) -> f64 {
        self.0.cost(x)
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.0.cost_grad(x, grad)
    }
}

/// A robot-pushing problem's own cost (duration, or a simulated distance).
#[derive(Debug)]
struct RobotNativeCost(Arc<RobotPush>);

impl CostFn for RobotNativeCost {
    fn cost(&self, x: &[f64]) -> f64 {
        self.0.cost(x)
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.0.cost_grad(x, grad)
    }
}

/// Lunar Lander's own cost: mean steps per episode / 16, simulated with the objective. It is
/// piecewise constant in `x` (step counts are integers), so its gradient is zero almost
/// everywhere: policies should treat it as unknown (as the PBGI paper does).
#[derive(Debug)]
struct LunarNativeCost(Arc<LunarLanderProblem>);

impl CostFn for LunarNativeCost {
    fn cost(&self, x: &[f64]) -> f64 {
        self.0.cost(x)
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(0.0);
        self.0.cost(x)
    }
}

/// A built problem: an objective and a cost.
struct Built {
    name: String,
    dim: usize,
    objective: Objective,
    cost: Box<dyn CostFn>,
}

impl Problem for Built {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn eval(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        self.objective.eval(x)
    }
    fn cost(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        self.cost.cost(x)
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if x.len() != self.dim || grad.len() != self.dim {
            grad.fill(f64::NAN);
            return f64::NAN;
        }
        self.cost.cost_grad(x, grad)
    }
    fn uniform_cost(&self) -> bool {
        self.cost.is_uniform()
    }
    fn optimum(&self) -> Option<f64> {
        self.objective.optimum()
    }
    fn argmax(&self) -> Option<Vec<f64>> {
        self.objective.argmax(self.dim)
    }
    fn regret_scale(&self) -> f64 {
        match self.objective {
            Objective::Synthetic(Function::Levy) => 100.0,
            Objective::Synthetic(Function::Rosenbrock) => 1e5,
            _ => 1.0,
        }
    }
    fn output_scale(&self) -> Option<OutputScale> {
        match &self.objective {
            Objective::Counterexample(c) => Some(c.output_scale()),
            _ => None,
        }
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ProblemError> {
    Err(ProblemError(msg.into()))
}

/// Reads a parsed option, or its default.
fn opt<T: std::str::FromStr>(spec: &ProblemSpec, key: &str, default: T) -> Result<T, ProblemError>
where
    T::Err: fmt::Display,
{
    match spec.options.get(key) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<T>()
            .map_err(|e| ProblemError(format!("option {key} = {v:?}: {e}"))),
    }
}

/// Builds the problem a spec names: objective `spec.objective` in dimension `spec.dim` with cost
/// `spec.cost`, randomness from `spec.seed`, settings from `spec.options`. See `docs/problems.md`
/// for every name and option.
///
/// Errors on an unknown objective, cost or option key, an unparsable option value, a dimension
/// the objective is not defined for, or a cost the objective does not support.
pub fn build(spec: &ProblemSpec) -> Result<Box<dyn Problem>, ProblemError> {
    let d = spec.dim;
    if d == 0 {
        return err("dim must be at least 1");
    }
    let name = spec.objective.as_str();
    let need_dim = |k: usize| -> Result<(), ProblemError> {
        if d == k {
            Ok(())
        } else {
            err(format!("{name} is defined for dim = {k}, got {d}"))
        }
    };
    // Option keys each objective and cost understands.
    let mut allowed: Vec<&str> = match name {
        "gp_sample" => vec![
            "kernel",
            "lengthscale",
            "outputscale",
            "num_features",
            "optimum_raw_samples",
            "optimum_restarts",
        ],
        "counterexample_eipc" | "counterexample_ei" => vec!["amplitude", "num_features"],
        "lda" => vec!["surrogate"],
        "robot_push_3d" => vec!["goal_seed", "cost_epsilon"],
        "robot_push_14d" => vec!["cost_type"],
        "lunar_lander" => vec!["episodes", "max_steps"],
        _ => vec![],
    };
    if spec.cost == "cosine" {
        allowed.push("cost_seed");
    }
    if let Some(k) = spec.options.keys().find(|k| !allowed.contains(&k.as_str())) {
        return err(format!(
            "unknown option {k:?} for objective {name:?} with cost {:?}; known: {}",
            spec.cost,
            if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            }
        ));
    }

    let objective = if let Some(f) = Function::parse(name) {
        if !f.accepts_dim(d) {
            return match f.fixed_dim() {
                Some(k) => err(format!("{name} is defined for dim = {k}, got {d}")),
                None => err(format!("{name} needs dim >= 2")),
            };
        }
        Objective::Synthetic(f)
    } else {
        match name {
            "gp_sample" => {
                let mut s = GpSampleSpec::new(d);
                let kernel: String = opt(spec, "kernel", "matern52".to_string())?;
                s.kernel = KernelKind::parse(&kernel)
                    .map_err(|e| ProblemError(format!("option kernel: {e}")))?;
                s.lengthscale = opt(spec, "lengthscale", 0.1)?;
                s.outputscale = opt(spec, "outputscale", 1.0)?;
                s.num_features = opt(spec, "num_features", 1024)?;
                s.raw_samples = Some(opt(spec, "optimum_raw_samples", 1024 * d)?);
                s.restarts = Some(opt(spec, "optimum_restarts", 10 * d)?);
                if s.raw_samples == Some(0) || s.restarts == Some(0) {
                    return err("optimum_raw_samples and optimum_restarts must be at least 1");
                }
                Objective::GpSample(GpSample::new(&s, spec.seed)?)
            }
            "counterexample_eipc" | "counterexample_ei" => {
                need_dim(1)?;
                let variant = if name == "counterexample_eipc" {
                    Variant::HardForEipc
                } else {
                    Variant::HardForEi
                };
                let scaling = match opt(spec, "amplitude", "sqrt".to_string())?.as_str() {
                    "sqrt" => AmplitudeScaling::Sqrt,
                    "linear" => AmplitudeScaling::Linear,
                    other => {
                        return err(format!(
                            "option amplitude = {other:?}: expected sqrt or linear"
                        ));
                    }
                };
                let features = opt(spec, "num_features", 1024)?;
                Objective::Counterexample(Counterexample::new(
                    variant, scaling, features, spec.seed,
                )?)
            }
            "pest_control" => {
                need_dim(crate::pest::STAGES)?;
                Objective::Pest(PestControl::new())
            }
            "lda" => {
                need_dim(3)?;
                let lda = match opt(spec, "surrogate", "reference".to_string())?.as_str() {
                    "reference" => Lda::new()?,
                    "refit" => Lda::refit()?,
                    other => {
                        return err(format!(
                            "option surrogate = {other:?}: expected reference or refit"
                        ));
                    }
                };
                Objective::Lda(Arc::new(lda))
            }
            "robot_push_3d" => {
                need_dim(3)?;
                let goal_seed = opt(spec, "goal_seed", spec.seed % 20)?;
                let eps = opt(spec, "cost_epsilon", 0.01)?;
                Objective::Robot(Arc::new(RobotPush::energy3(goal_seed, eps)?))
            }
            "robot_push_4d" => {
                need_dim(4)?;
                Objective::Robot(Arc::new(RobotPush::push4()))
            }
            "robot_push_14d" => {
                need_dim(14)?;
                let cost = match opt(spec, "cost_type", "mean".to_string())?.as_str() {
                    "mean" => RobotCost::MeanDuration,
                    "max" => RobotCost::MaxDuration,
                    "distance" => RobotCost::HandDistance,
                    other => {
                        return err(format!(
                            "option cost_type = {other:?}: expected mean, max or distance"
                        ));
                    }
                };
                Objective::Robot(Arc::new(RobotPush::push14(cost)?))
            }
            "lunar_lander" => {
                need_dim(12)?;
                let episodes = opt(spec, "episodes", crate::lunar::DEFAULT_EPISODES)?;
                let max_steps = opt(spec, "max_steps", crate::lunar::DEFAULT_MAX_STEPS)?;
                Objective::Lunar(Arc::new(LunarLanderProblem::new(episodes, max_steps)?))
            }
            _ => {
                return err(format!(
                    "unknown objective {name:?}; known: {}",
                    OBJECTIVES.join(", ")
                ));
            }
        }
    };

    let cost: Box<dyn CostFn> = match spec.cost.as_str() {
        "uniform" => Box::new(Uniform),
        "linear_mean" => Box::new(Linear { scale: 1.0 }),
        "linear" => Box::new(Linear { scale: 11.0 }),
        "periodic" => match objective.argmax(d) {
            Some(x) => Box::new(Cosine::periodic(&x)),
            None => {
                return err(format!(
                    "cost periodic needs a known maximizer; {name} has none"
                ));
            }
        },
        "cosine" => {
            let seed = opt(spec, "cost_seed", spec.seed)?;
            let Some(x) = objective.argmax(d) else {
                return err(format!(
                    "cost cosine needs a known maximizer; {name} has none"
                ));
            };
            match &objective {
                Objective::Synthetic(f) if f.cosine_period().is_some() => {
                    let (lo, hi): (Vec<f64>, Vec<f64>) = (0..d).map(|i| f.native_box(i)).unzip();
                    let period = f.cosine_period().unwrap_or(1.0);
                    Box::new(Cosine::random_family(seed, period, f.to_native(&x), lo, hi))
                }
                _ => Box::new(Cosine::random_family(
                    seed,
                    0.5,
                    x,
                    vec![0.0; d],
                    vec![1.0; d],
                )),
            }
        }
        "bump" => {
            if d != 1 {
                return err("cost bump is defined for dim = 1");
            }
            Box::new(Bump::default())
        }
        "native" => match &objective {
            Objective::Counterexample(c) => Box::new(c.cost()),
            Objective::Pest(p) => Box::new(PestPrice(p.clone())),
            Objective::Lda(l) => Box::new(LdaCost(Arc::clone(l))),
            Objective::Robot(r) => Box::new(RobotNativeCost(Arc::clone(r))),
            Objective::Lunar(l) => Box::new(LunarNativeCost(Arc::clone(l))),
            _ => {
                return err(format!(
                    "{name} has no native cost (native costs: counterexample_* bump, pest_control price, lda training time, robot_push_* duration or distance, lunar_lander mean steps / 16)"
                ));
            }
        },
        other => {
            return err(format!(
                "unknown cost {other:?}; known: {}",
                COSTS.join(", ")
            ));
        }
    };
    Ok(Box::new(Built {
        name: spec.objective.clone(),
        dim: d,
        objective,
        cost,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_synthetic_problems_and_rejects_unknown_names() {
        let p = build(&ProblemSpec {
            objective: "ackley".into(),
            dim: 3,
            cost: "linear_mean".into(),
            seed: 0,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.dim(), 3);
        assert_eq!(p.optimum(), Some(0.0));
        assert!(p.eval(&[0.5; 3]).abs() < 1e-12);
        let x = [0.1, 0.2, 0.3];
        let mut g = [0.0; 3];
        let c = p.cost_grad(&x, &mut g);
        assert!((c - 5.0).abs() < 1e-12);
        assert!(g.iter().all(|v| (v - 20.0 / 3.0).abs() < 1e-12));
        assert!(!p.uniform_cost());
        let bad = ProblemSpec {
            objective: "nope".into(),
            dim: 3,
            cost: "uniform".into(),
            seed: 0,
            ..Default::default()
        };
        let err = build(&bad).err().expect("unknown objective is an error");
        assert!(err.0.contains("unknown objective"));
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    fn spec(objective: &str, dim: usize, cost: &str) -> ProblemSpec {
        ProblemSpec {
            objective: objective.into(),
            dim,
            cost: cost.into(),
            seed: 3,
            ..Default::default()
        }
    }

    fn default_dim(name: &str) -> usize {
        match name {
            "dropwave" | "branin" => 2,
            "shekel5" => 4,
            "hartmann6" => 6,
            "counterexample_eipc" | "counterexample_ei" => 1,
            "pest_control" => 25,
            _ => 3,
        }
    }

    /// Every objective builds with every cost it supports; values are finite, costs positive,
    /// `cost_grad` agrees with `cost` and with central differences, and the stated optimum is
    /// attained at the stated maximizer.
    #[test]
    fn every_objective_builds_with_every_supported_cost() {
        for name in names() {
            if name.starts_with("robot_push") || name == "lunar_lander" {
                continue; // simulated: covered by the round-trip tests below
            }
            let d = default_dim(name);
            let mut spec_gp = spec(name, d, "uniform");
            if name == "gp_sample" {
                for (k, v) in [
                    ("lengthscale", "0.3"),
                    ("num_features", "256"),
                    ("optimum_raw_samples", "256"),
                    ("optimum_restarts", "4"),
                ] {
                    spec_gp.options.insert(k.into(), v.into());
                }
            }
            if name.starts_with("counterexample") {
                spec_gp.options.insert("num_features".into(), "256".into());
            }
            // The expensive constructions (grid searches, GP conditioning) with a few costs only.
            let costs = match name {
                "counterexample_eipc" | "counterexample_ei" => {
                    vec!["native", "uniform", "periodic"]
                }
                "lda" => vec!["native", "cosine"],
                _ => cost_names(),
            };
            for cost in costs {
                let mut s = spec_gp.clone();
                s.cost = cost.into();
                let p = match build(&s) {
                    Ok(p) => p,
                    Err(e) => {
                        // Only these combinations are unsupported.
                        let ok = (cost == "bump" && d != 1)
                            || (cost == "native"
                                && !matches!(
                                    name,
                                    "counterexample_eipc"
                                        | "counterexample_ei"
                                        | "pest_control"
                                        | "lda"
                                ))
                            || (name == "pest_control" && matches!(cost, "periodic" | "cosine"));
                        assert!(ok, "{name} with {cost}: {e}");
                        continue;
                    }
                };
                assert_eq!(p.dim(), d);
                assert_eq!(p.name(), name);
                assert_eq!(p.uniform_cost(), cost == "uniform");
                if let (Some(f), Some(x)) = (p.optimum(), p.argmax()) {
                    assert!((p.eval(&x) - f).abs() < 1e-9, "{name}");
                }
                for k in 0..5 {
                    let x: Vec<f64> = (0..d)
                        .map(|i| 0.05 + 0.9 * (((k * 7 + i * 3) % 11) as f64 / 10.0))
                        .collect();
                    assert!(p.eval(&x).is_finite(), "{name} {x:?}");
                    let mut g = vec![0.0; d];
                    let c = p.cost_grad(&x, &mut g);
                    assert!(c > 0.0 && c.is_finite(), "{name}/{cost}: cost {c}");
                    assert!((c - p.cost(&x)).abs() <= 1e-12 * c);
                    if cost == "bump" || (cost == "native" && name.starts_with("counter")) {
                        continue; // a 3.3e-4-wide bump: tested in costs.rs with a fitting step
                    }
                    if name == "pest_control" && cost == "native" {
                        assert!(g.iter().all(|v| *v == 0.0));
                        continue;
                    }
                    for i in 0..d {
                        let h = 1e-6;
                        let mut a = x.clone();
                        let mut b = x.clone();
                        a[i] += h;
                        b[i] -= h;
                        let fd = (p.cost(&a) - p.cost(&b)) / (2.0 * h);
                        let scale = g.iter().fold(c, |m, v| m.max(v.abs()));
                        assert!(
                            (fd - g[i]).abs() < 1e-5 * scale,
                            "{name}/{cost}: {fd} vs {}",
                            g[i]
                        );
                    }
                }
            }
        }
    }

    /// The robot-pushing problems build by name, agree bitwise with the direct construction,
    /// reject wrong dimensions and options, and report no optimum.
    #[test]
    fn robot_problems_round_trip() {
        use crate::robot::{RobotCost, RobotPush};
        let x3 = [0.2, 0.55, 0.4];
        let x4 = [0.1, 0.8, 0.6, 0.3];
        let x14: Vec<f64> = (0..14).map(|i| ((i * 5 + 2) % 13) as f64 / 12.0).collect();
        let mut s = spec("robot_push_3d", 3, "native");
        s.seed = 23; // goal seed 23 mod 20 = 3
        let p = build(&s).unwrap();
        let direct = RobotPush::energy3(3, 0.01).unwrap();
        assert_eq!(p.eval(&x3).to_bits(), direct.eval(&x3).to_bits());
        assert_eq!(p.cost(&x3).to_bits(), direct.cost(&x3).to_bits());
        assert_eq!((p.optimum(), p.argmax(), p.dim()), (None, None, 3));
        assert!(!p.uniform_cost());
        s.options.insert("goal_seed".into(), "4".into());
        s.options.insert("cost_epsilon".into(), "0.5".into());
        let q = build(&s).unwrap();
        let direct = RobotPush::energy3(4, 0.5).unwrap();
        assert_eq!(q.eval(&x3).to_bits(), direct.eval(&x3).to_bits());
        assert_eq!(q.cost(&x3).to_bits(), direct.cost(&x3).to_bits());
        let p = build(&spec("robot_push_4d", 4, "native")).unwrap();
        assert_eq!(
            p.eval(&x4).to_bits(),
            RobotPush::push4().eval(&x4).to_bits()
        );
        assert_eq!(p.cost(&x4), 29.0 * 0.6 + 1.0);
        let u = build(&spec("robot_push_4d", 4, "uniform")).unwrap();
        assert!(u.uniform_cost() && u.cost(&x4) == 1.0);
        for (t, c) in [
            ("mean", RobotCost::MeanDuration),
            ("max", RobotCost::MaxDuration),
            ("distance", RobotCost::HandDistance),
        ] {
            let mut s = spec("robot_push_14d", 14, "native");
            s.options.insert("cost_type".into(), t.into());
            let p = build(&s).unwrap();
            let direct = RobotPush::push14(c).unwrap();
            assert_eq!(p.eval(&x14).to_bits(), direct.eval(&x14).to_bits());
            assert_eq!(p.cost(&x14).to_bits(), direct.cost(&x14).to_bits());
            let mut g = vec![0.0; 14];
            let c = p.cost_grad(&x14, &mut g);
            assert!(c > 0.0 && g.iter().all(|v| v.is_finite()));
        }
        let mut s = spec("robot_push_14d", 14, "native");
        s.options.insert("cost_type".into(), "energy".into());
        assert!(build(&s).err().unwrap().0.contains("cost_type"));
        assert!(
            build(&spec("robot_push_4d", 3, "native"))
                .err()
                .unwrap()
                .0
                .contains("dim = 4")
        );
        assert!(build(&spec("robot_push_3d", 3, "periodic")).is_err());
        let mut s = spec("robot_push_4d", 4, "native");
        s.options.insert("goal_seed".into(), "1".into());
        assert!(build(&s).err().unwrap().0.contains("unknown option"));
        let mut s = spec("robot_push_3d", 3, "native");
        s.options.insert("cost_epsilon".into(), "-1".into());
        assert!(build(&s).is_err());
        assert!(names().contains(&"robot_push_14d"));
        // Wrong-length inputs give NaN.
        assert!(
            build(&spec("robot_push_3d", 3, "native"))
                .unwrap()
                .eval(&x4)
                .is_nan()
        );
    }

    /// Lunar Lander builds by name (d = 12) with its native or a uniform cost, agrees bitwise
    /// with the direct construction, parses and validates its options, and reports no optimum.
    #[test]
    fn lunar_lander_round_trip() {
        use crate::lunar::{COST_DIVISOR, GYM_HEURISTIC_WEIGHTS, LunarLanderProblem};
        let x = GYM_HEURISTIC_WEIGHTS;
        let mut s = spec("lunar_lander", 12, "native");
        s.options.insert("episodes".into(), "3".into());
        s.options.insert("max_steps".into(), " 400".into());
        let p = build(&s).unwrap();
        let direct = LunarLanderProblem::new(3, 400).unwrap();
        assert_eq!(p.eval(&x).to_bits(), direct.eval(&x).to_bits());
        assert_eq!(p.cost(&x).to_bits(), direct.cost(&x).to_bits());
        assert_eq!((p.optimum(), p.argmax(), p.dim()), (None, None, 12));
        assert_eq!(p.name(), "lunar_lander");
        assert!(!p.uniform_cost());
        let c = p.cost(&x);
        assert!(c > 0.0 && c <= 400.0 / COST_DIVISOR, "{c}");
        let mut g = vec![1.0; 12];
        assert_eq!(p.cost_grad(&x, &mut g).to_bits(), c.to_bits());
        assert!(g.iter().all(|v| *v == 0.0));
        let mut u = s.clone();
        u.cost = "uniform".into();
        let u = build(&u).unwrap();
        assert!(u.uniform_cost() && u.cost(&x) == 1.0);
        assert_eq!(u.eval(&x).to_bits(), direct.eval(&x).to_bits());
        assert!(names().contains(&"lunar_lander"));
        // Defaults: the paper's 50 episodes of at most 5000 steps (built, not evaluated here).
        assert!(build(&spec("lunar_lander", 12, "native")).is_ok());
        // Errors: dimension, options, costs that need a maximizer.
        let e = build(&spec("lunar_lander", 11, "native")).err().unwrap();
        assert!(e.0.contains("dim = 12"), "{e}");
        for (k, v, needle) in [
            ("episodes", "0", "episodes"),
            ("max_steps", "0", "max_steps"),
            ("max_steps", "abc", "max_steps"),
            ("episodes", "-1", "episodes"),
            ("seed", "1", "unknown option"),
        ] {
            let mut s = spec("lunar_lander", 12, "native");
            s.options.insert(k.into(), v.into());
            let e = build(&s).err().expect("invalid option");
            assert!(e.0.contains(needle), "{k} = {v}: {e}");
        }
        assert!(build(&spec("lunar_lander", 12, "periodic")).is_err());
        assert!(build(&spec("lunar_lander", 12, "cosine")).is_err());
        // Wrong-length inputs give NaN.
        assert!(p.eval(&x[..11]).is_nan() && p.cost(&x[..11]).is_nan());
    }

    #[test]
    fn errors_name_the_problem() {
        let e = build(&spec("nope", 3, "uniform")).err().unwrap();
        assert!(e.0.contains("unknown objective") && e.0.contains("gp_sample"));
        let e = build(&spec("ackley", 3, "nope")).err().unwrap();
        assert!(e.0.contains("unknown cost") && e.0.contains("periodic"));
        let e = build(&spec("shekel5", 3, "uniform")).err().unwrap();
        assert!(e.0.contains("dim = 4"));
        let e = build(&spec("rosenbrock", 1, "uniform")).err().unwrap();
        assert!(e.0.contains("dim >= 2"));
        let mut s = spec("ackley", 3, "uniform");
        s.options.insert("kernel".into(), "rbf".into());
        assert!(build(&s).err().unwrap().0.contains("unknown option"));
        let mut s = spec("gp_sample", 2, "uniform");
        s.options.insert("kernel".into(), "cubic".into());
        assert!(build(&s).err().unwrap().0.contains("kernel"));
        let mut s = spec("gp_sample", 2, "uniform");
        s.options.insert("lengthscale".into(), "-1".into());
        assert!(build(&s).is_err());
        let mut s = spec("gp_sample", 2, "uniform");
        s.options.insert("lengthscale".into(), "abc".into());
        assert!(build(&s).err().unwrap().0.contains("lengthscale"));
        assert!(build(&spec("pest_control", 25, "periodic")).is_err());
        assert!(build(&spec("ackley", 2, "bump")).is_err());
        assert!(build(&spec("ackley", 0, "uniform")).is_err());
        // Wrong-length inputs give NaN, not a panic.
        let p = build(&spec("hartmann3", 3, "linear_mean")).unwrap();
        assert!(p.eval(&[0.5; 2]).is_nan() && p.cost(&[0.5; 4]).is_nan());
    }

    #[test]
    fn seeds_options_and_scales() {
        assert_eq!(
            build(&spec("levy", 2, "uniform")).unwrap().regret_scale(),
            100.0
        );
        assert_eq!(
            build(&spec("ackley", 2, "uniform")).unwrap().regret_scale(),
            1.0
        );
        // The cosine cost depends on the seed (or cost_seed), the objective does not.
        let a = build(&spec("dropwave", 2, "cosine")).unwrap();
        let mut s = spec("dropwave", 2, "cosine");
        s.seed = 4;
        let b = build(&s).unwrap();
        s.options.insert("cost_seed".into(), "3".into());
        let c = build(&s).unwrap();
        let x = [0.3, 0.8];
        assert_ne!(a.cost(&x), b.cost(&x));
        assert_eq!(a.cost(&x), c.cost(&x));
        assert_eq!(a.eval(&x), b.eval(&x));
        // Periodic cost peaks at the maximizer: e^2 / I0(2/d)^d.
        let p = build(&spec("hartmann3", 3, "periodic")).unwrap();
        let x = p.argmax().unwrap();
        let peak = 2f64.exp() / crate::costs::bessel_i0(2.0 / 3.0).powi(3);
        assert!((p.cost(&x) - peak).abs() < 1e-12);
        // The normalized linear cost is the PBGI cost over 11.
        let l = build(&spec("ackley", 2, "linear")).unwrap();
        assert!((l.cost(&[0.25, 0.75]) - 1.0).abs() < 1e-15);
        // gp_sample options reach the sample.
        let mut s = spec("gp_sample", 1, "uniform");
        s.options.insert("kernel".into(), "rbf".into());
        s.options.insert("lengthscale".into(), "0.5".into());
        s.options.insert("outputscale".into(), "4".into());
        let g = build(&s).unwrap();
        let opt = g.optimum().unwrap();
        assert!((0..=1000).all(|k| g.eval(&[k as f64 / 1000.0]) <= opt + 1e-9));
        // A counterexample with the reference's linear amplitude scaling.
        let mut s = spec("counterexample_eipc", 1, "native");
        s.options.insert("amplitude".into(), "linear".into());
        s.options.insert("num_features".into(), "256".into());
        let c = build(&s).unwrap();
        assert!((c.cost(&[0.5]) - 10.0).abs() < 1e-12);
        let mut s = spec("lda", 3, "native");
        s.options.insert("surrogate".into(), "refit".into());
        let refit = build(&s).unwrap();
        let reference = build(&spec("lda", 3, "native")).unwrap();
        let x = [0.2, 0.7, 0.4];
        assert!((refit.eval(&x) - reference.eval(&x)).abs() < 0.01 * reference.eval(&x).abs());
        s.options.insert("surrogate".into(), "other".into());
        assert!(build(&s).err().unwrap().0.contains("surrogate"));
    }
}
