//! The circuit breakers of issue #14 and #33, stepped with a manual clock:
//! `--circuit-failure-threshold 3 --circuit-cooldown-ms 10000`, the endpoint breakers'
//! defaults (5 results in 60 s, 50 % failed).
//!
//! - A destination (`host:port`) whose subscribers all answer 503 opens its circuit
//!   (the failures are spread over all of them); while open its due jobs wait without
//!   spending an attempt (deadlines still run); after each cool-down exactly one probe
//!   goes out, a failed probe doubles the cool-down and a 200 closes the circuit and
//!   lets the backlog drain.
//! - One subscriber's 500s on a shared host open its own endpoint circuit only: its
//!   jobs wait for its probe while the others on the host go out at once.

use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::instance;
use deferhook::domain::Timestamp;

const CIRCUIT: &[&str] = &[
    "--circuit-failure-threshold",
    "3",
    "--circuit-cooldown-ms",
    "10000",
];

/// Ten jobs for two subscribers at `receiver` (one destination).
async fn ten_jobs(app: &TestApp, receiver: &Receiver) -> Vec<Value> {
    for id in ["s1", "s2"] {
        app.subscriber(id, &receiver.url(&format!("/{id}")), None)
            .await;
    }
    let mut jobs = Vec::new();
    for n in 0..10 {
        let subscriber = if n % 2 == 0 { "s1" } else { "s2" };
        jobs.push(app.job(subscriber, &format!("evt-{n}"), json!({})).await);
    }
    jobs
}

/// The jobs as the API shows them now.
async fn now_of(app: &TestApp, jobs: &[Value]) -> Vec<Value> {
    let mut current = Vec::new();
    for job in jobs {
        current.push(app.job_now(job).await);
    }
    current
}

/// Each job's attempt count now.
async fn attempts(app: &TestApp, jobs: &[Value]) -> Vec<u64> {
    now_of(app, jobs)
        .await
        .iter()
        .map(|job| job["attempts"].as_u64().unwrap())
        .collect()
}

/// When the job's backoff ends (`next_attempt_at`), whatever holds it after that.
fn next_attempt(job: &Value) -> Timestamp {
    Timestamp::parse_rfc3339(job["next_attempt_at"].as_str().unwrap()).unwrap()
}

/// Moves the clock to `ms` after `start`.
fn move_to(app: &TestApp, start: Timestamp, ms: i64) {
    let ahead = start
        .plus_ms(u64::try_from(ms).unwrap())
        .millis_since(app.now());
    assert!(ahead >= 0, "the clock is already past +{ms} ms");
    app.advance(ahead);
}

/// Steps the worker at +`ms` and returns how many jobs it attempted.
async fn step_at(app: &TestApp, start: Timestamp, ms: i64) -> usize {
    move_to(app, start, ms);
    app.run_pending().await.attempted()
}

async fn a_destination_answering_503_opens_its_circuit_and_a_probe_closes_it(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(503)]).await;
    let app = instance(db).flags(CIRCUIT).start().await;
    let jobs = ten_jobs(&app, &receiver).await;
    let start = app.now();

    // All ten go out at once; each subscriber's five 503s open its endpoint circuit,
    // and with every subscriber it served failing, the host's circuit opens for 10 s.
    assert_eq!(app.run_pending().await.attempted(), 10);
    assert_eq!(attempts(&app, &jobs).await, [1; 10]);

    // Past every job's backoff, before the cool-down ends: due, held, nothing spent.
    let due = now_of(&app, &jobs)
        .await
        .iter()
        .map(next_attempt)
        .max()
        .unwrap();
    let due_ms = due.millis_since(start);
    assert!(due_ms < 5_000, "backoffs of at most 1 s: {due_ms} ms");
    move_to(&app, start, due_ms);
    for job in now_of(&app, &jobs).await {
        assert_eq!(job["state"], "retrying", "{job}");
        assert_eq!(job["waiting_reason"], "destination_circuit_open", "{job}");
    }
    assert_eq!(app.run_pending().await.attempted(), 0);
    // A job created now waits too, and its deadline still runs.
    let short = app.job("s1", "evt-short", json!({ "ttl_ms": 3_000 })).await;
    let short_now = app.job_now(&short).await;
    assert_eq!(short_now["waiting_reason"], "destination_circuit_open");
    assert_eq!(step_at(&app, start, 9_999).await, 0);
    assert_eq!(attempts(&app, &jobs).await, [1; 10], "an attempt spent");
    let short_now = app.job_now(&short).await;
    assert_eq!(short_now["state"], "dead", "{short_now}");
    assert_eq!(short_now["dead_reason"], "deadline_exceeded");
    assert_eq!(short_now["attempts"], 0);
    assert_eq!(receiver.requests().len(), 10);

    // The cool-down is over: one probe, although ten jobs are due.
    assert_eq!(step_at(&app, start, 10_000).await, 1);
    assert_eq!(receiver.requests().len(), 11);
    assert_eq!(attempts(&app, &jobs).await.iter().sum::<u64>(), 11);

    // The probe got a 503: open again for twice as long (20 s).
    assert_eq!(step_at(&app, start, 20_000).await, 0);
    assert_eq!(step_at(&app, start, 29_999).await, 0);
    assert_eq!(step_at(&app, start, 30_000).await, 1);
    assert_eq!(receiver.requests().len(), 12);

    // The host recovers; the next probe (after 40 s) gets a 200 and closes the circuit,
    // and the backlog drains.
    receiver.reply_from_now(Reply::status(200));
    assert_eq!(step_at(&app, start, 69_999).await, 0);
    assert_eq!(step_at(&app, start, 70_000).await, 1);
    let delivered = |jobs: &[Value]| jobs.iter().filter(|j| j["state"] == "delivered").count();
    assert_eq!(delivered(&now_of(&app, &jobs).await), 1);
    for _ in 0..3 {
        app.run_pending().await;
    }
    let after = now_of(&app, &jobs).await;
    assert_eq!(delivered(&after), 10, "{after:?}");
    assert_eq!(receiver.requests().len(), 10 + 3 + 9);
}

