//! `POST /v1/replays`, `GET /v1/replays/{id}`, `POST /v1/replays/{id}/cancel`: the
//! filter-required rule, dry runs, limits, and progress as the store advances a replay
//! (the API-only server has no worker, so the test advances it with the clock).

use reqwest::Method;
use serde_json::json;

use crate::support::{
    TestApp, app_with, at, expect_fields, expect_json, expect_problem, job, spawn_app,
};

/// Creates `n` jobs for `subscriber` with a 1 s ttl and lets them die.
async fn dead_jobs(app: &TestApp, subscriber: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let body = job(
            subscriber,
            &format!("{subscriber}-{i}"),
            json!({"ttl_ms": 1_000}),
        );
        ids.push(
            app.create_job(&body).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    app.advance(2_000);
    app.store
        .expire_deadlines(app.now(), 1_000)
        .await
        .expect("sweep");
    ids
}

async fn state_of(app: &TestApp, id: &str) -> String {
    let job = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    job["state"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_dry_run_counts_and_changes_nothing() {
    let app = spawn_app().await;
    app.create_subscriber("s1").await;
    app.create_subscriber("s2").await;
    let s1 = dead_jobs(&app, "s1", 3).await;
    dead_jobs(&app, "s2", 2).await;

    let body =
        json!({"subscriber_id": "s1", "max_jobs": 100, "rate_per_second": 5, "dry_run": true});
    let dry = expect_json(&app.post_json("/v1/replays", &body).await, 200);
    assert_eq!(dry, json!({"matched": 3}));
    let all = json!({"all": true, "max_jobs": 4, "rate_per_second": 5, "dry_run": true});
    assert_eq!(
        expect_json(&app.post_json("/v1/replays", &all).await, 200)["matched"],
        4
    );
    for id in &s1 {
        assert_eq!(state_of(&app, id).await, "dead");
    }
    app.advance(60_000);
    let progress = app.store.advance_replays(app.now()).await.unwrap();
    assert_eq!(progress.requeued, 0, "a dry run creates no replay");
}

#[tokio::test]
async fn a_filter_or_all_true_is_required() {
    let app = spawn_app().await;
    let reply = app
        .post_json(
            "/v1/replays",
            &json!({"max_jobs": 10, "rate_per_second": 5}),
        )
        .await;
    let body = expect_fields(&reply, 422, &["all"]);
    assert!(body.to_string().contains("at least one of"), "{body}");
    let none = json!({"all": false, "max_jobs": 10, "rate_per_second": 5});
    expect_fields(&app.post_json("/v1/replays", &none).await, 422, &["all"]);
    let both = json!({"all": true, "subscriber_id": "s", "max_jobs": 10, "rate_per_second": 5});
    expect_fields(&app.post_json("/v1/replays", &both).await, 422, &["all"]);
    let all = json!({"all": true, "max_jobs": 10, "rate_per_second": 5});
    let accepted = expect_json(&app.post_json("/v1/replays", &all).await, 202);
    assert_eq!(accepted["matched"], 0);
    assert_eq!(accepted["state"], "done", "nothing matched: done at once");
}

#[tokio::test]
async fn invalid_fields_are_named() {
    let app = app_with().flag("--max-replay-rate", 50).start().await;
    let cases = [
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 51}),
            "rate_per_second",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 0}),
            "rate_per_second",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 0, "rate_per_second": 5}),
            "max_jobs",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 100_001, "rate_per_second": 5}),
            "max_jobs",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10}),
            "rate_per_second",
        ),
        (
            json!({"subscriber_id": "s", "rate_per_second": 5}),
            "max_jobs",
        ),
        (
            json!({"dead_reason": "tired", "max_jobs": 10, "rate_per_second": 5}),
            "dead_reason",
        ),
        (
            json!({"dead_after": "2026-11-30T12:00:00", "max_jobs": 10, "rate_per_second": 5}),
            "dead_after",
        ),
        (
            json!({"dead_after": at(1_000), "dead_before": at(1_000), "max_jobs": 10, "rate_per_second": 5}),
            "dead_before",
        ),
        (
            json!({"subscriber_id": "not valid!", "max_jobs": 10, "rate_per_second": 5}),
            "subscriber_id",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 5, "ttl_ms": 0}),
            "ttl_ms",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 5, "ttl_ms": 1}),
            "ttl_ms",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 5, "ttl_ms": u64::MAX}),
            "ttl_ms",
        ),
        (
            json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 5, "speed": 1}),
            "speed",
        ),
    ];
    for (body, field) in cases {
        let reply = app.post_json("/v1/replays", &body).await;
        expect_fields(&reply, 422, &[field]);
    }
    let garbage = app.post_raw("/v1/replays", "{").await;
    expect_problem(&garbage, 400);
}

