//! Request bodies and query strings, read into typed values with errors that name the field.
//!
//! JSON bodies go through [`serde_path_to_error`], so a wrong type deep inside names its path
//! (`space[1].low`); a syntax error is 400 naming `body`, a wrong field 422 naming it. JSON has no
//! NaN or infinity, and a number beyond the range of `f64` is a syntax error, so every number
//! that reaches the study layer is finite (which checks it again).
//!
//! A study configuration may come as JSON (`Content-Type: application/json`) or as TOML (any
//! other type, or none): the same schema as the configuration files.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use pandora_study::StudyConfig;
use pandora_study::error::plain_words;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// The body as UTF-8 text, or the extractor's refusal (413 for an oversize body) as a JSON error.
pub fn text(body: &Result<Bytes, BytesRejection>) -> Result<&str, ApiError> {
    let bytes = body
        .as_ref()
        .map_err(|r| ApiError::new(r.status(), Some("body"), r.body_text()))?;
    std::str::from_utf8(bytes).map_err(|e| ApiError::bad_request("body", format!("not UTF-8: {e}")))
}

/// Parses a JSON body into `T`; an empty body is `T::default()`.
pub fn json<T: DeserializeOwned + Default>(text: &str) -> Result<T, ApiError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    json_strict(text)
}

/// A JSON error: 400 for syntax, 422 naming the path for data.
fn json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    match inner.classify() {
        serde_json::error::Category::Data => {
            let field = if path == "." { "body" } else { path.as_str() };
            ApiError::invalid(field, plain_words(&inner.to_string()))
        }
        _ => ApiError::bad_request("body", format!("invalid JSON: {inner}")),
    }
}

/// Only `[study] storage` of a configuration, to see whether the client gave one.
#[derive(Debug, Default, Deserialize)]
struct StorageProbe {
    #[serde(default)]
    study: Option<StudyProbe>,
}

#[derive(Debug, Default, Deserialize)]
struct StudyProbe {
    #[serde(default)]
    storage: Option<String>,
}

/// Reads a study configuration (JSON or TOML by `content_type`) for the server whose storage URL
/// is `server_url`: validated like a configuration file; a `study.storage` other than the
/// server's is refused (the server serves one storage), a missing one becomes the server's;
/// the name must be plain ([`crate::security::check_new_name`]); and a `command` objective is
/// refused: a study created over HTTP must not make a later `pandora run` execute a program
/// chosen by a remote client.
pub fn config(
    content_type: Option<&str>,
    text: &str,
    server_url: &str,
) -> Result<StudyConfig, ApiError> {
    let is_json = content_type.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    let (mut cfg, probe) = if is_json {
        let cfg: StudyConfig = json_strict(text)?;
        cfg.validate()?;
        (
            cfg,
            serde_json::from_str::<StorageProbe>(text).unwrap_or_default(),
        )
    } else {
        let cfg = StudyConfig::from_toml(text)?;
        (
            cfg,
            toml::from_str::<StorageProbe>(text).unwrap_or_default(),
        )
    };
    if let Some(given) = probe.study.and_then(|s| s.storage) {
        let redacted = pandora_study::redact::redact_url(server_url);
        if given != server_url && given != redacted {
            return Err(ApiError::invalid(
                "study.storage",
                format!(
                    "this server serves {redacted}; leave study.storage out (or give that URL)"
                ),
            ));
        }
    }
    cfg.study.storage = server_url.to_string();
    crate::security::check_new_name(&cfg.study.name)?;
    if cfg.objective.command.is_some() {
        return Err(ApiError::invalid(
            "objective.command",
            "a study created over HTTP cannot have a command objective (the server would store \
             a program for `pandora run` to execute); use kind = \"external\" and ask/tell",
        ));
    }
    Ok(cfg)
}

/// [`json`] without the default for an empty body.
fn json_strict<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
    de.end()
        .map_err(|e| ApiError::bad_request("body", format!("invalid JSON: {e}")))?;
    Ok(value)
}

/// The pairs of a query string (`a=1&b=2`), each key at most once and among `known`; values are
/// taken as they are (the API's query values are numbers and plain words).
pub fn query<'a>(
    raw: Option<&'a str>,
    known: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, ApiError> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if !known.contains(&k) {
            return Err(ApiError::bad_request(
                "query",
                format!(
                    "unknown parameter {k:?}; expected one of {}",
                    known.join(", ")
                ),
            ));
        }
        if out.iter().any(|(seen, _)| *seen == k) {
            return Err(ApiError::bad_request(k, "given twice"));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// A whole number >= 0 of a query parameter.
pub fn whole(key: &str, value: &str) -> Result<u64, ApiError> {
    value.parse().map_err(|_| {
        ApiError::bad_request(key, format!("expected a whole number >= 0, got {value:?}"))
    })
}
