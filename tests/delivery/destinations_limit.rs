//! Destinations' limits (issue #14): the subscribers of one `host:port` share a limit
//! of requests open at once, across all instances, so a destination that holds every
//! request never takes the capacity the other destinations need. The receivers hold
//! requests unanswered for the whole test (attempt timeouts far beyond it), so "open"
//! is never a matter of timing; the worker runs on the system clock and the tests poll
//! with bounded waits.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::app::{Db, TestApp};
use crate::receiver::Receiver;
use crate::setup::{instance, instance_on};

/// `--destination-max-in-flight` when no flag sets it.
const DEFAULT_DESTINATION_LIMIT: usize =
    deferhook::domain::destination_state::DEFAULT_DESTINATION_MAX_IN_FLIGHT as usize;

/// Attempts and leases that outlast any test: a held request stays open until the
/// test ends.
const HOLD_FOR_THE_TEST: &[&str] = &["--attempt-timeout-ms", "600000", "--lease-ms", "1200000"];

/// Registers `(id, url)` subscribers with default limits, 16 at a time.
async fn subscribers(app: &Arc<TestApp>, specs: Vec<(String, String)>) {
    let slots = Arc::new(Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for (id, url) in specs {
        let (app, slots) = (app.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            app.put_subscriber(&id, &json!({ "url": url })).await;
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// Fans event `event_id` out to `ids`; returns the jobs.
async fn fan_out(app: &TestApp, event_id: &str, ids: &[String]) -> Vec<Value> {
    let body = json!({ "event_id": event_id, "payload": {"e": event_id}, "subscriber_ids": ids });
    let reply = app.post_json("/v1/events", &body).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["items"].as_array().unwrap().clone()
}

/// How many jobs are `delivered`, as `GET /v1/jobs?state=delivered` lists them.
async fn delivered(app: &TestApp) -> usize {
    let mut count = 0;
    let mut path = "/v1/jobs?state=delivered&limit=1000".to_owned();
    loop {
        let page = app.get_json(&path).await;
        count += page["items"].as_array().unwrap().len();
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/jobs?state=delivered&limit=1000&cursor={cursor}"),
            None => return count,
        }
    }
}

/// Polls until `done` holds, within `within`; `what` says what was awaited.
async fn wait_until(within: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The measuring instrument: a held request counts as open until its connection
/// closes, and no longer.
#[tokio::test]
async fn the_receiver_counts_a_held_request_until_its_connection_closes() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let receiver = Receiver::holding(200).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let sent = tokio::spawn(client.post(receiver.url("/held")).send());
    receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(receiver.connections_now(), 1);
    let given_up = sent.await.unwrap();
    assert!(
        given_up.is_err_and(|e| e.is_timeout()),
        "a held request was answered"
    );
    wait_until(
        Duration::from_secs(5),
        "the closed connection uncounted",
        async || receiver.connections_now() == 0,
    )
    .await;
    assert_eq!(receiver.max_connections(), 1);
    receiver.release();
    let answered = client.post(receiver.url("/later")).send().await.unwrap();
    assert_eq!(answered.status(), 200);
}

/// Issue #14's incident on default settings (only attempts and leases outlast the
/// test): 300 subscribers at a destination that holds every request, 1,700 at another,
/// four fan-outs of one event to all 2,000 back to back. Every one of the 6,800 fast
/// jobs is delivered while the slow requests are all still held (none answered, none
/// given up), so no fast job waited for a slow one; the slow destination never has
/// more connections carrying a request than its default limit, and reaches it.
async fn a_held_destination_never_holds_back_another_over_four_fan_outs(db: Db) {
    let started = Instant::now();
    let slow = Receiver::holding(200).await;
    let fast = Receiver::ok().await;
    let app = Arc::new(
        TestApp::builder()
            .backend(db)
            .allow_private_targets()
            .flags(HOLD_FOR_THE_TEST)
            .system_clock()
            .running_worker()
            .start()
            .await,
    );
    let is_slow = |n: usize| n % 20 < 3;
    let ids: Vec<String> = (0..2000).map(|n| format!("s{n:04}")).collect();
    let specs = (0..2000)
        .map(|n| {
            let receiver = if is_slow(n) { &slow } else { &fast };
            (ids[n].clone(), receiver.url(&format!("/{n}")))
        })
        .collect();
    subscribers(&app, specs).await;
    let registered = started.elapsed();
    let mut slow_jobs = Vec::new();
    for event in ["e1", "e2", "e3", "e4"] {
        let jobs = fan_out(&app, event, &ids).await;
        assert_eq!(jobs.len(), 2000);
        slow_jobs.extend(jobs.into_iter().filter(|job| {
            let id = job["subscriber_id"].as_str().unwrap();
            is_slow(id[1..].parse().unwrap())
        }));
    }
    let fanned_out = started.elapsed();

    wait_until(
        Duration::from_secs(120),
        "6,800 fast jobs at the fast receiver",
        async || {
            let pairs: HashSet<(String, String)> = fast
                .requests()
                .iter()
                .map(|r| (r.header("webhook-id").to_owned(), r.path.clone()))
                .collect();
            pairs.len() == 6800
        },
    )
    .await;
    let fast_through = started.elapsed();
    let held = slow.requests().len();
    assert_eq!(
        slow.open_now(),
        held,
        "a slow request ended before the fast jobs were through"
    );
    wait_until(
        Duration::from_secs(30),
        "6,800 jobs delivered",
        async || delivered(&app).await == 6800,
    )
    .await;
    assert_eq!(fast.requests().len(), 6800, "a fast job sent twice");

    // The slow destination: at its limit, never over it, every request still held.
    wait_until(
        Duration::from_secs(30),
        "the slow destination full",
        async || slow.max_connections() == DEFAULT_DESTINATION_LIMIT,
    )
    .await;
    app.two_more_claim_passes().await;
    assert_eq!(slow.max_connections(), DEFAULT_DESTINATION_LIMIT);
    assert_eq!(slow.max_open(), DEFAULT_DESTINATION_LIMIT);
    assert_eq!(
        slow.requests().len(),
        DEFAULT_DESTINATION_LIMIT,
        "a slow request beyond the limit"
    );
    assert_eq!(slow.open_now(), DEFAULT_DESTINATION_LIMIT);
    // The slow jobs not sent say why.
    let mut at_limit = 0;
    for job in &slow_jobs {
        let job = app.job_now(job).await;
        if job["state"] == "scheduled" {
            assert_eq!(job["waiting_reason"], "destination_at_limit", "{job}");
            at_limit += 1;
        }
    }
    assert_eq!(at_limit, 1200 - DEFAULT_DESTINATION_LIMIT);
    eprintln!(
        "incident: 2,000 subscribers registered in {registered:?}, four fan-outs stored by \
         {fanned_out:?}, 6,800 fast jobs at the receiver by {fast_through:?} with {held} \
         slow requests held; whole test {:?}",
        started.elapsed()
    );
}

/// A due job whose destination has `--destination-max-in-flight` requests open waits
/// with `waiting_reason: destination_at_limit`, and is not sent.
async fn a_job_held_back_by_its_destination_limit_says_so(db: Db) {
    let receiver = Receiver::holding(200).await;
    let app = instance(db)
        .flags(HOLD_FOR_THE_TEST)
        .flags(&["--destination-max-in-flight", "2"])
        .system_clock()
        .running_worker()
        .start()
        .await;
    let mut jobs = Vec::new();
    for id in ["a", "b", "c"] {
        app.subscriber(id, &receiver.url(&format!("/{id}")), None)
            .await;
        jobs.push(app.job(id, &format!("evt-{id}"), json!({})).await);
    }
    receiver.wait_for(2, Duration::from_secs(10)).await;
    app.two_more_claim_passes().await;
    let mut waiting = Vec::new();
    for job in &jobs {
        let job = app.job_now(job).await;
        if job["state"] != "in_flight" {
            waiting.push(job);
        }
    }
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["state"], "scheduled");
    assert_eq!(waiting[0]["waiting_reason"], "destination_at_limit");
    assert_eq!(receiver.requests().len(), 2);
    assert_eq!(receiver.max_connections(), 2);
}

crate::on_both_backends!(
    a_held_destination_never_holds_back_another_over_four_fan_outs,
    a_job_held_back_by_its_destination_limit_says_so,
);

/// Two instances on one PostgreSQL database, `--destination-max-in-flight 20` on both,
/// and each with only 15 slots (`--max-in-flight`), so that reaching 20 takes both and
/// staying at 20 takes the limit being shared: 100 subscribers at one receiver that
/// holds every request, one job each. The receiver reaches 20 connections carrying a
/// request, and never more, then or after each worker has looked twice more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_destination_limit_holds_across_two_instances() {
    if !crate::pg::reachable().await {
        return;
    }
    let receiver = Receiver::holding(200).await;
    let flags = ["--destination-max-in-flight", "20", "--max-in-flight", "15"];
    let first = Arc::new(
        instance(Db::Postgres)
            .flags(HOLD_FOR_THE_TEST)
            .flags(&flags)
            .system_clock()
            .running_worker()
            .start()
            .await,
    );
    let second = instance_on(&first.database_url)
        .flags(HOLD_FOR_THE_TEST)
        .flags(&flags)
        .system_clock()
        .running_worker()
        .start()
        .await;
    let ids: Vec<String> = (0..100).map(|n| format!("s{n:03}")).collect();
    let specs = ids
        .iter()
        .map(|id| (id.clone(), receiver.url(&format!("/{id}"))))
        .collect();
    subscribers(&first, specs).await;
    fan_out(&second, "e1", &ids).await;

    wait_until(Duration::from_secs(30), "20 requests held", async || {
        receiver.requests().len() >= 20
    })
    .await;
    tokio::join!(
        first.two_more_claim_passes(),
        second.two_more_claim_passes()
    );
    assert_eq!(receiver.max_connections(), 20);
    assert_eq!(receiver.max_open(), 20);
    assert_eq!(receiver.requests().len(), 20, "a request beyond the limit");
    // Both instances hold some of them (neither has 20 slots).
    let page = first.get_json("/v1/jobs?state=in_flight&limit=100").await;
    let owners: HashSet<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["lease"]["owner"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    drop(second);
}
