//! Gaussian-process models and pathwise posterior samples on NumPy arrays.
//!
//! Inputs are mapped to `u = (x − lower) / (upper − lower)` here (the bounds given, or the data's
//! bounding box), targets are standardized by [`GpModel`]; predictions and paths come back in raw
//! units.

use crate::error::{core_err, value_err};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pandora_core::gp::fit::{FitOptions, NoiseSpec, Priors};
use pandora_core::gp::{GpModel, GpParams, Kernel, KernelKind, PosteriorPath, Transforms};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A fitted or conditioned GP (the native half of `pandora.GP`).
#[pyclass(module = "pandora._pandora", frozen)]
pub struct NativeGp {
    model: GpModel,
    lower: Vec<f64>,
    range: Vec<f64>,
    d: usize,
    fitted: bool,
}

/// Pathwise posterior samples of a [`NativeGp`] (the native half of `pandora.GP.sample_paths`).
#[pyclass(module = "pandora._pandora", frozen)]
pub struct NativePaths {
    paths: Vec<PosteriorPath>,
    lower: Vec<f64>,
    range: Vec<f64>,
    y_mean: f64,
    y_std: f64,
    d: usize,
}

fn rows<'a>(x: &'a PyReadonlyArray2<'_, f64>, what: &str) -> PyResult<(&'a [f64], usize, usize)> {
    let shape = x.shape();
    let (n, d) = (shape[0], shape[1]);
    let s = x
        .as_slice()
        .map_err(|_| value_err(format!("{what}: expected a C-contiguous float64 array")))?;
    if let Some(i) = s.iter().position(|v| !v.is_finite()) {
        return Err(value_err(format!(
            "{what}[{}, {}] = {} is not finite",
            i / d.max(1),
            i % d.max(1),
            s[i]
        )));
    }
    Ok((s, n, d))
}

fn normalize(x: &[f64], lower: &[f64], range: &[f64]) -> Vec<f64> {
    let d = lower.len();
    let mut u = x.to_vec();
    for row in u.chunks_exact_mut(d) {
        for k in 0..d {
            row[k] = (row[k] - lower[k]) / range[k];
        }
    }
    u
}

/// An array of shape `(rows, cols)` from a row-major vector.
fn matrix<'py>(
    py: Python<'py>,
    v: Vec<f64>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
    PyArray1::from_vec(py, v).reshape([rows, cols])
}

