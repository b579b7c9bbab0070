//! The on-call filters of `GET /v1/jobs`: `dead_reason`, `created_after`/`created_before`
//! and `dead_after`/`dead_before`; a comma-separated `state` list, `waiting_reason`,
//! `error_class` and `last_status`. Invalid ones are a 422 naming the field.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use serde_json::{Value, json};

use crate::app::{Db, answer};
use crate::support::{TestApp, app_with, at, expect_fields, expect_json, job, spawn_app};

async fn list(app: &TestApp, query: &str) -> Value {
    expect_json(&app.get(&format!("/v1/jobs?{query}")).await, 200)
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Claims the one due job and records a terminal failure with `reason` at the clock's
/// time (a 404, `http_4xx`).
async fn kill(app: &TestApp, reason: DeadReason) -> String {
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    let claimed = &claimed[0];
    let event = JobEvent::TerminalFailure { reason };
    let result = answer(
        AttemptOutcome::Terminal,
        Some(404),
        Some(ErrorClass::Http4xx),
    );
    app.record(claimed, event, result).await;
    claimed.job_id.to_string()
}

/// Claims the one due job and records a 503 (`http_5xx`), its next attempt in an hour.
async fn fail_503(app: &TestApp) -> String {
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    let claimed = &claimed[0];
    let event = JobEvent::RetryableFailure {
        retry_at: app.now().plus_ms(3_600_000),
    };
    let result = answer(
        AttemptOutcome::Retryable,
        Some(503),
        Some(ErrorClass::Http5xx),
    );
    app.record(claimed, event, result).await;
    claimed.job_id.to_string()
}

#[tokio::test]
async fn dead_letters_are_found_by_reason_and_by_when_they_died() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    app.create_job(&job("s", "a", json!({}))).await;
    let first = kill(&app, DeadReason::NonRetryableResponse).await;
    app.advance(1_000);
    app.create_job(&job("s", "b", json!({}))).await;
    let second = kill(&app, DeadReason::TargetRejected).await;
    app.advance(1_000);
    let waiting = app
        .create_job(&job("s", "c", json!({"delay_ms": 60_000})))
        .await;

    let by_reason = list(&app, "dead_reason=target_rejected").await;
    assert_eq!(ids(&by_reason), [second.as_str()]);
    assert_eq!(by_reason["items"][0]["dead_reason"], "target_rejected");
    let dead_from_1s = list(&app, &format!("dead_after={}", at(1_000))).await;
    assert_eq!(ids(&dead_from_1s), [second.as_str()]);
    let dead_before_1s = list(&app, &format!("state=dead&dead_before={}", at(1_000))).await;
    assert_eq!(ids(&dead_before_1s), [first.as_str()]);
    // Paging holds the filter: one dead job per page, then the end.
    let page = list(&app, "limit=1&dead_after=2026-01-01T00:00:00Z").await;
    assert_eq!(ids(&page), [second.as_str()]);
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let next = list(
        &app,
        &format!("limit=1&dead_after=2026-01-01T00:00:00Z&cursor={cursor}"),
    )
    .await;
    assert_eq!(ids(&next), [first.as_str()]);
    assert_eq!(next["next_cursor"], Value::Null);

    // Creation bounds come from the UUIDv7 ids (the system's clock made them).
    let all = list(&app, "created_after=2000-01-01T00:00:00%2B02:00").await;
    assert_eq!(
        ids(&all),
        [waiting["id"].as_str().unwrap(), &second, &first]
    );
    let none = list(&app, "created_before=2000-01-01T00:00:00Z").await;
    assert_eq!(none, json!({"items": [], "next_cursor": null}));
}

#[tokio::test]
async fn invalid_filters_are_a_422_naming_the_field() {
    let app = spawn_app().await;
    let noon = "2026-11-30T12:00:00Z";
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("dead_reason=tired".into(), vec!["dead_reason"]),
        ("dead_reason=".into(), vec!["dead_reason"]),
        ("subscriber_id=".into(), vec!["subscriber_id"]),
        ("subscriber_id=has%20space".into(), vec!["subscriber_id"]),
        (format!("event_id={}", "e".repeat(300)), vec!["event_id"]),
        (
            "created_after=2026-11-30T12:00:00".into(),
            vec!["created_after"],
        ),
        ("created_before=yesterday".into(), vec!["created_before"]),
        ("dead_after=2026-11-30".into(), vec!["dead_after"]),
        (
            "dead_before=2026-11-30T12:00:00".into(),
            vec!["dead_before"],
        ),
        (
            format!("created_after={noon}&created_before={noon}"),
            vec!["created_before"],
        ),
        (
            format!("dead_after=2026-11-30T12:00:01Z&dead_before={noon}"),
            vec!["dead_before"],
        ),
        (
            "state=retrying&dead_reason=max_attempts".into(),
            vec!["state"],
        ),
        (format!("state=delivered&dead_after={noon}"), vec!["state"]),
        (format!("state=scheduled&dead_before={noon}"), vec!["state"]),
        (
            "state=nope&dead_reason=nope&dead_after=x".into(),
            vec!["state", "dead_reason", "dead_after"],
        ),
    ];
    for (query, fields) in cases {
        let reply = app.get(&format!("/v1/jobs?{query}")).await;
        expect_fields(&reply, 422, &fields);
    }
    // state=dead is what the dead-only filters imply: accepted.
    list(
        &app,
        &format!("state=dead&dead_reason=max_attempts&dead_after={noon}"),
    )
    .await;
}

