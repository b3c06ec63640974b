//! Typed errors of the numerical core.

/// Errors returned by `pandora-core`. Bad input is reported, never a panic.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// Input arrays disagree in shape.
    #[error("dimension mismatch in {what}: expected {expected}, got {got}")]
    DimensionMismatch {
        /// What was being checked.
        what: String,
        /// The expected size.
        expected: usize,
        /// The size that was given.
        got: usize,
    },
    /// A value is outside its allowed domain (NaN, infinite, non-positive where positive is required, ...).
    #[error("invalid value for {what}: {reason}")]
    InvalidInput {
        /// The offending field or argument.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The kernel matrix could not be factorized even with the largest allowed jitter.
    #[error("matrix is not positive definite even with jitter {jitter:e}")]
    NotPositiveDefinite {
        /// The largest jitter that was tried.
        jitter: f64,
    },
    /// A numerical routine failed to produce a finite result.
    #[error("numerical failure: {0}")]
    Numerical(String),
}

/// Result alias for `pandora-core`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// The same error with the field it names prefixed by `outer` (`runs[2]` + `at` →
    /// `runs[2].at`), for errors of a part reported from the whole.
    pub fn within(self, outer: impl std::fmt::Display) -> Self {
        match self {
            Error::InvalidInput { what, reason } => Error::InvalidInput {
                what: format!("{outer}.{what}"),
                reason,
            },
            Error::DimensionMismatch {
                what,
                expected,
                got,
            } => Error::DimensionMismatch {
                what: format!("{outer}.{what}"),
                expected,
                got,
            },
            other => other,
        }
    }

    /// Shorthand for [`Error::DimensionMismatch`].
    pub fn dim(what: impl Into<String>, expected: usize, got: usize) -> Self {
        Error::DimensionMismatch {
            what: what.into(),
            expected,
            got,
        }
    }
}