#[pymethods]
impl NativeGp {
    /// Fits the hyperparameters (maximum a posteriori under the papers' priors, or maximum
    /// likelihood with `priors=False`) to `x` (n × d) and `y` (n).
    #[staticmethod]
    #[pyo3(signature = (x, y, kernel, lower=None, upper=None, standardize=true, noise=Some(1e-4),
                        ard=true, priors=true, restarts=1, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        kernel: &str,
        lower: Option<Vec<f64>>,
        upper: Option<Vec<f64>>,
        standardize: bool,
        noise: Option<f64>,
        ard: bool,
        priors: bool,
        restarts: usize,
        seed: u64,
    ) -> PyResult<Self> {
        let (xs, n, d) = rows(&x, "X")?;
        let ys = y
            .as_slice()
            .map_err(|_| value_err("y: expected a contiguous float64 array"))?;
        if ys.len() != n {
            return Err(value_err(format!(
                "X has {n} rows but y has {} values",
                ys.len()
            )));
        }
        if n == 0 || d == 0 {
            return Err(value_err("fit needs at least one point and one dimension"));
        }
        if let Some(i) = ys.iter().position(|v| !v.is_finite()) {
            return Err(value_err(format!("y[{i}] = {} is not finite", ys[i])));
        }
        let kind = KernelKind::parse(kernel).map_err(core_err)?;
        let noise = match noise {
            Some(v) if v.is_finite() && v >= 0.0 => NoiseSpec::Fixed(v),
            Some(v) => return Err(value_err(format!("noise must be finite and >= 0, got {v}"))),
            None => NoiseSpec::Learned { floor: 1e-6 },
        };
        let (lower, range) = bounds(xs, d, lower, upper)?;
        py.detach(move || {
            let u = normalize(xs, &lower, &range);
            let opts = FitOptions {
                kind,
                ard,
                priors: if priors {
                    Priors::papers()
                } else {
                    Priors::none()
                },
                noise,
                restarts,
                seed,
                ..FitOptions::default()
            };
            let t = Transforms {
                normalize_inputs: None,
                standardize_outcomes: standardize,
                output_scale: None,
            };
            let model = GpModel::fit(&u, ys, d, &t, &opts, None).map_err(core_err)?;
            Ok(Self {
                model,
                lower,
                range,
                d,
                fitted: true,
            })
        })
    }

    /// Conditions a GP with the given hyperparameters on `x`, `y` (no fitting, no transforms:
    /// exactly the model of `pandora eval`). `x` may have zero rows (the prior).
    #[staticmethod]
    #[pyo3(signature = (x, y, kernel, lengthscales, outputscale=1.0, noise=0.0, mean=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn condition(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        kernel: &str,
        lengthscales: Vec<f64>,
        outputscale: f64,
        noise: f64,
        mean: f64,
    ) -> PyResult<Self> {
        let (xs, n, d) = rows(&x, "X")?;
        let ys = y
            .as_slice()
            .map_err(|_| value_err("y: expected a contiguous float64 array"))?;
        if ys.len() != n {
            return Err(value_err(format!(
                "X has {n} rows but y has {} values",
                ys.len()
            )));
        }
        if let Some(i) = ys.iter().position(|v| !v.is_finite()) {
            return Err(value_err(format!("y[{i}] = {} is not finite", ys[i])));
        }
        let kind = KernelKind::parse(kernel).map_err(core_err)?;
        let ls = if lengthscales.len() == 1 && d > 1 {
            vec![lengthscales[0]; d]
        } else {
            lengthscales
        };
        if ls.len() != d {
            return Err(value_err(format!(
                "lengthscales: expected 1 or {d} values, got {}",
                ls.len()
            )));
        }
        if !(mean.is_finite()) {
            return Err(value_err(format!("mean must be finite, got {mean}")));
        }
        let kernel = Kernel::new(kind, ls, outputscale).map_err(core_err)?;
        let params = GpParams {
            kernel,
            mean,
            noise,
        };
        py.detach(move || {
            let model = GpModel::with_params(xs, ys, d, &Transforms::default(), params)
                .map_err(core_err)?;
            Ok(Self {
                model,
                lower: vec![0.0; d],
                range: vec![1.0; d],
                d,
                fitted: false,
            })
        })
    }

    /// Input dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.d
    }

    /// Latent posterior `(mean, std)` at the rows of `x`, and with `grad` also `∂mean/∂x`,
    /// `∂std/∂x` (m × d each).
    #[pyo3(signature = (x, grad=false))]
    #[allow(clippy::type_complexity)]
    fn posterior<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        grad: bool,
    ) -> PyResult<(
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<f64>>,
        Option<Bound<'py, numpy::PyArray2<f64>>>,
        Option<Bound<'py, numpy::PyArray2<f64>>>,
    )> {
        let (xs, m, d) = rows(&x, "X")?;
        if d != self.d {
            return Err(value_err(format!(
                "X has {d} columns but the model has dimension {}",
                self.d
            )));
        }
        let post = py.detach(|| {
            let u = normalize(xs, &self.lower, &self.range);
            let mut p = self.model.posterior(&u, grad).map_err(core_err)?;
            for (i, g) in p.mean_grad.iter_mut().enumerate() {
                *g /= self.range[i % d];
            }
            for (i, g) in p.var_grad.iter_mut().enumerate() {
                *g /= self.range[i % d];
            }
            PyResult::Ok(p)
        })?;
        let std = post.std();
        if grad {
            let sg = post.std_grad();
            Ok((
                PyArray1::from_vec(py, post.mean),
                PyArray1::from_vec(py, std),
                Some(matrix(py, post.mean_grad, m, d)?),
                Some(matrix(py, sg, m, d)?),
            ))
        } else {
            Ok((
                PyArray1::from_vec(py, post.mean),
                PyArray1::from_vec(py, std),
                None,
                None,
            ))
        }
    }

    /// The hyperparameters (internal units: lengthscales of the normalized inputs, outputscale,
    /// mean and noise of the standardized targets) and the transforms.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.model.params();
        let (y_mean, y_std) = self.model.outcome_scale();
        let out = PyDict::new(py);
        out.set_item("kernel", p.kernel.kind.name())?;
        out.set_item("lengthscales", p.kernel.lengthscales.clone())?;
        out.set_item("outputscale", p.kernel.outputscale)?;
        out.set_item("mean", p.mean)?;
        out.set_item("noise", p.noise)?;
        out.set_item("y_mean", y_mean)?;
        out.set_item("y_std", y_std)?;
        out.set_item("lower", self.lower.clone())?;
        out.set_item(
            "upper",
            self.lower
                .iter()
                .zip(&self.range)
                .map(|(l, r)| l + r)
                .collect::<Vec<_>>(),
        )?;
        out.set_item("fitted", self.fitted)?;
        if let Some(s) = self.model.fit_summary() {
            out.set_item("log_marginal_likelihood", s.log_marginal_likelihood)?;
        }
        Ok(out)
    }

    /// Draws `n` independent pathwise posterior samples (random Fourier features for the prior,
    /// Matheron's update for the data), seeded.
    #[pyo3(signature = (n, seed=0, num_features=1024))]
    fn sample_paths(
        &self,
        py: Python<'_>,
        n: usize,
        seed: u64,
        num_features: usize,
    ) -> PyResult<NativePaths> {
        if n == 0 {
            return Err(value_err("n must be >= 1"));
        }
        let (y_mean, y_std) = self.model.outcome_scale();
        py.detach(|| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let paths = (0..n)
                .map(|_| PosteriorPath::sample(self.model.inner(), num_features, &mut rng))
                .collect::<Result<Vec<_>, _>>()
                .map_err(core_err)?;
            Ok(NativePaths {
                paths,
                lower: self.lower.clone(),
                range: self.range.clone(),
                y_mean,
                y_std,
                d: self.d,
            })
        })
    }
}

