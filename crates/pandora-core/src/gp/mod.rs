//! Gaussian processes.
