//! The on-call incident of issue #16, black box: one event fanned out to subscribers
//! that answer 2xx, 500 (until they recover), 410, or too late (on one slow
//! destination, whose timeouts are no evidence against its host: one each, its
//! circuit stays closed and a retry is worth it); then each question of the on-call engineer is answered by one call,
//! with the right figures, and the recovered subscribers' dead letters are replayed by
//! one call at the replay's rate (± 1/s).
//!
//! The worker is stepped on a manual clock (the attempts' timeouts are real, short);
//! a request's time is the clock's time at the step that sent it, the clock the
//! replay's token bucket reads.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::instance;

const HEALTHY: usize = 10;
const FAILING: usize = 10;
const GONE: usize = 5;
/// As many as `--circuit-failure-threshold`: their timeouts still do not open the
/// slow destination's circuit (only connection failures count, §15).
const SLOW: usize = 5;
/// The replay's rate, per second.
const RATE: u64 = 5;
/// The clock's step between two runs of the worker.
const STEP_MS: i64 = 100;

fn ids(kind: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{kind}-{i:02}")).collect()
}

async fn register(app: &TestApp, ids: &[String], receiver: &Receiver) {
    for id in ids {
        app.put_subscriber(id, &json!({ "url": receiver.url(&format!("/{id}")) }))
            .await;
    }
}

/// `GET path`, asserting 200.
async fn get_ok(app: &TestApp, path: &str) -> Value {
    let reply = app.get(path).await;
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.text);
    reply.json()
}

/// The `subscriber_id`s of a list of views, in order.
fn subscriber_ids(items: &Value, field: &str) -> Vec<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

