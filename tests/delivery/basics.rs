//! Delivery now and after a delay; the attempt history; metrics.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::app::{Db, metric};
use crate::receiver::Receiver;
use crate::setup::instance;

async fn a_job_due_now_is_delivered_once(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/hook"), None).await;
    let job = app.job("s", "evt-now", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let done = app.job_now(&job).await;
    assert_eq!(done["state"], "delivered");
    assert_eq!(done["attempts"], 1);
    assert!(done["delivered_at"].is_string());
    assert_eq!(done["waiting_reason"], serde_json::Value::Null);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/hook");
    assert_eq!(requests[0].header("webhook-id"), "evt-now");
    assert_eq!(requests[0].header("content-type"), "application/json");
    assert!(requests[0].header("user-agent").starts_with("deferhook/"));
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["number"], 1);
    assert_eq!(attempts[0]["outcome"], "delivered");
    assert_eq!(attempts[0]["status"], 200);
    assert_eq!(attempts[0]["possible_duplicate"], false);
    assert!(attempts[0]["duration_ms"].as_i64().unwrap() >= 0);
}

async fn a_delayed_job_waits_for_deliver_at(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-later", json!({ "delay_ms": 1500 })).await;
    assert_eq!(job["waiting_reason"], "scheduled");
    app.advance(1499);
    assert_eq!(app.run_pending().await.attempted(), 0, "sent early");
    assert!(receiver.requests().is_empty(), "sent early");
    app.advance(1);
    assert_eq!(app.run_pending().await.attempted(), 1, "not sent when due");
    assert_eq!(app.job_now(&job).await["state"], "delivered");
}

/// The running loop sleeps until the next due time, not the 1 s poll: a job due 1.5 s
/// after it was created is sent then (by the system clock), not up to a poll later.
async fn a_running_worker_claims_a_delayed_job_promptly(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).system_clock().running_worker().start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let created = Instant::now();
    let job = app.job("s", "evt-later", json!({ "delay_ms": 1500 })).await;
    let requests = receiver.wait_for(1, Duration::from_secs(5)).await;
    let waited = requests[0].at.duration_since(created);
    assert!(
        waited >= Duration::from_millis(1500),
        "sent early: {waited:?}"
    );
    // Woken at the due time, not by a slow poll.
    assert!(
        waited < Duration::from_millis(2400),
        "sent late: {waited:?}"
    );
    app.wait_state(&job, "delivered", Duration::from_secs(2))
        .await;
}

async fn metrics_count_accepted_jobs_and_attempts(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    let before = app.metrics().await;
    for series in [
        "deferhook_jobs_accepted_total",
        "deferhook_lease_extensions_total",
        "deferhook_lease_expirations_total",
        "deferhook_possible_duplicates_total",
        "deferhook_late_results_total",
        "deferhook_replayed_total",
        "deferhook_oldest_eligible_age_seconds",
        "deferhook_oldest_retrying_age_seconds",
        "deferhook_jobs_past_slo",
        "deferhook_jobs_near_deadline",
        "deferhook_jobs{state=\"scheduled\"}",
        "deferhook_dead_letters_total{reason=\"deadline_exceeded\"}",
        "deferhook_attempts_total{outcome=\"delivered\",class=\"none\"}",
    ] {
        metric(&before, series);
    }
    app.subscriber("s", &receiver.url("/"), None).await;
    app.job("s", "evt-metrics", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let after = app.metrics().await;
    // Tests share one process-wide recorder, so compare as lower bounds.
    let accepted = "deferhook_jobs_accepted_total";
    assert!(metric(&after, accepted) >= metric(&before, accepted) + 1.0);
    let delivered = "deferhook_attempts_total{outcome=\"delivered\",class=\"none\"}";
    assert!(metric(&after, delivered) >= metric(&before, delivered) + 1.0);
    assert_eq!(metric(&after, "deferhook_jobs{state=\"delivered\"}"), 1.0);
    assert!(after.contains("deferhook_attempt_duration_seconds_bucket"));
    assert!(after.contains("deferhook_claim_delay_seconds_bucket"));
    assert!(after.contains("deferhook_retry_depth_bucket"));
}

crate::on_both_backends!(
    a_job_due_now_is_delivered_once,
    a_delayed_job_waits_for_deliver_at,
    a_running_worker_claims_a_delayed_job_promptly,
    metrics_count_accepted_jobs_and_attempts,
);
