//! The on-call filters of `GET /v1/jobs`: `dead_reason`, `created_after`/`created_before`
//! and `dead_after`/`dead_before`. Invalid ones are a 422 naming the field.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use deferhook::store::{AttemptResult, LeaseRef, OutcomeRecord};
use serde_json::{Value, json};

use crate::support::{TestApp, at, expect_fields, expect_json, job, spawn_app};

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
/// time.
async fn kill(app: &TestApp, reason: DeadReason) -> String {
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    let claimed = &claimed[0];
    let now = app.now();
    let record = OutcomeRecord {
        lease: LeaseRef {
            job_id: claimed.job_id,
            token: claimed.lease_token,
        },
        attempt: claimed.attempt,
        started_at: now,
        finished_at: now,
        result: AttemptResult {
            outcome: AttemptOutcome::Terminal,
            status: Some(404),
            error_class: Some(ErrorClass::Http4xx),
            reason: Some("404 Not Found".into()),
            body_excerpt: None,
            resent: false,
        },
        transition: transition(&claimed.snapshot, JobEvent::TerminalFailure { reason }, now)
            .unwrap(),
        pause_subscriber: false,
    };
    app.store.record_outcomes(&[record], now).await.unwrap();
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
