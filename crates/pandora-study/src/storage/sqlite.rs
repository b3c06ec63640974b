//! SQLite backend.
