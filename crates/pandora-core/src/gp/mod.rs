//! Gaussian processes: kernels, the exact posterior, hyperparameter fitting and pathwise samples.

pub mod kernel;
pub mod model;
pub mod paths;

pub use kernel::{Kernel, KernelKind};
pub use model::{ExactGp, GpParams, PosteriorBatch};
pub use paths::{PosteriorPath, PriorPath};
