//! Limits on what a request may carry before any handler reads it: its headers (RFC
//! 6585 §5, 431) and its target (RFC 9110 §15.5.15, 414). Body sizes are limited by the
//! body-limit layer (413); list sizes by each resource (`limit` ≤ 1000, 10,000
//! subscribers per fan-out, 100,000 jobs per replay).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use super::problem::{Problem, problem_response};

/// Most bytes of all header names and values together.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header fields.
pub const MAX_HEADERS: usize = 64;
/// Most bytes of the request target (path and query).
pub const MAX_TARGET_BYTES: usize = 8 * 1024;

/// Answers 431 to a request whose headers exceed [`MAX_HEADERS`] fields or
/// [`MAX_HEADER_BYTES`] bytes, and 414 to a target over [`MAX_TARGET_BYTES`].
pub async fn limit_headers(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return refuse(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "at most {MAX_HEADERS} header fields and {MAX_HEADER_BYTES} bytes of headers \
                 are accepted"
            ),
        );
    }
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if target > MAX_TARGET_BYTES {
        return refuse(
            StatusCode::URI_TOO_LONG,
            format!("the request target may be at most {MAX_TARGET_BYTES} bytes"),
        );
    }
    next.run(request).await
}

fn refuse(status: StatusCode, detail: String) -> Response {
    let mut problem = Problem::from_status(status);
    problem.detail = Some(detail);
    problem_response(problem)
}
