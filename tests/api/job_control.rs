//! `POST /v1/jobs/{id}/cancel` and `PATCH /v1/jobs/{id}`: operator actions on waiting
//! jobs, refused (409) once a job is in flight or finished.

use reqwest::Method;
use serde_json::{Value, json};

use crate::app::metric;
use crate::support::{TestApp, at, expect_fields, expect_json, expect_problem, job, spawn_app};

async fn cancel(app: &TestApp, id: &str) -> crate::support::Reply {
    app.send(app.request(Method::POST, &format!("/v1/jobs/{id}/cancel")))
        .await
}

async fn patch(app: &TestApp, id: &str, body: Value) -> crate::support::Reply {
    app.send(
        app.request(Method::PATCH, &format!("/v1/jobs/{id}"))
            .json(&body),
    )
    .await
}

#[tokio::test]
async fn cancel_a_scheduled_job_once() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&job("s", "e", json!({"delay_ms": 60_000})))
        .await;
    let id = created["id"].as_str().unwrap();

    let cancelled = expect_json(&cancel(&app, id).await, 200);
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["waiting_reason"], Value::Null);
    let again = expect_problem(&cancel(&app, id).await, 409);
    assert!(
        again["detail"].as_str().unwrap().contains("cancelled"),
        "{again}"
    );
    app.advance(120_000);
    assert!(
        app.claim().await.is_empty(),
        "a cancelled job is never claimed"
    );
}

#[tokio::test]
async fn an_in_flight_job_cannot_be_cancelled_or_moved() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app.create_job(&job("s", "e", json!({}))).await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(app.claim().await.len(), 1);

    let refused = expect_problem(&cancel(&app, id).await, 409);
    assert!(
        refused["detail"].as_str().unwrap().contains("in_flight"),
        "{refused}"
    );
    expect_problem(
        &patch(&app, id, json!({"deliver_at": at(5_000)})).await,
        409,
    );
    let current = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(current["state"], "in_flight");
}

#[tokio::test]
async fn reschedule_a_scheduled_job() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&job(
            "s",
            "e",
            json!({"delay_ms": 10_000, "ttl_ms": 60_000}),
        ))
        .await;
    let id = created["id"].as_str().unwrap();

    let moved = expect_json(
        &patch(&app, id, json!({"deliver_at": at(30_000)})).await,
        200,
    );
    assert_eq!(moved["deliver_at"], at(30_000));
    assert_eq!(moved["deadline"], at(70_000), "the deadline is kept");
    app.advance(20_000);
    assert!(app.claim().await.is_empty(), "not due at its old time");
    let moved = expect_json(&patch(&app, id, json!({"deadline": at(90_000)})).await, 200);
    assert_eq!(moved["deadline"], at(90_000));
    assert_eq!(moved["deliver_at"], at(30_000));
    app.advance(10_000);
    assert_eq!(app.claim().await.len(), 1, "due at its new time");
}

#[tokio::test]
async fn bad_reschedules_are_named() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&job("s", "e", json!({"delay_ms": 10_000})))
        .await;
    let id = created["id"].as_str().unwrap();

    expect_fields(&patch(&app, id, json!({})).await, 422, &["body"]);
    expect_fields(
        &patch(&app, id, json!({"deliver_at": "tomorrow"})).await,
        422,
        &["deliver_at"],
    );
    expect_fields(
        &patch(&app, id, json!({"delay_ms": 5})).await,
        422,
        &["delay_ms"],
    );
    // Moving only deliver_at past the deadline names deliver_at and says how to move
    // both (it used to name `deadline`, with a text about past instants).
    let late = expect_fields(
        &patch(&app, id, json!({"deliver_at": at(200_000_000)})).await,
        422,
        &["deliver_at"],
    );
    assert!(
        late.to_string().contains("deadline in the same request"),
        "{late}"
    );
    expect_fields(
        &patch(
            &app,
            id,
            json!({"deliver_at": at(200_000_000), "deadline": at(100_000_000)}),
        )
        .await,
        422,
        &["deadline"],
    );

    let missing = uuid::Uuid::now_v7();
    expect_problem(
        &patch(&app, &missing.to_string(), json!({"deadline": at(5)})).await,
        404,
    );
    expect_problem(&cancel(&app, &missing.to_string()).await, 404);
    expect_fields(&cancel(&app, "not-a-uuid").await, 422, &["job_id"]);
    let unchanged = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(unchanged["deliver_at"], created["deliver_at"]);
    let both = json!({"deliver_at": at(200_000_000), "deadline": at(300_000_000)});
    let moved = expect_json(&patch(&app, id, both).await, 200);
    assert_eq!(moved["deliver_at"], at(200_000_000), "both move together");
}

