//! C-05: `Retry-After` (RFC 9110 §10.2.3) is honoured in both forms, a malformed one
//! falls back to the backoff, and a long one never outlives the deadline.

use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::app::Db;
use crate::receiver::{Receiver, Reply};
use crate::setup::{assert_next_attempt_within, instance};

const FLAGS: &[&str] = &["--backoff-base-ms", "200", "--backoff-max-ms", "400"];

async fn c05_retry_after_seconds_delays_the_next_attempt(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(429).header("retry-after", "3"),
        Reply::status(200),
    ])
    .await;
    let app = instance(db).flags(FLAGS).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-seconds", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let retrying = app.job_now(&job).await;
    assert_eq!(retrying["state"], "retrying");
    assert_eq!(retrying["waiting_reason"], "backing_off");
    assert!(retrying["next_attempt_at"].is_string());
    // Retried 3 s after the 429 (and well before 4.5 s).
    assert_next_attempt_within(&app, 3_000, 3_000).await;
    assert_eq!(receiver.requests().len(), 2);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
}

async fn c05_retry_after_http_date_delays_the_next_attempt(db: Db) {
    let at = SystemTime::UNIX_EPOCH
        + Duration::from_millis(deferhook::testing::START.plus_ms(4_000).as_millis() as u64);
    let receiver = Receiver::start(vec![
        Reply::status(503).header("retry-after", &httpdate::fmt_http_date(at)),
        Reply::status(200),
    ])
    .await;
    let app = instance(db).flags(FLAGS).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-date", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    // HTTP-dates have whole seconds: the date may be up to 1 s before `at`.
    assert_next_attempt_within(&app, 3_000, 4_000).await;
    assert_eq!(receiver.requests().len(), 2);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
}

async fn c05_a_malformed_retry_after_falls_back_to_the_backoff(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(429).header("retry-after", "abc"),
        Reply::status(200),
    ])
    .await;
    let app = instance(db).flags(FLAGS).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-abc", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    // Backoff after attempt 1: 200 ms nominal, equal jitter: 100–200 ms.
    assert_next_attempt_within(&app, 100, 200).await;
    let done = app.job_now(&job).await;
    assert_eq!(done["state"], "delivered");
    assert_eq!(done["attempts"], 2);
}

async fn c05_a_retry_after_beyond_the_deadline_is_a_dead_letter_now(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(429).header("retry-after", "86400")]).await;
    let app = instance(db).flags(FLAGS).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-long", json!({ "ttl_ms": 5000 })).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let dead = app.job_now(&job).await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["dead_reason"], "deadline_exceeded");
    assert_eq!(dead["last_error"]["status"], 429);
    assert_eq!(dead["last_error"]["class"], "http_429");
    assert_eq!(dead["attempts"], 1);
    app.advance(86_400_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(
        receiver.requests().len(),
        1,
        "no attempt after the deadline"
    );
}

crate::on_both_backends!(
    c05_retry_after_seconds_delays_the_next_attempt,
    c05_retry_after_http_date_delays_the_next_attempt,
    c05_a_malformed_retry_after_falls_back_to_the_backoff,
    c05_a_retry_after_beyond_the_deadline_is_a_dead_letter_now,
);
