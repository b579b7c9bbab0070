//! `POST /v1/events`: one job per subscriber, all or nothing, idempotent per
//! (subscriber, event).

use serde_json::{Value, json};

use crate::support::{expect_fields, expect_json, spawn_app};
use deferhook::testing::START_TEXT;

fn ids(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn listed(app: &crate::support::TestApp, event: &str) -> usize {
    let body = expect_json(&app.get(&format!("/v1/jobs?event_id={event}")).await, 200);
    body["items"].as_array().unwrap().len()
}

#[tokio::test]
async fn one_job_per_subscriber_in_order() {
    let app = spawn_app().await;
    for id in ["a", "b", "c"] {
        app.create_subscriber(id).await;
    }
    let request = json!({
        "event_id": "room-7:cleanup",
        "payload": {"room": 7},
        "subscriber_ids": ["c", "a", "b"],
        "delay_ms": 1000,
    });
    let body = expect_json(&app.post_json("/v1/events", &request).await, 201);
    let items = body["items"].as_array().unwrap();
    let subscribers: Vec<&str> = items
        .iter()
        .map(|j| j["subscriber_id"].as_str().unwrap())
        .collect();
    assert_eq!(subscribers, ["c", "a", "b"]);
    for job in items {
        assert_eq!(job["event_id"], "room-7:cleanup");
        assert_eq!(job["state"], "scheduled");
        assert_eq!(job["deliver_at"], "2026-11-30T12:00:01.000Z");
        assert_eq!(job["created_at"], START_TEXT);
    }
    assert_eq!(listed(&app, "room-7:cleanup").await, 3);

    // The same fan-out again: 200, the same jobs.
    let again = expect_json(&app.post_json("/v1/events", &request).await, 200);
    assert_eq!(ids(&again), ids(&body));
    assert_eq!(listed(&app, "room-7:cleanup").await, 3);

    // One more subscriber: 201, the existing three kept.
    app.create_subscriber("d").await;
    let wider = json!({
        "event_id": "room-7:cleanup",
        "payload": {"room": 7},
        "subscriber_ids": ["a", "b", "c", "d"],
    });
    let body = expect_json(&app.post_json("/v1/events", &wider).await, 201);
    assert_eq!(ids(&body).len(), 4);
    assert_eq!(listed(&app, "room-7:cleanup").await, 4);
}

#[tokio::test]
async fn a_conflict_or_an_unknown_subscriber_creates_nothing() {
    let app = spawn_app().await;
    for id in ["a", "b"] {
        app.create_subscriber(id).await;
    }
    let first = json!({"event_id": "e", "payload": {"v": 1}, "subscriber_ids": ["a"]});
    expect_json(&app.post_json("/v1/events", &first).await, 201);

    let conflicting = json!({"event_id": "e", "payload": {"v": 2}, "subscriber_ids": ["b", "a"]});
    let reply = app.post_json("/v1/events", &conflicting).await;
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(listed(&app, "e").await, 1, "b's job was not created");

    let unknown = json!({"event_id": "e2", "payload": {}, "subscriber_ids": ["a", "ghost"]});
    let reply = app.post_json("/v1/events", &unknown).await;
    expect_fields(&reply, 404, &["subscriber_ids"]);
    assert_eq!(listed(&app, "e2").await, 0);
}

#[tokio::test]
async fn bad_subscriber_lists_are_named() {
    let app = spawn_app().await;
    app.create_subscriber("a").await;
    let post = |ids: Value| {
        let request = json!({"event_id": "e", "payload": {}, "subscriber_ids": ids});
        let app = &app;
        async move { app.post_json("/v1/events", &request).await }
    };
    expect_fields(&post(json!([])).await, 422, &["subscriber_ids"]);
    expect_fields(&post(json!(["a", "a"])).await, 422, &["subscriber_ids[1]"]);
    expect_fields(
        &post(json!(["a", "b c"])).await,
        422,
        &["subscriber_ids[1]"],
    );
    let too_many: Vec<String> = (0..10_001).map(|n| format!("s{n}")).collect();
    let reply = post(json!(too_many)).await;
    let body = expect_fields(&reply, 422, &["subscriber_ids"]);
    assert!(body["detail"].as_str().unwrap().contains("10000"), "{body}");
    expect_fields(
        &app.post_json(
            "/v1/events",
            &json!({"event_id": "e", "payload": null, "subscriber_ids": ["a"], "delay_ms": 1, "deliver_at": START_TEXT}),
        )
        .await,
        422,
        &["payload", "delay_ms"],
    );
    assert_eq!(listed(&app, "e").await, 0);
}
