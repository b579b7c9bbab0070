//! `/v1/subscribers`: create, update, read, list, and every invalid field.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::support::{at, expect_fields, expect_json, expect_problem, spawn_app};
use deferhook::testing::START_TEXT;

/// A valid caller-chosen secret (the Standard Webhooks example, 24 key bytes).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn keys(body: &Value) -> BTreeSet<&str> {
    body.as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn put_creates_with_defaults_and_shows_the_secret_once() {
    let app = spawn_app().await;
    let reply = app
        .put_json(
            "/v1/subscribers/billing",
            &json!({"url": "https://example.com/hooks"}),
        )
        .await;
    let body = expect_json(&reply, 201);
    assert_eq!(reply.header("location"), Some("/v1/subscribers/billing"));
    let secret = body["secret"]
        .as_str()
        .expect("secret on create")
        .to_owned();
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64");
    assert_eq!(key.len(), 32);
    assert_eq!(reply.text.matches("whsec_").count(), 1, "{}", reply.text);
    let mut without_secret = body.clone();
    without_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(
        without_secret,
        json!({
            "id": "billing",
            "url": "https://example.com/hooks",
            "destination": "example.com:443",
            "max_in_flight": 16,
            "rate_limit_per_second": null,
            "enabled": true,
            "paused_reason": null,
            "paused_at": null,
            "created_at": START_TEXT,
            "updated_at": START_TEXT,
            "event_types": [],
            "attempt_timeout_ms": null,
            "health": {
                "status": "healthy", "since": null, "last_error": null,
                "jobs": {"scheduled": 0, "in_flight": 0, "retrying": 0},
                "dead_last_hour": 0, "failing_jobs": 0,
                "paused_reason": null, "paused_at": null, "retry_advice": null,
            },
        })
    );

    // Never again: not on update, read or list.
    app.advance(1_000);
    let again = app
        .put_json(
            "/v1/subscribers/billing",
            &json!({"url": "https://example.com/v2", "max_in_flight": 4,
                    "rate_limit_per_second": 10, "enabled": false}),
        )
        .await;
    let updated = expect_json(&again, 200);
    assert!(!keys(&updated).contains("secret"), "{updated}");
    assert_eq!(again.header("location"), None);
    assert_eq!(
        updated,
        json!({
            "id": "billing",
            "url": "https://example.com/v2",
            "destination": "example.com:443",
            "max_in_flight": 4,
            "rate_limit_per_second": 10,
            "enabled": false,
            "paused_reason": "operator",
            "paused_at": at(1_000),
            "created_at": START_TEXT,
            "updated_at": at(1_000),
            "event_types": [],
            "attempt_timeout_ms": null,
            "health": {
                "status": "paused",
                "since": at(1_000),
                "last_error": null,
                "jobs": {"scheduled": 0, "in_flight": 0, "retrying": 0},
                "dead_last_hour": 0,
                "failing_jobs": 0,
                "paused_reason": "operator",
                "paused_at": at(1_000),
                "retry_advice": {
                    "verdict": "after_resume",
                    "reason": "its subscriber is paused: nothing is sent until it is resumed",
                    "at": null,
                },
            },
        })
    );
    let read = app.get("/v1/subscribers/billing").await;
    assert_eq!(expect_json(&read, 200), updated);
    let list = app.get("/v1/subscribers").await;
    assert_eq!(expect_json(&list, 200)["items"], json!([updated]));
    for reply in [&again, &read, &list] {
        assert!(!reply.text.contains(&secret), "{}", reply.text);
        assert!(!reply.text.contains("secret"), "{}", reply.text);
    }
}

#[tokio::test]
async fn a_chosen_secret_is_echoed_on_create_only() {
    let app = spawn_app().await;
    let path = "/v1/subscribers/chosen";
    let body = json!({"url": "https://example.com/h", "secret": SECRET});
    let created = app.put_json(path, &body).await;
    assert_eq!(expect_json(&created, 201)["secret"], SECRET);
    let updated = app.put_json(path, &body).await;
    assert_eq!(updated.status, 200);
    assert!(!updated.text.contains(SECRET), "{}", updated.text);
}

