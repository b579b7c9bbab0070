//! `POST /v1/jobs`: the job object, scheduling semantics under a manual clock, and the
//! payload kept byte for byte.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{app_with, at, expect_json, job, spawn_app};
use deferhook::testing::START_TEXT;

/// Every field docs/DESIGN.md §5 names for the job object.
const DESIGN_FIELDS: [&str; 14] = [
    "id",
    "event_id",
    "subscriber_id",
    "state",
    "attempts",
    "deliver_at",
    "next_attempt_at",
    "deadline",
    "created_at",
    "updated_at",
    "delivered_at",
    "dead_reason",
    "waiting_reason",
    "last_error",
];

const DAY_MS: u64 = 86_400_000;

#[tokio::test]
async fn create_answers_201_with_the_whole_job_and_its_location() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let reply = app
        .post_json("/v1/jobs", &job("s", "evt-1", json!({"delay_ms": 5000})))
        .await;
    let body = expect_json(&reply, 201);
    let id = body["id"].as_str().expect("id");
    assert_eq!(Uuid::parse_str(id).unwrap().get_version_num(), 7);
    assert_eq!(
        reply.header("location"),
        Some(format!("/v1/jobs/{id}").as_str())
    );
    let expected = json!({
        "id": id,
        "event_id": "evt-1",
        "subscriber_id": "s",
        "state": "scheduled",
        "attempts": 0,
        "deliver_at": at(5_000),
        "next_attempt_at": null,
        "deadline": at(5_000 + DAY_MS),
        "created_at": START_TEXT,
        "updated_at": START_TEXT,
        "delivered_at": null,
        "dead_reason": null,
        "waiting_reason": "scheduled",
        "last_error": null,
    });
    for field in DESIGN_FIELDS {
        assert!(body.get(field).is_some(), "missing {field}: {body}");
        assert_eq!(body[field], expected[field], "{field}: {body}");
    }
    assert_eq!(body["max_attempts"], Value::Null);
    assert_eq!(body["lease"], Value::Null);
}

#[tokio::test]
async fn get_answers_the_same_object_and_waiting_reason_follows_the_clock() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&job("s", "e", json!({"delay_ms": 5000, "max_attempts": 3})))
        .await;
    assert_eq!(created["max_attempts"], 3);
    let path = format!("/v1/jobs/{}", created["id"].as_str().unwrap());
    let read = expect_json(&app.get(&path).await, 200);
    assert_eq!(read, created);

    app.advance(4_999);
    let before = expect_json(&app.get(&path).await, 200);
    assert_eq!(before["waiting_reason"], "scheduled");
    app.advance(1);
    let due = expect_json(&app.get(&path).await, 200);
    assert_eq!(due["waiting_reason"], Value::Null);
    let mut unchanged = due.clone();
    unchanged["waiting_reason"] = json!("scheduled");
    assert_eq!(
        unchanged, created,
        "only waiting_reason moves with the clock"
    );
}

#[tokio::test]
async fn without_scheduling_fields_it_is_due_now_with_the_default_ttl() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let body = app.create_job(&job("s", "e", json!({}))).await;
    assert_eq!(body["deliver_at"], START_TEXT);
    assert_eq!(body["deadline"], at(DAY_MS));
    assert_eq!(body["waiting_reason"], Value::Null);
}

#[tokio::test]
async fn times_with_offsets_are_normalised_to_utc() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let body = app
        .create_job(&job(
            "s",
            "e",
            json!({"deliver_at": "2026-11-30T14:30:00.250+02:00",
                   "deadline": "2026-12-01T00:00:00-05:00"}),
        ))
        .await;
    assert_eq!(body["deliver_at"], "2026-11-30T12:30:00.250Z");
    assert_eq!(body["deadline"], "2026-12-01T05:00:00.000Z");
    let defaulted = app
        .create_job(&job(
            "s",
            "e2",
            json!({"deliver_at": "2026-11-30T14:30:00.250+02:00"}),
        ))
        .await;
    assert_eq!(defaulted["deadline"], "2026-12-01T12:30:00.250Z");
}

#[tokio::test]
async fn a_past_deliver_at_means_now() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let body = app
        .create_job(&job(
            "s",
            "e",
            json!({"deliver_at": "2020-01-01T00:00:00Z"}),
        ))
        .await;
    assert_eq!(body["deliver_at"], START_TEXT);
    assert_eq!(body["deadline"], at(DAY_MS));
    assert_eq!(body["waiting_reason"], Value::Null);
}

