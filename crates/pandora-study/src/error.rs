//! Errors of the study layer.

/// Errors of studies, search spaces and storage.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid user input (configuration, parameters, reported values).
    #[error("{what}: {reason}")]
    Invalid {
        /// The offending field.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A storage backend failed.
    #[error("storage: {0}")]
    Storage(String),
    /// The PostgreSQL server or driver failed (connection, login, statement); the message never
    /// contains the password of the storage URL.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// The study or trial does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An error of the numerical core.
    #[error(transparent)]
    Core(#[from] pandora_core::Error),
}

/// Result alias for the study layer.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Storage(format!("JSON: {e}"))
    }
}
