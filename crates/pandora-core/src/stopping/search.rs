//! Maximization of a pointwise statistic ([`maximize_pointwise`]) and of a posterior or prior
//! sample path ([`path_maximum`]; PRB and the automatic λ's `U`) over the points a run can
//! propose, shared by the rules: the candidates, or the unit cube restricted to the valid points
//! of the run's [`MixedSpace`] (categorical one-hot blocks, discrete grids).

use super::{Candidates, OptimizerConfig, RunState};
use crate::acquisition::{OnModel, PointwiseAcquisition};
use crate::error::Result;
use crate::gp::GpModel;
use crate::optim::mixed::{MixedSpace, maximize_mixed};
use crate::optim::multistart::{MultiStartOptions, Objective, maximize, maximize_discrete};

/// Rows of `points` that are not (to within `1e-12` per coordinate) an observed point.
pub(crate) fn unevaluated(points: &[f64], observed: &[f64], d: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(points.len());
    for p in points.chunks_exact(d) {
        let seen = observed
            .chunks_exact(d)
            .any(|o| o.iter().zip(p).all(|(a, b)| (a - b).abs() <= 1e-12));
        if !seen {
            out.extend_from_slice(p);
        }
    }
    out
}

/// `max_x a(x)` of a pointwise acquisition on `model` (with the run's cost model): multi-start
/// L-BFGS-B on `[0,1]^d` (on its valid points only when the run has a mixed
/// [`RunState::space`]) plus the extra candidates, or only the candidates when they are
/// exclusive, then without the evaluated ones if `exclude_evaluated` (`−∞` if every candidate has
/// been evaluated). Returns the value and the point.
pub(crate) fn maximize_pointwise<A: PointwiseAcquisition>(
    state: &RunState<'_>,
    model: &GpModel,
    acq: A,
    opt: &OptimizerConfig,
    seed: u64,
    exclude_evaluated: bool,
) -> Result<(f64, Vec<f64>)> {
    let d = state.d;
    state.cost_info.with_model(|cost| {
        let obj = match cost {
            Some(c) => OnModel::with_cost(model, acq, c),
            None => OnModel::new(model, acq),
        };
        match state.candidates {
            Some(Candidates {
                points,
                exclusive: true,
            }) => {
                let open = if exclude_evaluated {
                    unevaluated(points, state.x, d)
                } else {
                    points.to_vec()
                };
                if open.is_empty() {
                    return Ok((f64::NEG_INFINITY, Vec::new()));
                }
                let (i, v) = maximize_discrete(&obj, &open)?;
                Ok((v, open[i * d..(i + 1) * d].to_vec()))
            }
            extra => {
                let r = match state.space {
                    Some(s) if !s.is_continuous() => {
                        maximize_mixed(&obj, s, &opt.multistart(), seed)?
                    }
                    _ => maximize(&obj, &opt.multistart(), seed)?,
                };
                let mut best = (r.value, r.x);
                if let Some(c) = extra {
                    let (i, v) = maximize_discrete(&obj, c.points)?;
                    if v > best.0 {
                        best = (v, c.points[i * d..(i + 1) * d].to_vec());
                    }
                }
                Ok(best)
            }
        }
    })
}

/// An objective on a model's internal coordinates (a sample path) seen on the unit cube:
/// `x ↦ obj(a + b ⊙ x)` with `a = to_internal(0)` and `b = to_internal(1) − a` (the model's
/// input transform is affine per coordinate), gradient `b ⊙ ∇obj`. The mixed search works on the
/// unit cube, where the one-hot blocks and the grids of a [`MixedSpace`] are defined.
struct OnUnitCube<'a> {
    inner: &'a dyn Objective,
    offset: Vec<f64>,
    slope: Vec<f64>,
}

impl OnUnitCube<'_> {
    fn internal(&self, xs: &[f64]) -> Vec<f64> {
        let d = self.offset.len();
        xs.iter()
            .enumerate()
            .map(|(i, x)| self.offset[i % d] + self.slope[i % d] * x)
            .collect()
    }
}

impl Objective for OnUnitCube<'_> {
    fn dim(&self) -> usize {
        self.offset.len()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let v = self.inner.value_grad(&self.internal(x), grad);
        for (g, b) in grad.iter_mut().zip(&self.slope) {
            *g *= b;
        }
        v
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        self.inner.values(&self.internal(xs), out);
    }
}

/// Where a sample path is maximized: the candidates in the model's internal coordinates (with
/// whether they are exclusive), the valid points of the run's space, and the multi-start
/// settings.
pub(crate) struct PathDomain<'a> {
    /// Candidate points (internal coordinates, row-major) and whether they are the only points.
    pub candidates: Option<(Vec<f64>, bool)>,
    /// The run's valid points (on the unit cube); `None` or all-continuous: the whole cube.
    pub space: Option<&'a MixedSpace>,
    /// Raw samples and restarts (the bounds are set here).
    pub multistart: MultiStartOptions,
}

/// The maximum of a sample path `obj` (on `model`'s internal coordinates) over the points the run
/// can propose: only the candidates when they are exclusive; otherwise the unit cube, restricted
/// to the valid points of a mixed space ([`maximize_mixed`] on the cube through
/// [`OnUnitCube`]), together with the extra candidates. On an all-continuous space this is
/// multi-start L-BFGS-B on the image of the cube, as before.
pub(crate) fn path_maximum(
    obj: &dyn Objective,
    model: &GpModel,
    domain: &PathDomain<'_>,
    seed: u64,
) -> Result<f64> {
    let d = obj.dim();
    if let Some((pts, true)) = &domain.candidates {
        return Ok(maximize_discrete(obj, pts)?.1);
    }
    let lower = model.to_internal(&vec![0.0; d])?;
    let upper = model.to_internal(&vec![1.0; d])?;
    let mut max = match domain.space {
        Some(s) if !s.is_continuous() => {
            let slope = upper.iter().zip(&lower).map(|(u, l)| u - l).collect();
            let on_cube = OnUnitCube {
                inner: obj,
                offset: lower,
                slope,
            };
            maximize_mixed(&on_cube, s, &domain.multistart, seed)?.value
        }
        _ => {
            let mut ms = domain.multistart.clone();
            ms.lower = Some(lower);
            ms.upper = Some(upper);
            maximize(obj, &ms, seed)?.value
        }
    };
    if let Some((pts, _)) = &domain.candidates {
        max = max.max(maximize_discrete(obj, pts)?.1);
    }
    Ok(max)
}
