//! The worker's slots, read from a real process's `/metrics` (in-process instances
//! share one recorder, whose slot gauges add up over all their workers): the gauges
//! follow the running attempts, an explicit `--max-in-flight` is the slot count, and
//! without it the count is the default from the open-files limit and the memory budget.

use std::time::{Duration, Instant};

use deferhook::delivery::slots::WorkerSlots;
use serde_json::json;

use crate::app::{Db, metric};
use crate::process::{Process, spawn};
use crate::receiver::{Receiver, Reply};

/// `deferhook_worker_slots_busy` and `_free` of `process`.
async fn slot_gauges(process: &Process) -> (f64, f64) {
    let text = reqwest::get(format!("{}/metrics", process.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    (
        metric(&text, "deferhook_worker_slots_busy"),
        metric(&text, "deferhook_worker_slots_free"),
    )
}

/// Polls until the gauges read `(busy, free)` (the worker starts after the API
/// answers, and a scrape races the attempts); fails with the last reading.
async fn wait_gauges(process: &Process, busy: f64, free: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let read = slot_gauges(process).await;
        if read == (busy, free) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot gauges (busy, free) are {read:?}, expected {:?}",
            (busy, free)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `body` to `path` of `process`'s API and expects a 2xx.
async fn send(process: &Process, method: reqwest::Method, path: &str, body: serde_json::Value) {
    let url = format!("{}{path}", process.base);
    let response = reqwest::Client::new()
        .request(method, url)
        .json(&body)
        .send();
    let status = response.await.unwrap().status();
    assert!(status.is_success(), "{path}: {status}");
}

async fn the_slot_gauges_follow_running_attempts(db: Db) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Holds every request until the test ends.
    let receiver = Receiver::start(vec![Reply::status(200).after(Duration::from_secs(60))]).await;
    let database = db.database().await;
    // The attempts outlast the test (the lease is 30 s by default).
    let flags = ["--max-in-flight", "3", "--attempt-timeout-ms", "25000"];
    let process = spawn(&database.url, &flags);
    wait_gauges(&process, 0.0, 3.0).await;
    let subscriber = json!({ "url": receiver.url("/"), "max_in_flight": 10 });
    send(
        &process,
        reqwest::Method::PUT,
        "/v1/subscribers/s",
        subscriber,
    )
    .await;
    for n in 0..5 {
        let job =
            json!({ "subscriber_id": "s", "event_id": format!("evt-slot-{n}"), "payload": {} });
        send(&process, reqwest::Method::POST, "/v1/jobs", job).await;
    }
    // Three attempts hold the three slots; the other two jobs wait for one.
    wait_gauges(&process, 3.0, 0.0).await;
    assert_eq!(receiver.open_now(), 3);
    assert_eq!(receiver.max_open(), 3);
    // The console's overview shows them in use (issue #33 saw "0 of 8192" reported
    // while requests were open): within a heartbeat or two.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let page = reqwest::get(format!("{}/console/", process.base))
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let text = page.text().await.unwrap();
        if text.contains("<td>3 of 3</td>") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the overview never showed 3 of 3 slots in use:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn without_max_in_flight_the_slots_follow_the_limits(db: Db) {
    let database = db.database().await;
    // The child raises its soft limit to the hard one it inherits from this process.
    let hard = deferhook::open_files::raise_to(0).unwrap().hard;
    for budget_mb in [8, 1 << 20] {
        let budget = budget_mb.to_string();
        let process = spawn(&database.url, &["--memory-budget-mb", &budget]);
        let expected = WorkerSlots::choose(None, hard, budget_mb).count;
        wait_gauges(&process, 0.0, expected as f64).await;
    }
}

crate::on_both_backends!(
    the_slot_gauges_follow_running_attempts,
    without_max_in_flight_the_slots_follow_the_limits,
);
