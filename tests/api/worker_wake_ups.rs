//! Operator changes that may let due jobs go wake this instance's worker at once
//! (docs/DESIGN.md §3.3): a change to a destination, a subscriber enabled again by
//! `PATCH`, a resume that resumed any. Changes that free nothing do not. No worker
//! runs here; the test reads the store's wake-up directly.

use std::time::Duration;

use serde_json::json;

use crate::app::Db;
use crate::support::{TestApp, app_with};

/// Whether the worker's wake-up was sent since the last call (a sent wake-up is kept
/// until taken).
async fn woken(app: &TestApp) -> bool {
    let wake = app.store.wake();
    tokio::time::timeout(Duration::from_millis(50), wake.notified())
        .await
        .is_ok()
}

async fn operator_changes_that_may_free_work_wake_the_worker(db: Db) {
    let app = app_with().backend(db).start().await;
    app.put_subscriber("s", &json!({ "url": "https://hooks.example.com/s" }))
        .await;
    let _ = woken(&app).await;

    let destination = "/v1/destinations/hooks.example.com:443";
    let reply = app.put_json(destination, &json!({ "paused": true })).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let _ = woken(&app).await;
    let reply = app.put_json(destination, &json!({ "paused": false })).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(woken(&app).await, "a destination resumed");
    let reply = app.put_json(destination, &json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(!woken(&app).await, "an empty change writes nothing");

    let subscriber = "/v1/subscribers/s";
    let reply = app
        .patch_json(subscriber, &json!({ "enabled": false }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(!woken(&app).await, "a pause frees nothing");
    let reply = app
        .patch_json(subscriber, &json!({ "enabled": true }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(woken(&app).await, "enabled again");

    let resume = json!({ "subscriber_ids": ["s"] });
    let reply = app.post_json("/v1/subscribers/resume", &resume).await;
    assert_eq!(reply.json()["resumed"], 0, "{}", reply.text);
    assert!(!woken(&app).await, "nothing was paused");
    app.patch_json(subscriber, &json!({ "enabled": false }))
        .await;
    let reply = app.post_json("/v1/subscribers/resume", &resume).await;
    assert_eq!(reply.json()["resumed"], 1, "{}", reply.text);
    assert!(woken(&app).await, "resumed");
}

crate::on_both_backends!(operator_changes_that_may_free_work_wake_the_worker);
