//! Gittins index theory as code: an exact Pandora's Box solver, a brute-force DP to verify it,
//! the expected-budget constraint of Theorem 2 of the PBGI paper, and Gittins indices of Markov
//! chains via the local MDP.
//!
//! - [`pandora`]: boxes with discrete or normal rewards and deterministic or random costs, the
//!   index `g` solving `E[max(X − g, 0)] = E[C]`, Weitzman's policy, its exact expected net utility
//!   and a seeded Monte Carlo simulator.
//! - [`budget`]: the expected-budget constraint (Theorem 2): `λ*`, two policies and the mixing
//!   probability that spends exactly `B`.
//! - [`chain`]: Markov chain selection, the local MDP and its Gittins index; Pandora's Box as a
//!   special case.
//! - [`dp`]: dynamic programming over `(opened set, best reward)` for small discrete instances.
//! - [`freeze_thaw`]: cost-aware freeze-thaw with discrete learning curves: which run to start,
//!   continue or keep, by Gittins indices, verified against dynamic programming.

pub mod budget;
pub mod chain;
pub mod counterexamples;
pub mod dp;
pub mod freeze_thaw;
pub mod pandora;
mod sweep;

pub use budget::{BudgetSolution, LAMBDA_MAX, LAMBDA_MIN, solve_budget};
pub use chain::{
    MarkovChain, all_indices, index_policy_choice, index_policy_value, selection_optimum,
};
pub use dp::{DP_MAX_BOXES, dp_optimum};
pub use pandora::{
    Cost, MonteCarlo, PandoraBox, Problem, Reward, WeitzmanPolicy, discrete_index,
    discrete_policy_value,
};

#[cfg(test)]
pub(crate) mod tests;
