//! Linear algebra on top of faer.
