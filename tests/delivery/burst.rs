//! C-04: SQLite under a burst. 500 jobs due at one instant and 50 more POSTs during
//! the burst: every POST answers 201 (or 503 with `Retry-After`, nothing stored), and
//! all 550 jobs are delivered with one request each.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::app::{App, Db};
use crate::receiver::Receiver;

/// POSTs a job until it is stored: 201 (or 200 after a retried 503). A 503 must carry
/// `Retry-After` and store nothing.
async fn post_until_stored(app: &App, body: serde_json::Value) -> u16 {
    loop {
        let response = app
            .client
            .post(format!("{}/v1/jobs", app.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            201 => return 201,
            503 => {
                assert!(response.headers().contains_key("retry-after"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("POST answered {other}: {}", response.text().await.unwrap()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c04_a_burst_on_sqlite_loses_nothing() {
    let _heavy = crate::app::heavy().await;
    let receiver = Receiver::ok().await;
    let app = Arc::new(App::start(Db::Sqlite, &[]).await);
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
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.counts_by_id().len() < 550 {
        assert!(
            Instant::now() < deadline,
            "{} of 550 delivered",
            receiver.counts_by_id().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 550);
    assert!(counts.values().all(|n| *n == 1), "a job was sent twice");
    let listed = app.get("/v1/jobs?state=delivered&limit=1000").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 550);
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
