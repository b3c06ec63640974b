//! # pandora-core
//!
//! The numerical core of Pandora, a cost-aware Bayesian optimization engine. Pure numerics, no I/O:
//! everything random takes an explicit seeded RNG and every routine works in `f64`.
//!
//! Modules, in the order data flows through them:
//! - [`math`]: the standard normal distribution and log-space helpers, accurate far in the tails.
//! - [`linalg`]: Cholesky factors with jitter escalation and O(n²) appends, triangular solves.
//! - [`gp`]: kernels, the exact Gaussian-process posterior, hyperparameter fitting, pathwise samples.
//! - [`acquisition`]: acquisition functions with exact gradients (maximization convention), the
//!   registry of names and each acquisition's step recipe (`Acquirer`).
//! - [`optim`]: bounded L-BFGS-B, scrambled Sobol points and multi-start maximization on `[0,1]^d`.
//! - [`policy`]: one BO step: initial design, fit, the acquisition's step, proposal.
//! - [`run`]: the typed records a BO loop keeps (decisions, study state), why it finished, and
//!   PBGI-D's λ replayed from them; the policy configuration (`run::spec::PolicySpec`) shared by
//!   studies, experiments and Python.
//! - [`freeze_thaw`]: the cost-aware freeze-thaw policy (continue, start or stop training runs by
//!   Gittins indices over a learning-curve GP; the exact theory is [`gittins::freeze_thaw`]).

pub mod acquisition;
pub mod cvs;
pub mod error;
pub mod freeze_thaw;
pub mod gittins;
pub mod gp;
pub mod linalg;
pub mod math;
pub mod optim;
pub mod policy;
pub mod run;
pub mod stopping;

pub use error::{Error, Result};
