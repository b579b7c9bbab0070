//! Limits on what a request may carry before any handler reads it: its headers (RFC
//! 6585 §5, 431) and its target (RFC 9110 §15.5.15, 414), checked before the request is
//! logged, so an oversized request writes nothing to the log; and the body length it
//! declares (RFC 9110 §15.5.14, 413), checked before its body is read. A body sent
//! without a length (chunked) is limited while it is read, by the body-limit layer
//! (413). List sizes are limited by each resource (`limit` ≤ 1000, 10,000 subscribers
//! per fan-out, 100,000 jobs per replay).

use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::REQUEST_ID_HEADER;
use super::problem::{AppError, FieldError, Problem, problem_response};
use super::request_id::{SERVER_REQUEST_ID_HEADER, ServerRequestId};

/// Most bytes of all header names and values together.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header fields.
pub const MAX_HEADERS: usize = 64;
/// Most bytes of the request target (path and query).
pub const MAX_TARGET_BYTES: usize = 8 * 1024;

/// Answers 431 to a request whose headers exceed [`MAX_HEADERS`] fields or
/// [`MAX_HEADER_BYTES`] bytes, and 414 to a target over [`MAX_TARGET_BYTES`]. It runs
/// before the request is logged or its `x-request-id` read: the refusal carries a fresh
/// server id of its own, as both its `x-request-id` and its `x-server-request-id`.
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

/// Answers 413 to a request whose `Content-Length` exceeds `max_body_bytes`, before
/// reading any of its body (a client that declares 10 MB and sends nothing is answered
/// at once, not held until the request timeout).
pub async fn limit_declared_body(
    State(max_body_bytes): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > max_body_bytes as u64) {
        return AppError::TooLarge(FieldError::new("body", "the request body is too large"))
            .into_response();
    }
    next.run(request).await
}

fn refuse(status: StatusCode, detail: String) -> Response {
    let mut problem = Problem::from_status(status);
    problem.detail = Some(detail);
    let mut response = problem_response(problem);
    let id = ServerRequestId::fresh().header_value();
    let headers = response.headers_mut();
    headers.insert(HeaderName::from_static(REQUEST_ID_HEADER), id.clone());
    headers.insert(HeaderName::from_static(SERVER_REQUEST_ID_HEADER), id);
    response
}
