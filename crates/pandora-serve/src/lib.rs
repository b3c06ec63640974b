//! # pandora-serve
//!
//! `pandora serve`: the ask/tell loop and the study reports of one storage (SQLite or
//! PostgreSQL) as a JSON HTTP API, for workers in any language (docs/serve.md, with the OpenAPI
//! description in docs/openapi.json).
//!
//! ## What it is
//!
//! An HTTP server ([`axum`] on [`tokio`]) whose handlers are thin adapters over the calls the
//! `pandora` CLI makes ([`pandora_study::Study::ask`], [`pandora_study::Study::report`],
//! [`pandora_study::Study::summary`], [`pandora_study::export`], ...): the same semantics, the
//! same atomicity (an ask runs under the storage's lock, so two concurrent asks never receive
//! the same trial) and the same validation (an error names its field, with a 4xx status).
//!
//! ## How a request runs
//!
//! 1. The guard ([`routes`]): the rate limiters, then the bearer token ([`security`]).
//! 2. The handler reads its input into typed values ([`body`]): path, query and body, each error
//!    naming its field; bodies larger than the limit are refused with 413.
//! 3. One study call on tokio's blocking pool with a pooled storage connection ([`pool`]).
//! 4. The result as JSON (or CSV for exports); errors as `{"error": {status, field, message}}`
//!    ([`error`]), every message redacted of storage passwords.
//!
//! ## Degenerate cases
//!
//! An unknown study or trial is 404; a trial told twice is 409; a storage that fails is 503
//! (the connection is dropped, the next request opens a new one); a panic in a study call is 500
//! and the server goes on. A client that disconnects does not cut a study call short.
//!
//! ## Security
//!
//! Bearer token compared in constant time, no serving beyond loopback without one, a body size
//! limit and rate limits per client and in all ([`security`]); the storage URL's password never
//! appears in a response or a log line (only its redacted form is kept for display,
//! [`state::App::shown_url`]); names of new studies are plain, and a study created over HTTP
//! cannot carry a command objective ([`body::config`]).

pub mod body;
pub mod dashboard;
pub mod error;
pub mod pool;
pub mod routes;
pub mod security;
pub mod server;
pub mod state;

pub use error::ApiError;
pub use routes::{ROUTES, Route, router};
pub use security::Token;
pub use server::{ServeError, run, serve, serve_app, shutdown_signal};
pub use state::{App, Options, RateLimited};
