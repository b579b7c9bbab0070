//! Request ids (issue #15 part 5.1): a client's `x-request-id` is kept only when it is
//! at most 64 characters of `A–Z a–z 0–9 . _ : -`; any other — one that would forge
//! fields of a log line, a long one, several — is replaced by the server's own id of the
//! request, a fresh UUID that every response carries in `x-server-request-id` (issue
//! #34 part 4.10), whatever the client sent.

use reqwest::Method;

use crate::support::{Reply, TestApp, spawn_app};

/// The client's id replaced by the server's own: a UUID.
fn assert_fresh_uuid(reply: &Reply, sent: &str) {
    let echoed = reply.header("x-request-id").expect("an x-request-id");
    assert_ne!(echoed, sent);
    assert!(uuid::Uuid::parse_str(echoed).is_ok(), "{echoed}");
    assert_eq!(reply.header("x-server-request-id"), Some(echoed));
}

async fn get_with_ids(app: &TestApp, path: &str, ids: &[&str]) -> Reply {
    let mut request = app.request(Method::GET, path);
    for id in ids {
        request = request.header("x-request-id", *id);
    }
    app.send(request).await
}

#[tokio::test]
async fn an_id_that_would_forge_log_fields_is_replaced() {
    let app = spawn_app().await;
    let forged = "abc method=DELETE path=/v1/subscribers/billing}: status=204";
    for path in ["/v1/jobs", "/v1/nothing"] {
        let reply = get_with_ids(&app, path, &[forged]).await;
        assert_fresh_uuid(&reply, forged);
    }
    for forged in ["a\"b", "x{y}", "a=b", "tab\there"] {
        assert_fresh_uuid(&get_with_ids(&app, "/healthz", &[forged]).await, forged);
    }
}

#[tokio::test]
async fn a_long_id_is_replaced() {
    let app = spawn_app().await;
    let longest = "i".repeat(64);
    let kept = get_with_ids(&app, "/healthz", &[&longest]).await;
    assert_eq!(kept.header("x-request-id"), Some(longest.as_str()));
    let long = "i".repeat(65);
    assert_fresh_uuid(&get_with_ids(&app, "/healthz", &[&long]).await, &long);
}

#[tokio::test]
async fn several_ids_are_replaced_by_one() {
    let app = spawn_app().await;
    let reply = get_with_ids(&app, "/healthz", &["first-id", "second-id"]).await;
    assert_fresh_uuid(&reply, "first-id");
    assert_eq!(reply.headers.get_all("x-request-id").iter().count(), 1);
}

#[tokio::test]
async fn a_safe_id_is_echoed() {
    let app = spawn_app().await;
    let id = "0192d6a4-7c1e-7b3a-9f0e-2c4d5e6f7a8b:svc_a.2";
    let reply = get_with_ids(&app, "/v1/jobs", &[id]).await;
    assert_eq!(reply.header("x-request-id"), Some(id));
}

/// The server's id is its own, fresh for each request: a client that sends the
/// server's id of an earlier request as its `x-request-id`, or as an
/// `x-server-request-id`, gets a new one.
#[tokio::test]
async fn the_server_s_id_is_fresh_for_every_request() {
    let app = spawn_app().await;
    let first = get_with_ids(&app, "/v1/jobs", &[]).await;
    let server_id = first.header("x-server-request-id").unwrap().to_owned();
    assert_eq!(first.header("x-request-id"), Some(server_id.as_str()));

    let request = app
        .request(Method::GET, "/v1/jobs")
        .header("x-request-id", &server_id)
        .header("x-server-request-id", &server_id);
    let copied = app.send(request).await;
    assert_eq!(copied.header("x-request-id"), Some(server_id.as_str()));
    let again = copied.header("x-server-request-id").unwrap();
    assert_ne!(again, server_id);
    assert_eq!(
        copied.headers.get_all("x-server-request-id").iter().count(),
        1
    );
}
