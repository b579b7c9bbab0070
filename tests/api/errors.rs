//! Every bad `POST /v1/jobs` is problem+json naming the field at fault, and stores
//! nothing.

use serde_json::{Value, json};

use crate::support::{
    TestApp, app_with, expect_fields, expect_json, expect_problem, job, spawn_app,
};

async fn assert_no_jobs(app: &TestApp) {
    let page = expect_json(&app.get("/v1/jobs").await, 200);
    assert_eq!(page, json!({"items": [], "next_cursor": null}));
}

#[tokio::test]
async fn malformed_json_is_a_400_about_the_body() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    for (body, field) in [
        (
            r#"{"subscriber_id": "s", "event_id": "e", "payload": {"a": 1}"#,
            "body",
        ),
        (
            r#"{"subscriber_id": "s", "event_id": "e", "payload": {"a": 1}} x"#,
            "body",
        ),
        ("", "body"),
        // A syntax error inside a field names that field.
        (r#"{"subscriber_id": 's'}"#, "subscriber_id"),
        (
            r#"{"subscriber_id": "s", "event_id": "e", "payload": {"a": }}"#,
            "payload",
        ),
    ] {
        let reply = app.post_raw("/v1/jobs", body).await;
        let problem = expect_fields(&reply, 400, &[field]);
        let message = problem["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("line 1, column"), "{message}");
    }
    assert_no_jobs(&app).await;
}

#[tokio::test]
async fn each_missing_required_field_is_named() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    for field in ["subscriber_id", "event_id", "payload"] {
        let mut body = job("s", "e", json!({}));
        body.as_object_mut().unwrap().remove(field);
        let reply = app.post_json("/v1/jobs", &body).await;
        expect_fields(&reply, 422, &[field]);
    }
    assert_no_jobs(&app).await;
}

#[tokio::test]
async fn each_invalid_field_is_named() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"deliver_at": "2026-12-01T10:00:00Z", "delay_ms": 1000}),
            "delay_ms",
        ),
        (
            json!({"deadline": "2026-12-02T10:00:00Z", "ttl_ms": 1000}),
            "ttl_ms",
        ),
        (
            json!({"deliver_at": "2026-12-01T10:00:00Z", "deadline": "2026-12-01T10:00:00Z"}),
            "deadline",
        ),
        (
            json!({"deliver_at": "2026-12-01T10:00:00Z", "deadline": "2026-12-01T09:00:00Z"}),
            "deadline",
        ),
        // deliver_at in the past means now, so the deadline must be after now.
        (
            json!({"deliver_at": "2020-01-01T00:00:00Z", "deadline": "2020-01-02T00:00:00Z"}),
            "deadline",
        ),
        (
            json!({"delay_ms": 5000, "deadline": "2026-11-30T12:00:04Z"}),
            "deadline",
        ),
        (json!({"ttl_ms": 0}), "ttl_ms"),
        // At the end of time no deadline after deliver_at exists.
        (json!({"delay_ms": u64::MAX}), "delay_ms"),
        (
            json!({"deliver_at": "9999-12-31T23:59:59.999Z"}),
            "deliver_at",
        ),
        (
            json!({"deliver_at": "9999-12-31T23:59:59.999Z", "ttl_ms": 1}),
            "ttl_ms",
        ),
        // Short of it, the default TTL is not cut to fit: give a deadline (issue #15).
        (json!({"deliver_at": "9999-12-31T23:59:59Z"}), "deadline"),
        (
            json!({"deliver_at": "9999-12-31T23:59:59Z", "ttl_ms": 1000}),
            "ttl_ms",
        ),
        (json!({"deliver_at": "2026-12-01T10:00:00"}), "deliver_at"),
        (json!({"deliver_at": "tomorrow"}), "deliver_at"),
        (json!({"deadline": "2026-12-01T10:00:00"}), "deadline"),
        (json!({"delay_ms": -5}), "delay_ms"),
        (json!({"delay_ms": "5000"}), "delay_ms"),
        (json!({"max_attempts": 0}), "max_attempts"),
        (json!({"max_attempts": 10_001}), "max_attempts"),
        (json!({"payload": null}), "payload"),
        (json!({"event_id": "two words"}), "event_id"),
        (json!({"event_id": ""}), "event_id"),
        (json!({"subscriber_id": "a b"}), "subscriber_id"),
        (json!({"delay": 5}), "delay"),
    ];
    for (extra, field) in cases {
        let body = job("s", "e", extra);
        let reply = app.post_json("/v1/jobs", &body).await;
        expect_fields(&reply, 422, &[field]);
    }
    let all = json!({"subscriber_id": "a b", "event_id": "", "payload": null, "ttl_ms": 0});
    let reply = app.post_json("/v1/jobs", &all).await;
    expect_fields(
        &reply,
        422,
        &["subscriber_id", "event_id", "payload", "ttl_ms"],
    );
    for not_an_object in [r#""s""#, "42", "null"] {
        let reply = app.post_raw("/v1/jobs", not_an_object).await;
        expect_fields(&reply, 422, &["body"]);
    }
    assert_no_jobs(&app).await;
}