async fn an_incident_is_answered_one_call_per_question(db: Db) {
    let ok = Receiver::ok().await;
    let failing = Receiver::start(vec![Reply::status(500)]).await;
    let gone = Receiver::start(vec![Reply::status(410)]).await;
    // The attempt timeout (1 s) leaves a busy machine room to answer the others at
    // once; the slow receiver answers well after it.
    let slow = Receiver::start(vec![Reply::status(200).after(Duration::from_secs(5))]).await;
    let app = instance(db)
        .flags(&[
            "--attempt-timeout-ms",
            "1000",
            "--circuit-failure-threshold",
            "5",
        ])
        .start()
        .await;
    let (healthy_ids, failing_ids) = (ids("healthy", HEALTHY), ids("failing", FAILING));
    let (gone_ids, slow_ids) = (ids("gone", GONE), ids("slow", SLOW));
    register(&app, &healthy_ids, &ok).await;
    register(&app, &failing_ids, &failing).await;
    register(&app, &gone_ids, &gone).await;
    register(&app, &slow_ids, &slow).await;
    let everyone: Vec<&String> = healthy_ids
        .iter()
        .chain(&failing_ids)
        .chain(&gone_ids)
        .chain(&slow_ids)
        .collect();

    let since = app.now();
    let fan_out = json!({"event_id": "order-1", "payload": {"order": 1},
                         "subscriber_ids": everyone, "max_attempts": 2});
    assert_eq!(app.post_json("/v1/events", &fan_out).await.status, 201);
    let calm = json!({"event_id": "order-2", "payload": {"order": 2},
                      "subscriber_ids": healthy_ids});
    assert_eq!(app.post_json("/v1/events", &calm).await.status, 201);
    app.run_pending().await;
    assert_eq!(ok.requests().len(), 2 * HEALTHY);

    // 1. Which events are affected: one call.
    let affected = get_ok(
        &app,
        &format!("/v1/events?affected_since={}", since.to_rfc3339()),
    )
    .await;
    let items = affected["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "only order-1 is affected: {affected}");
    let event = &items[0];
    assert_eq!(event["event_id"], "order-1");
    assert_eq!(event["affected"], FAILING + SLOW + GONE);
    assert_eq!(
        event["jobs"],
        json!({"scheduled": 0, "in_flight": 0, "retrying": FAILING + SLOW,
               "delivered": HEALTHY, "dead": GONE, "cancelled": 0})
    );

    // 2. Which subscribers fail, and why: one call, the causes first (the one holding
    // the most jobs first), the subscribers paused by a 410 among them.
    let failing_now = get_ok(&app, "/v1/subscribers?health=failing&limit=100").await;
    let causes: Vec<(Value, Value, Value, Value, Value)> = failing_now["causes"]
        .as_array()
        .expect("causes with health=failing")
        .iter()
        .map(|c| {
            (
                c["error_class"].clone(),
                c["status"].clone(),
                c["paused_reason"].clone(),
                c["subscribers"].clone(),
                c["failing_jobs"].clone(),
            )
        })
        .collect();
    assert_eq!(
        causes,
        [
            (
                json!("http_5xx"),
                json!(500),
                Value::Null,
                json!(FAILING),
                json!(FAILING)
            ),
            (
                json!("timeout"),
                Value::Null,
                Value::Null,
                json!(SLOW),
                json!(SLOW)
            ),
            (
                json!("http_4xx"),
                json!(410),
                json!("gone"),
                json!(GONE),
                json!(GONE)
            ),
        ],
        "{failing_now}"
    );
    let top = subscriber_ids(&failing_now["causes"][0]["top"], "id");
    assert_eq!(top, failing_ids, "ten at most, by jobs then id");
    let listed = &failing_now["items"];
    let mut expected: Vec<String> = failing_ids
        .iter()
        .chain(&slow_ids)
        .chain(&gone_ids)
        .cloned()
        .collect();
    expected.sort();
    let mut got = subscriber_ids(listed, "id");
    got.sort();
    assert_eq!(got, expected, "{failing_now}");
    for view in listed.as_array().unwrap() {
        let health = &view["health"];
        let id = view["id"].as_str().unwrap();
        if id.starts_with("gone") {
            assert_eq!(health["status"], "paused", "{view}");
            assert_eq!(health["paused_reason"], "gone", "{view}");
            assert_eq!(health["dead_last_hour"], 1, "{view}");
            continue;
        }
        assert_eq!(health["status"], "failing", "{view}");
        assert_eq!(health["jobs"]["retrying"], 1, "{view}");
        let (class, status) = if id.starts_with("slow") {
            ("timeout", Value::Null)
        } else {
            ("http_5xx", json!(500))
        };
        assert_eq!(health["last_error"]["class"], class, "{view}");
        assert_eq!(health["last_error"]["status"], status, "{view}");
    }
    // The paused ones, with why.
    let paused = get_ok(&app, "/v1/subscribers?health=paused").await;
    assert_eq!(subscriber_ids(&paused["items"], "id"), gone_ids);
    for view in paused["items"].as_array().unwrap() {
        assert_eq!(view["health"]["paused_reason"], "gone", "{view}");
        assert_eq!(view["health"]["last_error"]["status"], 410, "{view}");
    }

    // 3. Would a retry help: one call per event.
    let summary = get_ok(&app, "/v1/events/order-1").await;
    assert_eq!(
        summary["retry_advice"],
        json!({"yes": FAILING + SLOW, "no": GONE}),
        "{summary}"
    );
    assert_eq!(summary["error_classes"]["http_5xx"], FAILING);
    assert_eq!(summary["error_classes"]["timeout"], SLOW);
    assert_eq!(summary["dead_reasons"]["non_retryable_response"], GONE);
    assert_eq!(
        summary["failing_subscribers"]["total"],
        FAILING + SLOW + GONE
    );
    let advice: BTreeMap<String, String> = summary["failing_subscribers"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["subscriber_id"].as_str().unwrap().to_owned(),
                item["retry_advice"]["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(advice["failing-00"], "yes");
    assert_eq!(advice["slow-00"], "yes");
    assert_eq!(advice["gone-00"], "no");

    // The failing and the slow jobs run out of attempts and become dead letters.
    app.advance(2_000);
    app.run_pending().await;
    let dead = get_ok(&app, "/v1/jobs?event_id=order-1&state=dead&limit=100").await;
    assert_eq!(
        dead["items"].as_array().unwrap().len(),
        FAILING + SLOW + GONE
    );
    let summary = get_ok(&app, "/v1/events/order-1").await;
    assert_eq!(
        summary["retry_advice"]["replay"],
        FAILING + SLOW,
        "{summary}"
    );

    // 4. The failing subscribers recover: their dead letters replayed at RATE/s by
    // one call.
    failing.reply_from_now(Reply::status(200));
    let replay = app
        .post_json(
            "/v1/replays",
            &json!({"subscriber_ids": failing_ids, "rate_per_second": RATE,
                    "max_jobs": 1000}),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.text);
    assert_eq!(replay.json()["matched"], FAILING);
    let before = failing.requests().len();
    let mut sent_at = Vec::new();
    for _ in 0..100 {
        app.run_pending().await;
        let now = app.now().as_millis();
        let total = failing.requests().len() - before;
        sent_at.extend(std::iter::repeat_n(now, total - sent_at.len()));
        if sent_at.len() == FAILING {
            break;
        }
        app.advance(STEP_MS);
    }
    assert_eq!(sent_at.len(), FAILING, "every replayed job delivered");
    let span_s = (sent_at[FAILING - 1] - sent_at[0]) as f64 / 1_000.0;
    let rate = (FAILING - 1) as f64 / span_s;
    assert!(
        (rate - RATE as f64).abs() <= 1.0,
        "replayed at {rate:.2}/s, asked {RATE}/s ({sent_at:?})"
    );
    let delivered = get_ok(&app, "/v1/jobs?event_id=order-1&state=delivered&limit=100").await;
    assert_eq!(
        delivered["items"].as_array().unwrap().len(),
        HEALTHY + FAILING
    );

    // 5. Re-enable the subscribers paused by a 410: one call.
    let resumed = app
        .post_json("/v1/subscribers/resume", &json!({"paused_reason": "gone"}))
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    assert_eq!(resumed.json()["resumed"], GONE);
    let paused = get_ok(&app, "/v1/subscribers?health=paused").await;
    assert_eq!(paused["items"], json!([]));
}

on_both_backends!(an_incident_is_answered_one_call_per_question);
