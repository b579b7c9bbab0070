//! C-10: the same job created twice, or concurrently. (subscriber_id, event_id)
//! identifies a job; a repeat with an equal payload answers 200 with the stored job,
//! a different payload 409, and nothing is ever created twice.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::support::{TestApp, expect_json, expect_problem, job, spawn_app};

async fn jobs_of_event(app: &TestApp, event: &str) -> Vec<Value> {
    let page = expect_json(&app.get(&format!("/v1/jobs?event_id={event}")).await, 200);
    page["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_repeat_with_an_equal_payload_answers_the_stored_job() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let first = app
        .post_raw(
            "/v1/jobs",
            r#"{"subscriber_id":"s","event_id":"E","delay_ms":1000,
                "payload":{"a":1,"b":[1,2],"c":{"x":"é","y":null}}}"#,
        )
        .await;
    let j1 = expect_json(&first, 201);

    app.advance(500);
    let repeat = app
        .post_raw(
            "/v1/jobs",
            r#"{ "delay_ms" : 99999, "ttl_ms": 5,
                 "payload" : { "c" : { "y" : null, "x" : "\u00e9" }, "b" : [ 1, 2 ], "a" : 1 },
                 "event_id" : "E", "subscriber_id" : "s" }"#,
        )
        .await;
    assert_eq!(expect_json(&repeat, 200), j1, "the stored job, unchanged");
    assert_eq!(repeat.header("location"), None);
    assert_eq!(jobs_of_event(&app, "E").await, vec![j1]);
}

#[tokio::test]
async fn a_repeat_with_a_different_payload_is_a_409_and_creates_nothing() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let j1 = app
        .create_job(&job("s", "E", json!({"payload": {"a": 1}})))
        .await;
    let j1_id = j1["id"].as_str().unwrap();
    for payload in [
        json!({"a": 2}),
        json!({"a": 1.0}),
        json!([{"a": 1}]),
        json!("a"),
    ] {
        let reply = app
            .post_json("/v1/jobs", &job("s", "E", json!({"payload": payload})))
            .await;
        let problem = expect_problem(&reply, 409);
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(j1_id), "{detail}");
    }
    assert_eq!(jobs_of_event(&app, "E").await, vec![j1.clone()]);
    let read = app.get(&format!("/v1/jobs/{j1_id}")).await;
    assert_eq!(expect_json(&read, 200), j1);
}

#[tokio::test]
async fn the_same_event_for_another_subscriber_is_another_job() {
    let app = spawn_app().await;
    app.create_subscriber("s1").await;
    app.create_subscriber("s2").await;
    let a = app.create_job(&job("s1", "E", json!({}))).await;
    let b = app
        .create_job(&job("s2", "E", json!({"payload": {"other": true}})))
        .await;
    assert_ne!(a["id"], b["id"]);
    assert_eq!(jobs_of_event(&app, "E").await.len(), 2);
}

#[tokio::test]
async fn twenty_concurrent_creates_make_exactly_one_job() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let body = job(
        "s",
        "E2",
        json!({"payload": {"p": [1, 2, 3]}, "delay_ms": 60_000}),
    );
    let mut tasks = JoinSet::new();
    for _ in 0..20 {
        let request = app.client.post(app.url("/v1/jobs")).json(&body);
        tasks.spawn(async move {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            assert!(response.headers().contains_key("x-request-id"));
            let text = response.text().await.expect("body");
            (status, text)
        });
    }
    let mut statuses = Vec::new();
    let mut ids = BTreeSet::new();
    while let Some(joined) = tasks.join_next().await {
        let (status, text) = joined.expect("task");
        assert!(status == 200 || status == 201, "{status}: {text}");
        statuses.push(status);
        let body: Value = serde_json::from_str(&text).unwrap();
        ids.insert(body["id"].as_str().unwrap().to_owned());
    }
    statuses.sort_unstable();
    let mut expected = vec![200; 19];
    expected.push(201);
    assert_eq!(statuses, expected);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let listed = jobs_of_event(&app, "E2").await;
    assert_eq!(listed.len(), 1);
    assert_eq!(ids.first().map(String::as_str), listed[0]["id"].as_str());
}

/// Payload equality must not lose precision: two integers that differ only past
/// f64's 53 bits are different payloads.
#[tokio::test]
async fn integers_beyond_f64_precision_are_compared_exactly() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let create =
        |n: &str| format!(r#"{{"subscriber_id":"s","event_id":"big","payload":{{"n":{n}}}}}"#);
    let first = app
        .post_raw("/v1/jobs", create("123456789012345678901"))
        .await;
    expect_json(&first, 201);
    let other = app
        .post_raw("/v1/jobs", create("123456789012345678902"))
        .await;
    expect_problem(&other, 409);
}

/// A payload the server accepted once is equal to itself when repeated.
#[tokio::test]
async fn a_repeat_of_a_payload_with_a_huge_number_is_equal() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let body = r#"{"subscriber_id":"s","event_id":"huge","payload":{"x":1e400}}"#;
    expect_json(&app.post_raw("/v1/jobs", body).await, 201);
    expect_json(&app.post_raw("/v1/jobs", body).await, 200);
}
