//! What the API tests share: the instance they start (the one harness,
//! `tests/common/app.rs`, with the API alone and a manual clock at
//! [`deferhook::testing::START`]) and the assertions on its answers.

use deferhook::testing::START;
use serde_json::Value;

pub use crate::app::{AppBuilder, Reply, TestApp, job};

/// An API-only instance (`--no-worker`: the tests claim jobs through the store
/// themselves) with the CLI's defaults.
pub async fn spawn_app() -> TestApp {
    app_with().start().await
}

/// An API-only instance with extra flags:
/// `app_with().flag("--max-payload-bytes", 1024).start().await`.
pub fn app_with() -> AppBuilder {
    TestApp::builder().no_worker()
}

/// `START + ms` as the API writes it.
pub fn at(ms: u64) -> String {
    START.plus_ms(ms).to_rfc3339()
}

/// Asserts a JSON success with `status` and returns its body.
pub fn expect_json(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{reply:?}"
    );
    reply.json()
}

/// Asserts an RFC 9457 problem with `status` (in the body too) and the status's
/// standard title; returns its body.
pub fn expect_problem(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json"),
        "{reply:?}"
    );
    let body = reply.json();
    assert_eq!(body["status"], status, "{body}");
    let title = reqwest::StatusCode::from_u16(status)
        .unwrap()
        .canonical_reason()
        .unwrap();
    assert_eq!(body["title"], title, "{body}");
    assert_eq!(body["type"], "about:blank", "{body}");
    body
}

/// Asserts a problem with `status` whose `errors` name exactly `fields`, each with a
/// message; returns its body.
pub fn expect_fields(reply: &Reply, status: u16, fields: &[&str]) -> Value {
    let body = expect_problem(reply, status);
    let errors = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    let named: Vec<&str> = errors
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    assert_eq!(named, fields, "{body}");
    for error in errors {
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    body
}
