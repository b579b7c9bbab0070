//! Request ids (docs/DESIGN.md §5.1). Two per request:
//!
//! - The server's own id ([`ServerRequestId`]): a fresh random UUID given to every
//!   request by [`assign_ids`], never taken from the client, kept in the request's
//!   extensions and answered in `x-server-request-id`. The audit trail records it, so
//!   an entry's id cannot be copied by another actor (issue #34 part 4.10).
//! - The request id (`x-request-id`): a client's id is kept only when it is short and
//!   of safe characters, so that it can neither flood the log nor forge the fields of a
//!   log line (`abc method=DELETE path=…`); any other value is dropped, and
//!   tower-http's `SetRequestIdLayer`, the next layer, sets the server's id in its
//!   place ([`ServerIdAsRequestId`]), so a client that sends none sees one id. The
//!   response echoes the id used.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::request_id::{MakeRequestId, MakeRequestUuid, RequestId};
use uuid::Uuid;

use super::REQUEST_ID_HEADER;

/// The response header carrying the server's id of the request.
pub const SERVER_REQUEST_ID_HEADER: &str = "x-server-request-id";

/// The id the server gave a request: a random (version 4) UUID, never the client's;
/// in the request's extensions from [`assign_ids`] on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerRequestId(pub Uuid);

impl ServerRequestId {
    /// A fresh id.
    pub fn fresh() -> Self {
        ServerRequestId(Uuid::new_v4())
    }

    /// The id as a header value (hyphenated, lower case).
    pub fn header_value(self) -> HeaderValue {
        HeaderValue::from_str(&self.0.to_string()).expect("a UUID is a valid header value")
    }
}

/// Longest request id kept, in bytes (a UUID is 36).
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// True for an id of 1 to [`MAX_REQUEST_ID_LEN`] characters of `A–Z a–z 0–9 . _ : -`
/// (a UUID, a ULID, `req-42`, `svc:2026-12-01.7`): nothing a log line would need to
/// escape.
pub fn acceptable(id: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID_LEN).contains(&id.len())
        && id
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Middleware: gives the request its [`ServerRequestId`] (in its extensions, and in
/// the answer's `x-server-request-id`), and removes its `x-request-id` unless it is one
/// field whose value is [`acceptable`], so that the server's id replaces it.
pub async fn assign_ids(mut request: Request, next: Next) -> Response {
    let server_id = ServerRequestId::fresh();
    request.extensions_mut().insert(server_id);
    let headers = request.headers_mut();
    let mut ids = headers.get_all(REQUEST_ID_HEADER).iter();
    let keep = match (ids.next(), ids.next()) {
        (Some(id), None) => acceptable(id.as_bytes()),
        (None, _) => true,
        (Some(_), Some(_)) => false,
    };
    if !keep {
        headers.remove(REQUEST_ID_HEADER);
    }
    let mut response = next.run(request).await;
    response.headers_mut().insert(
        HeaderName::from_static(SERVER_REQUEST_ID_HEADER),
        server_id.header_value(),
    );
    response
}

/// The request id `SetRequestIdLayer` gives a request without an acceptable one: the
/// server's own ([`ServerRequestId`], set by [`assign_ids`]); a fresh UUID should that
/// layer ever run first.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerIdAsRequestId;

impl MakeRequestId for ServerIdAsRequestId {
    fn make_request_id<B>(&mut self, request: &axum::http::Request<B>) -> Option<RequestId> {
        match request.extensions().get::<ServerRequestId>() {
            Some(id) => Some(RequestId::new(id.header_value())),
            None => MakeRequestUuid.make_request_id(request),
        }
    }
}

/// Both ids of a request, as the audit trail records them (docs/DESIGN.md §5.11).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestIds {
    /// The request's `x-request-id`: the client's when acceptable, else the server's.
    pub request_id: Option<String>,
    /// The server's id ([`ServerRequestId`]); `None` only outside the API's middleware.
    pub server_request_id: Option<Uuid>,
}

impl RequestIds {
    /// The ids of a request with these headers and extensions.
    pub fn of(headers: &HeaderMap, extensions: &Extensions) -> Self {
        RequestIds {
            request_id: headers
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            server_request_id: extensions.get::<ServerRequestId>().map(|id| id.0),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestIds {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(RequestIds::of(&parts.headers, &parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_of_safe_characters_are_kept() {
        for id in [
            "0192d6a4-7c1e-7b3a-9f0e-2c4d5e6f7a8b",
            "01JDX4ZKQ8R7S6T5V4W3X2Y1Z0",
            "req-42",
            "svc:2026-12-01.7_a",
            "x",
        ] {
            assert!(acceptable(id.as_bytes()), "{id}");
        }
        assert!(acceptable("a".repeat(MAX_REQUEST_ID_LEN).as_bytes()));
    }

    #[test]
    fn a_request_without_an_id_takes_the_server_s() {
        let server_id = ServerRequestId::fresh();
        let mut request = axum::http::Request::new(());
        request.extensions_mut().insert(server_id);
        let made = ServerIdAsRequestId.make_request_id(&request).unwrap();
        assert_eq!(made.header_value(), &server_id.header_value());
        assert_ne!(ServerRequestId::fresh(), server_id);
    }

    #[test]
    fn long_empty_or_unsafe_ids_are_refused() {
        for id in [
            "",
            "abc method=DELETE path=/v1/subscribers/billing}: status=204",
            "a\"b",
            "a=b",
            "a{b}",
            "tab\there",
            "é",
        ] {
            assert!(!acceptable(id.as_bytes()), "{id}");
        }
        assert!(!acceptable("a".repeat(MAX_REQUEST_ID_LEN + 1).as_bytes()));
    }
}
