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
//! # Rate limit
//!
//! One token bucket for the whole server ([`TokenBucket`]): it holds at most `burst` requests and
//! refills at `per_second`; a request that finds it empty is refused with 429 and `Retry-After`.
//! It is global, not per client, because what it protects is global: every `ask` fits Gaussian
//! processes and holds the storage's write lock, and one flooding client slows every worker the
//! same. Requests refused for the rate do not reach authentication or the storage.
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
use std::net::SocketAddr;
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
