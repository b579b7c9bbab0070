//! Issue #20 end to end with real receivers: an event fanned out by type carries its
//! type in `webhook-event-type` (signed as before), and a running instance's scheduler
//! delivers a schedule's periods, each once, with the period in its `webhook-id`.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::app::Db;
use crate::receiver::Receiver;
use crate::setup::instance;
use crate::signing::verifies;

async fn a_typed_event_is_sent_with_its_type(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    let secret = app.subscriber("typed", &receiver.url("/typed"), None).await;
    app.patch_json(
        "/v1/subscribers/typed",
        &json!({"event_types": ["shipment.*"]}),
    )
    .await;
    app.subscriber("plain", &receiver.url("/plain"), None).await;
    let event = json!({
        "event_id": "shipment-981:delivered",
        "event_type": "shipment.delivered",
        "payload": {"shipment": 981},
    });
    let reply = app.post_json("/v1/events", &event).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    app.job("plain", "untyped", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 2);
    let requests = receiver.requests();
    let typed = requests.iter().find(|r| r.path == "/typed").unwrap();
    assert_eq!(typed.header("webhook-event-type"), "shipment.delivered");
    assert_eq!(typed.header("webhook-id"), "shipment-981:delivered");
    assert!(verifies(&secret, typed), "the signature is as before");
    let plain = requests.iter().find(|r| r.path == "/plain").unwrap();
    assert!(plain.headers.get("webhook-event-type").is_none());
}

/// The scheduler runs where the worker runs: an interval of one second delivers one
/// job per period, each with its own period in the event id.
async fn a_running_instance_delivers_each_period_once(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).system_clock().running_worker().start().await;
    app.subscriber("room-7", &receiver.url("/cleanup"), None)
        .await;
    let schedule = json!({
        "subscriber_id": "room-7",
        "every_ms": 1_000,
        "event_id": "cleanup:room-7:{period_start}",
        "payload": {"room": 7},
    });
    let reply = app.put_json("/v1/schedules/tick", &schedule).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let requests = receiver.wait_for(3, Duration::from_secs(15)).await;
    let ids: Vec<&str> = requests.iter().map(|r| r.header("webhook-id")).collect();
    let distinct: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "each period once: {ids:?}");
    for id in &ids {
        let period = id.strip_prefix("cleanup:room-7:").expect(id);
        assert!(period.ends_with('Z') && period.len() == 20, "{period}");
    }
    assert_eq!(requests[0].body, r#"{"room":7}"#.as_bytes());
    let jobs = app.get_json("/v1/jobs?schedule_id=tick").await;
    assert!(jobs["items"].as_array().unwrap().len() >= 3, "{jobs}");
}

crate::on_both_backends!(
    a_typed_event_is_sent_with_its_type,
    a_running_instance_delivers_each_period_once,
);
