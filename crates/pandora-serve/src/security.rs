//! The server's guards: the bearer token, the loopback rule, the rate limit and study names.
//!
//! # Bearer token
//!
//! With a token (`--token-file`), every request must carry `Authorization: Bearer TOKEN`. The
//! presented token is compared with [`subtle::ConstantTimeEq`]: the time taken does not depend on
//! where the first differing byte is, so the token cannot be guessed byte by byte from response
//! times. (A presented token of another length is refused at once; the length of a token is not
//! a secret worth hiding: it is at least [`MIN_TOKEN_LEN`] random characters.) A missing or wrong
//! token is 401 with `WWW-Authenticate: Bearer`, before the request touches the storage.
//!
//! # Loopback rule
//!
//! Without a token, anyone who can reach the port can ask, tell and create studies. The server
//! therefore refuses to bind anything but a loopback address (`127.0.0.0/8`, `::1`) unless a
//! token is set ([`check_bind`]).
//!
//! # Rate limits
//!
//! Two kinds of token bucket ([`TokenBucket`]: it holds at most `burst` requests and refills at
//! `per_second`; a request that finds it empty is refused with 429 and `Retry-After`, the time
//! until its next token):
//!
//! * **Per client** ([`ClientBuckets`]): one bucket per peer address, so that one flooding
//!   client is refused while the others still get through. The client is the TCP peer's IP
//!   address; IPv6 addresses count by their /64 prefix (one host usually owns a whole /64 and
//!   could otherwise take a fresh bucket per address), IPv4-mapped IPv6 addresses as IPv4.
//!   Behind a reverse proxy every request comes from the proxy's address: give the per-client
//!   limit the global limit's values there (then it never refuses first). The table is bounded:
//!   when it holds [`MAX_CLIENTS`] addresses, buckets that have refilled completely (idle
//!   clients: forgetting them changes nothing) are dropped; clients beyond that, and requests
//!   without a known peer (in-process calls), share one overflow bucket.
//! * **Global**: one bucket for the whole server, taken after the client's, because what it
//!   protects is global: every `ask` fits Gaussian processes and holds the storage's write lock,
//!   and many clients together can slow every worker as one flooding client would.
//!
//! Requests refused for the rate do not reach authentication or the storage.
//!
//! # Study names
//!
//! A study created over HTTP must have a name of 1 to [`MAX_NAME_LEN`] characters from
//! `A-Z a-z 0-9 . _ -`, starting with a letter or digit ([`check_new_name`]): it then needs no
//! escaping in a URL path, an HTML page, a file name or a `Content-Disposition` header. Names are
//! only ever bound as SQL parameters, never spliced into SQL text. Studies created by the CLI
//! may have other names; they are reachable (percent-encoded in the path) when the study layer
//! accepts them ([`check_name`]: no control characters, at most 1024 bytes).

use crate::error::ApiError;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The shortest token accepted, in bytes.
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest name of a study created over HTTP, in characters.
pub const MAX_NAME_LEN: usize = 128;

/// A bearer token (never printed: its `Debug` shows its length only).
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({} bytes)", self.0.len())
    }
}

impl Token {
    /// A token from its text: surrounding white space (a file's final newline) is dropped; the
    /// rest must be at least [`MIN_TOKEN_LEN`] visible ASCII characters (it travels in a header).
    pub fn new(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token must be at least {MIN_TOKEN_LEN} characters long, got {}",
                t.len()
            ));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token must be visible ASCII characters without spaces".into());
        }
        Ok(Self(t.as_bytes().to_vec()))
    }

    /// Whether an `Authorization` header value is `Bearer` and this token (constant time in the
    /// token's bytes).
    pub fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(h) = header else { return false };
        let Some(presented) = strip_bearer(h) else {
            return false;
        };
        presented.len() == self.0.len() && bool::from(presented.ct_eq(&self.0))
    }
}

