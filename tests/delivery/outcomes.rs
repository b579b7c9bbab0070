//! Retryable and terminal answers, deadlines and the last error kept.

use std::time::{Duration, Instant};

use deferhook::domain::Timestamp;
use serde_json::json;

use crate::app::Db;
use crate::receiver::{Receiver, Reply};
use crate::setup::{assert_next_attempt_within, instance, step_until};

/// One hour: far past any backoff of these tests, well within a job's default ttl.
const LATER_MS: i64 = 3_600_000;

async fn two_503s_then_200_is_three_attempts_of_the_same_bytes(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(503).body("down"),
        Reply::status(503).body("down"),
        Reply::status(200),
    ])
    .await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app
        .job_raw(r#"{"subscriber_id":"s","event_id":"evt-3","payload":{"z": 1,  "a":[1.50, "x"]}}"#)
        .await;
    // Backoff: base 100 ms doubling with equal jitter -> 50 to 100 ms, then 100 to 200.
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_next_attempt_within(&app, 50, 100).await;
    assert_next_attempt_within(&app, 100, 200).await;
    let done = app.job_now(&job).await;
    assert_eq!(done["state"], "delivered");
    assert_eq!(done["attempts"], 3);
    // The last error stays on the job for the record.
    assert_eq!(done["last_error"]["status"], 503);
    assert_eq!(done["last_error"]["class"], "http_5xx");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(request.header("webhook-id"), "evt-3");
        assert_eq!(&request.body[..], br#"{"z": 1,  "a":[1.50, "x"]}"#);
    }
    let attempts = app.attempts(&job).await;
    let outcomes: Vec<_> = attempts.iter().map(|a| a["outcome"].clone()).collect();
    assert_eq!(
        outcomes,
        [json!("retryable"), json!("retryable"), json!("delivered")]
    );
    assert_eq!(attempts[0]["body_excerpt"], "down");
}

async fn a_400_is_dead_at_once(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(400).body("bad field x")]).await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-400", json!({})).await;
    app.run_pending().await;
    let dead = app.job_now(&job).await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["dead_reason"], "non_retryable_response");
    assert_eq!(dead["attempts"], 1);
    assert_eq!(dead["last_error"]["class"], "http_4xx");
    assert_eq!(dead["last_error"]["status"], 400);
    assert_eq!(dead["last_error"]["body_excerpt"], "bad field x");
    app.advance(LATER_MS);
    assert_eq!(app.run_pending().await.attempted(), 0, "retried");
    assert_eq!(receiver.requests().len(), 1);
}

async fn a_redirect_is_dead_and_never_followed(db: Db) {
    let target = Receiver::ok().await;
    let receiver = Receiver::start(vec![
        Reply::status(302).header("location", &target.url("/elsewhere")),
    ])
    .await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-302", json!({})).await;
    app.run_pending().await;
    let dead = app.job_now(&job).await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["dead_reason"], "non_retryable_response");
    assert_eq!(dead["last_error"]["class"], "http_3xx");
    assert_eq!(dead["last_error"]["status"], 302);
    app.advance(LATER_MS);
    assert_eq!(app.run_pending().await.attempted(), 0, "retried");
    assert!(
        target.requests().is_empty(),
        "the redirect target was requested"
    );
}

async fn max_attempts_makes_a_dead_letter(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(500)]).await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-max", json!({ "max_attempts": 2 })).await;
    let dead = step_until(&app, &job, "dead", 3).await;
    assert_eq!(dead["dead_reason"], "max_attempts");
    assert_eq!(dead["attempts"], 2);
    app.advance(LATER_MS);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(receiver.requests().len(), 2);
}