/// serde would fill the request struct from an array, by position.
#[tokio::test]
async fn an_array_body_is_refused_not_read_by_position() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let positional = r#" ["s", "e", {"a": 1}, null, null, null, null, null]"#;
    let body = expect_fields(&app.post_raw("/v1/jobs", positional).await, 422, &["body"]);
    assert_eq!(body["errors"][0]["message"], "must be a JSON object");
    let put = app
        .request(reqwest::Method::PUT, "/v1/subscribers/t")
        .header("content-type", "application/json")
        .body(r#"["https://example.com/", null, null, null, null]"#);
    expect_fields(&app.send(put).await, 422, &["body"]);
    expect_problem(&app.get("/v1/subscribers/t").await, 404);
    assert_no_jobs(&app).await;
}

#[tokio::test]
async fn a_payload_over_the_limit_is_a_413_about_the_payload() {
    let app = app_with().flag("--max-payload-bytes", 1024).start().await;
    app.create_subscriber("s").await;
    // The limit counts the payload's JSON text: a string of n letters is n + 2 bytes.
    let at_limit = job("s", "fits", json!({"payload": "x".repeat(1022)}));
    expect_json(&app.post_json("/v1/jobs", &at_limit).await, 201);
    let over = job("s", "over", json!({"payload": "x".repeat(1023)}));
    let body = expect_fields(&app.post_json("/v1/jobs", &over).await, 413, &["payload"]);
    assert_eq!(
        body["errors"][0]["message"],
        "is 1025 bytes; at most 1024 are accepted"
    );
    let listed = expect_json(&app.get("/v1/jobs?event_id=over").await, 200);
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn a_body_far_over_the_limit_is_a_413() {
    let app = app_with().flag("--max-payload-bytes", 1024).start().await;
    app.create_subscriber("s").await;
    // Beyond the body limit (payload limit + room for a 10,000-subscriber fan-out).
    let huge = job("s", "huge", json!({"payload": "x".repeat(3_000_000)}));
    let reply = app.post_json("/v1/jobs", &huge).await;
    expect_fields(&reply, 413, &["body"]);
    assert_no_jobs(&app).await;
}

#[tokio::test]
async fn an_unknown_subscriber_is_a_404() {
    let app = spawn_app().await;
    let reply = app
        .post_json("/v1/jobs", &job("ghost", "e", json!({})))
        .await;
    let body = expect_fields(&reply, 404, &["subscriber_id"]);
    assert_eq!(
        body["errors"][0]["message"],
        "subscriber `ghost` does not exist"
    );
    app.create_subscriber("s").await;
    assert_no_jobs(&app).await;
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_415() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let text = serde_json::to_string(&job("s", "e", json!({}))).unwrap();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = app
            .request(reqwest::Method::POST, "/v1/jobs")
            .body(text.clone());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let body = expect_problem(&app.send(request).await, 415);
        assert_eq!(body["detail"], "the body must be application/json");
    }
    let put = app
        .request(reqwest::Method::PUT, "/v1/subscribers/t")
        .header("content-type", "text/plain")
        .body(r#"{"url": "https://example.com/"}"#);
    expect_problem(&app.send(put).await, 415);
    assert_no_jobs(&app).await;
}
