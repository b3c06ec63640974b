//! The one interface every benchmark problem implements, and the registry that builds problems
//! by name.
//!
//! A problem is an objective on the unit cube `[0,1]^d` (maximized) together with the cost of
//! evaluating it. Problems that depend on randomness (GP prior samples, random cost families)
//! are built from an explicit seed, so a seed identifies one instance.

use std::fmt;

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
}

/// What went wrong building a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemError(pub String);

impl fmt::Display for ProblemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProblemError {}

/// Which problem to build: an objective name, a dimension, a cost name and a seed. Construct it
/// with `..Default::default()` so that options added later keep your code compiling.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProblemSpec {
    /// Objective name, e.g. `"ackley"` (see [`Builtin::NAMES`](crate::Builtin::NAMES)).
    pub objective: String,
    /// Input dimension.
    pub dim: usize,
    /// Cost name: `"uniform"` or `"linear_mean"` (`1 + 20·mean(x)`).
    pub cost: String,
    /// Seed of the instance (GP samples, random cost families).
    pub seed: u64,
}

/// A synthetic objective with a cost function.
struct Synthetic {
    name: String,
    objective: crate::Builtin,
    dim: usize,
    cost: CostKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CostKind {
    Uniform,
    LinearMean,
}

impl Problem for Synthetic {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn eval(&self, x: &[f64]) -> f64 {
        self.objective.eval(x)
    }
    fn cost(&self, x: &[f64]) -> f64 {
        match self.cost {
            CostKind::Uniform => 1.0,
            CostKind::LinearMean => crate::linear_mean_cost(x),
        }
    }
    fn cost_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        match self.cost {
            CostKind::Uniform => grad.fill(0.0),
            CostKind::LinearMean => grad.fill(20.0 / x.len() as f64),
        }
        self.cost(x)
    }
    fn uniform_cost(&self) -> bool {
        self.cost == CostKind::Uniform
    }
    fn optimum(&self) -> Option<f64> {
        Some(self.objective.optimum())
    }
}

/// Builds the problem a spec names.
pub fn build(spec: &ProblemSpec) -> Result<Box<dyn Problem>, ProblemError> {
    if spec.dim == 0 {
        return Err(ProblemError("dim must be at least 1".into()));
    }
    let objective = crate::Builtin::parse(&spec.objective).ok_or_else(|| {
        ProblemError(format!(
            "unknown objective {:?}; known: {}",
            spec.objective,
            crate::Builtin::NAMES.join(", ")
        ))
    })?;
    if objective == crate::Builtin::Rosenbrock && spec.dim < 2 {
        return Err(ProblemError("rosenbrock needs dim >= 2".into()));
    }
    let cost = match spec.cost.as_str() {
        "uniform" => CostKind::Uniform,
        "linear_mean" => CostKind::LinearMean,
        other => {
            return Err(ProblemError(format!(
                "unknown cost {other:?}; known: uniform, linear_mean"
            )));
        }
    };
    Ok(Box::new(Synthetic {
        name: spec.objective.clone(),
        objective,
        dim: spec.dim,
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
        };
        let err = build(&bad).err().expect("unknown objective is an error");
        assert!(err.0.contains("unknown objective"));
    }
}
