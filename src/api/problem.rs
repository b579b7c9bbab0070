//! Errors as RFC 9457 problem details (`application/problem+json`).
//!
//! Every error the API answers has this shape: handlers return [`AppError`] (the
//! application's errors, answered here), and
//! [`problem_for_bare_errors`] rewrites the bodies of errors produced outside the
//! handlers (unknown route, 405, body limit, timeout) into the same shape.

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

pub use crate::app::AppError;
pub use crate::domain::field_error::FieldError;

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

impl AppError {
    fn problem(self) -> Problem {
        let status = self.status();
        let mut problem = Problem::from_status(status);
        match self {
            AppError::Malformed(error)
            | AppError::TooLarge(error)
            | AppError::UnknownReference(error) => {
                problem.detail = Some(format!("{}: {}", error.field, error.message));
                problem.errors = vec![error];
            }
            AppError::Invalid(errors) => {
                problem.detail = Some(
                    errors
                        .iter()
                        .map(|e| format!("{}: {}", e.field, e.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                problem.errors = errors;
            }
            AppError::NotFound(detail)
            | AppError::Conflict(detail)
            | AppError::Unauthorized(detail) => {
                problem.detail = Some(detail);
            }
            AppError::UnsupportedMediaType => {
                problem.detail = Some("the body must be application/json".into());
            }
            AppError::Unavailable(_) => {
                problem.detail = Some(
                    "the store is unavailable; nothing was written, retry after the delay".into(),
                );
            }
            AppError::Internal(_) => {}
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

impl AppError {
    /// The problem details this error answers with (RFC 9457); an internal error's
    /// cause is logged, never shown, and an unavailable store is logged as a warning.
    pub fn into_problem(self) -> Problem {
        match &self {
            AppError::Internal(detail) => tracing::error!(%detail, "request failed"),
            AppError::Unavailable(cause) => {
                tracing::warn!(%cause, "store unavailable; answering 503");
            }
            _ => {}
        }
        self.problem()
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let unavailable = matches!(self, AppError::Unavailable(_));
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
