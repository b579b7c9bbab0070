//! Subscriber isolation: one slow receiver never delays the others (C-09, and the
//! fan-out case of a few hundred slow subscribers among thousands), and
//! `rate_limit_per_second` holds across instances.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::app::{App, Db};
use crate::receiver::{Receiver, Reply};

/// RFC 3339 for now + `ahead`.
fn rfc3339_in(ahead: Duration) -> (String, SystemTime) {
    let at = SystemTime::now() + ahead;
    let ms = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (
        deferhook::domain::Timestamp::from_millis(ms).to_rfc3339(),
        at,
    )
}

/// Registers subscribers concurrently: `(id, url, max_in_flight)`.
async fn subscribers(app: &Arc<App>, specs: Vec<(String, String, u32)>) {
    let slots = Arc::new(Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for (id, url, max_in_flight) in specs {
        let (app, slots) = (app.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            let response = app
                .client
                .put(format!("{}/v1/subscribers/{id}", app.base))
                .json(&json!({ "url": url, "max_in_flight": max_in_flight }))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 201);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// C-09: subscriber A has 50 jobs to a receiver that sleeps 30 s, `max_in_flight = 2`;
/// subscriber B has 5 jobs to a fast receiver, due 1 s later. B's jobs are delivered
/// within 1 s of their `deliver_at`; A never has more than 2 requests open.
async fn c09_one_slow_subscriber_never_delays_another(db: Db) {
    let slow = Receiver::start(vec![Reply::status(200).after(Duration::from_secs(30))]).await;
    let fast = Receiver::ok().await;
    let app = Arc::new(App::start(db, &["--attempt-timeout-ms", "2000"]).await);
    subscribers(
        &app,
        vec![
            ("a".into(), slow.url("/"), 2),
            ("b".into(), fast.url("/"), 16),
        ],
    )
    .await;
    for n in 0..50 {
        app.job("a", &format!("a-{n}"), json!({ "ttl_ms": 60_000 }))
            .await;
    }
    let (due, due_wall) = rfc3339_in(Duration::from_secs(1));
    for n in 0..5 {
        app.job("b", &format!("b-{n}"), json!({ "deliver_at": due }))
            .await;
    }
    let requests = fast.wait_for(5, Duration::from_secs(5)).await;
    for request in &requests {
        let late = request.wall.duration_since(due_wall).unwrap_or_default();
        assert!(
            late < Duration::from_secs(1),
            "B delivered {late:?} after deliver_at"
        );
    }
    // Let A's attempts time out and retry a while.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        slow.max_open(),
        2,
        "A had more than max_in_flight requests open"
    );
    assert!(slow.requests().len() >= 2);
}

/// The fan-out case, scaled: one event to 2,000 subscribers, 300 of them at a receiver
/// that answers only after 30 s, beyond the 10 s attempt timeout. Every fast
/// subscriber's job is delivered while every slow attempt still holds its slot: no
/// fast job waited for a slow one to end. No slow subscriber has more requests open
/// than its limit.
///
/// How soon the fast jobs arrive (within 2 s of `deliver_at`, issue #8) is a speed
/// target: the benchmark measures it (`deferhook-bench --scenario fanout`,
/// BENCHMARKS.md), not this debug-build test, whose machine is shared with the rest
/// of the suite. Slow attempts hold one of the instance's `--max-in-flight` slots
/// until they time out, so the instance is sized above the slow share (300) plus room
/// for the rest.
async fn fan_out_to_2000_with_300_slow_subscribers(db: Db) {
    let _heavy = crate::app::heavy().await;
    let slow = Receiver::start(vec![Reply::status(200).after(Duration::from_secs(30))]).await;
    let fast = Receiver::ok().await;
    let app = Arc::new(
        App::start(
            db,
            &[
                "--attempt-timeout-ms",
                "10000",
                "--lease-ms",
                "30000",
                "--max-in-flight",
                "1000",
            ],
        )
        .await,
    );
    let specs = (0..2000)
        .map(|n| {
            let (url, limit) = if n % 20 < 3 {
                (slow.url(&format!("/{n}")), 1)
            } else {
                (fast.url(&format!("/{n}")), 16)
            };
            (format!("s{n:04}"), url, limit)
        })
        .collect();
    subscribers(&app, specs).await;
    let (due, due_wall) = rfc3339_in(Duration::from_secs(3));
    let ids: Vec<String> = (0..2000).map(|n| format!("s{n:04}")).collect();
    let response = app
        .client
        .post(format!("{}/v1/events", app.base))
        .json(
            &json!({ "event_id": "fan-1", "payload": {"k": 1}, "subscriber_ids": ids,
                       "deliver_at": due, "ttl_ms": 60_000 }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    // A job cannot be delivered before it exists: when the one-transaction insert of
    // 2,000 jobs ends after `deliver_at` (a loaded machine), lateness counts from then
    // (`deliver_at` in the past means now).
    let created_wall = SystemTime::now();
    let eligible = due_wall.max(created_wall);
    let requests = fast.wait_for(1700, Duration::from_secs(9)).await;
    // Every slow attempt started is still open (none has timed out or been answered):
    // the fast jobs went through the other slots, never waiting for a slow one.
    let (open, started) = (slow.open_now(), slow.requests().len());
    assert_eq!(
        open, started,
        "a slow attempt ended before the fast jobs were through"
    );
    let latest = requests
        .iter()
        .map(|r| r.wall.duration_since(eligible).unwrap_or_default())
        .max()
        .unwrap_or_default();
    eprintln!(
        "fan-out: 1,700 fast jobs delivered at most {latest:?} after they were due \
         (created {:?} after the due time), {open} slow attempts open",
        created_wall.duration_since(due_wall).unwrap_or_default()
    );
    assert_eq!(fast.counts_by_id().len(), 1, "one event id");
    // Every slow subscriber is attempted, each (limit 1, its own path) never twice at once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let paths: std::collections::HashSet<String> =
            slow.requests().into_iter().map(|r| r.path).collect();
        if paths.len() == 300 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of 300 slow subscribers attempted",
            paths.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        slow.max_open_per_path(),
        1,
        "a slow subscriber over its limit"
    );
}

crate::on_both_backends!(
    c09_one_slow_subscriber_never_delays_another,
    fan_out_to_2000_with_300_slow_subscribers,
);

/// `rate_limit_per_second = 5` holds within ±1 in every 1 s window, across two
/// instances sharing one PostgreSQL database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_two_instances() {
    if !crate::pg::reachable().await {
        return;
    }
    let receiver = Receiver::ok().await;
    let first = Arc::new(App::start(Db::Postgres, &[]).await);
    let second = App::on(&first.database_url, &[]).await;
    let response = first
        .client
        .put(format!("{}/v1/subscribers/r", first.base))
        .json(&json!({ "url": receiver.url("/"), "rate_limit_per_second": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let (due, _) = rfc3339_in(Duration::from_millis(500));
    for n in 0..25 {
        first
            .job("r", &format!("r-{n}"), json!({ "deliver_at": due }))
            .await;
    }
    let requests = receiver.wait_for(25, Duration::from_secs(15)).await;
    let times: Vec<Instant> = requests.iter().map(|r| r.at).collect();
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..]
            .iter()
            .take_while(|t| t.duration_since(*start) < Duration::from_secs(1))
            .count();
        assert!(in_window <= 6, "{in_window} requests within 1 s");
    }
    let span = *times.last().unwrap() - times[0];
    assert!(
        span >= Duration::from_millis(3500),
        "25 jobs at 5/s took only {span:?}"
    );
    drop(second);
}