/// C-06: deadline 6 s, attempt timeout 2 s, receiver always 500 with body `E42`.
async fn c06_retries_stop_at_the_deadline_and_keep_the_real_error(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(500).body("E42")]).await;
    let app = instance(db)
        .flags(&["--backoff-base-ms", "500", "--backoff-max-ms", "2000"])
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-c06", json!({ "ttl_ms": 6000 })).await;
    let deadline = Timestamp::parse_rfc3339(job["deadline"].as_str().unwrap()).unwrap();
    assert_eq!(deadline.millis_since(app.now()), 6000);
    let dead = step_until(&app, &job, "dead", 20).await;
    assert_eq!(dead["dead_reason"], "deadline_exceeded");
    assert_eq!(dead["last_error"]["status"], 500);
    assert_eq!(dead["last_error"]["class"], "http_5xx");
    assert!(
        dead["last_error"]["body_excerpt"]
            .as_str()
            .unwrap()
            .contains("E42")
    );
    assert!(dead["attempts"].as_u64().unwrap() >= 2);
    // Dead within 1 s of the deadline (here: as soon as no retry fits before it).
    let dead_at = Timestamp::parse_rfc3339(dead["dead_at"].as_str().unwrap()).unwrap();
    assert!(dead_at <= deadline.plus_ms(1_000), "dead too late");
    app.advance(LATER_MS);
    assert_eq!(app.run_pending().await.attempted(), 0);
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts.len(), receiver.requests().len());
    for attempt in &attempts {
        let started = Timestamp::parse_rfc3339(attempt["started_at"].as_str().unwrap()).unwrap();
        assert!(started < deadline, "a request started after the deadline");
    }
}

async fn a_timeout_is_retried_and_the_attempt_says_so(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(200).after(Duration::from_millis(1500)),
        Reply::status(200),
    ])
    .await;
    let app = instance(db)
        .flags(&["--attempt-timeout-ms", "500"])
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-timeout", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    // The timed-out request is abandoned, long before the receiver would answer it.
    let abandoned = Instant::now() + Duration::from_millis(900);
    while receiver.open_now() > 0 {
        assert!(
            Instant::now() < abandoned,
            "the timed-out request is still open"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = step_until(&app, &job, "delivered", 3).await;
    assert_eq!(done["attempts"], 2);
    assert_eq!(done["last_error"]["class"], "timeout");
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts[0]["outcome"], "retryable");
    assert_eq!(attempts[0]["error_class"], "timeout");
    assert_eq!(receiver.max_open_per_id(), 1);
}

/// A subscriber's own `attempt_timeout_ms` (issue #33) bounds its attempts in place
/// of the server's: 300 ms here against the server's 2 s, while another subscriber on
/// the same receiver waits the server's.
async fn a_subscribers_own_attempt_timeout_bounds_its_attempts(db: Db) {
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(900))]).await;
    let app = instance(db).start().await;
    let quick = json!({"url": receiver.url("/quick"), "attempt_timeout_ms": 300});
    let put = app.put_json("/v1/subscribers/quick", &quick).await;
    assert_eq!(put.status, 201, "{}", put.text);
    app.subscriber("patient", &receiver.url("/patient"), None)
        .await;
    let short = app.job("quick", "evt-short", json!({})).await;
    let long = app.job("patient", "evt-long", json!({})).await;
    let started = Instant::now();
    assert_eq!(app.run_pending().await.attempted(), 2);
    let short = app.job_now(&short).await;
    assert_eq!(short["state"], "retrying", "{short}");
    assert_eq!(short["last_error"]["class"], "timeout");
    assert_eq!(
        short["last_error"]["reason"], "no answer within 300 ms",
        "{short}"
    );
    let long = app.job_now(&long).await;
    assert_eq!(long["state"], "delivered", "{long}");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

async fn a_connection_refused_is_retried(db: Db) {
    // A port bound but never listened on: connections are refused, and no other test
    // can take the port while this one runs (as it could after a listener's drop).
    let unlistened = tokio::net::TcpSocket::new_v4().unwrap();
    unlistened.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = unlistened.local_addr().unwrap().port();
    let app = instance(db).start().await;
    app.subscriber("s", &format!("http://127.0.0.1:{port}/"), None)
        .await;
    let job = app
        .job("s", "evt-refused", json!({ "ttl_ms": 10000 }))
        .await;
    app.run_pending().await;
    app.advance(100);
    app.run_pending().await;
    let retrying = app.job_now(&job).await;
    assert!(retrying["attempts"].as_u64() >= Some(2), "{retrying}");
    assert_eq!(retrying["last_error"]["class"], "connect");
    assert_eq!(retrying["last_error"]["status"], serde_json::Value::Null);
    drop(unlistened);
}

