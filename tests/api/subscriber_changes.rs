//! `PATCH /v1/subscribers/{id}` and `POST /v1/subscribers/resume` (issue #16), on both
//! backends: only the fields given change, a pause shows why and since when, a resume
//! is all or nothing and answers how many it enabled.

use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::support::{app_with, at, expect_fields, expect_json, expect_problem};

async fn app(db: Db) -> TestApp {
    app_with().backend(db).start().await
}

async fn subscriber(app: &TestApp, id: &str) -> Value {
    expect_json(&app.get(&format!("/v1/subscribers/{id}")).await, 200)
}

async fn patch(app: &TestApp, id: &str, body: Value) -> crate::app::Reply {
    app.patch_json(&format!("/v1/subscribers/{id}"), &body)
        .await
}

async fn patch_changes_only_the_fields_given(db: Db) {
    let app = app(db).await;
    app.put_subscriber(
        "billing",
        &json!({"url": "https://example.com/hooks", "max_in_flight": 5, "rate_limit_per_second": 10}),
    )
    .await;
    app.advance(1_000);

    let paused = expect_json(
        &patch(&app, "billing", json!({"enabled": false})).await,
        200,
    );
    assert_eq!(
        paused,
        json!({
            "id": "billing",
            "url": "https://example.com/hooks",
            "destination": "example.com:443",
            "max_in_flight": 5,
            "rate_limit_per_second": 10,
            "enabled": false,
            "paused_reason": "operator",
            "paused_at": at(1_000),
            "created_at": at(0),
            "updated_at": at(1_000),
            "event_types": [],
            "attempt_timeout_ms": null,
            "health": {
                "status": "paused",
                "since": at(1_000),
                "last_error": null,
                "jobs": {"scheduled": 0, "in_flight": 0, "retrying": 0},
                "dead_last_hour": 0,
                "failing_jobs": 0,
                "paused_reason": "operator",
                "paused_at": at(1_000),
                "retry_advice": {
                    "verdict": "after_resume",
                    "reason": "its subscriber is paused: nothing is sent until it is resumed",
                    "at": null,
                },
            },
        })
    );
    assert_eq!(subscriber(&app, "billing").await, paused);

    app.advance(1_000);
    let cleared = expect_json(
        &patch(&app, "billing", json!({"rate_limit_per_second": null})).await,
        200,
    );
    assert_eq!(cleared["rate_limit_per_second"], Value::Null);
    assert_eq!(cleared["max_in_flight"], 5);
    assert_eq!(cleared["enabled"], false);
    assert_eq!(cleared["paused_at"], at(1_000));

    app.advance(1_000);
    let moved = expect_json(
        &patch(
            &app,
            "billing",
            json!({"enabled": true, "url": "https://hooks.example.org:8443/in"}),
        )
        .await,
        200,
    );
    assert_eq!(moved["url"], "https://hooks.example.org:8443/in");
    assert_eq!(moved["destination"], "hooks.example.org:8443");
    assert_eq!(moved["enabled"], true);
    assert_eq!(moved["paused_reason"], Value::Null);
    assert_eq!(moved["paused_at"], Value::Null);
    assert_eq!(moved["updated_at"], at(3_000));
    assert!(moved.get("secret").is_none(), "{moved}");
    let destination = app
        .get_json("/v1/destinations/hooks.example.org:8443")
        .await;
    assert_eq!(destination["subscribers"], 1, "{destination}");
}

