//! The best new configuration: a smooth proxy maximized over the cube, its best end points
//! re-scored by the exact chain index (module doc of [`super`], "The new configuration").

use super::{Pricing, StartCandidate, ThawOptions};
use crate::acquisition::OnModel;
use crate::acquisition::pbgi::Pbgi;
use crate::error::Result;
use crate::gp::learning_curve::LcPosterior;
use crate::optim::multistart::maximize;

/// End points closer than this (largest coordinate difference) count as one candidate.
const SAME_POINT: f64 = 1e-6;

/// Maximizes the proxy, re-scores its `opts.rescore` best distinct end points and returns the
/// one of largest chain index (ties: the better proxy).
pub(super) fn best_new(
    model: &LcPosterior,
    pricing: &Pricing<'_>,
    opts: &ThawOptions,
    seed: u64,
) -> Result<StartCandidate> {
    let schedule = pricing.schedule;
    let whole_run: f64 = schedule.weights.iter().sum();
    let last = schedule.positions[schedule.len() - 1];
    let at_end = model.at_step(Some(last))?;
    let acq = Pbgi {
        lambda: pricing.lambda * whole_run,
    };
    let proxy = match pricing.cost {
        Some(cost) => OnModel::with_cost(&at_end, acq, cost),
        None => OnModel::new(&at_end, acq),
    };
    let result = maximize(&proxy, &opts.multistart, seed)?;
    let mut ends: Vec<(Vec<f64>, f64)> = std::iter::once((result.x, result.value))
        .chain(result.restarts)
        .filter(|(_, v)| v.is_finite())
        .collect();
    ends.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut kept: Vec<(Vec<f64>, f64)> = Vec::with_capacity(opts.rescore);
    for (x, v) in ends {
        if kept.len() == opts.rescore {
            break;
        }
        let seen = kept
            .iter()
            .any(|(y, _)| x.iter().zip(y).all(|(a, b)| (a - b).abs() <= SAME_POINT));
        if !seen {
            kept.push((x, v));
        }
    }
    let mut best: Option<StartCandidate> = None;
    for (x, proxy) in kept {
        let curve = model.predict(&x, None, schedule.positions())?;
        let index = pricing
            .chain(&x, 0, &curve, model, opts, false)?
            .current_index();
        if best.as_ref().is_none_or(|b| index > b.index) {
            best = Some(StartCandidate { x, index, proxy });
        }
    }
    best.ok_or_else(|| {
        crate::error::Error::Numerical("the proxy was not finite at any start".into())
    })
}
