//! The error every problem constructor returns.
//!
//! Building a problem can fail for reasons the caller can fix: an unknown name or option, a
//! dimension the objective is not defined for, an option value that does not parse, a surrogate
//! whose data is malformed. [`ProblemError`] carries the message, which names the problem and the
//! option. It is a leaf: the registry ([`crate::problem`]) and each problem import it, so
//! imports between the problem files run one way, toward the registry's dependencies.

use std::fmt;

/// What went wrong building a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemError(pub String);

impl fmt::Display for ProblemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProblemError {}
