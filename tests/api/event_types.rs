//! Event types (issue #20): subscribers subscribe with names and trailing wildcards;
//! `POST /v1/events` with an `event_type` and no `subscriber_ids` fans out to every
//! subscriber whose types match, all or nothing and idempotent as every fan-out; jobs
//! keep their type and list by it.

use serde_json::{Value, json};

use crate::app::Db;
use crate::support::{TestApp, app_with, expect_fields, expect_json, expect_problem};

async fn subscribe(app: &TestApp, id: &str, types: &[&str]) {
    let url = format!("https://example.com/hooks/{id}");
    app.put_subscriber(id, &json!({"url": url, "event_types": types}))
        .await;
}

fn subscribers_of(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["subscriber_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn subscribers_take_names_and_wildcards() {
    let app = app_with().start().await;
    subscribe(&app, "a", &["shipment.*", "invoice.paid"]).await;
    let read = expect_json(&app.get("/v1/subscribers/a").await, 200);
    assert_eq!(read["event_types"], json!(["shipment.*", "invoice.paid"]));
    let patched = expect_json(
        &app.patch_json("/v1/subscribers/a", &json!({"event_types": ["*"]}))
            .await,
        200,
    );
    assert_eq!(patched["event_types"], json!(["*"]));
    // A PUT that leaves them out keeps them.
    let put = app
        .put_json(
            "/v1/subscribers/a",
            &json!({"url": "https://example.com/hooks/a"}),
        )
        .await;
    assert_eq!(expect_json(&put, 200)["event_types"], json!(["*"]));

    for (types, fields) in [
        (json!(["ok.*", "ship ment"]), &["event_types[1]"][..]),
        (json!(["*.delivered"]), &["event_types[0]"][..]),
        (json!(["a.**"]), &["event_types[0]"][..]),
        (json!(["a", "a"]), &["event_types[1]"][..]),
        (json!([""]), &["event_types[0]"][..]),
        (
            json!((0..101).map(|n| format!("t{n}")).collect::<Vec<_>>()),
            &["event_types"][..],
        ),
    ] {
        let body = json!({"url": "https://example.com/hooks/b", "event_types": types});
        expect_fields(&app.put_json("/v1/subscribers/b", &body).await, 422, fields);
        let patch = json!({"event_types": types});
        expect_fields(
            &app.patch_json("/v1/subscribers/a", &patch).await,
            422,
            fields,
        );
    }
    expect_fields(
        &app.patch_json("/v1/subscribers/a", &json!({"event_types": null}))
            .await,
        422,
        &["event_types"],
    );
    expect_problem(&app.get("/v1/subscribers/b").await, 404);
    let unchanged = expect_json(&app.get("/v1/subscribers/a").await, 200);
    assert_eq!(unchanged["event_types"], json!(["*"]));
}

async fn an_event_type_fans_out_to_the_subscribers_that_match(db: Db) {
    let app = app_with().backend(db).start().await;
    subscribe(&app, "a-all-shipments", &["shipment.*"]).await;
    subscribe(&app, "b-delivered", &["shipment.delivered"]).await;
    subscribe(&app, "c-invoices", &["invoice.*"]).await;
    subscribe(&app, "d-nothing", &[]).await;
    app.patch_json("/v1/subscribers/b-delivered", &json!({"enabled": false}))
        .await;
    let event = json!({
        "event_id": "shipment-981:delivered",
        "event_type": "shipment.delivered",
        "payload": {"shipment": 981},
    });
    let body = expect_json(&app.post_json("/v1/events", &event).await, 201);
    assert_eq!(subscribers_of(&body), ["a-all-shipments", "b-delivered"]);
    for job in body["items"].as_array().unwrap() {
        assert_eq!(job["event_type"], "shipment.delivered");
        assert_eq!(job["event_id"], "shipment-981:delivered");
        assert_eq!(job["state"], "scheduled");
    }
    assert_eq!(
        body["items"][1]["waiting_reason"], "subscriber_paused",
        "a paused subscriber's job waits"
    );
    // The same event again: the same jobs, 200.
    let again = expect_json(&app.post_json("/v1/events", &event).await, 200);
    assert_eq!(again["items"], body["items"]);
    // Another payload for the same event: 409, nothing created.
    let mut other = event.clone();
    other["payload"] = json!({"shipment": 982});
    expect_problem(&app.post_json("/v1/events", &other).await, 409);
    // The job listing filters by type.
    let listed = expect_json(
        &app.get("/v1/jobs?event_type=shipment.delivered").await,
        200,
    );
    assert_eq!(listed["items"].as_array().unwrap().len(), 2);
    let none = expect_json(&app.get("/v1/jobs?event_type=shipment").await, 200);
    assert_eq!(none["items"], json!([]), "exact, no prefix");
    // A type nobody subscribes to: 201 with no job.
    let lonely = json!({"event_id": "x", "event_type": "audit.ping", "payload": 1});
    let empty = expect_json(&app.post_json("/v1/events", &lonely).await, 201);
    assert_eq!(empty["items"], json!([]));
    // A subscriber subscribed later gets the next event, not the past one.
    subscribe(&app, "e-late", &["shipment.delivered"]).await;
    let next = json!({
        "event_id": "shipment-982:delivered",
        "event_type": "shipment.delivered",
        "payload": {"shipment": 982},
    });
    let body = expect_json(&app.post_json("/v1/events", &next).await, 201);
    assert_eq!(
        subscribers_of(&body),
        ["a-all-shipments", "b-delivered", "e-late"]
    );
    // Named subscribers with a type: just those, the type kept.
    let named = json!({
        "event_id": "invoice-5:paid",
        "event_type": "invoice.paid",
        "subscriber_ids": ["d-nothing"],
        "payload": {},
    });
    let body = expect_json(&app.post_json("/v1/events", &named).await, 201);
    assert_eq!(subscribers_of(&body), ["d-nothing"]);
    assert_eq!(body["items"][0]["event_type"], "invoice.paid");
}

#[tokio::test]
async fn a_job_takes_a_type_and_bad_types_are_named() {
    let app = app_with().start().await;
    app.create_subscriber("s").await;
    let job = app
        .post_json(
            "/v1/jobs",
            &json!({"subscriber_id": "s", "event_id": "e", "event_type": "order.placed", "payload": {}}),
        )
        .await;
    assert_eq!(expect_json(&job, 201)["event_type"], "order.placed");
    for (body, fields) in [
        (
            json!({"event_id": "e", "event_type": "order placed", "payload": 1}),
            &["event_type"][..],
        ),
        (
            json!({"event_id": "e", "event_type": "order.*", "payload": 1}),
            &["event_type"][..],
        ),
        (
            json!({"event_id": "e", "payload": 1}),
            &["subscriber_ids"][..],
        ),
    ] {
        expect_fields(&app.post_json("/v1/events", &body).await, 422, fields);
    }
    let bad_job = json!({"subscriber_id": "s", "event_id": "f", "event_type": "", "payload": 1});
    expect_fields(
        &app.post_json("/v1/jobs", &bad_job).await,
        422,
        &["event_type"],
    );
    expect_fields(
        &app.get("/v1/jobs?event_type=a%20b").await,
        422,
        &["event_type"],
    );
    expect_fields(
        &app.get("/v1/jobs?schedule_id=..").await,
        422,
        &["schedule_id"],
    );
}

crate::on_both_backends!(an_event_type_fans_out_to_the_subscribers_that_match);

/// More subscribers than one fan-out takes: a 422 naming the limit, nothing created.
#[tokio::test]
async fn more_than_ten_thousand_subscribers_of_a_type_is_a_422() {
    let app = app_with().start().await;
    let mut puts = tokio::task::JoinSet::new();
    for chunk in 0..20 {
        let store = app.store.clone();
        let now = app.now();
        puts.spawn(async move {
            for n in (chunk * 501)..((chunk + 1) * 501) {
                let put = deferhook::store::SubscriberPut {
                    id: format!("s{n:05}"),
                    url: "https://example.com/hook".into(),
                    secret: None,
                    generated_secret: deferhook::domain::secret::SigningSecret::generate(),
                    max_in_flight: None,
                    rate_limit_per_second: None,
                    enabled: None,
                    event_types: Some(vec!["bulk.*".into()]),
                    attempt_timeout_ms: None,
                };
                store.put_subscriber(put, now).await.unwrap();
            }
        });
    }
    puts.join_all().await;
    let event = json!({"event_id": "big", "event_type": "bulk.sent", "payload": 1});
    let problem = expect_fields(
        &app.post_json("/v1/events", &event).await,
        422,
        &["event_type"],
    );
    assert!(problem.to_string().contains("10000"), "{problem}");
    let jobs = expect_json(&app.get("/v1/jobs?event_id=big").await, 200);
    assert_eq!(jobs["items"], json!([]));
}
