//! The request id (`x-request-id`, docs/DESIGN.md §5.1): a client's id is kept only when
//! it is short and of safe characters, so that it can neither flood the log nor forge
//! the fields of a log line (`abc method=DELETE path=…`); any other value is dropped, and
//! tower-http's `SetRequestIdLayer`, the next layer, assigns a fresh UUID. The response
//! echoes the id used.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use super::REQUEST_ID_HEADER;

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

/// Middleware: removes the request's `x-request-id` unless it is one field whose value
/// is [`acceptable`], so that a fresh id replaces it.
pub async fn drop_unsafe_ids(mut request: Request, next: Next) -> Response {
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
    next.run(request).await
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