/// The credentials of `Bearer CREDENTIALS` (the scheme in any case, RFC 7235).
fn strip_bearer(h: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = h.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// Refuses to serve without a token on anything but a loopback address.
pub fn check_bind(addr: &SocketAddr, has_token: bool) -> Result<(), String> {
    if has_token || addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "--bind {addr}: refusing to serve on a non-loopback address without a token; \
             give --token-file FILE (anyone who can reach the port could ask, tell and create \
             studies), or bind 127.0.0.1"
        ))
    }
}

/// A token bucket: `burst` requests at once, refilled at `per_second`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket. `per_second` and `burst` must be finite and > 0 (checked by the caller's
    /// configuration); `burst` is at least 1.
    pub fn new(per_second: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            per_second,
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Takes one request's token at time `now`; `Err(wait)` if the bucket is empty, with the time
    /// until the next token.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.per_second).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - self.tokens) / self.per_second;
            Err(Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(1)))
        }
    }
}

impl TokenBucket {
    /// Whether the bucket is full at `now` (its client has been idle long enough that a fresh
    /// bucket would behave the same).
    fn is_full(&self, now: Instant) -> bool {
        self.last.is_none_or(|last| {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens + dt * self.per_second >= self.burst
        })
    }
}

/// The most client addresses [`ClientBuckets`] keeps a bucket for.
pub const MAX_CLIENTS: usize = 4096;

/// The per-client rate limit: a [`TokenBucket`] per client address (see the module docs).
#[derive(Debug, Clone)]
pub struct ClientBuckets {
    per_second: f64,
    burst: u32,
    clients: HashMap<IpAddr, TokenBucket>,
    overflow: TokenBucket,
}

impl ClientBuckets {
    /// No clients yet; each gets `burst` requests at once, refilled at `per_second` (finite and
    /// > 0, checked by the caller's configuration).
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self {
            per_second,
            burst,
            clients: HashMap::new(),
            overflow: TokenBucket::new(per_second, burst),
        }
    }

    /// Takes one request's token of `client` (`None`: unknown) at `now`; `Err(wait)` if its
    /// bucket is empty.
    pub fn take(&mut self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let Some(key) = client.map(client_key) else {
            return self.overflow.take(now);
        };
        if self.clients.len() >= MAX_CLIENTS && !self.clients.contains_key(&key) {
            self.clients.retain(|_, b| !b.is_full(now));
            if self.clients.len() >= MAX_CLIENTS {
                return self.overflow.take(now);
            }
        }
        let (rate, burst) = (self.per_second, self.burst);
        self.clients
            .entry(key)
            .or_insert_with(|| TokenBucket::new(rate, burst))
            .take(now)
    }

    /// How many clients have a bucket.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Whether no client has a bucket.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

/// The address a client is counted under: IPv4 as it is (also when mapped into IPv6), IPv6 by
/// its /64 prefix.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Checks the name of a study to be created (see the module docs).
pub fn check_new_name(name: &str) -> Result<(), ApiError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(ApiError::invalid(
            "study.name",
            format!("must be 1 to {MAX_NAME_LEN} characters long"),
        ));
    }
    if !first_ok || !name.chars().all(ok_char) {
        return Err(ApiError::invalid(
            "study.name",
            format!(
                "{name:?}: only letters, digits, '.', '_' and '-' are allowed, starting with a \
                 letter or digit"
            ),
        ));
    }
    Ok(())
}

/// Checks the name of an existing study given in a path (see the module docs).
pub fn check_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > pandora_study::storage::MAX_STUDY_NAME_BYTES {
        return Err(ApiError::invalid("name", "must be 1 to 1024 bytes long"));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "name",
            "must not contain control characters",
        ));
    }
    Ok(())
}

