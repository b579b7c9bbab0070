//! Subscriber health and retry advice (issue #16 parts 3 and 4), on both backends:
//! every subscriber view carries `health` in its documented shape, `?health=` lists
//! the most failing first and refuses an unknown value, and jobs carry `retry_advice`
//! and `dead_detail`.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use deferhook::store::ClaimedJob;
use serde_json::{Value, json};

use crate::app::{Db, TestApp, answer};
use crate::support::{app_with, at, expect_fields, expect_json};

async fn app(db: Db) -> TestApp {
    app_with().backend(db).start().await
}

/// Records `claimed`'s attempt as ending now with an HTTP `status` failure.
async fn fail(app: &TestApp, claimed: &ClaimedJob, status: u16) {
    let now = app.now();
    let (outcome, class, event) = if status >= 500 {
        let retry_at = now.plus_ms(10_000);
        (
            AttemptOutcome::Retryable,
            ErrorClass::Http5xx,
            JobEvent::RetryableFailure { retry_at },
        )
    } else {
        let reason = DeadReason::NonRetryableResponse;
        (
            AttemptOutcome::Terminal,
            ErrorClass::Http4xx,
            JobEvent::TerminalFailure { reason },
        )
    };
    app.record(claimed, event, answer(outcome, Some(status), Some(class)))
        .await;
}

/// Creates a job of `subscriber` due now, claims it and fails it with `status`;
/// returns the job's id.
async fn failed_job(app: &TestApp, subscriber: &str, event: &str, status: u16) -> String {
    let created = app.job(subscriber, event, json!({})).await;
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    fail(app, &claimed[0], status).await;
    created["id"].as_str().unwrap().to_owned()
}

async fn every_subscriber_view_shows_its_health(db: Db) {
    let app = app(db).await;
    let created = app.create_subscriber("s").await;
    assert_eq!(
        created["health"],
        json!({
            "status": "healthy", "since": null, "last_error": null,
            "jobs": {"scheduled": 0, "in_flight": 0, "retrying": 0},
            "dead_last_hour": 0, "failing_jobs": 0,
            "paused_reason": null, "paused_at": null, "retry_advice": null,
        })
    );
    app.advance(1_000);
    failed_job(&app, "s", "a", 503).await;
    app.job("s", "later", json!({"delay_ms": 60_000})).await;
    app.advance(1_000);

    let health = json!({
        "status": "failing",
        "since": at(1_000),
        "last_error": {"class": "http_5xx", "status": 503, "reason": "HTTP 503", "at": at(1_000)},
        "jobs": {"scheduled": 1, "in_flight": 0, "retrying": 1},
        "dead_last_hour": 0,
        "failing_jobs": 1,
        "paused_reason": null,
        "paused_at": null,
        "retry_advice": {
            "verdict": "yes",
            "reason": "1 job(s) wait after http_5xx (HTTP 503), which is transient; they are \
                       retried from `at`, and POST /v1/jobs/{id}/retry or a replay selecting \
                       `retrying` jobs sends them now",
            "at": at(11_000),
        },
    });
    let read = expect_json(&app.get("/v1/subscribers/s").await, 200);
    assert_eq!(read["health"], health, "{read}");
    let listed = expect_json(&app.get("/v1/subscribers").await, 200);
    assert_eq!(listed["items"][0]["health"], health);
    let patched = expect_json(
        &app.patch_json("/v1/subscribers/s", &json!({"max_in_flight": 3}))
            .await,
        200,
    );
    assert_eq!(patched["health"], health);

    // Paused by an operator: paused since then, advice after resume.
    let paused = expect_json(
        &app.patch_json("/v1/subscribers/s", &json!({"enabled": false}))
            .await,
        200,
    );
    assert_eq!(paused["health"]["status"], "paused");
    assert_eq!(paused["health"]["since"], at(2_000));
    assert_eq!(paused["health"]["paused_reason"], "operator");
    assert_eq!(paused["health"]["paused_at"], at(2_000));
    assert_eq!(paused["health"]["retry_advice"]["verdict"], "after_resume");
    let put = app
        .put_json(
            "/v1/subscribers/s",
            &json!({"url": "https://example.com/hooks/s"}),
        )
        .await;
    assert_eq!(expect_json(&put, 200)["health"]["status"], "paused");
}

