//! `POST /v1/jobs/{id}/retry`: a `retrying` job made due at once (docs/DESIGN.md §2.3,
//! §5.2), on both backends; refused (409) for any other state, past the deadline, and
//! for an unknown (404) or malformed (422) id.

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::store::ClaimedJob;
use reqwest::Method;
use serde_json::{Value, json};

use crate::app::{Db, answer};
use crate::support::{TestApp, app_with, at, expect_fields, expect_json, expect_problem, job};

async fn retry(app: &TestApp, id: &str) -> crate::support::Reply {
    app.send(app.request(Method::POST, &format!("/v1/jobs/{id}/retry")))
        .await
}

/// Records `claimed`'s attempt as ending now: a 503 retried `retry_in_ms` later, or
/// (`None`) a 200.
async fn finish(app: &TestApp, claimed: &ClaimedJob, retry_in_ms: Option<u64>) {
    let (event, result) = match retry_in_ms {
        Some(ms) => (
            JobEvent::RetryableFailure {
                retry_at: app.now().plus_ms(ms),
            },
            answer(
                AttemptOutcome::Retryable,
                Some(503),
                Some(ErrorClass::Http5xx),
            ),
        ),
        None => (
            JobEvent::Delivered,
            answer(AttemptOutcome::Delivered, Some(200), None),
        ),
    };
    app.record(claimed, event, result).await;
}

/// A job created now whose first attempt failed, retrying in 60 s (at `at(60_000)`).
async fn retrying_job(app: &TestApp, event_id: &str, ttl_ms: u64) -> Value {
    let created = app
        .create_job(&job("s", event_id, json!({"ttl_ms": ttl_ms})))
        .await;
    let claimed = app.claim().await.remove(0);
    finish(app, &claimed, Some(60_000)).await;
    created
}

async fn retry_makes_a_retrying_job_due_now(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let created = retrying_job(&app, "e", 3_600_000).await;
    let id = created["id"].as_str().unwrap();
    app.advance(5_000);
    assert!(
        app.claim().await.is_empty(),
        "not due before next_attempt_at"
    );

    let retried = expect_json(&retry(&app, id).await, 200);
    assert_eq!(retried["state"], "retrying", "{retried}");
    assert_eq!(retried["next_attempt_at"], at(5_000), "{retried}");
    assert_eq!(retried["attempts"], 1);
    assert_eq!(
        retried["deadline"], created["deadline"],
        "the deadline is kept"
    );
    let read = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(read["next_attempt_at"], at(5_000), "{read}");
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1, "due at once");
    assert_eq!(claimed[0].attempt, 2);
    let again = expect_problem(&retry(&app, id).await, 409);
    assert!(
        again["detail"].as_str().unwrap().contains("in_flight"),
        "{again}"
    );
}

async fn retry_of_a_job_not_retrying_is_refused(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let scheduled = app
        .create_job(&job("s", "later", json!({"delay_ms": 60_000})))
        .await;
    let delivered = app.create_job(&job("s", "now", json!({}))).await;
    let claimed = app.claim().await.remove(0);
    finish(&app, &claimed, None).await;
    for (created, state) in [(&scheduled, "scheduled"), (&delivered, "delivered")] {
        let id = created["id"].as_str().unwrap();
        let refused = expect_problem(&retry(&app, id).await, 409);
        let detail = refused["detail"].as_str().unwrap();
        assert!(detail.contains(state), "{refused}");
        assert!(detail.contains("only retrying jobs"), "{refused}");
        let read = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
        assert_eq!(read["state"], state, "unchanged");
    }
    let scheduled_now = expect_json(
        &app.get(&format!("/v1/jobs/{}", scheduled["id"].as_str().unwrap()))
            .await,
        200,
    );
    assert_eq!(scheduled_now["deliver_at"], scheduled["deliver_at"]);

    let missing = uuid::Uuid::now_v7().to_string();
    expect_problem(&retry(&app, &missing).await, 404);
    expect_fields(&retry(&app, "not-a-uuid").await, 422, &["job_id"]);
}

/// A retrying job whose deadline has passed before the sweep made it dead is left
/// to the sweep (409).
async fn retry_past_the_deadline_is_refused(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&job("s", "short", json!({"ttl_ms": 90_000})))
        .await;
    let id = created["id"].as_str().unwrap();
    let claimed = app.claim().await.remove(0);
    finish(&app, &claimed, Some(80_000)).await;
    app.advance(90_000);
    let refused = expect_problem(&retry(&app, id).await, 409);
    assert!(
        refused["detail"].as_str().unwrap().contains("deadline"),
        "{refused}"
    );
    let read = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(read["next_attempt_at"], at(80_000), "unchanged: {read}");
}

/// A job whose lease expired reads `retrying`; a retry ends the expired lease (its
/// attempt recorded `unknown`), as a cancel does, and the job is claimed again.
async fn retry_of_a_job_whose_lease_expired_ends_the_lease(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let created = app.create_job(&job("s", "e", json!({}))).await;
    let id = created["id"].as_str().unwrap();
    let first = app.claim().await.remove(0);
    app.advance(45_000);

    let retried = expect_json(&retry(&app, id).await, 200);
    assert_eq!(retried["state"], "retrying", "{retried}");
    assert_eq!(retried["lease"], Value::Null);
    assert_eq!(retried["next_attempt_at"], at(45_000), "{retried}");
    let attempts = app.attempts(&created).await;
    assert_eq!(attempts[0]["outcome"], "unknown", "{attempts:?}");
    assert_eq!(
        attempts[0]["finished_at"],
        at(45_000),
        "recorded by the retry"
    );
    let second = app.claim().await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].attempt, 2);
    assert!(second[0].lease_token > first.lease_token, "a new lease");
}

/// The retry's answer is the job as `GET` shows it: brought forward behind an open
/// circuit, it waits for the circuit, and its advice says so (not "sent now").
async fn a_retry_behind_an_open_circuit_answers_what_holds_it(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let created = retrying_job(&app, "e", 3_600_000).await;
    let id = created["id"].as_str().unwrap();
    let opened = app
        .put_json(
            "/v1/destinations/example.com:443",
            &json!({"circuit": "open"}),
        )
        .await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let retried = expect_json(&retry(&app, id).await, 200);
    assert_eq!(
        retried["waiting_reason"], "destination_circuit_open",
        "{retried}"
    );
    assert_eq!(
        retried["retry_advice"]["verdict"], "not_before",
        "{retried}"
    );
    let read = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(read["waiting_reason"], retried["waiting_reason"]);
    assert_eq!(read["retry_advice"], retried["retry_advice"]);
}

crate::on_both_backends!(
    a_retry_behind_an_open_circuit_answers_what_holds_it,
    retry_makes_a_retrying_job_due_now,
    retry_of_a_job_not_retrying_is_refused,
    retry_past_the_deadline_is_refused,
    retry_of_a_job_whose_lease_expired_ends_the_lease,
);
