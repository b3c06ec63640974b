//! Errors of the HTTP API: a status code, the field at fault and a message, sent as
//! `{"error": {"status": 422, "field": "cost", "message": "..."}}`.
//!
//! Study-layer errors map as follows: [`pandora_study::Error::Invalid`] is 422 naming its field,
//! except an invalid *state* of a trial (told twice, heartbeat of a finished trial: the field is
//! `trial N of study ...`), which is 409 naming `number`; [`pandora_study::Error::NotFound`] is
//! 404; storage and PostgreSQL failures are 503 (the storage, not the request, is at fault);
//! numerical errors are 500. Every message passes through
//! [`pandora_study::redact::redact_text`], so no password of a storage URL can reach a client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The request field at fault (`cost`, `study.name`, `body`, `number`, ...), if one is.
    pub field: Option<String>,
    /// What went wrong, in words.
    pub message: String,
}

/// The JSON body of an error.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize)]
struct ErrorDetail<'a> {
    status: u16,
    field: Option<&'a str>,
    message: &'a str,
}

impl ApiError {
    /// An error of `status` about `field`.
    pub fn new(status: StatusCode, field: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            status,
            field: field.map(str::to_string),
            message: message.into(),
        }
    }

    /// 400: the request is malformed (syntax, encoding).
    pub fn bad_request(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Some(field), message)
    }

    /// 422: the request is well-formed but a field's value is invalid.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, Some(field), message)
    }

    /// 404: what `field` names does not exist.
    pub fn not_found(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, Some(field), message)
    }

    /// 500: a bug or a panic; the details go to the server's log, not to the client.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, None, message)
    }
}

impl From<pandora_study::Error> for ApiError {
    fn from(e: pandora_study::Error) -> Self {
        use pandora_study::Error as E;
        match e {
            E::Invalid { what, reason } if what.starts_with("trial ") => Self::new(
                StatusCode::CONFLICT,
                Some("number"),
                format!("{what}: {reason}"),
            ),
            E::Invalid { what, reason } => Self::invalid(&what, reason),
            E::NotFound(what) => {
                let field = if what.starts_with("trial ") {
                    "number"
                } else {
                    "name"
                };
                Self::not_found(field, format!("not found: {what}"))
            }
            e @ (E::Storage(_) | E::Postgres(_)) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, None, e.to_string())
            }
            e @ E::Core(_) => Self::internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = pandora_study::redact::redact_text(&self.message);
        if self.status.is_server_error() {
            // The server's log: redacted like the response.
            eprintln!("pandora serve: {}: {message}", self.status);
        }
        let body = ErrorBody {
            error: ErrorDetail {
                status: self.status.as_u16(),
                field: self.field.as_deref(),
                message: &message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}
