//! A destination's circuit breaker (issue #14), stepped with a manual clock:
//! `--circuit-failure-threshold 3 --circuit-cooldown-ms 10000`. 503s open it; while
//! open its due jobs wait without spending an attempt (deadlines still run); after
//! each cool-down exactly one probe goes out, a failed probe doubles the cool-down and
//! a 200 closes the circuit and lets the backlog drain. 500s are the subscriber's own
//! failures and never open it.

use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::{instance, next_due};

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

/// Moves the clock to `ms` after `start`.
fn move_to(app: &TestApp, start: deferhook::domain::Timestamp, ms: i64) {
    let ahead = start
        .plus_ms(u64::try_from(ms).unwrap())
        .millis_since(app.now());
    assert!(ahead >= 0, "the clock is already past +{ms} ms");
    app.advance(ahead);
}

/// Steps the worker at +`ms` and returns how many jobs it attempted.
async fn step_at(app: &TestApp, start: deferhook::domain::Timestamp, ms: i64) -> usize {
    move_to(app, start, ms);
    app.run_pending().await.attempted()
}

async fn a_destination_answering_503_opens_its_circuit_and_a_probe_closes_it(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(503)]).await;
    let app = instance(db).flags(CIRCUIT).start().await;
    let jobs = ten_jobs(&app, &receiver).await;
    let start = app.now();

    // All ten go out at once; three 503s in a row open the circuit for 10 s.
    assert_eq!(app.run_pending().await.attempted(), 10);
    assert_eq!(attempts(&app, &jobs).await, [1; 10]);

    // Past every job's backoff, before the cool-down ends: due, held, nothing spent.
    let due = now_of(&app, &jobs)
        .await
        .iter()
        .map(next_due)
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

async fn a_destination_answering_500_keeps_its_circuit_closed(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(500)]).await;
    let app = instance(db).flags(CIRCUIT).start().await;
    let jobs = ten_jobs(&app, &receiver).await;
    for round in 1..=3 {
        assert_eq!(app.run_pending().await.attempted(), 10, "round {round}");
        let current = now_of(&app, &jobs).await;
        for job in &current {
            assert_eq!(job["state"], "retrying", "{job}");
            assert_eq!(job["attempts"], round, "{job}");
            assert_eq!(job["waiting_reason"], "backing_off", "{job}");
        }
        let due = current.iter().map(next_due).max().unwrap();
        app.advance(due.millis_since(app.now()));
        // Due, and held back by nothing: only a worker is awaited.
        for job in now_of(&app, &jobs).await {
            assert!(job["waiting_reason"].is_null(), "{job}");
        }
    }
    assert_eq!(receiver.requests().len(), 30);
}

crate::on_both_backends!(
    a_destination_answering_503_opens_its_circuit_and_a_probe_closes_it,
    a_destination_answering_500_keeps_its_circuit_closed,
);
