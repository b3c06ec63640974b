//! # pandora-problems
//!
//! Test functions on the unit cube `[0,1]^d`, maximized, with the scalings of the PBGI paper
//! (BoTorch definitions negated so that the optimum value is 0), the budgeted-MSEI paper's
//! Dropwave, Alpine1 and Shekel5, Hartmann-3/6 and Branin ([`synthetic`]); the papers' cost
//! functions ([`costs`]); Bayesian-regret GP prior samples ([`gp_sample`]); the PBGI paper's 1-D
//! counterexamples ([`counterexamples`]); Pest Control ([`pest`]); the online-LDA surrogate
//! ([`lda`]); the cost-varying-subsets surrogates ([`cvs`]); robot pushing on the rapier2d
//! physics engine ([`robot`]); gym's Lunar Lander on the same engine, flown by the 12-weight
//! heuristic controller ([`lunar`]); the freeze-thaw benchmark (LCDB learning curves, a
//! synthetic family, and the policies that play them: [`freeze_thaw`]). Everything is built by name with [`build`]
//! ([`problem`], the one registry: studies' `builtin` objectives use it too), and fails with a
//! [`ProblemError`] ([`error`]). `docs/problems.md` documents every problem, cost, option and deviation from the reference
//! code.

pub mod costs;
pub mod counterexamples;
pub mod cvs;
pub mod error;
pub mod freeze_thaw;
pub mod gp_sample;
pub mod lda;
pub mod lunar;
pub mod pest;
pub mod problem;
pub mod robot;
pub mod synthetic;

pub use costs::linear_mean_cost;
pub use error::ProblemError;
pub use problem::{Problem, ProblemSpec, build, cost_names, names};