async fn the_health_listing_orders_by_failing_jobs_and_refuses_unknown_values(db: Db) {
    let app = app(db).await;
    for id in ["a", "b", "c", "ok"] {
        app.create_subscriber(id).await;
    }
    // b: 2 dead, c: 2 dead, a: 1 dead; ok: delivered nothing, never failed.
    for (id, n) in [("a", 1), ("b", 2), ("c", 2)] {
        for k in 0..n {
            failed_job(&app, id, &format!("e{k}"), 404).await;
        }
    }
    let page = |query: String| {
        let app = &app;
        async move { expect_json(&app.get(&format!("/v1/subscribers?{query}")).await, 200) }
    };
    let first = page("health=failing&limit=2".into()).await;
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["b", "c"]);
    assert_eq!(first["items"][0]["health"]["failing_jobs"], 2);
    assert_eq!(first["items"][0]["health"]["dead_last_hour"], 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = page(format!("health=failing&limit=2&cursor={cursor}")).await;
    assert_eq!(ids(&second), ["a"]);
    assert_eq!(second["next_cursor"], Value::Null);
    assert_eq!(ids(&page("health=healthy".into()).await), ["ok"]);
    assert_eq!(
        ids(&page("health=paused".into()).await),
        Vec::<String>::new()
    );
    // Without `health`: every subscriber, in id order.
    assert_eq!(ids(&page("limit=10".into()).await), ["a", "b", "c", "ok"]);

    expect_fields(
        &app.get("/v1/subscribers?health=sick").await,
        422,
        &["health"],
    );
    // A cursor of the id-ordered listing is not one of the health listing.
    let by_id = page("limit=1".into()).await;
    let cursor = by_id["next_cursor"].as_str().unwrap();
    expect_fields(
        &app.get(&format!("/v1/subscribers?health=failing&cursor={cursor}"))
            .await,
        422,
        &["cursor"],
    );
}

async fn jobs_carry_retry_advice_and_dead_detail(db: Db) {
    let app = app(db).await;
    app.create_subscriber("s").await;
    let retrying = failed_job(&app, "s", "a", 503).await;
    let gone = failed_job(&app, "s", "b", 404).await;
    let job = |id: String| {
        let app = &app;
        async move { expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200) }
    };

    let read = job(retrying.clone()).await;
    assert_eq!(read["retry_advice"]["verdict"], "yes", "{read}");
    assert_eq!(read["retry_advice"]["at"], read["next_attempt_at"]);
    assert_eq!(read["dead_detail"], Value::Null);
    let read = job(gone.clone()).await;
    assert_eq!(read["retry_advice"]["verdict"], "no", "{read}");
    assert!(
        read["retry_advice"]["reason"]
            .as_str()
            .unwrap()
            .contains("404"),
        "{read}"
    );
    assert_eq!(read["retry_advice"]["at"], Value::Null);
    let listed = expect_json(&app.get("/v1/jobs?subscriber_id=s").await, 200);
    let verdicts: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["retry_advice"]["verdict"])
        .collect();
    assert_eq!(verdicts, [&json!("no"), &json!("yes")], "newest first");

    // A job of a paused subscriber dies at its deadline: it keeps why it waited.
    app.create_subscriber("p").await;
    let waiting = app.job("p", "c", json!({"ttl_ms": 5_000})).await;
    let id = waiting["id"].as_str().unwrap().to_owned();
    app.patch_json("/v1/subscribers/p", &json!({"enabled": false}))
        .await;
    let read = job(id.clone()).await;
    assert_eq!(read["retry_advice"]["verdict"], "after_resume", "{read}");
    app.advance(6_000);
    app.store.expire_deadlines(app.now(), 100).await.unwrap();
    let read = job(id).await;
    assert_eq!(read["state"], "dead");
    assert_eq!(read["dead_reason"], "deadline_exceeded");
    assert_eq!(read["dead_detail"], "subscriber_paused");
    assert_eq!(read["retry_advice"]["verdict"], "after_resume", "{read}");
}

crate::on_both_backends!(
    every_subscriber_view_shows_its_health,
    the_health_listing_orders_by_failing_jobs_and_refuses_unknown_values,
    jobs_carry_retry_advice_and_dead_detail,
);
