//! Where a BO step may propose: the valid points of a mixed space, away from pending points.
//!
//! ## Definition
//!
//! A [`Domain`] is the set of points a step may hand out: the valid points of a [`MixedSpace`]
//! (one-hot blocks of categorical parameters, grids of int and ordinal ones; the whole cube
//! `[0,1]^d` without one), minus the open balls of radius [`PENDING_EXCLUSION_RADIUS`] around
//! the points handed out but not evaluated yet.
//!
//! ## Algorithm
//!
//! [`maximize_in`] maximizes an objective whose first `d` coordinates are the proposal (the rest,
//! such as the look-ahead points of a scenario tree, are free and continuous): over the valid
//! points with [`maximize_mixed`] (the first `d` coordinates constrained), otherwise with
//! [`maximize`]. The exclusion wraps the objective: inside a ball its value is `-∞`, which the
//! multi-start optimizer treats as outside the domain. Every point the mixed search scores is
//! valid, so the exclusion holds between projected points.
//!
//! ## Degenerate cases
//!
//! - No pending point and no (or an all-continuous) space: exactly [`maximize`], the
//!   continuous code path.
//! - Every candidate inside the excluded balls (pending points covering the cube): the
//!   maximization is run again without the exclusion, so a step is never blocked.
//!
//! The fantasies of the pending points already make the model expect the pending outcomes
//! there, but an index such as PBGI's stays near the posterior mean at a fantasized point and can
//! remain the largest (seen at a cheap corner), so without the exclusion a second worker would
//! receive the same point.

use super::mixed::{MixedSpace, maximize_mixed};
use super::multistart::{MultiStartOptions, MultiStartResult, Objective, maximize};
use crate::error::Result;

/// Euclidean radius (on the unit cube) around each pending point inside which a model step does
/// not propose (see the module docs).
pub const PENDING_EXCLUSION_RADIUS: f64 = 0.1;

/// Where a step may propose: the valid points of `space` (the whole cube if `None`), away from
/// the `pending` points (row-major, `d` coordinates each).
#[derive(Debug, Clone, Copy, Default)]
pub struct Domain<'a> {
    /// The valid points.
    pub space: Option<&'a MixedSpace>,
    /// Points handed out but not evaluated yet.
    pub pending: &'a [f64],
}

impl<'a> Domain<'a> {
    /// The space if it is not all-continuous.
    pub fn mixed(&self) -> Option<&'a MixedSpace> {
        self.space.filter(|s| !s.is_continuous())
    }

    /// The same valid points without the pending-point exclusion.
    pub fn without_pending(self) -> Self {
        Domain {
            pending: &[],
            ..self
        }
    }
}

/// Whether `x` lies within [`PENDING_EXCLUSION_RADIUS`] of a pending point.
pub fn near_pending(x: &[f64], pending: &[f64]) -> bool {
    let r2 = PENDING_EXCLUSION_RADIUS * PENDING_EXCLUSION_RADIUS;
    pending
        .chunks_exact(x.len())
        .any(|p| p.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() < r2)
}

/// An objective restricted to points at least `radius` away from every pending point: inside a
/// ball its value is `-∞`. Only the first `d` coordinates (the proposal) count.
struct AwayFromPending<'a> {
    inner: &'a dyn Objective,
    pending: &'a [f64],
    radius: f64,
    d: usize,
}

impl AwayFromPending<'_> {
    fn excluded(&self, x: &[f64]) -> bool {
        let r2 = self.radius * self.radius;
        self.pending
            .chunks_exact(self.d)
            .any(|p| p.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() < r2)
    }
}

impl Objective for AwayFromPending<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if self.excluded(x) {
            grad.fill(0.0);
            return f64::NEG_INFINITY;
        }
        self.inner.value_grad(x, grad)
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        self.inner.values(xs, out);
        let d = self.dim();
        for (x, o) in xs.chunks_exact(d).zip(out.iter_mut()) {
            if self.excluded(x) {
                *o = f64::NEG_INFINITY;
            }
        }
    }
}

/// Maximizes `obj`, whose first `d` coordinates are the proposal, over the `domain` (see the
/// module docs): the valid points of its space, away from the pending points; without the
/// exclusion if every candidate lies inside it.
pub fn maximize_in(
    obj: &dyn Objective,
    d: usize,
    domain: Domain<'_>,
    ms: &MultiStartOptions,
    seed: u64,
) -> Result<MultiStartResult> {
    let lifted = domain.mixed().map(|s| s.extended(obj.dim()));
    let run = |o: &dyn Objective| match &lifted {
        Some(s) => maximize_mixed(o, s, ms, seed),
        None => maximize(o, ms, seed),
    };
    if domain.pending.is_empty() {
        return run(obj);
    }
    let away = AwayFromPending {
        inner: obj,
        pending: domain.pending,
        radius: PENDING_EXCLUSION_RADIUS,
        d,
    };
    match run(&away) {
        Ok(r) if r.value.is_finite() => Ok(r),
        _ => run(obj),
    }
}