/// docs/DESIGN.md §2.2: a job whose lease expired (its worker died) is `retrying`,
/// due at the lease's expiry, its attempt's outcome unknown, to every read (the job,
/// listings and their filters, the attempts, the subscriber's stats, the metrics)
/// before any claim or sweep takes it over; it can be cancelled, not moved.
#[tokio::test]
async fn a_job_whose_lease_expired_reads_retrying_and_can_be_cancelled() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app.create_job(&job("s", "e", json!({}))).await;
    let id = created["id"].as_str().unwrap();
    let path = format!("/v1/jobs/{id}");
    let listed = |body: Value| -> Vec<String> {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(app.claim().await.len(), 1, "claimed under a 30 s lease");
    app.advance(29_999);
    let live = expect_json(&app.get(&path).await, 200);
    assert_eq!(live["state"], "in_flight", "{live}");

    app.advance(1);
    let expired = expect_json(&app.get(&path).await, 200);
    assert_eq!(expired["state"], "retrying", "{expired}");
    assert_eq!(expired["lease"], Value::Null, "{expired}");
    assert_eq!(
        expired["next_attempt_at"],
        at(30_000),
        "due at the lease's expiry"
    );
    assert_eq!(
        expired["waiting_reason"],
        Value::Null,
        "due, waiting for a worker"
    );
    assert_eq!(expired["attempts"], 1);
    let retrying = app.get_json("/v1/jobs?state=retrying").await;
    assert_eq!(listed(retrying), [id]);
    let in_flight = app.get_json("/v1/jobs?state=in_flight").await;
    assert!(listed(in_flight).is_empty());
    let attempts = app.attempts(&created).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["outcome"], "unknown", "{attempts:?}");
    assert_eq!(
        attempts[0]["reason"],
        "the lease expired before a result was recorded"
    );
    let stats = app.get_json("/v1/subscribers/s/stats").await;
    assert_eq!(stats["jobs"]["retrying"], 1, "{stats}");
    assert_eq!(stats["jobs"]["in_flight"], 0, "{stats}");
    let metrics = app.metrics().await;
    assert_eq!(metric(&metrics, "deferhook_jobs{state=\"retrying\"}"), 1.0);
    assert_eq!(metric(&metrics, "deferhook_jobs{state=\"in_flight\"}"), 0.0);

    let moved = expect_problem(
        &patch(&app, id, json!({"deliver_at": at(60_000)})).await,
        409,
    );
    assert!(
        moved["detail"].as_str().unwrap().contains("retrying"),
        "{moved}"
    );
    let cancelled = expect_json(&cancel(&app, id).await, 200);
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["lease"], Value::Null);
    let read = expect_json(&app.get(&path).await, 200);
    assert_eq!(read["state"], "cancelled");
    let attempts = app.attempts(&created).await;
    assert_eq!(attempts[0]["outcome"], "unknown", "{attempts:?}");
    assert_eq!(
        attempts[0]["finished_at"],
        at(30_000),
        "recorded by the cancel"
    );
    assert!(
        app.claim().await.is_empty(),
        "a cancelled job is never claimed"
    );
}
