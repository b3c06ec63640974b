//! Bounded optimization: L-BFGS-B, scrambled Sobol points, multi-start maximization.

pub mod lbfgsb;

pub use lbfgsb::{
    LbfgsbOptions, LbfgsbResult, LbfgsbWorkspace, Termination, minimize, minimize_with_workspace,
};
