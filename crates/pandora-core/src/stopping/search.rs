//! Maximization of a pointwise statistic over the search space, shared by the rules.

use super::{Candidates, OptimizerConfig, RunState};
use crate::acquisition::{OnModel, PointwiseAcquisition};
use crate::error::Result;
use crate::gp::GpModel;
use crate::optim::mixed::maximize_mixed;
use crate::optim::multistart::{maximize, maximize_discrete};

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
