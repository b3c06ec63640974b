//! Acquisition functions on arrays of posterior means and standard deviations.

use crate::error::{core_err, value_err};
use numpy::{PyArray1, PyReadonlyArray1};
use pandora_core::acquisition::{
    AcquisitionName, AcquisitionParams, CostConvention, LogCost, build_pointwise, pbgi_index,
    pbgi_index_min,
};
use pyo3::prelude::*;

/// Values and partial derivatives of one acquisition over a batch.
struct Batch {
    value: Vec<f64>,
    d_mean: Vec<f64>,
    d_std: Vec<f64>,
    d_log_cost: Vec<f64>,
}

/// The native tuple: values and (if requested) `∂/∂mean`, `∂/∂std`, `∂/∂log cost`.
type Out<'py> = (
    Bound<'py, PyArray1<f64>>,
    Option<Bound<'py, PyArray1<f64>>>,
    Option<Bound<'py, PyArray1<f64>>>,
    Option<Bound<'py, PyArray1<f64>>>,
);

fn slice<'a>(a: &'a PyReadonlyArray1<'_, f64>, what: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| value_err(format!("{what}: expected a contiguous float64 array")))
}

fn check_finite(xs: &[f64], what: &str) -> PyResult<()> {
    if let Some(i) = xs.iter().position(|v| !v.is_finite()) {
        return Err(value_err(format!("{what}[{i}] = {} is not finite", xs[i])));
    }
    Ok(())
}

/// Evaluates the acquisition `name` at every `(mean[i], std[i])` (with the log-cost summary
/// `(log_cost_mean[i], log_cost_var[i])`, default 0) in maximization convention, or for `pbgi`
/// in minimization convention when `minimize` is true. Returns `(value, d_mean, d_std,
/// d_log_cost)`; the derivatives are `None` unless `grad`.
#[pyfunction]
#[pyo3(signature = (name, mean, std, *, log_cost_mean=None, log_cost_var=None, best_f=None,
                    beta=None, alpha=None, lam=None, convention=None, minimize=false, grad=false))]
#[allow(clippy::too_many_arguments)]
pub fn acquisition_values<'py>(
    py: Python<'py>,
    name: &str,
    mean: PyReadonlyArray1<'py, f64>,
    std: PyReadonlyArray1<'py, f64>,
    log_cost_mean: Option<PyReadonlyArray1<'py, f64>>,
    log_cost_var: Option<PyReadonlyArray1<'py, f64>>,
    best_f: Option<f64>,
    beta: Option<f64>,
    alpha: Option<f64>,
    lam: Option<f64>,
    convention: Option<&str>,
    minimize: bool,
    grad: bool,
) -> PyResult<Out<'py>> {
    let mu = slice(&mean, "mean")?;
    let sd = slice(&std, "std")?;
    let n = mu.len();
    if sd.len() != n {
        return Err(value_err(format!(
            "mean and std must have the same length (got {n} and {})",
            sd.len()
        )));
    }
    let cm = match &log_cost_mean {
        Some(a) => Some(slice(a, "cost")?),
        None => None,
    };
    let cv = match &log_cost_var {
        Some(a) => Some(slice(a, "cost_var")?),
        None => None,
    };
    for (c, what) in [(cm, "cost"), (cv, "cost_var")] {
        if let Some(c) = c
            && c.len() != n
        {
            return Err(value_err(format!(
                "{what} must have the same length as mean ({n}), got {}",
                c.len()
            )));
        }
    }
    let acq_name = AcquisitionName::parse(name).map_err(core_err)?;
    let conv = match convention {
        None | Some("inverse") => CostConvention::Inverse,
        Some("expected") => CostConvention::Expected,
        Some(other) => {
            return Err(value_err(format!(
                "convention must be 'inverse' or 'expected', got {other:?}"
            )));
        }
    };
    let is_pbgi = matches!(acq_name, AcquisitionName::Pbgi | AcquisitionName::PbgiD);
    if minimize && !is_pbgi {
        return Err(value_err(
            "minimize=True is only available for pbgi (negate the mean for the others)",
        ));
    }
    let batch = py.detach(|| -> PyResult<Batch> {
        check_finite(mu, "mean")?;
        if let Some(i) = sd.iter().position(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(value_err(format!(
                "std[{i}] = {} must be finite and >= 0",
                sd[i]
            )));
        }
        let zero_ok = is_pbgi || matches!(acq_name, AcquisitionName::Ucb | AcquisitionName::Lcb);
        if !zero_ok && let Some(i) = sd.iter().position(|s| *s == 0.0) {
            return Err(value_err(format!("std[{i}] = 0: '{name}' needs std > 0")));
        }
        if let Some(c) = cm {
            check_finite(c, "log cost")?;
        }
        if let Some(c) = cv {
            check_finite(c, "cost_var")?;
            if let Some(i) = c.iter().position(|v| *v < 0.0) {
                return Err(value_err(format!("cost_var[{i}] = {} must be >= 0", c[i])));
            }
        }
        let mut b = Batch {
            value: vec![0.0; n],
            d_mean: if grad { vec![0.0; n] } else { Vec::new() },
            d_std: if grad { vec![0.0; n] } else { Vec::new() },
            d_log_cost: if grad { vec![0.0; n] } else { Vec::new() },
        };
        let cost_at = |i: usize| LogCost {
            mean: cm.map_or(0.0, |c| c[i]),
            var: cv.map_or(0.0, |c| c[i]),
        };
        if is_pbgi {
            let lam = lam.ok_or_else(|| value_err("pbgi needs lam > 0"))?;
            if !(lam.is_finite() && lam > 0.0) {
                return Err(value_err(format!("lam must be finite and > 0, got {lam}")));
            }
            let log_lam = lam.ln();
            let index = if minimize { pbgi_index_min } else { pbgi_index };
            for i in 0..n {
                let c = cost_at(i);
                let r = index(mu[i], sd[i], log_lam + c.mean + 0.5 * c.var);
                b.value[i] = r.g;
                if grad {
                    b.d_mean[i] = r.dg_dmu;
                    b.d_std[i] = r.dg_dsigma;
                    b.d_log_cost[i] = r.dg_dlog_lambda_c;
                }
            }
        } else {
            let params = AcquisitionParams {
                best_f,
                beta,
                alpha,
                lambda: lam,
                convention: Some(conv),
                ..AcquisitionParams::default()
            };
            let acq = build_pointwise(acq_name, &params, 1).map_err(core_err)?;
            for i in 0..n {
                let p = acq.eval(mu[i], sd[i], cost_at(i));
                b.value[i] = p.value;
                if grad {
                    b.d_mean[i] = p.d_mu;
                    b.d_std[i] = p.d_sigma;
                    b.d_log_cost[i] = p.d_cost_mean;
                }
            }
        }
        Ok(b)
    })?;
    let arr = |v: Vec<f64>| PyArray1::from_vec(py, v);
    if grad {
        Ok((
            arr(batch.value),
            Some(arr(batch.d_mean)),
            Some(arr(batch.d_std)),
            Some(arr(batch.d_log_cost)),
        ))
    } else {
        Ok((arr(batch.value), None, None, None))
    }
}