async fn an_endless_body_is_read_only_up_to_the_cap(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(500).endless(),
        Reply::status(200).endless(),
    ])
    .await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-huge", json!({})).await;
    let done = step_until(&app, &job, "delivered", 3).await;
    assert_eq!(done["attempts"], 2);
    let excerpt = done["last_error"]["body_excerpt"].as_str().unwrap();
    assert!(excerpt.len() <= 1024, "excerpt of {} bytes", excerpt.len());
    assert!(excerpt.starts_with("xxxx"));
}

async fn a_200_whose_body_stalls_is_delivered_not_retried(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(200).stalled()]).await;
    let app = instance(db)
        .flags(&["--attempt-timeout-ms", "500"])
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-stall", json!({})).await;
    let started = Instant::now();
    assert_eq!(app.run_pending().await.attempted(), 1);
    // The attempt ended at the timeout: the stalled body was cut short.
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "the attempt took {took:?}"
    );
    let done = app.job_now(&job).await;
    assert_eq!(done["state"], "delivered");
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["last_error"], serde_json::Value::Null);
    app.advance(LATER_MS);
    assert_eq!(app.run_pending().await.attempted(), 0, "retried");
    assert_eq!(receiver.requests().len(), 1);
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts[0]["outcome"], "delivered");
    assert_eq!(attempts[0]["status"], 200);
    assert!(attempts[0]["duration_ms"].as_i64().unwrap() < 1500);
}

/// docs/DESIGN.md §3: `410 Gone` is terminal for the job and pauses the subscriber; its other
/// jobs wait (deadlines running) until `PUT … enabled: true`.
async fn a_410_pauses_the_subscriber_until_resumed(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(410).body("gone")]).await;
    let app = instance(db).start().await;
    let put = |body: serde_json::Value| {
        let app = &app;
        async move { app.put_json("/v1/subscribers/g", &body).await.status }
    };
    let created = put(json!({ "url": receiver.url("/"), "max_in_flight": 1 })).await;
    assert_eq!(created, 201);
    let first = app.job("g", "gone-1", json!({})).await;
    let second = app.job("g", "gone-2", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let dead = app.job_now(&first).await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["dead_reason"], "non_retryable_response");
    assert_eq!(dead["last_error"]["status"], 410);
    let waiting = app.job_now(&second).await;
    assert_eq!(waiting["waiting_reason"], "subscriber_paused");
    assert_eq!(waiting["state"], "scheduled");
    assert_eq!(app.get_json("/v1/subscribers/g").await["enabled"], false);
    app.advance(1_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(
        receiver.requests().len(),
        1,
        "a paused subscriber got a request"
    );

    assert_eq!(
        put(json!({ "url": receiver.url("/"), "enabled": true })).await,
        200
    );
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&second).await["state"], "dead");
    assert_eq!(receiver.requests().len(), 2);
    assert_eq!(app.get_json("/v1/subscribers/g").await["enabled"], false);
}

crate::on_both_backends!(
    two_503s_then_200_is_three_attempts_of_the_same_bytes,
    a_400_is_dead_at_once,
    a_redirect_is_dead_and_never_followed,
    max_attempts_makes_a_dead_letter,
    c06_retries_stop_at_the_deadline_and_keep_the_real_error,
    a_timeout_is_retried_and_the_attempt_says_so,
    a_subscribers_own_attempt_timeout_bounds_its_attempts,
    a_connection_refused_is_retried,
    an_endless_body_is_read_only_up_to_the_cap,
    a_200_whose_body_stalls_is_delivered_not_retried,
    a_410_pauses_the_subscriber_until_resumed,
);
