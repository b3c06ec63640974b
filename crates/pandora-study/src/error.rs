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

/// Rewrites the Rust type names in a serde/TOML/JSON deserialization message into words a user
/// of a configuration file knows: `expected usize` becomes `expected a whole number >= 0`,
/// `expected f64` `expected a number`, `sequence` `list`, `map` `table`, and `integer `3`` or
/// `floating point `1.5`` the number itself. Everything else (field names, line and column,
/// the excerpt of the file) is kept.
pub fn plain_words(message: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("expected usize", "expected a whole number >= 0"),
        ("expected u64", "expected a whole number >= 0"),
        ("expected u32", "expected a whole number >= 0"),
        ("expected u16", "expected a whole number >= 0"),
        ("expected u8", "expected a whole number >= 0"),
        ("expected isize", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected a borrowed string", "expected a string"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a table"),
        ("invalid type: sequence", "invalid type: list"),
        ("invalid type: map", "invalid type: table"),
    ];
    let mut out = message.to_string();
    for (rust, plain) in WORDS {
        out = out.replace(rust, plain);
    }
    // `expected struct StudySection` and the like: a table.
    while let Some(pos) = out.find("expected struct ") {
        let rest = &out[pos + "expected struct ".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out = format!("{}expected a table{}", &out[..pos], &rest[end..]);
    }
    // `integer `3`` and `floating point `1.5``: the number.
    for kind in ["integer `", "floating point `"] {
        while let Some(pos) = out.find(kind) {
            let rest = &out[pos + kind.len()..];
            let Some(end) = rest.find('`') else { break };
            out = format!(
                "{}the number {}{}",
                &out[..pos],
                &rest[..end],
                &rest[end + 1..]
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::plain_words;

    #[test]
    fn rust_type_names_become_words() {
        for (rust, plain) in [
            (
                "invalid type: string \"ten\", expected u64",
                "invalid type: string \"ten\", expected a whole number >= 0",
            ),
            (
                "invalid value: integer `-3`, expected usize",
                "invalid value: the number -3, expected a whole number >= 0",
            ),
            (
                "invalid type: floating point `1.5`, expected usize",
                "invalid type: the number 1.5, expected a whole number >= 0",
            ),
            (
                "invalid type: sequence, expected f64",
                "invalid type: list, expected a number",
            ),
            (
                "invalid type: integer `3`, expected struct StudySection at line 2",
                "invalid type: the number 3, expected a table at line 2",
            ),
            ("unknown field `step`", "unknown field `step`"),
        ] {
            assert_eq!(plain_words(rust), plain, "{rust}");
        }
    }
}