#[tokio::test]
async fn update_keeps_omitted_fields_and_null_clears_the_rate_limit() {
    let app = spawn_app().await;
    let path = "/v1/subscribers/rl";
    let first = app
        .put_json(
            path,
            &json!({"url": "https://example.com/a", "rate_limit_per_second": 7, "max_in_flight": 3}),
        )
        .await;
    assert_eq!(expect_json(&first, 201)["rate_limit_per_second"], 7);
    let kept = app
        .put_json(path, &json!({"url": "https://example.com/b"}))
        .await;
    let kept = expect_json(&kept, 200);
    assert_eq!(
        (
            &kept["rate_limit_per_second"],
            &kept["max_in_flight"],
            &kept["enabled"]
        ),
        (&json!(7), &json!(3), &json!(true))
    );
    let cleared = app
        .put_json(
            path,
            &json!({"url": "https://example.com/b", "rate_limit_per_second": null}),
        )
        .await;
    let cleared = expect_json(&cleared, 200);
    assert_eq!(cleared["rate_limit_per_second"], Value::Null);
    assert_eq!(cleared["max_in_flight"], 3);
    let read = expect_json(&app.get(path).await, 200);
    assert_eq!(read["rate_limit_per_second"], Value::Null);
}

#[tokio::test]
async fn an_attempt_timeout_is_set_kept_patched_and_cleared() {
    let app = spawn_app().await;
    let path = "/v1/subscribers/slow";
    let body = json!({"url": "https://example.com/s", "attempt_timeout_ms": 29_000});
    let created = app.put_json(path, &body).await;
    assert_eq!(expect_json(&created, 201)["attempt_timeout_ms"], 29_000);
    let kept = app
        .put_json(path, &json!({"url": "https://example.com/s"}))
        .await;
    assert_eq!(expect_json(&kept, 200)["attempt_timeout_ms"], 29_000);
    let patched = app
        .patch_json(path, &json!({"attempt_timeout_ms": 8_000}))
        .await;
    assert_eq!(expect_json(&patched, 200)["attempt_timeout_ms"], 8_000);
    let refused = app
        .patch_json(path, &json!({"attempt_timeout_ms": 60_000}))
        .await;
    expect_fields(&refused, 422, &["attempt_timeout_ms"]);
    assert_eq!(
        expect_json(&app.get(path).await, 200)["attempt_timeout_ms"],
        8_000,
        "nothing written"
    );
    let cleared = app
        .patch_json(path, &json!({"attempt_timeout_ms": null}))
        .await;
    assert_eq!(
        expect_json(&cleared, 200)["attempt_timeout_ms"],
        Value::Null
    );
}

#[tokio::test]
async fn get_unknown_is_a_404_problem() {
    let app = spawn_app().await;
    let body = expect_problem(&app.get("/v1/subscribers/nobody").await, 404);
    assert_eq!(body["detail"], "subscriber `nobody` does not exist");
}

#[tokio::test]
async fn list_pages_in_id_order_to_the_end() {
    let app = spawn_app().await;
    for id in ["s-3", "s-1", "s-5", "s-2", "s-4"] {
        app.create_subscriber(id).await;
    }
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut path = "/v1/subscribers?limit=2".to_owned();
    loop {
        let page = expect_json(&app.get(&path).await, 200);
        let ids: Vec<String> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        pages.push(ids.len());
        seen.extend(ids);
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/subscribers?limit=2&cursor={cursor}"),
            None => {
                assert_eq!(page["next_cursor"], Value::Null);
                break;
            }
        }
        assert!(pages.len() < 10, "paging does not end");
    }
    assert_eq!(pages, [2, 2, 1]);
    assert_eq!(seen, ["s-1", "s-2", "s-3", "s-4", "s-5"]);
}

