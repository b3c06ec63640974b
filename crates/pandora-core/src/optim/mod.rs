//! Bounded optimization: L-BFGS-B, scrambled Sobol points, multi-start maximization.
//!
//! - [`lbfgsb`]: bound-constrained L-BFGS-B (minimization), allocation-free with a reusable
//!   workspace.
//! - [`sobol`]: Owen-scrambled Sobol points in `[0,1)^d` (`f64`, up to 1024 dimensions).
//! - [`multistart`]: BoTorch-style multi-start maximization of an [`Objective`] on a box, with
//!   deterministic parallel restarts; `lockstep` runs the restarts of objectives that evaluate
//!   blocks faster than points ([`Objective::prefers_blocks`]) as one block per round.
//! - [`mixed`]: the valid points of a cube with one-hot blocks and discrete coordinates
//!   ([`MixedSpace`]) and maximization over them only ([`maximize_mixed`]).
//! - [`domain`]: where a BO step may propose ([`Domain`]: the valid points away from pending
//!   ones) and maximization there ([`maximize_in`]).

pub mod domain;
pub mod lbfgsb;
mod lockstep;
pub mod mixed;
pub mod multistart;
mod objective;
pub mod sobol;
mod sobol_directions;

pub use domain::{Candidate, Domain, PENDING_EXCLUSION_RADIUS, maximize_in, runners_up};
pub use lbfgsb::{
    LbfgsbOptions, LbfgsbResult, LbfgsbWorkspace, Termination, minimize, minimize_with_workspace,
};
pub use mixed::{
    DiscreteCoord, MixedSpace, MixedStrategy, OneHotBlock, maximize_mixed, maximize_mixed_with,
};
pub use multistart::{
    MultiStartOptions, MultiStartResult, Objective, boltzmann_select, maximize, maximize_discrete,
};
pub use sobol::{Sobol, design_point, scrambled_sobol};
