//! Acquisition functions.
