//! C-04: SQLite under a burst. 500 jobs due at one instant and 50 more POSTs during
//! the burst: every POST answers 201 (or 503 with `Retry-After`, nothing stored), and
//! all 550 jobs are delivered with one request each. About the running loop: it runs
//! on the system clock, and the test polls for outcomes.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::app::{Db, TestApp};
use crate::receiver::Receiver;
use crate::setup::instance;

/// POSTs a job until it is stored: 201 (or 200 after a retried 503). A 503 must carry
/// `Retry-After` and store nothing.
async fn post_until_stored(app: &TestApp, body: serde_json::Value) -> u16 {
    loop {
        let reply = app.post_json("/v1/jobs", &body).await;
        match reply.status {
            201 => return 201,
            503 => {
                assert!(reply.header("retry-after").is_some());
                // The producer's pause before it tries again (its behaviour, not a
                // schedule of deferhook's).
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("POST answered {other}: {}", reply.text),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c04_a_burst_on_sqlite_loses_nothing() {
    let receiver = Receiver::ok().await;
    let app = Arc::new(
        instance(Db::Sqlite)
            .system_clock()
            .running_worker()
            .start()
            .await,
    );
    app.subscriber("s", &receiver.url("/"), None).await;
    let at = time_in(Duration::from_secs(4));
    let slots = Arc::new(Semaphore::new(16));
    let mut posts = tokio::task::JoinSet::new();
    for n in 0..500 {
        let (app, slots) = (app.clone(), slots.clone());
        let body = json!({"subscriber_id": "s", "event_id": format!("burst-{n}"), "payload": {"n": n}, "deliver_at": at});
        posts.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            post_until_stored(&app, body).await
        });
    }
    while let Some(status) = posts.join_next().await {
        assert_eq!(status.unwrap(), 201);
    }
    // During the burst: 50 more, due now.
    let burst_at = Instant::now();
    while receiver.requests().is_empty() {
        assert!(
            burst_at.elapsed() < Duration::from_secs(10),
            "the burst never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for n in 0..50 {
        let (app, slots) = (app.clone(), slots.clone());
        let body =
            json!({"subscriber_id": "s", "event_id": format!("during-{n}"), "payload": {"n": n}});
        posts.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            post_until_stored(&app, body).await
        });
    }
    while let Some(status) = posts.join_next().await {
        assert_eq!(status.unwrap(), 201);
    }
    // Every job delivered (terminal: never claimed again) after one attempt (a claim
    // persists its attempt before sending): no request can follow.
    let deadline = Instant::now() + Duration::from_secs(30);
    let delivered = loop {
        let listed = app.get_json("/v1/jobs?state=delivered&limit=1000").await;
        let items = listed["items"].as_array().unwrap().clone();
        if items.len() == 550 {
            break items;
        }
        assert!(
            Instant::now() < deadline,
            "{} of 550 delivered",
            items.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        delivered.iter().all(|job| job["attempts"] == 1),
        "a job was attempted twice"
    );
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 550);
    assert!(counts.values().all(|n| *n == 1), "a job was sent twice");
}

/// RFC 3339 for now + `ahead`.
fn time_in(ahead: Duration) -> String {
    let at = deferhook::domain::Timestamp::from_millis(
        (SystemTime::now() + ahead)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    at.to_rfc3339()
}