async fn patch_refuses_bad_input_and_writes_nothing(db: Db) {
    let app = app(db).await;
    app.put_subscriber("billing", &json!({"url": "https://example.com/hooks"}))
        .await;
    let before = subscriber(&app, "billing").await;
    app.advance(1_000);

    expect_fields(&patch(&app, "billing", json!({})).await, 422, &["body"]);
    let secret = patch(
        &app,
        "billing",
        json!({"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
    )
    .await;
    expect_problem(&secret, 422);
    assert!(!secret.text.contains("MfKQ9r8G"), "{}", secret.text);
    expect_fields(
        &patch(
            &app,
            "billing",
            json!({"url": null, "max_in_flight": 0, "enabled": null, "rate_limit_per_second": 0}),
        )
        .await,
        422,
        &["url", "enabled", "max_in_flight", "rate_limit_per_second"],
    );
    expect_fields(
        &patch(
            &app,
            "billing",
            json!({"url": "ftp://example.com/x", "enabled": false}),
        )
        .await,
        422,
        &["url"],
    );
    expect_problem(&patch(&app, "nobody", json!({"enabled": true})).await, 404);
    assert_eq!(app.get("/v1/subscribers/nobody").await.status, 404);
    assert_eq!(subscriber(&app, "billing").await, before);
}

async fn resume_by_ids_answers_how_many(db: Db) {
    let app = app(db).await;
    for id in ["a", "b", "c"] {
        app.put_subscriber(id, &json!({"url": format!("https://{id}.example.com/h")}))
            .await;
    }
    expect_json(&patch(&app, "a", json!({"enabled": false})).await, 200);
    expect_json(&patch(&app, "b", json!({"enabled": false})).await, 200);
    app.advance(1_000);

    let reply = app
        .post_json(
            "/v1/subscribers/resume",
            &json!({"subscriber_ids": ["a", "c"]}),
        )
        .await;
    assert_eq!(expect_json(&reply, 200), json!({"resumed": 1}));
    let a = subscriber(&app, "a").await;
    assert_eq!(
        (&a["enabled"], &a["paused_reason"], &a["updated_at"]),
        (&json!(true), &Value::Null, &json!(at(1_000)))
    );
    assert_eq!(subscriber(&app, "b").await["enabled"], false);

    let reply = app
        .post_json(
            "/v1/subscribers/resume",
            &json!({"paused_reason": "operator"}),
        )
        .await;
    assert_eq!(expect_json(&reply, 200), json!({"resumed": 1}));
    assert_eq!(subscriber(&app, "b").await["enabled"], true);
}

async fn resume_refuses_bad_input_and_writes_nothing(db: Db) {
    let app = app(db).await;
    app.put_subscriber("a", &json!({"url": "https://a.example.com/h"}))
        .await;
    expect_json(&patch(&app, "a", json!({"enabled": false})).await, 200);
    let resume = |body: Value| {
        let app = &app;
        async move { app.post_json("/v1/subscribers/resume", &body).await }
    };

    let unknown = resume(json!({"subscriber_ids": ["a", "nobody"]})).await;
    expect_fields(&unknown, 404, &["subscriber_ids[1]"]);
    assert_eq!(
        subscriber(&app, "a").await["enabled"],
        false,
        "all or nothing"
    );

    expect_fields(&resume(json!({})).await, 422, &["body"]);
    expect_fields(
        &resume(json!({"subscriber_ids": ["a"], "paused_reason": "gone"})).await,
        422,
        &["body"],
    );
    expect_fields(
        &resume(json!({"subscriber_ids": []})).await,
        422,
        &["subscriber_ids"],
    );
    let too_many: Vec<String> = (0..1_001).map(|n| format!("s{n}")).collect();
    expect_fields(
        &resume(json!({"subscriber_ids": too_many})).await,
        422,
        &["subscriber_ids"],
    );
    expect_fields(
        &resume(json!({"subscriber_ids": ["a", "bad id", "a"]})).await,
        422,
        &["subscriber_ids[1]", "subscriber_ids[2]"],
    );
    expect_fields(
        &resume(json!({"paused_reason": "tired"})).await,
        422,
        &["paused_reason"],
    );
    expect_problem(
        &resume(json!({"paused_reason": "gone", "all": true})).await,
        422,
    );
    // A selector given as null is not "left out": the document says neither is nullable.
    expect_fields(
        &resume(json!({"paused_reason": "operator", "subscriber_ids": null})).await,
        422,
        &["subscriber_ids"],
    );
    assert_eq!(subscriber(&app, "a").await["enabled"], false);
}

crate::on_both_backends!(
    patch_changes_only_the_fields_given,
    patch_refuses_bad_input_and_writes_nothing,
    resume_by_ids_answers_how_many,
    resume_refuses_bad_input_and_writes_nothing,
);
