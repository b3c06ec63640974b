//! PRB, the probabilistic regret bound (Wilson 2024): stop when the incumbent `x̂` (the best
//! observed point) is `ε`-optimal with posterior probability at least `1 − δ`,
//!
//! ```text
//! P̂ = (1/S) Σ_s 1[max_x f_s(x) − f_s(x̂) ≤ ε] ≥ 1 − δ,
//! ```
//!
//! estimated from `S` pathwise posterior samples `f_s` (random Fourier features + Matheron's
//! update, [`PosteriorPath`]). The sample size follows the reference schedule: `S = 64` at the
//! first check, then `S ← min(⌈1.5 S⌉, 1000)` after every check. Defaults `ε = 0.05`,
//! `δ = 0.05` (the paper's stated values; the reference code used `ε = 0.1` for its synthetic
//! problems). Each path is maximized over exactly the points the run can propose: multi-start
//! L-BFGS-B on `[0,1]^d`, restricted to the valid points of the run's [`RunState::space`] when it
//! has categorical or discrete parameters ([`crate::optim::maximize_mixed`]: the relaxed cube's
//! maximum lies between the one-hot vertices, where no trial can be, and would make every regret
//! too large), plus the candidates (exclusive candidate sets are searched exhaustively); the
//! posterior is the one on all data.

use super::optimizer::OptimizerConfig;
use super::search::{PathDomain, path_maximum};
use super::{
    Candidates, Comparison, Decision, Guard, GuardState, RunState, Statistic, StoppingRule,
    check_positive, decide,
};
use crate::acquisition::ThompsonSample;
use crate::error::{Error, Result};
use crate::gp::paths::PosteriorPath;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// The sample-size schedule of PRB.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleSchedule {
    /// Samples at the first check (default 64).
    pub initial: usize,
    /// Growth factor after every check (default 1.5).
    pub growth: f64,
    /// Cap (default 1000).
    pub max: usize,
}

impl Default for SampleSchedule {
    fn default() -> Self {
        Self {
            initial: 64,
            growth: 1.5,
            max: 1000,
        }
    }
}

impl SampleSchedule {
    /// The sample size after `s`: `min(⌈growth·s⌉, max)`.
    pub fn next(&self, s: usize) -> usize {
        ((s as f64 * self.growth).ceil() as usize).min(self.max)
    }
}

/// The PRB rule (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct Prb {
    epsilon: f64,
    delta: f64,
    schedule: SampleSchedule,
    num_features: usize,
    guard: Guard,
    optimizer: OptimizerConfig,
    samples: usize,
    state: GuardState,
}

impl Prb {
    /// The rule with tolerance `epsilon > 0`, confidence `1 − delta` (`0 < delta < 1`), the given
    /// sample schedule and `num_features` random Fourier features per path.
    pub fn new(
        epsilon: f64,
        delta: f64,
        schedule: SampleSchedule,
        num_features: usize,
        guard: Guard,
        optimizer: OptimizerConfig,
    ) -> Result<Self> {
        check_positive("prb epsilon", epsilon)?;
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::invalid(
                "prb delta",
                format!("must be in (0, 1), got {delta}"),
            ));
        }
        if schedule.initial == 0
            || schedule.max < schedule.initial
            || schedule.growth.is_nan()
            || schedule.growth < 1.0
        {
            return Err(Error::invalid(
                "prb schedule",
                "needs initial >= 1, max >= initial and growth >= 1",
            ));
        }
        Ok(Self {
            epsilon,
            delta,
            schedule,
            num_features,
            guard,
            optimizer,
            samples: schedule.initial,
            state: GuardState::default(),
        })
    }

    /// The number of samples the next check will draw.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The simple regrets `max_x f_s(x) − f_s(x̂)` (objective units) of `samples` posterior paths.
    pub fn sample_regrets(&self, state: &RunState<'_>, samples: usize) -> Result<Vec<f64>> {
        let model = state.require_model(self.name())?;
        let d = state.d;
        let inner = model.inner();
        let y_std = model.outcome_scale().1;
        let a = state.incumbent().0;
        let x_hat = model.to_internal(&state.x[a * d..(a + 1) * d])?;
        let candidates = match state.candidates {
            Some(Candidates { points, exclusive }) => Some((model.to_internal(points)?, exclusive)),
            None => None,
        };
        let domain = PathDomain {
            candidates,
            space: state.space,
            multistart: self.optimizer.multistart_or(d, 100 * d, 2),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(state.seed ^ 0x7072_6200);
        let mut out = Vec::with_capacity(samples);
        for s in 0..samples {
            let path = PosteriorPath::sample(inner, self.num_features, &mut rng)?;
            let at_hat = path.value(&x_hat);
            let ts = ThompsonSample { path };
            let max = path_maximum(&ts, model, &domain, state.seed.wrapping_add(s as u64))?;
            out.push((y_std * (max - at_hat)).max(0.0));
        }
        Ok(out)
    }

    /// Like [`Prb::sample_regrets`], but faster on a fixed point set: `samples` posterior paths
    /// sharing one frequency draw ([`PosteriorPath::sample_batch`]; each path has its own weights
    /// and noise) are evaluated together on `points` (row-major, on the unit cube) plus the
    /// incumbent, and each path's maximum is taken over those points
    /// ([`PosteriorPath::values_many`]). On a fine grid of a low-dimensional space this is an
    /// exhaustive search (the reference code's 1-D protocol); the continuous maximum is
    /// under-estimated by at most the grid's resolution.
    pub fn sample_regrets_on_points(
        &self,
        state: &RunState<'_>,
        samples: usize,
        points: &[f64],
    ) -> Result<Vec<f64>> {
        let model = state.require_model(self.name())?;
        let d = state.d;
        if points.is_empty() || !points.len().is_multiple_of(d) {
            return Err(Error::invalid(
                "prb points",
                "must be a non-empty row-major m x d array",
            ));
        }
        let a = state.incumbent().0;
        let mut pts = model.to_internal(points)?;
        pts.extend(model.to_internal(&state.x[a * d..(a + 1) * d])?);
        let m = pts.len() / d;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(state.seed ^ 0x7072_6200);
        let paths =
            PosteriorPath::sample_batch(model.inner(), self.num_features, samples, &mut rng)?;
        let values = PosteriorPath::values_many(&paths, &pts)?;
        let y_std = model.outcome_scale().1;
        Ok(values
            .chunks_exact(m)
            .map(|v| {
                let at_hat = v[m - 1];
                let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (y_std * (max - at_hat)).max(0.0)
            })
            .collect())
    }
}

impl StoppingRule for Prb {
    fn name(&self) -> &'static str {
        "prb"
    }

    fn check(&mut self, state: &RunState<'_>) -> Result<Decision> {
        state.validate()?;
        let value = match state.supplied.prb {
            Some(v) => v,
            None => {
                let r = self.sample_regrets(state, self.samples)?;
                r.iter().filter(|&&v| v <= self.epsilon).count() as f64 / r.len() as f64
            }
        };
        self.samples = self.schedule.next(self.samples);
        let threshold = 1.0 - self.delta;
        let stats = vec![Statistic::new(
            "prob_regret_below_epsilon",
            value,
            threshold,
            Comparison::AtLeast,
        )];
        Ok(decide(
            self.name(),
            &self.guard,
            &mut self.state,
            state.iteration(),
            stats,
            value >= threshold,
        ))
    }

    fn reset(&mut self) {
        self.samples = self.schedule.initial;
        self.state = GuardState::default();
    }
}
