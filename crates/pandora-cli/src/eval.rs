//! `pandora eval`: JSON in, JSON out. Builds an exact GP with the given hyperparameters, then
//! reports the latent posterior, its gradients, the log marginal likelihood and acquisition values
//! with gradients at the query points. No input or output transforms are applied.

use anyhow::{Context, Result, anyhow, bail};
use pandora_core::acquisition::{
    ExpectedImprovement, LogExpectedImprovement, OnModel, PointwiseAcquisition,
};
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use pandora_core::optim::multistart::{MultiStartOptions, MultiStartResult, maximize};
use serde::{Deserialize, Serialize};
use std::io::Read;

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

/// Evaluates the request in `text` and returns the response as a JSON value.
pub fn evaluate(text: &str) -> Result<serde_json::Value> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let input: EvalInput = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            anyhow!("{}", e.inner())
        } else {
            anyhow!("{path}: {}", e.inner())
        }
    })?;
    let kind = KernelKind::parse(&input.kernel.kind).map_err(|e| anyhow!("{e}"))?;
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
    let lengthscales = match input.kernel.lengthscales {
        Lengthscales::Shared(l) => vec![l; d],
        Lengthscales::PerDim(v) => v,
    };
    let kernel =
        Kernel::new(kind, lengthscales, input.kernel.outputscale).map_err(|e| anyhow!("{e}"))?;
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
    )
    .map_err(|e| anyhow!("{e}"))?;
    let post = gp.posterior(&points, true).map_err(|e| anyhow!("{e}"))?;
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
        let best_f = |name: &str| -> Result<f64> {
            let v = spec
                .best_f
                .ok_or_else(|| anyhow!("acquisitions[{i}].best_f: required by '{name}'"))?;
            if !v.is_finite() {
                bail!("acquisitions[{i}].best_f: must be finite");
            }
            Ok(v)
        };
        let opt = input
            .optimize
            .as_ref()
            .filter(|o| o.acquisition == i)
            .map(|o| optimize_settings(o, d))
            .transpose()?;
        let (value, gradient, best) = match spec.name.as_str() {
            "ei" => run(
                &gp,
                ExpectedImprovement {
                    best_f: best_f("ei")?,
                },
                &points,
                opt,
            )?,
            "log_ei" => run(
                &gp,
                LogExpectedImprovement {
                    best_f: best_f("log_ei")?,
                },
                &points,
                opt,
            )?,
            other => bail!(
                "acquisitions[{i}].name: unknown acquisition '{other}' (available: ei, log_ei)"
            ),
        };
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

fn run<A: PointwiseAcquisition>(
    gp: &ExactGp,
    acq: A,
    points: &[f64],
    optimize: Option<(MultiStartOptions, u64)>,
) -> Result<Evaluated> {
    let obj = OnModel::new(gp, acq);
    let (v, g) = obj.evaluate(points, true).map_err(|e| anyhow!("{e}"))?;
    let best = match optimize {
        Some((ms, seed)) => Some(maximize(&obj, &ms, seed).map_err(|e| anyhow!("optimize: {e}"))?),
        None => None,
    };
    Ok((v, g, best))
}

/// Reads the request from `path` (stdin if `None` or `-`) and prints the response.
pub fn main(path: Option<&str>) -> Result<()> {
    let text = match path {
        None | Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the eval request from stdin")?;
            s
        }
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading {p}"))?,
    };
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
