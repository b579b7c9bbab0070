//! Subscriber isolation: one slow receiver never delays the others (C-09, and the
//! fan-out case of a few hundred slow subscribers among thousands), and
//! `rate_limit_per_second` holds across instances. The first two are about the
//! running loop (slow attempts hold their slots while it keeps claiming), so they run
//! it on the system clock and poll for outcomes; the rate limit is the store's, so
//! that test steps two workers on one manual clock.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use deferhook::domain::destination_state::DEFAULT_DESTINATION_MAX_IN_FLIGHT;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::{instance, instance_on};

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
async fn subscribers(app: &Arc<TestApp>, specs: Vec<(String, String, u32)>) {
    let slots = Arc::new(Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for (id, url, max_in_flight) in specs {
        let (app, slots) = (app.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            app.put_subscriber(&id, &json!({ "url": url, "max_in_flight": max_in_flight }))
                .await;
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
    let app = Arc::new(
        instance(db)
            .flags(&["--attempt-timeout-ms", "2000"])
            .system_clock()
            .running_worker()
            .start()
            .await,
    );
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
    // A's attempts time out (2 s) and are retried: two rounds of two.
    slow.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(
        slow.max_open(),
        2,
        "A had more than max_in_flight requests open"
    );
    assert!(slow.requests().len() >= 4);
}

/// The fan-out case, scaled: one event to 2,000 subscribers, 300 of them at a receiver
/// that answers only after 120 s, beyond the 60 s attempt timeout. Every fast
/// subscriber's job is delivered while every slow attempt still holds its slot: no
/// fast job waited for a slow one to end. No slow subscriber has more requests open
/// than its limit, and the slow receiver (one destination) no more than its
/// destination's limit (`--destination-max-in-flight`, docs/DESIGN.md §15): all 300
/// at once when the default allows, else the limit's worth while the others wait.
///
/// How soon the fast jobs arrive (within 2 s of `deliver_at`, issue #8) is a speed
/// target: the benchmark measures it (`deferhook-bench --scenario fanout`,
/// BENCHMARKS.md), not this debug-build test, whose machine is shared with the rest
/// of the suite. The slow receiver answers after 120 s and attempts time out after
/// 60 s, both beyond the test's own bounds, so "no slow attempt ended" holds however
/// loaded the machine is. The instance's slot count is the default.
async fn fan_out_to_2000_with_300_slow_subscribers(db: Db) {
    let slow = Receiver::start(vec![Reply::status(200).after(Duration::from_secs(120))]).await;
    let fast = Receiver::ok().await;
    let app = Arc::new(
        instance(db)
            .flags(&["--attempt-timeout-ms", "60000", "--lease-ms", "120000"])
            .system_clock()
            .running_worker()
            .start()
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
        .post_json(
            "/v1/events",
            &json!({ "event_id": "fan-1", "payload": {"k": 1}, "subscriber_ids": ids,
                       "deliver_at": due, "ttl_ms": 180_000 }),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    // A job cannot be delivered before it exists: when the one-transaction insert of
    // 2,000 jobs ends after `deliver_at` (a loaded machine), lateness counts from then
    // (`deliver_at` in the past means now).
    let created_wall = SystemTime::now();
    let eligible = due_wall.max(created_wall);
    let requests = fast.wait_for(1700, Duration::from_secs(45)).await;
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
    // The slow destination fills what its limit allows of the 300 and no more; each
    // slow subscriber (limit 1, its own path) never twice at once.
    let expected = 300.min(DEFAULT_DESTINATION_MAX_IN_FLIGHT as usize);
    let deadline = Instant::now() + Duration::from_secs(10);
    while slow.open_now() < expected {
        assert!(
            Instant::now() < deadline,
            "{} slow attempts open, not {expected}",
            slow.open_now()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.two_more_claim_passes().await;
    assert_eq!(
        slow.max_open(),
        expected,
        "the slow destination over its limit"
    );
    assert_eq!(slow.requests().len(), expected);
    assert_eq!(
        slow.max_open_per_path(),
        1,
        "a slow subscriber over its limit"
    );
}

/// Waits (bounded by `within`) until `done` holds; fails with `what` otherwise.
async fn wait_until(done: impl Fn() -> bool, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded by `within`) until `receiver` has `n` requests open.
async fn open_requests(receiver: &Receiver, n: usize, within: Duration) {
    let what = format!("fewer than {n} requests open within {within:?}");
    wait_until(|| receiver.open_now() >= n, within, &what).await;
}

/// Waits (at most 10 s) until the worker has marked subscriber `id`'s endpoint
/// long-running (docs/DESIGN.md §15.2), reading the database.
async fn marked_long_running(app: &TestApp, id: &str) {
    const MARKED: &str = "SELECT COUNT(*) FROM endpoint_circuits \
        WHERE subscriber_id = $1 AND long_running = TRUE";
    let url = &app.database_url;
    let (sqlite, postgres) = if url.starts_with("sqlite:") {
        (Some(sqlx::SqlitePool::connect(url).await.unwrap()), None)
    } else {
        (None, Some(sqlx::PgPool::connect(url).await.unwrap()))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let marked: i64 = match (&sqlite, &postgres) {
            (Some(pool), _) => sqlx::query_scalar(MARKED).bind(id).fetch_one(pool).await,
            (_, Some(pool)) => sqlx::query_scalar(MARKED).bind(id).fetch_one(pool).await,
            _ => unreachable!("one pool"),
        }
        .unwrap();
        if marked > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id} not marked long-running within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue #33: a new slow endpoint on a shared host holds at most the long-running
/// share of its places before its first result. `/slow` holds every request until the
/// end of the test, `/quick` answers at once, both on one receiver (one destination,
/// limit 4), `--long-attempt-ms 200`. quick is delivered first; one slow job goes out
/// and stays open: the worker marks slow long-running 200 ms in. Six more slow jobs then find one place (half of 4, one held
/// already), not three, and quick's next job still goes at once.
async fn a_new_slow_endpoint_is_capped_before_its_first_result(db: Db) {
    let receiver = Receiver::ok().await;
    receiver.reply_on("/slow", Reply::status(200).held());
    let app = instance(db)
        .flags(&["--long-attempt-ms", "200"])
        .flags(&["--attempt-timeout-ms", "30000", "--lease-ms", "60000"])
        .system_clock()
        .running_worker()
        .start()
        .await;
    app.put_subscriber("quick", &json!({ "url": receiver.url("/quick") }))
        .await;
    let slow = json!({ "url": receiver.url("/slow"), "max_in_flight": 16 });
    app.put_subscriber("slow", &slow).await;
    let host = format!("/v1/destinations/127.0.0.1:{}", receiver.addr.port());
    let four = app.put_json(&host, &json!({ "max_in_flight": 4 })).await;
    assert_eq!(four.status, 200, "{}", four.text);

    app.job("quick", "q-0", json!({})).await;
    receiver.wait_for(1, Duration::from_secs(10)).await;
    app.job("slow", "s-0", json!({})).await;
    open_requests(&receiver, 1, Duration::from_secs(10)).await;
    marked_long_running(&app, "slow").await;
    for n in 1..=6 {
        app.job("slow", &format!("s-{n}"), json!({})).await;
    }
    open_requests(&receiver, 2, Duration::from_secs(10)).await;
    app.two_more_claim_passes().await;
    assert_eq!(
        receiver.open_now(),
        2,
        "slow took more than the long-running share (without the mark: 4)"
    );
    app.job("quick", "q-1", json!({})).await;
    let quick = || {
        let requests = receiver.requests();
        requests.iter().filter(|r| r.path == "/quick").count()
    };
    wait_until(
        || quick() >= 2,
        Duration::from_secs(10),
        "quick's second job waited",
    )
    .await;
    // Quick's request counts as open until its answer is written: wait for it to end.
    // A third slow request would be held open, so this would wait in vain.
    wait_until(
        || receiver.open_now() == 2,
        Duration::from_secs(5),
        "still one place for slow's six",
    )
    .await;
    receiver.release();
}

crate::on_both_backends!(
    c09_one_slow_subscriber_never_delays_another,
    fan_out_to_2000_with_300_slow_subscribers,
    a_new_slow_endpoint_is_capped_before_its_first_result,
);

/// `rate_limit_per_second = 5` holds within ±1 in every 1 s window, across two
/// instances sharing one PostgreSQL database (and one clock, stepped every 100 ms).
#[tokio::test]
async fn a_rate_limit_holds_across_two_instances() {
    if !crate::pg::reachable().await {
        return;
    }
    let receiver = Receiver::ok().await;
    let first = instance(Db::Postgres).start().await;
    let second = instance_on(&first.database_url)
        .shared_clock(first.manual_clock())
        .start()
        .await;
    first
        .put_subscriber(
            "r",
            &json!({ "url": receiver.url("/"), "rate_limit_per_second": 5 }),
        )
        .await;
    let due = first.now().plus_ms(500).to_rfc3339();
    for n in 0..25 {
        first
            .job("r", &format!("r-{n}"), json!({ "deliver_at": due }))
            .await;
    }
    // Each request's time: the clock's at the step that sent it.
    let mut times: Vec<i64> = Vec::new();
    for _ in 0..200 {
        if times.len() >= 25 {
            break;
        }
        for app in [&first, &second] {
            app.run_pending().await;
            let sent = receiver.requests().len();
            times.resize(sent, app.now().as_millis());
        }
        first.advance(100);
    }
    assert_eq!(times.len(), 25, "25 jobs within 20 s at 5/s");
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..]
            .iter()
            .take_while(|t| **t - *start < 1_000)
            .count();
        assert!(in_window <= 6, "{in_window} requests within 1 s");
    }
    let span = times.last().unwrap() - times[0];
    assert!(span >= 3_500, "25 jobs at 5/s took only {span} ms");
}
