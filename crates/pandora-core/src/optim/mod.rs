//! Bounded optimization: L-BFGS-B, scrambled Sobol points, multi-start maximization.
