//! Bounded optimization: L-BFGS-B, scrambled Sobol points, multi-start maximization.

pub mod lbfgsb;
pub mod sobol;
mod sobol_directions;

pub use lbfgsb::{
    LbfgsbOptions, LbfgsbResult, LbfgsbWorkspace, Termination, minimize, minimize_with_workspace,
};
pub use sobol::{Sobol, scrambled_sobol};
