//! Errors as RFC 9457 problem details (`application/problem+json`).
//!
//! Every error the API answers has this shape: handlers return [`ApiError`], and
//! [`problem_for_bare_errors`] rewrites the bodies of errors produced outside the
//! handlers (unknown route, 405, body limit, timeout) into the same shape.

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

pub use crate::domain::field_error::FieldError;
use crate::domain::job_template::PayloadTooLarge;
use crate::store::StoreError;

/// The media type of problem details (RFC 9457 §3).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Seconds a client should wait before retrying after a 503 (RFC 9110 §10.2.3).
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// An RFC 9457 problem details body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem type; `about:blank` means the status says it all.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status code, equal to the response's.
    pub status: u16,
    /// What happened in this occurrence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The invalid fields, for validation errors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

/// What a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON, or not the JSON of the expected shape (400).
    #[error("malformed request")]
    Malformed(FieldError),
    /// Fields are well-formed but invalid (422).
    #[error("invalid request")]
    Invalid(Vec<FieldError>),
    /// No valid API token was presented (401).
    #[error("unauthorized")]
    Unauthorized(String),
    /// The resource does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// A field names something that does not exist, e.g. an unknown subscriber (404).
    #[error("unknown reference")]
    UnknownReference(FieldError),
    /// The request conflicts with what is stored (409).
    #[error("{0}")]
    Conflict(String),
    /// The body or a field is over its size limit (413).
    #[error("too large")]
    TooLarge(FieldError),
    /// The body is not `application/json` (415).
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// The store is unreachable or busy; nothing was written (503 + `Retry-After`).
    #[error("the store is unavailable")]
    Unavailable(String),
    /// A fault of the server; details are logged, not returned (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 422 about one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Invalid(vec![FieldError::new(field, message)])
    }

    /// The HTTP status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Malformed(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) | ApiError::UnknownReference(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn problem(self) -> Problem {
        let status = self.status();
        let mut problem = Problem::from_status(status);
        match self {
            ApiError::Malformed(error)
            | ApiError::TooLarge(error)
            | ApiError::UnknownReference(error) => {
                problem.detail = Some(format!("{}: {}", error.field, error.message));
                problem.errors = vec![error];
            }
            ApiError::Invalid(errors) => {
                problem.detail = Some(
                    errors
                        .iter()
                        .map(|e| format!("{}: {}", e.field, e.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                problem.errors = errors;
            }
            ApiError::NotFound(detail)
            | ApiError::Conflict(detail)
            | ApiError::Unauthorized(detail) => {
                problem.detail = Some(detail);
            }
            ApiError::UnsupportedMediaType => {
                problem.detail = Some("the body must be application/json".into());
            }
            ApiError::Unavailable(_) => {
                problem.detail = Some(
                    "the store is unavailable; nothing was written, retry after the delay".into(),
                );
            }
            ApiError::Internal(_) => {}
        }
        problem
    }
}

impl Problem {
    /// A problem carrying only the status and its standard reason as title.
    pub fn from_status(status: StatusCode) -> Self {
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: None,
            errors: Vec::new(),
        }
    }
}

impl From<PayloadTooLarge> for ApiError {
    fn from(PayloadTooLarge(error): PayloadTooLarge) -> Self {
        ApiError::TooLarge(error)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => ApiError::Unavailable(cause),
            StoreError::UnknownSubscriber(id) => ApiError::UnknownReference(FieldError::new(
                "subscriber_id",
                format!("subscriber `{id}` does not exist"),
            )),
            quota @ StoreError::TooManySchedules { .. } => {
                ApiError::invalid("schedule_id", quota.to_string())
            }
            conflict @ (StoreError::PayloadConflict { .. }
            | StoreError::ReplayRateBudget { .. }
            | StoreError::SubscriberBeingDeleted(_)) => ApiError::Conflict(conflict.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl ApiError {
    /// The problem details this error answers with (RFC 9457); an internal error's
    /// cause is logged, never shown, and an unavailable store is logged as a warning.
    pub fn into_problem(self) -> Problem {
        match &self {
            ApiError::Internal(detail) => tracing::error!(%detail, "request failed"),
            ApiError::Unavailable(cause) => {
                tracing::warn!(%cause, "store unavailable; answering 503");
            }
            _ => {}
        }
        self.problem()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let unavailable = matches!(self, ApiError::Unavailable(_));
        let mut response = problem_response(self.into_problem());
        if unavailable {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

/// Renders a problem with its status and media type.
pub fn problem_response(problem: Problem) -> Response {
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Json(problem)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
}

/// Middleware: an error response that is not problem+json yet (from routing, a body
/// limit or a timeout) gets a problem body; its status and other headers stay. An
/// HTML page (the console's errors) is left as it is.
pub async fn problem_for_bare_errors(request: axum::extract::Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    // The console's pages answer errors as HTML pages of their own.
    let is_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem || is_page {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let mut problem = Problem::from_status(status);
    problem.detail = match status {
        StatusCode::NOT_FOUND => Some("no such route".into()),
        StatusCode::METHOD_NOT_ALLOWED => Some("this route does not accept that method".into()),
        StatusCode::REQUEST_TIMEOUT => Some("the request took too long".into()),
        StatusCode::PAYLOAD_TOO_LARGE => Some("the request body is too large".into()),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            Some("the request headers are too large".into())
        }
        StatusCode::BAD_REQUEST => {
            Some("the request could not be read (e.g. a path that is not valid UTF-8)".into())
        }
        _ => None,
    };
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    Response::from_parts(parts, Body::from(body))
}