/// 401 for a missing or wrong token.
pub fn unauthorized() -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut r = ApiError::new(
        StatusCode::UNAUTHORIZED,
        Some("Authorization"),
        "missing or wrong bearer token (send `Authorization: Bearer TOKEN`)",
    )
    .into_response();
    r.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_must_match_exactly() {
        let t = Token::new("abcdefghijklmnop\n").unwrap();
        assert!(t.accepts(Some(b"Bearer abcdefghijklmnop")));
        assert!(t.accepts(Some(b"bearer abcdefghijklmnop")));
        for bad in [
            &b"Bearer abcdefghijklmnoq"[..],
            b"Bearer abcdefghijklmno",
            b"Bearer abcdefghijklmnopq",
            b"Basic abcdefghijklmnop",
            b"abcdefghijklmnop",
            b"Bearer ",
            b"",
        ] {
            assert!(!t.accepts(Some(bad)), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(!t.accepts(None));
        assert!(Token::new("short").is_err());
        assert!(Token::new("has a space inside it").is_err());
        assert_eq!(format!("{t:?}"), "Token(16 bytes)");
    }

    #[test]
    fn only_loopback_without_a_token() {
        let ok: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let ok6: SocketAddr = "[::1]:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lan: SocketAddr = "192.168.1.5:8080".parse().unwrap();
        assert!(check_bind(&ok, false).is_ok());
        assert!(check_bind(&ok6, false).is_ok());
        assert!(
            check_bind(&any, false)
                .unwrap_err()
                .contains("--token-file")
        );
        assert!(check_bind(&lan, false).is_err());
        assert!(check_bind(&any, true).is_ok());
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, 3);
        for _ in 0..3 {
            assert!(b.take(t0).is_ok());
        }
        let wait = b.take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        // Half a second later: one token.
        let t1 = t0 + Duration::from_millis(500);
        assert!(b.take(t1).is_ok());
        assert!(b.take(t1).is_err());
        // Long idle: back to the burst, not beyond.
        let t2 = t1 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(b.take(t2).is_ok());
        }
        assert!(b.take(t2).is_err());
    }

    #[test]
    fn each_client_has_its_own_bucket() {
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let mut c = ClientBuckets::new(1.0, 2);
        assert!(c.take(Some(a), t0).is_ok());
        assert!(c.take(Some(a), t0).is_ok());
        let wait = c.take(Some(a), t0).unwrap_err();
        assert!((wait.as_secs_f64() - 1.0).abs() < 1e-9, "{wait:?}");
        // Another client is not affected, nor are requests of unknown peers.
        assert!(c.take(Some(b), t0).is_ok());
        assert!(c.take(None, t0).is_ok());
        assert_eq!(c.len(), 2);
        // One second later, a's next token.
        let t1 = t0 + Duration::from_secs(1);
        assert!(c.take(Some(a), t1).is_ok());
        assert!(c.take(Some(a), t1).is_err());
    }

    #[test]
    fn an_ipv6_host_counts_by_its_prefix() {
        let t0 = Instant::now();
        let mut c = ClientBuckets::new(1.0, 1);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_host: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(c.take(Some(one), t0).is_ok());
        assert!(c.take(Some(same_host), t0).is_err());
        assert!(c.take(Some(other), t0).is_ok());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn the_client_table_stays_bounded() {
        let t0 = Instant::now();
        let mut c = ClientBuckets::new(1.0, 1);
        let ip = |i: usize| IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
        for i in 0..MAX_CLIENTS {
            assert!(c.take(Some(ip(i)), t0).is_ok());
        }
        // The table is full of busy clients: a new one shares the overflow bucket.
        assert!(c.take(Some(ip(MAX_CLIENTS)), t0).is_ok());
        assert!(c.take(Some(ip(MAX_CLIENTS + 1)), t0).is_err());
        assert_eq!(c.len(), MAX_CLIENTS);
        // Once they have refilled (idle), they are forgotten and a new client gets a bucket.
        let later = t0 + Duration::from_secs(10);
        assert!(c.take(Some(ip(MAX_CLIENTS + 2)), later).is_ok());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn names_of_new_studies_are_plain() {
        for ok in ["a", "study-1", "Branin_2d.v3", &"x".repeat(MAX_NAME_LEN)] {
            assert!(check_new_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "../etc",
            ".hidden",
            "a/b",
            "a b",
            "<script>",
            "x'; DROP TABLE trials;--",
            "é",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            let e = check_new_name(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("study.name"), "{bad}");
            assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        }
        assert!(check_name("my study").is_ok());
        assert!(check_name("a\nb").is_err());
    }
}
