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
//! [`runners_up`] keeps, next to the maximizer, the best few other points the multi-start search
//! scored: the restarts' end points (local optima) and the best raw samples
//! ([`MultiStartResult::raw_top`]; a mixed space's local search sweeps the categories, so its
//! restarts often all end at the maximizer), with a finite value, best first, each at least
//! [`PENDING_EXCLUSION_RADIUS`] from the maximizer and from every one kept before it (greedy; at
//! most [`RUNNERS_UP`]). They cost no evaluation (the values are known), and they do not change
//! the maximizer. A caller that decided on a snapshot and
//! finds its point taken by another worker at the claim takes the best runner-up that is not
//! (`pandora-study`'s claim): a point the maximization found on the same model, with the other
//! worker's point excluded but not fantasized.
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

/// How many runner-up local optima [`runners_up`] keeps at most.
pub const RUNNERS_UP: usize = 7;

/// A local optimum of a maximization other than the maximizer ([`runners_up`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The point (the proposal's `d` coordinates).
    pub x: Vec<f64>,
    /// The objective's value there.
    pub value: f64,
}

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

/// The best scored points of `r` apart from its maximizer (see the module docs): the first `d`
/// coordinates of the restarts' end points and of the best raw samples with a finite value,
/// best first (ties: restarts first, in start order), each at least [`PENDING_EXCLUSION_RADIUS`]
/// from `r.x` and from those kept before it; at most [`RUNNERS_UP`].
pub fn runners_up(r: &MultiStartResult, d: usize) -> Vec<Candidate> {
    let mut ends: Vec<(&[f64], f64)> = (r.restarts.iter().chain(&r.raw_top))
        .filter(|(x, v)| v.is_finite() && x.len() >= d && r.x.len() >= d)
        .map(|(x, v)| (&x[..d], *v))
        .collect();
    ends.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut kept: Vec<Candidate> = Vec::new();
    for (x, value) in ends {
        if kept.len() == RUNNERS_UP {
            break;
        }
        let close = |y: &[f64]| near_pending(x, y);
        if close(&r.x[..d]) || kept.iter().any(|c| close(&c.x)) {
            continue;
        }
        kept.push(Candidate {
            x: x.to_vec(),
            value,
        });
    }
    kept
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `cos(6πx)` on [0, 1] plus a small tilt: local maxima near 0, 1/3, 2/3 and 1, the best at 1.
    struct Wavy;

    impl Objective for Wavy {
        fn dim(&self) -> usize {
            1
        }

        fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
            let w = 6.0 * std::f64::consts::PI;
            grad[0] = -w * (w * x[0]).sin() + 0.1;
            (w * x[0]).cos() + 0.1 * x[0]
        }
    }

    #[test]
    fn runners_up_are_the_other_local_optima_best_first_and_apart() {
        let ms = MultiStartOptions {
            raw_samples: Some(64),
            num_restarts: Some(12),
            ..MultiStartOptions::default()
        };
        let r = maximize_in(&Wavy, 1, Domain::default(), &ms, 3).unwrap();
        assert!((r.x[0] - 1.0).abs() < 1e-6, "{:?}", r.x);
        let ups = runners_up(&r, 1);
        let xs: Vec<f64> = ups.iter().map(|c| (c.x[0] * 3.0).round() / 3.0).collect();
        // The three other local maxima first (raw samples near them score less), then raw samples.
        assert_eq!(xs[..3], [2.0 / 3.0, 1.0 / 3.0, 0.0], "{ups:?}");
        assert!(ups.len() <= RUNNERS_UP);
        for (i, c) in ups.iter().enumerate() {
            assert!(!near_pending(&c.x, &r.x), "{ups:?}");
            assert!(
                ups[..i].iter().all(|b| !near_pending(&c.x, &b.x)),
                "{ups:?}"
            );
        }
        assert!(ups.windows(2).all(|w| w[0].value >= w[1].value));
        assert!(ups.iter().all(|c| c.value <= r.value));
        // With a point pending at the maximizer, it and its ball are left out.
        let pending = [1.0];
        let domain = Domain {
            space: None,
            pending: &pending,
        };
        let r = maximize_in(&Wavy, 1, domain, &ms, 3).unwrap();
        let ups = runners_up(&r, 1);
        // The tilt moves the local maximum by 0.1 / (6π)² ≈ 3e-4.
        assert!((r.x[0] - 2.0 / 3.0).abs() < 1e-3, "{:?}", r.x);
        assert!(ups.iter().all(|c| !near_pending(&c.x, &pending)), "{ups:?}");
    }
}
