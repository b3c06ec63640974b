//! Standard normal distribution and log-space helpers (owned by the math work item; see `normal.rs`).