#[tokio::test]
async fn ttl_ms_counts_from_deliver_at() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let delayed = app
        .create_job(&job("s", "e1", json!({"delay_ms": 2000, "ttl_ms": 1000})))
        .await;
    assert_eq!(
        (&delayed["deliver_at"], &delayed["deadline"]),
        (&json!(at(2_000)), &json!(at(3_000)))
    );
    let explicit = app
        .create_job(&job(
            "s",
            "e2",
            json!({"deliver_at": "2026-11-30T13:00:00Z", "ttl_ms": 500}),
        ))
        .await;
    assert_eq!(explicit["deadline"], "2026-11-30T13:00:00.500Z");
}

#[tokio::test]
async fn the_default_ttl_comes_from_the_flag() {
    let app = app_with().flag("--default-ttl-ms", 60_000).start().await;
    app.create_subscriber("s").await;
    let body = app
        .create_job(&job("s", "e", json!({"delay_ms": 1000})))
        .await;
    assert_eq!(body["deadline"], at(61_000));
}

#[tokio::test]
async fn the_payload_is_stored_byte_for_byte() {
    let app = app_with().flag("--max-payload-bytes", 1024).start().await;
    app.create_subscriber("s").await;
    let payload = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;
    let body = format!(
        r#"{{ "subscriber_id": "s", "event_id": "c-07", "delay_ms": 1000,
             "payload":   {payload}  }}"#
    );
    let reply = app.post_raw("/v1/jobs", body).await;
    let created = expect_json(&reply, 201);
    assert!(app.claim().await.is_empty(), "claimed before deliver_at");
    app.advance(1_000);
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(&*claimed[0].payload, payload);
    assert_eq!(
        claimed[0].job_id.to_string(),
        created["id"].as_str().unwrap()
    );
    assert_eq!(claimed[0].event_id, "c-07");
    assert_eq!(claimed[0].url, "https://example.com/hooks/s");
}

#[tokio::test]
async fn a_paused_subscriber_explains_a_due_job() {
    let app = spawn_app().await;
    app.put_json(
        "/v1/subscribers/s",
        &json!({"url": "https://example.com/h", "enabled": false}),
    )
    .await;
    let body = app.create_job(&job("s", "e", json!({}))).await;
    assert_eq!(body["waiting_reason"], "subscriber_paused");
    let later = app
        .create_job(&job("s", "e2", json!({"delay_ms": 10})))
        .await;
    assert_eq!(later["waiting_reason"], "scheduled");
}

#[tokio::test]
async fn a_due_job_explains_its_subscribers_limits() {
    let app = spawn_app().await;
    app.put_json(
        "/v1/subscribers/s",
        &json!({"url": "https://example.com/h", "max_in_flight": 1, "rate_limit_per_second": 1}),
    )
    .await;
    let first = app.create_job(&job("s", "e1", json!({}))).await;
    assert_eq!(first["waiting_reason"], serde_json::Value::Null);
    app.create_job(&job("s", "e2", json!({}))).await;
    assert_eq!(app.claim().await.len(), 1, "max_in_flight 1");
    let second = expect_json(&app.get("/v1/jobs?event_id=e2").await, 200);
    assert_eq!(second["items"][0]["waiting_reason"], "subscriber_at_limit");
    let first = expect_json(
        &app.get(&format!("/v1/jobs/{}", first["id"].as_str().unwrap()))
            .await,
        200,
    );
    assert_eq!(first["waiting_reason"], "in_flight");

    // Room again (max_in_flight 5), but one attempt started within the last second.
    app.put_json(
        "/v1/subscribers/s",
        &json!({"url": "https://example.com/h", "max_in_flight": 5}),
    )
    .await;
    let second = expect_json(&app.get("/v1/jobs?event_id=e2").await, 200);
    assert_eq!(
        second["items"][0]["waiting_reason"],
        "subscriber_rate_limited"
    );
    app.advance(1_000);
    let second = expect_json(&app.get("/v1/jobs?event_id=e2").await, 200);
    assert_eq!(
        second["items"][0]["waiting_reason"],
        serde_json::Value::Null
    );
}
