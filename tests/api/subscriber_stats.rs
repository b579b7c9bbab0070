//! `GET /v1/subscribers/{id}/stats`: jobs per state, the oldest eligible age as of the
//! server's clock, the last success and the last failure; 404 for an unknown subscriber.

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::store::AttemptResult;
use serde_json::{Value, json};

use crate::support::{TestApp, at, expect_json, expect_problem, job, spawn_app};

async fn stats(app: &TestApp, id: &str) -> Value {
    expect_json(&app.get(&format!("/v1/subscribers/{id}/stats")).await, 200)
}

#[tokio::test]
async fn stats_show_counts_the_oldest_eligible_age_and_the_last_outcomes() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    app.create_job(&job("s", "now", json!({}))).await;
    app.create_job(&job("s", "later", json!({"delay_ms": 60_000})))
        .await;
    app.advance(2_500);

    let fresh = stats(&app, "s").await;
    assert_eq!(
        fresh,
        json!({
            "subscriber_id": "s",
            "jobs": {"scheduled": 2, "in_flight": 0, "retrying": 0, "delivered": 0,
                     "dead": 0, "cancelled": 0},
            "oldest_eligible_age_ms": 2_500,
            "last_success_at": null,
            "last_failure": null,
        })
    );

    // The due job fails with a 503 and is retried 1 s later; then it is delivered.
    let claimed = app.claim().await.remove(0);
    let failure = AttemptResult {
        outcome: AttemptOutcome::Retryable,
        status: Some(503),
        error_class: Some(ErrorClass::Http5xx),
        reason: Some("503 Service Unavailable".into()),
        body_excerpt: None,
        resent: false,
    };
    let retry_at = app.now().plus_ms(1_000);
    app.record(&claimed, JobEvent::RetryableFailure { retry_at }, failure)
        .await;
    app.advance(1_500);
    let retrying = stats(&app, "s").await;
    assert_eq!(retrying["jobs"]["retrying"], 1);
    assert_eq!(retrying["oldest_eligible_age_ms"], 500, "{retrying}");
    assert_eq!(
        retrying["last_failure"],
        json!({"at": at(2_500), "class": "http_5xx", "status": 503,
               "reason": "503 Service Unavailable"})
    );

    let claimed = app.claim().await.remove(0);
    let success = AttemptResult {
        outcome: AttemptOutcome::Delivered,
        status: Some(200),
        error_class: None,
        reason: None,
        body_excerpt: None,
        resent: false,
    };
    app.record(&claimed, JobEvent::Delivered, success).await;
    let done = stats(&app, "s").await;
    assert_eq!(done["jobs"]["delivered"], 1);
    assert_eq!(done["jobs"]["scheduled"], 1);
    assert_eq!(done["oldest_eligible_age_ms"], Value::Null);
    assert_eq!(done["last_success_at"], at(4_000));
    assert_eq!(done["last_failure"]["at"], at(2_500));
}

#[tokio::test]
async fn stats_of_an_unknown_subscriber_are_a_404() {
    let app = spawn_app().await;
    let reply = app.get("/v1/subscribers/nobody/stats").await;
    let problem = expect_problem(&reply, 404);
    assert!(
        problem["detail"].as_str().unwrap().contains("nobody"),
        "{problem}"
    );
}