#[pymethods]
impl NativePaths {
    /// Number of paths.
    fn __len__(&self) -> usize {
        self.paths.len()
    }

    /// Input dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.d
    }

    /// Values of every path at the rows of `x`: an array of shape `(paths, m)`.
    fn values<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
        let (xs, m, d) = rows(&x, "X")?;
        if d != self.d {
            return Err(value_err(format!(
                "X has {d} columns but the paths have dimension {}",
                self.d
            )));
        }
        let k = self.paths.len();
        let out = py.detach(|| {
            let u = normalize(xs, &self.lower, &self.range);
            let mut out = vec![0.0; k * m];
            for (p, o) in self.paths.iter().zip(out.chunks_exact_mut(m.max(1))) {
                p.values(&u, &mut o[..m]).map_err(core_err)?;
                for v in o.iter_mut() {
                    *v = self.y_mean + self.y_std * *v;
                }
            }
            PyResult::Ok(out)
        })?;
        matrix(py, out, k, m)
    }
}

/// The normalization `(lower, range)`: the given bounds, or the data's bounding box (a degenerate
/// dimension gets range 1).
fn bounds(
    x: &[f64],
    d: usize,
    lower: Option<Vec<f64>>,
    upper: Option<Vec<f64>>,
) -> PyResult<(Vec<f64>, Vec<f64>)> {
    match (lower, upper) {
        (Some(lo), Some(hi)) => {
            if lo.len() != d || hi.len() != d {
                return Err(value_err(format!(
                    "bounds: expected {d} lower and upper values, got {} and {}",
                    lo.len(),
                    hi.len()
                )));
            }
            let mut range = Vec::with_capacity(d);
            for k in 0..d {
                let r = hi[k] - lo[k];
                if !(lo[k].is_finite() && hi[k].is_finite() && r > 0.0) {
                    return Err(value_err(format!(
                        "bounds: need finite lower < upper in dimension {k}, got [{}, {}]",
                        lo[k], hi[k]
                    )));
                }
                range.push(r);
            }
            Ok((lo, range))
        }
        (None, None) => {
            let mut lo = vec![f64::INFINITY; d];
            let mut hi = vec![f64::NEG_INFINITY; d];
            for row in x.chunks_exact(d) {
                for k in 0..d {
                    lo[k] = lo[k].min(row[k]);
                    hi[k] = hi[k].max(row[k]);
                }
            }
            let range = (0..d)
                .map(|k| {
                    let r = hi[k] - lo[k];
                    if r.is_finite() && r > 0.0 { r } else { 1.0 }
                })
                .collect();
            let lo = lo
                .into_iter()
                .map(|v| if v.is_finite() { v } else { 0.0 })
                .collect();
            Ok((lo, range))
        }
        _ => Err(value_err("bounds: give both lower and upper, or neither")),
    }
}
