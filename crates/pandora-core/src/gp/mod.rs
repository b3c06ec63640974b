//! Gaussian processes: kernels, the exact posterior, hyperparameter fitting, transforms and
//! pathwise samples.

pub mod fit;
pub mod gp_model;
pub mod kernel;
pub mod learning_curve;
pub mod likelihood;
pub mod model;
pub mod paths;
pub mod transform;

pub use gp_model::{FitSummary, GpModel, WarmOutcome};
pub use kernel::{Kernel, KernelKind};
pub use learning_curve::{LcPosterior, LearningCurveGp};
pub use model::{ExactGp, GpParams, PairPosterior, PosteriorBatch};
pub use paths::{PosteriorPath, PriorPath};
pub use transform::{OutputScale, Transforms};

use crate::error::Result;

/// A model that gives the latent posterior mean and variance (and their input gradients) at a
/// batch of points. Acquisition functions are written against this trait.
pub trait Posterior: Sync {
    /// Input dimension.
    fn dim(&self) -> usize;
    /// Posterior at the rows of `xs` (row-major `m × d`), with gradients if `grad`.
    fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch>;
    /// Whether a block of points costs much less than its points one at a time (an exact GP
    /// with many training points: its per-point work is matrix–vector products with the `n × n`
    /// factor, which a block turns into matrix–matrix products). Default `false`.
    fn prefers_blocks(&self) -> bool {
        false
    }
}

impl Posterior for ExactGp {
    fn dim(&self) -> usize {
        ExactGp::dim(self)
    }
    fn posterior(&self, xs: &[f64], grad: bool) -> Result<PosteriorBatch> {
        ExactGp::posterior(self, xs, grad)
    }
    fn prefers_blocks(&self) -> bool {
        self.n() >= model::BLOCKS_FROM_N
    }
}