#[tokio::test]
async fn a_replay_shows_its_progress_and_can_be_cancelled() {
    let app = spawn_app().await;
    app.create_subscriber("s1").await;
    app.create_subscriber("s2").await;
    let s1 = dead_jobs(&app, "s1", 3).await;
    let s2 = dead_jobs(&app, "s2", 1).await;

    let body =
        json!({"subscriber_id": "s1", "max_jobs": 100, "rate_per_second": 1, "ttl_ms": 60_000});
    let created = expect_json(&app.post_json("/v1/replays", &body).await, 202);
    assert_eq!(created["matched"], 3);
    assert_eq!(created["state"], "running");
    assert_eq!(created["requeued"], 0);
    assert_eq!(created["rate_per_second"], 1);
    assert_eq!(created["filter"]["subscriber_id"], "s1");
    assert_eq!(created["filter"]["all"], false);
    let id = created["id"].as_str().unwrap();

    // One job per second.
    app.store.advance_replays(app.now()).await.unwrap();
    let first = s1[0].as_str();
    let requeued = expect_json(&app.get(&format!("/v1/jobs/{first}")).await, 200);
    assert_eq!(requeued["state"], "scheduled");
    assert_eq!(requeued["event_id"], "s1-0");
    assert_eq!(requeued["deadline"], at(4_000 + 60_000));
    app.advance(500);
    app.store.advance_replays(app.now()).await.unwrap();
    let progress = expect_json(&app.get(&format!("/v1/replays/{id}")).await, 200);
    assert_eq!(progress["requeued"], 1);
    assert_eq!(progress["state"], "running");

    let cancel = app.request(Method::POST, &format!("/v1/replays/{id}/cancel"));
    let cancelled = expect_json(&app.send(cancel).await, 200);
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["finished_at"], at(4_500));
    app.advance(10_000);
    app.store.advance_replays(app.now()).await.unwrap();
    assert_eq!(state_of(&app, &s1[1]).await, "dead");
    assert_eq!(state_of(&app, &s1[2]).await, "dead");
    assert_eq!(
        state_of(&app, &s2[0]).await,
        "dead",
        "another subscriber's stay dead"
    );
    let again = app.request(Method::POST, &format!("/v1/replays/{id}/cancel"));
    assert_eq!(
        expect_json(&app.send(again).await, 200)["state"],
        "cancelled"
    );
}

#[tokio::test]
async fn unknown_or_malformed_replay_ids() {
    let app = spawn_app().await;
    let unknown = "01937c5e-0000-7000-8000-000000000000";
    expect_problem(&app.get(&format!("/v1/replays/{unknown}")).await, 404);
    let cancel = app.request(Method::POST, &format!("/v1/replays/{unknown}/cancel"));
    expect_problem(&app.send(cancel).await, 404);
    expect_fields(&app.get("/v1/replays/nope").await, 422, &["replay_id"]);
}

#[tokio::test]
async fn overlapping_replays_cannot_exceed_the_server_rate() {
    let app = app_with().flag("--max-replay-rate", 50).start().await;
    app.create_subscriber("s").await;
    dead_jobs(&app, "s", 2).await;
    let body = |rate: u32| json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": rate});
    let first = expect_json(&app.post_json("/v1/replays", &body(30)).await, 202);
    assert_eq!(first["state"], "running");
    let refused = expect_problem(&app.post_json("/v1/replays", &body(30)).await, 409);
    let detail = refused["detail"].as_str().unwrap();
    assert!(detail.contains("at most 20/s"), "{detail}");
    expect_json(&app.post_json("/v1/replays", &body(20)).await, 202);
}
