//! What every request shares: the storage pool, the storage URL (secret, for connections) and
//! its redacted form (the only one responses and logs show), the token and the rate limiter.

use crate::pool::{Opener, Pool};
use crate::security::{Token, TokenBucket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's settings (`Debug` shows the storage URL redacted).
#[derive(Clone)]
pub struct Options {
    /// The storage URL (`sqlite:PATH` or `postgresql://...`); it may hold a password.
    pub storage_url: String,
    /// The bearer token, if requests must carry one.
    pub token: Option<Token>,
    /// The largest request body accepted, in bytes (larger ones get 413).
    pub max_body_bytes: usize,
    /// Requests per second the rate limiter lets through on average.
    pub rate_per_second: f64,
    /// Requests the rate limiter lets through at once.
    pub rate_burst: u32,
    /// Storage connections in use at once (study calls beyond wait).
    pub max_connections: usize,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field(
                "storage_url",
                &pandora_study::redact::redact_url(&self.storage_url),
            )
            .field("token", &self.token)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("rate_per_second", &self.rate_per_second)
            .field("rate_burst", &self.rate_burst)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl Options {
    /// The defaults for `storage_url`: no token, 1 MiB bodies, 200 requests/s with bursts of
    /// 400, 8 connections.
    pub fn new(storage_url: impl Into<String>) -> Self {
        Self {
            storage_url: storage_url.into(),
            token: None,
            max_body_bytes: 1 << 20,
            rate_per_second: 200.0,
            rate_burst: 400,
            max_connections: 8,
        }
    }
}

/// The shared state of the server (cheap to clone).
#[derive(Clone)]
pub struct App(Arc<Inner>);

struct Inner {
    pool: Arc<Pool>,
    url: String,
    shown_url: String,
    token: Option<Token>,
    bucket: Mutex<TokenBucket>,
    max_body_bytes: usize,
}

impl App {
    /// The state of a server on `options.storage_url`.
    pub fn new(options: Options) -> Self {
        let url = options.storage_url.clone();
        let open: Box<Opener> = Box::new(move || pandora_study::storage::open(&url));
        Self::with_opener(options, open)
    }

    /// The state of a server whose connections come from `open` (tests: a PostgreSQL URL shown,
    /// an SQLite file used).
    pub fn with_opener(options: Options, open: Box<Opener>) -> Self {
        let rate = if options.rate_per_second.is_finite() && options.rate_per_second > 0.0 {
            options.rate_per_second
        } else {
            1.0
        };
        Self(Arc::new(Inner {
            pool: Arc::new(Pool::new(open, options.max_connections)),
            shown_url: pandora_study::redact::redact_url(&options.storage_url),
            url: options.storage_url,
            token: options.token,
            bucket: Mutex::new(TokenBucket::new(rate, options.rate_burst)),
            max_body_bytes: options.max_body_bytes,
        }))
    }

    /// The storage pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.0.pool
    }

    /// The storage URL with its password: for connections and stored configurations only.
    pub(crate) fn url(&self) -> &str {
        &self.0.url
    }

    /// The storage URL as responses and logs show it (password redacted).
    pub fn shown_url(&self) -> &str {
        &self.0.shown_url
    }

    /// The body size limit.
    pub fn max_body_bytes(&self) -> usize {
        self.0.max_body_bytes
    }

    /// Whether a request with this `Authorization` header may go on.
    pub fn authorized(&self, header: Option<&[u8]>) -> bool {
        self.0.token.as_ref().is_none_or(|t| t.accepts(header))
    }

    /// Takes a token of the rate limiter now; `Err(wait)` if there is none.
    pub fn take_rate_token(&self) -> Result<(), Duration> {
        match self.0.bucket.lock() {
            Ok(mut b) => b.take(Instant::now()),
            // A poisoned lock (a panic while holding it) cannot leave the bucket inconsistent.
            Err(p) => p.into_inner().take(Instant::now()),
        }
    }
}
