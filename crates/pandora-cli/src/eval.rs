//! `pandora eval`: JSON in, JSON out. Builds an exact GP with the given hyperparameters, then
//! reports the latent posterior, its gradients, the log marginal likelihood and acquisition values
//! with gradients at the query points. No input or output transforms are applied.

use anyhow::{Context, Result, anyhow, bail};
use pandora_core::acquisition::{
    AcquisitionName, AcquisitionParams, CostConvention, CostModel, LinearMeanCost, LogCostBatch,
    OnModel, ThompsonSample, UniformCost, build_pointwise,
};
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use pandora_core::optim::multistart::Objective;
use pandora_core::optim::multistart::{MultiStartOptions, MultiStartResult, maximize};
use serde::{Deserialize, Serialize};

/// Lengthscales: one shared number or one per dimension.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Lengthscales {
    Shared(f64),
    PerDim(Vec<f64>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelSpec {
    #[serde(rename = "type")]
    kind: String,
    #[serde(alias = "lengthscale")]
    lengthscales: Lengthscales,
    #[serde(default = "one")]
    outputscale: f64,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcqSpec {
    name: String,
    best_f: Option<f64>,
    beta: Option<f64>,
    t: Option<f64>,
    alpha: Option<f64>,
    remaining_budget: Option<f64>,
    budget: Option<f64>,
    lambda: Option<f64>,
    convention: Option<String>,
    cost: Option<CostSpec>,
    seed: Option<u64>,
    num_features: Option<usize>,
}

/// Evaluation cost of the query points.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum CostSpec {
    /// c ≡ 1.
    Uniform,
    /// c(x) = offset + slope · mean(x).
    LinearMean { offset: f64, slope: f64 },
    /// One known cost per query point (no gradient; cannot be optimized).
    Values { values: Vec<f64> },
}

/// Costs given per query point, in the order of `points`.
struct PointCosts(Vec<f64>);

impl CostModel for PointCosts {
    fn log_cost(&self, xs: &[f64], d: usize, grad: bool) -> pandora_core::Result<LogCostBatch> {
        let m = xs.len() / d;
        if m != self.0.len() {
            return Err(pandora_core::Error::invalid(
                "cost.values",
                "per-point costs apply to the request's points only (not to optimize)",
            ));
        }
        Ok(LogCostBatch {
            mean: self.0.iter().map(|c| c.ln()).collect(),
            var: vec![0.0; m],
            mean_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
            var_grad: if grad { vec![0.0; m * d] } else { Vec::new() },
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptimizeSpec {
    /// Index into `acquisitions` (default 0).
    #[serde(default)]
    acquisition: usize,
    /// `[lower, upper]` bounds of the search box (default the unit cube).
    bounds: Option<[Vec<f64>; 2]>,
    raw_samples: Option<usize>,
    restarts: Option<usize>,
    #[serde(default)]
    seed: u64,
}

#[derive(Debug, Serialize)]
struct OptimumOutput {
    acquisition: String,
    x: Vec<f64>,
    value: f64,
    evaluations: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalInput {
    #[serde(default)]
    train_x: Vec<Vec<f64>>,
    #[serde(default)]
    train_y: Vec<f64>,
    kernel: KernelSpec,
    #[serde(default)]
    noise: f64,
    #[serde(default)]
    mean: f64,
    points: Vec<Vec<f64>>,
    #[serde(default)]
    acquisitions: Vec<AcqSpec>,
    optimize: Option<OptimizeSpec>,
}

#[derive(Debug, Serialize)]
struct AcqOutput {
    name: String,
    value: Vec<f64>,
    gradient: Vec<Vec<f64>>,
}

#[derive(Debug, Serialize)]
struct EvalOutput {
    mean: Vec<f64>,
    std: Vec<f64>,
    mean_gradient: Vec<Vec<f64>>,
    std_gradient: Vec<Vec<f64>>,
    log_marginal_likelihood: f64,
    acquisitions: Vec<AcqOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    optimum: Option<OptimumOutput>,
    jitter: f64,
}

fn rows(flat: &[f64], d: usize) -> Vec<Vec<f64>> {
    flat.chunks_exact(d).map(|r| r.to_vec()).collect()
}

fn flatten(field: &str, pts: &[Vec<f64>], d: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(pts.len() * d);
    for (i, p) in pts.iter().enumerate() {
        if p.len() != d {
            bail!("{field}[{i}]: expected {d} coordinates, got {}", p.len());
        }
        if let Some(k) = p.iter().position(|v| !v.is_finite()) {
            bail!("{field}[{i}][{k}]: coordinate must be finite");
        }
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Size limits of a request, checked before anything sized by them is allocated (an exact GP
/// holds `n × n` matrices: 5 000 training points take 200 MB each). Documented in docs/eval.md.
pub mod limits {
    /// Most training points (`train_x` rows).
    pub const TRAIN_POINTS: usize = 5_000;
    /// Most query points (`points` rows).
    pub const POINTS: usize = 10_000;
    /// Most dimensions (coordinates per point, lengthscales).
    pub const DIM: usize = 1_000;
    /// Most numbers in `train_x` or in `points` (rows × dimensions).
    pub const NUMBERS: usize = 1_000_000;
    /// Most `optimize.raw_samples`.
    pub const RAW_SAMPLES: usize = 100_000;
    /// Most `optimize.restarts`.
    pub const RESTARTS: usize = 1_000;
    /// Most random features of a Thompson sample (`num_features`).
    pub const FEATURES: usize = 4_096;
}

/// An error naming `field` unless `value <= limit`.
fn at_most(field: &str, value: usize, limit: usize) -> Result<()> {
    if value > limit {
        bail!("{field}: {value} is more than the limit of {limit} (see docs/eval.md, \"Limits\")");
    }
    Ok(())
}

/// Checks the request's sizes against [`limits`] and the lengthscales against the points.
fn check_sizes(input: &EvalInput, d: usize) -> Result<()> {
    at_most("kernel.lengthscales (dimensions)", d, limits::DIM)?;
    at_most("train_x (rows)", input.train_x.len(), limits::TRAIN_POINTS)?;
    at_most("points (rows)", input.points.len(), limits::POINTS)?;
    at_most(
        "train_x (numbers)",
        input.train_x.len() * d,
        limits::NUMBERS,
    )?;
    at_most("points (numbers)", input.points.len() * d, limits::NUMBERS)?;
    if let Some(o) = &input.optimize {
        at_most(
            "optimize.raw_samples",
            o.raw_samples.unwrap_or(0),
            limits::RAW_SAMPLES,
        )?;
        at_most(
            "optimize.restarts",
            o.restarts.unwrap_or(0),
            limits::RESTARTS,
        )?;
    }
    for (i, a) in input.acquisitions.iter().enumerate() {
        let field = format!("acquisitions[{i}].num_features");
        at_most(&field, a.num_features.unwrap_or(0), limits::FEATURES)?;
    }
    // Per-dimension lengthscales that disagree with every point's dimension: the lengthscales
    // are wrong, not the points.
    if let Lengthscales::PerDim(v) = &input.kernel.lengthscales {
        let dims: Vec<usize> = [input.train_x.first(), input.points.first()]
            .into_iter()
            .flatten()
            .map(Vec::len)
            .collect();
        if let Some(&k) = dims.first()
            && dims.iter().all(|&x| x == k)
            && k != v.len()
        {
            bail!(
                "kernel.lengthscales: {} values, but the points have {k} coordinates (give one \
                 lengthscale per coordinate, or a single number)",
                v.len()
            );
        }
    }
    Ok(())
}

/// Evaluates the request in `text` and returns the response as a JSON value.
pub fn evaluate(text: &str) -> Result<serde_json::Value> {
    let input: EvalInput = crate::input::parse(text)?;
    let kind = KernelKind::parse(&input.kernel.kind)?;
    let d = match (
        &input.kernel.lengthscales,
        input.points.first(),
        input.train_x.first(),
    ) {
        (Lengthscales::PerDim(v), _, _) => v.len(),
        (Lengthscales::Shared(_), Some(p), _) => p.len(),
        (Lengthscales::Shared(_), None, Some(p)) => p.len(),
        (Lengthscales::Shared(_), None, None) => 1,
    };
    if d == 0 {
        bail!("kernel.lengthscales: need at least one dimension");
    }
    check_sizes(&input, d)?;
    let lengthscales = match input.kernel.lengthscales {
        Lengthscales::Shared(l) => vec![l; d],
        Lengthscales::PerDim(v) => v,
    };
    let kernel = Kernel::new(kind, lengthscales, input.kernel.outputscale)?;
    let train_x = flatten("train_x", &input.train_x, d)?;
    if input.train_y.len() != input.train_x.len() {
        bail!(
            "train_y: expected {} values (one per train_x row), got {}",
            input.train_x.len(),
            input.train_y.len()
        );
    }
    if let Some(i) = input.train_y.iter().position(|v| !v.is_finite()) {
        bail!("train_y[{i}]: must be finite");
    }
    if !(input.noise.is_finite() && input.noise >= 0.0) {
        bail!("noise: must be a finite variance >= 0, got {}", input.noise);
    }
    if !input.mean.is_finite() {
        bail!("mean: must be finite");
    }
    let points = flatten("points", &input.points, d)?;
    let gp = ExactGp::new(
        train_x,
        input.train_y,
        GpParams {
            kernel,
            mean: input.mean,
            noise: input.noise,
        },
    )?;
    let post = gp.posterior(&points, true)?;
    if let Some(o) = &input.optimize
        && o.acquisition >= input.acquisitions.len()
    {
        bail!(
            "optimize.acquisition: index {} but only {} acquisitions are given",
            o.acquisition,
            input.acquisitions.len()
        );
    }
    let mut acquisitions = Vec::new();
    let mut optimum = None;
    for (i, spec) in input.acquisitions.iter().enumerate() {
        let opt = input
            .optimize
            .as_ref()
            .filter(|o| o.acquisition == i)
            .map(|o| optimize_settings(o, d))
            .transpose()?;
        let (value, gradient, best) =
            run_spec(&gp, spec, &points, d, opt).map_err(|e| anyhow!("acquisitions[{i}].{e:#}"))?;
        if let Some(r) = best {
            optimum = Some(OptimumOutput {
                acquisition: spec.name.clone(),
                x: r.x,
                value: r.value,
                evaluations: r.evaluations,
            });
        }
        acquisitions.push(AcqOutput {
            name: spec.name.clone(),
            value,
            gradient: rows(&gradient, d),
        });
    }
    let out = EvalOutput {
        std: post.std(),
        std_gradient: rows(&post.std_grad(), d),
        mean_gradient: rows(&post.mean_grad, d),
        mean: post.mean,
        log_marginal_likelihood: gp.log_marginal_likelihood(),
        acquisitions,
        optimum,
        jitter: gp.cholesky().jitter(),
    };
    Ok(serde_json::to_value(out)?)
}

fn optimize_settings(o: &OptimizeSpec, d: usize) -> Result<(MultiStartOptions, u64)> {
    if o.raw_samples == Some(0) || o.restarts == Some(0) {
        bail!("optimize: raw_samples and restarts must be at least 1");
    }
    let mut ms = MultiStartOptions {
        raw_samples: o.raw_samples,
        num_restarts: o.restarts,
        ..MultiStartOptions::default()
    };
    if let Some([lo, hi]) = &o.bounds {
        if lo.len() != d || hi.len() != d {
            bail!("optimize.bounds: expected two arrays of {d} numbers");
        }
        if lo
            .iter()
            .zip(hi)
            .any(|(a, b)| !(a.is_finite() && b.is_finite() && a <= b))
        {
            bail!("optimize.bounds: need finite lower <= upper in every dimension");
        }
        ms.lower = Some(lo.clone());
        ms.upper = Some(hi.clone());
    }
    Ok((ms, o.seed))
}

type Evaluated = (Vec<f64>, Vec<f64>, Option<MultiStartResult>);

/// Evaluates one acquisition spec at the points (and maximizes it if asked). Errors start with
/// the offending field name, so the caller can prefix the acquisition's index.
fn run_spec(
    gp: &ExactGp,
    spec: &AcqSpec,
    points: &[f64],
    d: usize,
    optimize: Option<(MultiStartOptions, u64)>,
) -> Result<Evaluated> {
    let name = AcquisitionName::parse(&spec.name).map_err(|e| anyhow!("{}", field_error(e)))?;
    // `costs` must outlive `objective`, which borrows it.
    let costs: Box<dyn CostModel>;
    let objective: Box<dyn Objective + '_>;
    let evaluated: (Vec<f64>, Vec<f64>);
    match name {
        AcquisitionName::Random => {
            bail!("name: 'random' has no value at a point (it is a policy, not a function)")
        }
        AcquisitionName::Ts => {
            let ts = ThompsonSample::draw(
                gp,
                spec.num_features.unwrap_or(1024),
                spec.seed.unwrap_or(0),
            )
            .map_err(|e| anyhow!("{}", field_error(e)))?;
            let mut g = vec![0.0; points.len()];
            let v = points
                .chunks_exact(d)
                .zip(g.chunks_exact_mut(d))
                .map(|(x, gx)| ts.value_grad(x, gx))
                .collect();
            evaluated = (v, g);
            objective = Box::new(ts);
        }
        _ => {
            let convention = match spec.convention.as_deref() {
                None | Some("inverse") => CostConvention::Inverse,
                Some("expected") => CostConvention::Expected,
                Some(other) => {
                    bail!("convention: expected 'inverse' or 'expected', got '{other}'")
                }
            };
            let params = AcquisitionParams {
                best_f: spec.best_f,
                beta: spec.beta,
                t: spec.t,
                alpha: spec.alpha,
                remaining_budget: spec.remaining_budget,
                total_budget: spec.budget,
                lambda: spec.lambda,
                convention: Some(convention),
                ..AcquisitionParams::default()
            };
            let acq =
                build_pointwise(name, &params, d).map_err(|e| anyhow!("{}", field_error(e)))?;
            costs = match &spec.cost {
                None | Some(CostSpec::Uniform) => Box::new(UniformCost),
                Some(CostSpec::LinearMean { offset, slope }) => Box::new(LinearMeanCost {
                    offset: *offset,
                    slope: *slope,
                }),
                Some(CostSpec::Values { values }) => {
                    if values.len() != points.len() / d {
                        bail!(
                            "cost.values: expected {} costs (one per point), got {}",
                            points.len() / d,
                            values.len()
                        );
                    }
                    if values.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
                        bail!("cost.values: every cost must be finite and > 0");
                    }
                    if optimize.is_some() {
                        bail!(
                            "cost: per-point 'values' costs cannot be optimized; use a cost function"
                        );
                    }
                    Box::new(PointCosts(values.clone()))
                }
            };
            let obj = OnModel::with_cost(gp, acq, costs.as_ref());
            evaluated = obj
                .evaluate(points, true)
                .map_err(|e| anyhow!("{}", field_error(e)))?;
            objective = Box::new(obj);
        }
    }
    let (values, grads) = evaluated;
    if let Some(j) = values.iter().position(|v| v.is_nan()) {
        bail!("name: the acquisition is undefined at points[{j}]");
    }
    let best = match optimize {
        Some((ms, seed)) => Some(maximize(objective.as_ref(), &ms, seed).context("optimize")?),
        None => None,
    };
    Ok((values, grads, best))
}

/// Renders a core error as `field: reason`.
fn field_error(e: pandora_core::Error) -> String {
    match e {
        pandora_core::Error::InvalidInput { what, reason } => format!("{what}: {reason}"),
        other => other.to_string(),
    }
}

/// Reads the request from `path` (stdin if `None` or `-`) and prints the response.
pub fn main(path: Option<&str>) -> Result<()> {
    let text = crate::input::read(path, "eval request")?;
    let out = evaluate(&text)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let base = r#"{"train_x": [[0.1, 0.2]], "train_y": [1.0],
            "kernel": {"type": "matern52", "lengthscales": [0.3, 0.5], "outputscale": 1.7},
            "noise": 1e-4, "mean": 0.2, "points": [[0.5, 0.5]],
            "acquisitions": [{"name": "log_ei", "best_f": 1.0}]}"#;
        assert!(evaluate(base).is_ok());
        let cases = [
            (base.replace("matern52", "matern72"), "kernel.type"),
            (
                base.replace("[0.3, 0.5]", "[0.3, \"a\"]"),
                "kernel.lengthscales",
            ),
            (
                base.replace("[0.3, 0.5]", "[0.3, -0.5]"),
                "kernel.lengthscales",
            ),
            (base.replace("[[0.5, 0.5]]", "[[0.5]]"), "points[0]"),
            (
                base.replace("[0.3, 0.5]", "[0.3, 0.5, 0.7]"),
                "kernel.lengthscales: 3 values, but the points have 2 coordinates",
            ),
            (
                base.replace("\"log_ei\", ", "\"ts\", \"num_features\": 100000, "),
                "acquisitions[0].num_features: 100000 is more than the limit of 4096",
            ),
            (
                base.replace(
                    "\"mean\": 0.2,",
                    "\"mean\": 0.2, \"optimize\": {\"raw_samples\": 1000000000},",
                ),
                "optimize.raw_samples: 1000000000 is more than the limit",
            ),
            (
                base.replace("\"train_y\": [1.0]", "\"train_y\": [1.0, 2.0]"),
                "train_y",
            ),
            (
                base.replace("\"log_ei\"", "\"foo\""),
                "acquisitions[0].name",
            ),
            (
                base.replace(", \"best_f\": 1.0", ""),
                "acquisitions[0].best_f",
            ),
            (base.replace("1e-4", "-1"), "noise"),
            (
                base.replace("\"mean\": 0.2,", "\"mean\": 0.2, \"bogus\": 1,"),
                "bogus",
            ),
            (base.replace("\"points\": [[0.5, 0.5]],", ""), "points"),
            (
                base.replace(
                    "\"mean\": 0.2,",
                    "\"mean\": 0.2, \"optimize\": {\"acquisition\": 3},",
                ),
                "optimize.acquisition",
            ),
            (
                base.replace(
                    "\"mean\": 0.2,",
                    "\"mean\": 0.2, \"optimize\": {\"bounds\": [[0, 0], [1]]},",
                ),
                "optimize.bounds",
            ),
        ];
        for (text, field) in cases {
            let err = evaluate(&text).unwrap_err().to_string();
            assert!(err.contains(field), "error '{err}' should name '{field}'");
        }
    }
}