#[tokio::test]
async fn a_full_last_page_ends_the_listing() {
    let app = spawn_app().await;
    for id in ["a", "b"] {
        app.create_subscriber(id).await;
    }
    let page = expect_json(&app.get("/v1/subscribers?limit=2").await, 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["next_cursor"], Value::Null);
}

#[tokio::test]
async fn each_invalid_field_is_named() {
    let app = spawn_app().await;
    let url = "https://example.com/h";
    let cases: Vec<(&str, Value, &str)> = vec![
        ("ok-id", json!({"url": "ftp://x"}), "url"),
        ("ok-id", json!({"url": "not a url"}), "url"),
        (
            "ok-id",
            json!({"url": "https://user:pw@example.com/"}),
            "url",
        ),
        ("ok-id", json!({"url": "https://example.com/#frag"}), "url"),
        ("a%20b", json!({"url": url}), "subscriber_id"),
        (
            "ok-id",
            json!({"url": url, "max_in_flight": 0}),
            "max_in_flight",
        ),
        (
            "ok-id",
            json!({"url": url, "max_in_flight": 10_001}),
            "max_in_flight",
        ),
        (
            "ok-id",
            json!({"url": url, "max_in_flight": -1}),
            "max_in_flight",
        ),
        (
            "ok-id",
            json!({"url": url, "rate_limit_per_second": 0}),
            "rate_limit_per_second",
        ),
        ("ok-id", json!({"url": url, "enabled": "yes"}), "enabled"),
        (
            "ok-id",
            json!({"url": url, "attempt_timeout_ms": 99}),
            "attempt_timeout_ms",
        ),
        (
            "ok-id",
            // Past the lease (30 s) less its margin (1 s).
            json!({"url": url, "attempt_timeout_ms": 29_001}),
            "attempt_timeout_ms",
        ),
        (
            "ok-id",
            json!({"url": url, "attempt_timeout_ms": "5s"}),
            "attempt_timeout_ms",
        ),
        ("ok-id", json!({"secret": SECRET}), "url"),
        ("ok-id", json!({"url": url, "colour": "red"}), "colour"),
    ];
    for (id, body, field) in cases {
        let reply = app.put_json(&format!("/v1/subscribers/{id}"), &body).await;
        expect_fields(&reply, 422, &[field]);
    }
    let two = app
        .put_json("/v1/subscribers/a%20b", &json!({"url": "ftp://x"}))
        .await;
    expect_fields(&two, 422, &["subscriber_id", "url"]);
    let none = expect_json(&app.get("/v1/subscribers").await, 200);
    assert_eq!(none["items"], json!([]));
}

#[tokio::test]
async fn a_bad_secret_is_refused_without_echoing_it() {
    let app = spawn_app().await;
    for secret in [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_not base64 at all!!",
        "whsec_c2hvcnQtc2VjcmV0LXRleHQ=",
        "whsec_",
    ] {
        let reply = app
            .put_json(
                "/v1/subscribers/s",
                &json!({"url": "https://example.com/h", "secret": secret}),
            )
            .await;
        expect_fields(&reply, 422, &["secret"]);
        assert!(
            !reply.text.contains(secret),
            "{secret} echoed: {}",
            reply.text
        );
        let tail = secret.trim_start_matches("whsec_");
        if !tail.is_empty() {
            assert!(!reply.text.contains(tail), "{tail} echoed: {}", reply.text);
        }
    }
    expect_problem(&app.get("/v1/subscribers/s").await, 404);
}

#[tokio::test]
async fn list_rejects_bad_parameters() {
    let app = spawn_app().await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("cursor=!!", "cursor"),
        ("cursor=YSBi", "cursor"), // base64 of "a b", not a subscriber id
        ("sort=id", "sort"),
    ] {
        let reply = app.get(&format!("/v1/subscribers?{query}")).await;
        expect_fields(&reply, 422, &[field]);
    }
}
