//! What every request shares: the storage pool, the storage URL (secret, for connections) and
//! its redacted form (the only one responses and logs show), the token and the rate limiters.

use crate::pool::{Opener, Pool};
use crate::security::{ClientBuckets, Token, TokenBucket};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
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
    /// Requests per second one client (peer address) is let through on average.
    pub client_rate_per_second: f64,
    /// Requests one client is let through at once.
    pub client_rate_burst: u32,
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
            .field("client_rate_per_second", &self.client_rate_per_second)
            .field("client_rate_burst", &self.client_rate_burst)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl Options {
    /// The defaults for `storage_url`: no token, 1 MiB bodies, 200 requests/s with bursts of
    /// 400 in all, 100 requests/s with bursts of 200 per client, 8 connections.
    pub fn new(storage_url: impl Into<String>) -> Self {
        Self {
            storage_url: storage_url.into(),
            token: None,
            max_body_bytes: 1 << 20,
            rate_per_second: 200.0,
            rate_burst: 400,
            client_rate_per_second: 100.0,
            client_rate_burst: 200,
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
    clients: Mutex<ClientBuckets>,
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
        let rate = positive_or_one(options.rate_per_second);
        let client_rate = positive_or_one(options.client_rate_per_second);
        Self(Arc::new(Inner {
            pool: Arc::new(Pool::new(open, options.max_connections)),
            shown_url: pandora_study::redact::redact_url(&options.storage_url),
            url: options.storage_url,
            token: options.token,
            bucket: Mutex::new(TokenBucket::new(rate, options.rate_burst)),
            clients: Mutex::new(ClientBuckets::new(client_rate, options.client_rate_burst)),
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

    /// Whether requests must carry the bearer token.
    pub fn has_token(&self) -> bool {
        self.0.token.is_some()
    }

    /// Whether a request with this `Authorization` header may go on.
    pub fn authorized(&self, header: Option<&[u8]>) -> bool {
        self.0.token.as_ref().is_none_or(|t| t.accepts(header))
    }

    /// Takes a token of `client`'s bucket (`None`: the peer is unknown), then one of the global
    /// bucket, now; `Err` says which limit refused and the wait until its next token.
    pub fn take_rate_token(&self, client: Option<IpAddr>) -> Result<(), RateLimited> {
        let now = Instant::now();
        relock(&self.0.clients)
            .take(client, now)
            .map_err(|wait| RateLimited {
                per_client: true,
                wait,
            })?;
        relock(&self.0.bucket)
            .take(now)
            .map_err(|wait| RateLimited {
                per_client: false,
                wait,
            })
    }
}

/// A request refused by a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    /// The client's own limit refused it (else the global one).
    pub per_client: bool,
    /// The time until the refusing bucket has a token again.
    pub wait: Duration,
}

/// Locks a rate limiter's mutex; a poisoned lock (a panic while holding it) cannot leave a
/// bucket inconsistent, so it is used as it is.
fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A rate from the options: finite and > 0 (the CLI checks), else 1 per second.
fn positive_or_one(rate: f64) -> f64 {
    if rate.is_finite() && rate > 0.0 {
        rate
    } else {
        1.0
    }
}