/// An incident in small: a dead letter (404), a job backing off after a 503, a job
/// whose worker died (its lease expired: it reads `retrying`), one in flight, one
/// scheduled and one waiting for its paused subscriber; each on-call question is one
/// listing.
async fn on_call_filters_answer_in_one_call(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    app.create_subscriber("p").await;
    app.create_job(&job("s", "a", json!({}))).await;
    let dead = kill(&app, DeadReason::NonRetryableResponse).await;
    app.create_job(&job("s", "b", json!({}))).await;
    let failing = fail_503(&app).await;
    app.create_job(&job("s", "c", json!({}))).await;
    let orphan = app.claim().await[0].job_id.to_string();
    app.advance(20_000);
    app.create_job(&job("s", "d", json!({}))).await;
    let running = app.claim().await[0].job_id.to_string();
    let scheduled = app
        .create_job(&job("s", "e", json!({"delay_ms": 600_000})))
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let paused_sub = json!({"url": "https://example.com/hooks/p", "enabled": false});
    expect_json(&app.put_json("/v1/subscribers/p", &paused_sub).await, 200);
    let paused = app.create_job(&job("p", "f", json!({}))).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.advance(10_000); // The orphan's 30 s lease has expired.

    let states = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["state"].as_str().unwrap().to_owned())
            .collect()
    };
    let not_delivered = list(&app, "state=retrying,dead").await;
    assert_eq!(
        ids(&not_delivered),
        [orphan.clone(), failing.clone(), dead.clone()]
    );
    assert_eq!(states(&not_delivered), ["retrying", "retrying", "dead"]);
    let again = list(&app, "state=dead,retrying,dead").await;
    assert_eq!(ids(&again), ids(&not_delivered), "duplicates are harmless");
    let in_flight = list(&app, "state=in_flight,scheduled").await;
    assert_eq!(
        ids(&in_flight),
        [paused.clone(), scheduled.clone(), running.clone()]
    );
    // Pages of one across the merged states neither skip nor repeat.
    let mut seen = Vec::new();
    let mut query = "state=retrying,in_flight,dead&limit=1".to_owned();
    loop {
        let page = list(&app, &query).await;
        seen.extend(ids(&page));
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        query = format!("state=retrying,in_flight,dead&limit=1&cursor={cursor}");
    }
    assert_eq!(
        seen,
        [
            running.clone(),
            orphan.clone(),
            failing.clone(),
            dead.clone()
        ]
    );

    for (reason, expected) in [
        ("backing_off", vec![failing.as_str()]),
        ("in_flight", vec![running.as_str()]),
        ("scheduled", vec![scheduled.as_str()]),
        ("subscriber_paused", vec![paused.as_str()]),
    ] {
        let page = list(&app, &format!("waiting_reason={reason}")).await;
        assert_eq!(ids(&page), expected, "{reason}");
        for item in page["items"].as_array().unwrap() {
            assert_eq!(item["waiting_reason"], reason, "{item}");
        }
    }
    let backing_off_5xx = list(
        &app,
        "state=retrying,dead&waiting_reason=backing_off&error_class=http_5xx&last_status=503",
    )
    .await;
    assert_eq!(ids(&backing_off_5xx), [failing.as_str()]);
    let by_class = list(&app, "error_class=http_4xx").await;
    assert_eq!(ids(&by_class), [dead.as_str()]);
    assert_eq!(by_class["items"][0]["last_error"]["status"], 404);
    assert_eq!(
        ids(&list(&app, "last_status=503").await),
        [failing.as_str()]
    );
    assert!(ids(&list(&app, "error_class=http_5xx&last_status=404").await).is_empty());
    let dead_only = list(&app, "state=dead&dead_reason=non_retryable_response").await;
    assert_eq!(ids(&dead_only), [dead.as_str()]);
}

#[tokio::test]
async fn on_call_filters_answer_in_one_call_sqlite() {
    on_call_filters_answer_in_one_call(Db::Sqlite).await;
}

#[tokio::test]
async fn on_call_filters_answer_in_one_call_postgres() {
    on_call_filters_answer_in_one_call(Db::Postgres).await;
}

#[tokio::test]
async fn invalid_on_call_filters_are_a_422_naming_the_field() {
    let app = spawn_app().await;
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("state=retrying,nope", vec!["state"]),
        ("state=retrying,", vec!["state"]),
        ("state=,dead", vec!["state"]),
        ("state=retrying,,dead", vec!["state"]),
        (
            "state=dead,retrying&dead_reason=max_attempts",
            vec!["state"],
        ),
        ("waiting_reason=idle", vec!["waiting_reason"]),
        ("waiting_reason=subscriber_at_limit", vec!["waiting_reason"]),
        (
            "waiting_reason=destination_circuit_open",
            vec!["waiting_reason"],
        ),
        (
            "waiting_reason=backing_off&state=dead",
            vec!["waiting_reason"],
        ),
        ("error_class=http_500", vec!["error_class"]),
        ("last_status=99", vec!["last_status"]),
        ("last_status=600", vec!["last_status"]),
        ("last_status=5xx", vec!["last_status"]),
        (
            "state=x&waiting_reason=y&error_class=z&last_status=0",
            vec!["state", "waiting_reason", "error_class", "last_status"],
        ),
    ];
    for (query, fields) in cases {
        let reply = app.get(&format!("/v1/jobs?{query}")).await;
        expect_fields(&reply, 422, &fields);
    }
    list(&app, "state=dead,dead&dead_reason=max_attempts").await;
}
