//! `POST /v1/subscribers/pause` (issue #33), on both backends: named subscribers, all
//! or nothing, or every failing one of a cause (its latest error's class and status);
//! the answer lists the ones selected, which a resume by ids undoes; audited.

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use serde_json::{Value, json};

use crate::app::{Db, TestApp, answer};
use crate::support::{app_with, expect_fields, expect_json};

async fn enabled(app: &TestApp, id: &str) -> Value {
    let view = expect_json(&app.get(&format!("/v1/subscribers/{id}")).await, 200);
    view["enabled"].clone()
}

async fn pause(app: &TestApp, body: Value) -> crate::app::Reply {
    app.post_json("/v1/subscribers/pause", &body).await
}

/// Gives `id` a job whose attempt fails with `status`/`class` (retried later).
async fn fail(app: &TestApp, id: &str, status: Option<u16>, class: ErrorClass) {
    app.job(id, &format!("evt-{id}"), json!({})).await;
    let claimed = app.claim().await;
    let mine = claimed
        .iter()
        .find(|c| c.subscriber_id == id)
        .expect("its job claimed");
    let retry_at = app.now().plus_ms(60_000);
    let result = answer(AttemptOutcome::Retryable, status, Some(class));
    app.record(mine, JobEvent::RetryableFailure { retry_at }, result)
        .await;
}

async fn pause_by_ids_is_all_or_nothing_and_audited(db: Db) {
    let app = app_with().backend(db).start().await;
    for id in ["a", "b", "c"] {
        app.create_subscriber(id).await;
    }
    let unknown = pause(&app, json!({"subscriber_ids": ["a", "nobody"]})).await;
    expect_fields(&unknown, 404, &["subscriber_ids[1]"]);
    assert_eq!(enabled(&app, "a").await, true, "all or nothing");

    let repeated = pause(&app, json!({"subscriber_ids": ["b", "a", "b"]})).await;
    expect_fields(&repeated, 422, &["subscriber_ids[2]"]);
    let reply = pause(&app, json!({"subscriber_ids": ["b", "a"]})).await;
    assert_eq!(
        expect_json(&reply, 200),
        json!({"paused": 2, "subscriber_ids": ["a", "b"]})
    );
    let a = expect_json(&app.get("/v1/subscribers/a").await, 200);
    assert_eq!(
        (&a["enabled"], &a["paused_reason"]),
        (&json!(false), &json!("operator"))
    );
    assert_eq!(enabled(&app, "c").await, true);
    let again = pause(&app, json!({"subscriber_ids": ["a"]})).await;
    assert_eq!(expect_json(&again, 200)["paused"], 0, "already paused");

    let trail = app.get_json("/v1/audit?action=subscriber.pause").await;
    let items = trail["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{trail}");
    assert_eq!(items[1]["parameters"]["subscriber_ids"], json!(["b", "a"]));
}

async fn pause_by_cause_takes_the_failing_of_that_cause_only(db: Db) {
    let app = app_with().backend(db).start().await;
    for id in ["slow1", "slow2", "five", "fine"] {
        app.create_subscriber(id).await;
    }
    fail(&app, "slow1", None, ErrorClass::Timeout).await;
    fail(&app, "slow2", None, ErrorClass::Timeout).await;
    fail(&app, "five", Some(500), ErrorClass::Http5xx).await;

    let reply = pause(&app, json!({"health": "failing", "error_class": "timeout"})).await;
    assert_eq!(
        expect_json(&reply, 200),
        json!({"paused": 2, "subscriber_ids": ["slow1", "slow2"]})
    );
    assert_eq!(enabled(&app, "five").await, true);
    assert_eq!(enabled(&app, "fine").await, true);
    let by_status = pause(&app, json!({"health": "failing", "status": 500})).await;
    assert_eq!(
        expect_json(&by_status, 200),
        json!({"paused": 1, "subscriber_ids": ["five"]})
    );
    let none = pause(&app, json!({"health": "failing", "error_class": "connect"})).await;
    assert_eq!(
        expect_json(&none, 200),
        json!({"paused": 0, "subscriber_ids": []})
    );
    // The ids answered undo it.
    let resumed = app
        .post_json(
            "/v1/subscribers/resume",
            &json!({"subscriber_ids": ["slow1", "slow2"]}),
        )
        .await;
    assert_eq!(expect_json(&resumed, 200)["resumed"], 2);
    assert_eq!(enabled(&app, "slow1").await, true);
}

async fn pause_refuses_bad_input_and_writes_nothing(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("a").await;
    let cases = [
        (json!({}), "body"),
        (
            json!({"subscriber_ids": ["a"], "health": "failing"}),
            "body",
        ),
        (
            json!({"subscriber_ids": ["a"], "error_class": "timeout"}),
            "body",
        ),
        (json!({"subscriber_ids": []}), "subscriber_ids"),
        (json!({"subscriber_ids": ["bad id"]}), "subscriber_ids[0]"),
        (json!({"health": "paused"}), "health"),
        (
            json!({"health": "failing", "error_class": "slow"}),
            "error_class",
        ),
        (json!({"health": "failing", "status": 700}), "status"),
        (json!({"health": "failing", "colour": "red"}), "colour"),
        (
            json!({"health": "failing", "subscriber_ids": null}),
            "subscriber_ids",
        ),
    ];
    for (body, field) in cases {
        expect_fields(&pause(&app, body.clone()).await, 422, &[field]);
    }
    assert_eq!(enabled(&app, "a").await, true);
    // `pause` names the route: no subscriber may take it.
    let taken = app
        .put_json(
            "/v1/subscribers/pause",
            &json!({"url": "https://example.com/h"}),
        )
        .await;
    assert_eq!(taken.status, 405, "{}", taken.text);
}

crate::on_both_backends!(
    pause_by_ids_is_all_or_nothing_and_audited,
    pause_by_cause_takes_the_failing_of_that_cause_only,
    pause_refuses_bad_input_and_writes_nothing,
);