async fn one_subscriber_failing_on_a_shared_host_holds_only_its_own_jobs(db: Db) {
    let receiver = Receiver::ok().await;
    receiver.reply_on("/bad", Reply::status(500));
    let app = instance(db).flags(CIRCUIT).start().await;
    app.subscriber("bad", &receiver.url("/bad"), None).await;
    app.subscriber("good", &receiver.url("/good"), None).await;
    let mut bad = Vec::new();
    for n in 0..5 {
        bad.push(app.job("bad", &format!("evt-bad-{n}"), json!({})).await);
        app.job("good", &format!("evt-good-{n}"), json!({})).await;
    }
    let start = app.now();
    assert_eq!(app.run_pending().await.attempted(), 10);

    // Five failures out of five results: the endpoint circuit of `bad` opens for 10 s.
    let due = now_of(&app, &bad)
        .await
        .iter()
        .map(next_attempt)
        .max()
        .unwrap();
    move_to(&app, start, due.millis_since(start));
    let until = start.plus_ms(10_000).to_rfc3339();
    for job in now_of(&app, &bad).await {
        assert_eq!(job["state"], "retrying", "{job}");
        assert_eq!(job["waiting_reason"], "subscriber_circuit_open", "{job}");
        assert_eq!(job["retry_advice"]["verdict"], "not_before", "{job}");
        assert_eq!(job["retry_advice"]["at"], until.as_str(), "{job}");
    }
    // The host's circuit stays closed: `good` goes out at once, `bad` waits.
    let destinations = app.get("/v1/destinations").await.json();
    let items = destinations["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{destinations}");
    assert_eq!(items[0]["circuit"]["state"], "closed", "{destinations}");
    let fresh = app.job("good", "evt-good-late", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&fresh).await["state"], "delivered");
    assert_eq!(attempts(&app, &bad).await, [1; 5], "an attempt spent");

    // The cool-down is over: one probe for `bad`; it fails, so 20 s more.
    assert_eq!(step_at(&app, start, 9_999).await, 0);
    assert_eq!(step_at(&app, start, 10_000).await, 1);
    assert_eq!(step_at(&app, start, 29_999).await, 0);
    assert_eq!(step_at(&app, start, 30_000).await, 1);
    // `bad` recovers: the next probe (after 40 s) closes it and the rest drain.
    receiver.reply_on("/bad", Reply::status(200));
    assert_eq!(step_at(&app, start, 69_999).await, 0);
    assert_eq!(step_at(&app, start, 70_000).await, 1);
    for _ in 0..3 {
        app.run_pending().await;
    }
    let after = now_of(&app, &bad).await;
    let delivered = after.iter().filter(|j| j["state"] == "delivered").count();
    assert_eq!(delivered, 5, "{after:?}");
    let to_bad = receiver
        .requests()
        .iter()
        .filter(|r| r.path == "/bad")
        .count();
    assert_eq!(to_bad, 5 + 3 + 4);
}

crate::on_both_backends!(
    a_destination_answering_503_opens_its_circuit_and_a_probe_closes_it,
    one_subscriber_failing_on_a_shared_host_holds_only_its_own_jobs,
);
