//! C-05: `Retry-After` (RFC 9110 §10.2.3) is honoured in both forms, a malformed one
//! falls back to the backoff, and a long one never outlives the deadline.

use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::app::{App, Db};
use crate::receiver::{Receiver, Reply};

const FLAGS: &[&str] = &["--backoff-base-ms", "200", "--backoff-max-ms", "400"];

async fn c05_retry_after_seconds_delays_the_next_attempt(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(429).header("retry-after", "3"),
        Reply::status(200),
    ])
    .await;
    let app = App::start(db, FLAGS).await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-seconds", json!({})).await;
    let retrying = app
        .wait_state(&job, "retrying", Duration::from_secs(3))
        .await;
    assert_eq!(retrying["waiting_reason"], "backing_off");
    assert!(retrying["next_attempt_at"].is_string());
    let requests = receiver.wait_for(2, Duration::from_secs(6)).await;
    let gap = requests[1].at - requests[0].at;
    assert!(gap >= Duration::from_secs(3), "retried after {gap:?}");
    assert!(gap < Duration::from_millis(4500), "retried after {gap:?}");
    app.wait_state(&job, "delivered", Duration::from_secs(2))
        .await;
}

async fn c05_retry_after_http_date_delays_the_next_attempt(db: Db) {
    let at = SystemTime::now() + Duration::from_secs(4);
    let receiver = Receiver::start(vec![
        Reply::status(503).header("retry-after", &httpdate::fmt_http_date(at)),
        Reply::status(200),
    ])
    .await;
    let app = App::start(db, FLAGS).await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-date", json!({})).await;
    let requests = receiver.wait_for(2, Duration::from_secs(7)).await;
    // HTTP-dates have whole seconds: the date may be up to 1 s before `at`.
    let floor = at - Duration::from_secs(1);
    assert!(requests[1].wall >= floor, "retried before the date");
    app.wait_state(&job, "delivered", Duration::from_secs(2))
        .await;
}

async fn c05_a_malformed_retry_after_falls_back_to_the_backoff(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(429).header("retry-after", "abc"),
        Reply::status(200),
    ])
    .await;
    let app = App::start(db, FLAGS).await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-abc", json!({})).await;
    let done = app
        .wait_state(&job, "delivered", Duration::from_secs(3))
        .await;
    assert_eq!(done["attempts"], 2);
    let requests = receiver.requests();
    let gap = requests[1].at - requests[0].at;
    // Backoff after attempt 1: 200 ms nominal, equal jitter: 100–200 ms.
    assert!(gap >= Duration::from_millis(100), "retried after {gap:?}");
    assert!(gap < Duration::from_millis(1500), "retried after {gap:?}");
}

async fn c05_a_retry_after_beyond_the_deadline_is_a_dead_letter_now(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(429).header("retry-after", "86400")]).await;
    let app = App::start(db, FLAGS).await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-ra-long", json!({ "ttl_ms": 5000 })).await;
    let dead = app.wait_state(&job, "dead", Duration::from_secs(3)).await;
    assert_eq!(dead["dead_reason"], "deadline_exceeded");
    assert_eq!(dead["last_error"]["status"], 429);
    assert_eq!(dead["last_error"]["class"], "http_429");
    assert_eq!(dead["attempts"], 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
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
