//! `/v1/schedules` (issue #20): a recurring schedule is put, read, listed, run and
//! deleted; bad input is a 422 naming the field and writes nothing; the scheduler's
//! periods become jobs listed by `schedule_id`, and the view shows the last one.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};

use crate::app::Db;
use crate::support::{TestApp, app_with, expect_fields, expect_json, expect_problem};
use deferhook::domain::job_template::JobLimits;
use deferhook::scheduler::Scheduler;

/// The README's cleanup example: a daily period for room 7.
fn cleanup() -> Value {
    json!({
        "subscriber_id": "room-7",
        "cron": "0 0 * * *",
        "event_id": "cleanup:room-7:{period_start}",
        "payload": {"room": 7, "task": "cleanup"},
        "ttl_ms": 3_600_000,
    })
}

async fn put(app: &TestApp, id: &str, body: &Value) -> crate::app::Reply {
    app.put_json(&format!("/v1/schedules/{id}"), body).await
}

/// One pass of a scheduler over the app's store at the app's `now`.
async fn pass(app: &TestApp) {
    let limits = JobLimits {
        max_payload_bytes: 65_536,
        default_ttl_ms: 86_400_000,
    };
    let clock = Arc::new(app.manual_clock());
    Scheduler::new(app.store.clone(), clock, limits)
        .pass(app.now())
        .await
        .unwrap();
}

async fn a_schedule_is_created_read_and_replaced(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("room-7").await;
    let reply = put(&app, "cleanup-room-7", &cleanup()).await;
    let created = expect_json(&reply, 201);
    assert_eq!(
        reply.header("location"),
        Some("/v1/schedules/cleanup-room-7")
    );
    assert_eq!(
        created,
        json!({
            "id": "cleanup-room-7",
            "subscriber_id": "room-7",
            "event_type": null,
            "cron": "0 0 * * *",
            "time_zone": "UTC",
            "every_ms": null,
            "anchor": null,
            "event_id": "cleanup:room-7:{period_start}",
            "payload": {"room": 7, "task": "cleanup"},
            "ttl_ms": 3_600_000,
            "max_attempts": null,
            "catch_up": "latest",
            "enabled": true,
            "created_at": "2026-11-30T12:00:00.000Z",
            "updated_at": "2026-11-30T12:00:00.000Z",
            "next_periods": [
                "2026-12-01T00:00:00.000Z",
                "2026-12-02T00:00:00.000Z",
                "2026-12-03T00:00:00.000Z",
                "2026-12-04T00:00:00.000Z",
                "2026-12-05T00:00:00.000Z",
            ],
            "last_run": null,
            "last_error": null,
        })
    );
    assert_eq!(
        expect_json(&app.get("/v1/schedules/cleanup-room-7").await, 200),
        created
    );
    // The producer puts it again when it restarts: nothing changes.
    app.advance(60_000);
    let again = expect_json(&put(&app, "cleanup-room-7", &cleanup()).await, 200);
    assert_eq!(again["updated_at"], created["updated_at"]);
    // A new payload and zone replace the old ones.
    let mut changed = cleanup();
    changed["time_zone"] = json!("Europe/Berlin");
    changed["payload"] = json!([1, 2.50, "x"]);
    let replaced = expect_json(&put(&app, "cleanup-room-7", &changed).await, 200);
    assert_eq!(replaced["time_zone"], "Europe/Berlin");
    assert_eq!(replaced["payload"], json!([1, 2.50, "x"]));
    assert_eq!(replaced["created_at"], created["created_at"]);
    assert_eq!(replaced["updated_at"], "2026-11-30T12:01:00.000Z");
    assert_eq!(
        replaced["next_periods"][0], "2026-11-30T23:00:00.000Z",
        "Berlin's midnight"
    );
    // Paused: no period to come.
    changed["enabled"] = json!(false);
    let paused = expect_json(&put(&app, "cleanup-room-7", &changed).await, 200);
    assert_eq!(paused["next_periods"], json!([]));
    // Left out, `enabled` keeps the operator's pause.
    let kept = expect_json(&put(&app, "cleanup-room-7", &cleanup()).await, 200);
    assert_eq!(kept["enabled"], false);
}

async fn an_interval_keeps_its_anchor_when_put_again(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("room-7").await;
    let hourly = json!({
        "subscriber_id": "room-7",
        "every_ms": 3_600_000,
        "event_id": "cleanup:room-7:{period_start}",
        "payload": {"room": 7},
    });
    let created = expect_json(&put(&app, "hourly", &hourly).await, 201);
    assert_eq!(
        created["anchor"], "2026-11-30T12:00:00.000Z",
        "its creation"
    );
    assert_eq!(created["time_zone"], Value::Null);
    assert_eq!(created["next_periods"][0], "2026-11-30T13:00:00.000Z");
    app.advance(600_000);
    let again = expect_json(&put(&app, "hourly", &hourly).await, 200);
    assert_eq!(
        again["anchor"], "2026-11-30T12:00:00.000Z",
        "a restart never shifts it"
    );
    assert_eq!(again["next_periods"][0], "2026-11-30T13:00:00.000Z");
    let mut anchored = hourly.clone();
    anchored["anchor"] = json!("2026-11-30T00:20:00+01:00");
    let moved = expect_json(&put(&app, "hourly", &anchored).await, 200);
    assert_eq!(moved["anchor"], "2026-11-29T23:20:00.000Z");
    assert_eq!(moved["next_periods"][0], "2026-11-30T12:20:00.000Z");
}

#[tokio::test]
async fn bad_input_is_a_422_naming_the_field_and_writes_nothing() {
    let app = app_with().start().await;
    app.create_subscriber("room-7").await;
    let with = |changes: Value| {
        let mut body = cleanup();
        for (key, value) in changes.as_object().unwrap() {
            if value.is_null() {
                body.as_object_mut().unwrap().remove(key);
            } else {
                body[key] = value.clone();
            }
        }
        body
    };
    for (changes, fields) in [
        (json!({"cron": "61 * * * *"}), &["cron"][..]),
        (json!({"cron": "* * * *"}), &["cron"][..]),
        (json!({"cron": "0 0 * * * * 2027"}), &["cron"][..]),
        (json!({"time_zone": "Mars/Olympus"}), &["time_zone"][..]),
        (json!({"time_zone": "+01:00"}), &["time_zone"][..]),
        (json!({"event_id": "cleanup:room-7"}), &["event_id"][..]),
        (
            json!({"event_id": format!("{}{{period_start}}", "x".repeat(240))}),
            &["event_id"][..],
        ),
        (json!({"cron": null, "every_ms": 999}), &["every_ms"][..]),
        (json!({"every_ms": 60_000}), &["every_ms"][..]),
        (json!({"cron": null}), &["cron"][..]),
        (
            json!({"cron": null, "every_ms": 60_000, "time_zone": "UTC"}),
            &["time_zone"][..],
        ),
        (json!({"anchor": "2026-11-30T00:00:00Z"}), &["anchor"][..]),
        (
            json!({"cron": null, "every_ms": 60_000, "anchor": "yesterday"}),
            &["anchor"][..],
        ),
        (
            json!({"subscriber_id": null, "event_type": "ship ment"}),
            &["event_type"][..],
        ),
        (
            json!({"subscriber_id": null, "event_type": "shipment.*"}),
            &["event_type"][..],
        ),
        (
            json!({"event_type": "shipment.delivered"}),
            &["event_type"][..],
        ),
        (json!({"subscriber_id": null}), &["subscriber_id"][..]),
        (json!({"subscriber_id": "a b"}), &["subscriber_id"][..]),
        (json!({"catch_up": "sometimes"}), &["catch_up"][..]),
        (json!({"ttl_ms": 0}), &["ttl_ms"][..]),
        (json!({"max_attempts": 0}), &["max_attempts"][..]),
        (
            json!({"cron": "61 * * * *", "event_id": "x"}),
            &["cron", "event_id"][..],
        ),
    ] {
        let reply = put(&app, "nightly", &with(changes.clone())).await;
        expect_fields(&reply, 422, fields);
        let _ = changes;
    }
    let null_payload = put(&app, "nightly", &with(json!({"payload": Value::Null}))).await;
    assert!(
        null_payload.status == 422 || null_payload.status == 400,
        "{}",
        null_payload.text
    );
    let unknown = expect_problem(
        &put(&app, "nightly", &with(json!({"subscriber_id": "nobody"}))).await,
        404,
    );
    assert!(unknown.to_string().contains("nobody"), "{unknown}");
    expect_fields(&put(&app, "a%20b", &cleanup()).await, 422, &["schedule_id"]);
    expect_problem(&app.get("/v1/schedules/nightly").await, 404);
    let listed = expect_json(&app.get("/v1/schedules").await, 200);
    assert_eq!(listed["items"], json!([]), "nothing written");
}

async fn the_periods_become_jobs_and_the_view_shows_the_last(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("room-7").await;
    let every_minute = json!({
        "subscriber_id": "room-7",
        "every_ms": 60_000,
        "event_id": "cleanup:room-7:{period_start}",
        "payload": {"room": 7},
        "max_attempts": 5,
    });
    expect_json(&put(&app, "minutely", &every_minute).await, 201);
    app.advance(55_000);
    pass(&app).await;
    app.advance(60_000);
    pass(&app).await;
    let jobs = expect_json(&app.get("/v1/jobs?schedule_id=minutely").await, 200);
    let keys: Vec<&str> = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "cleanup:room-7:2026-11-30T12:02:00Z",
            "cleanup:room-7:2026-11-30T12:01:00Z"
        ],
        "newest first, one per period"
    );
    let newest = &jobs["items"][0];
    assert_eq!(newest["schedule_id"], "minutely");
    assert_eq!(newest["deliver_at"], "2026-11-30T12:02:00.000Z");
    assert_eq!(newest["max_attempts"], 5);
    let view = expect_json(&app.get("/v1/schedules/minutely").await, 200);
    assert_eq!(view["last_run"]["period_start"], "2026-11-30T12:02:00.000Z");
    assert_eq!(
        view["last_run"]["event_id"],
        "cleanup:room-7:2026-11-30T12:02:00Z"
    );
    assert_eq!(view["last_run"]["jobs"], 1);
    assert_eq!(view["last_run"]["job"]["id"], newest["id"]);
    assert_eq!(view["last_run"]["job"]["state"], "scheduled");
    assert_eq!(view["next_periods"][0], "2026-11-30T12:02:00.000Z");
    // In a listing the job is not read.
    let listed = expect_json(&app.get("/v1/schedules").await, 200);
    assert_eq!(listed["items"][0]["last_run"]["job"], Value::Null);
    assert_eq!(listed["items"][0]["last_run"]["jobs"], 1);
}

async fn run_makes_the_current_period_once_and_delete_keeps_the_jobs(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("room-7").await;
    let hourly = json!({
        "subscriber_id": "room-7",
        "every_ms": 3_600_000,
        "anchor": "2026-11-30T00:00:00Z",
        "event_id": "cleanup:room-7:{period_start}",
        "payload": {"room": 7},
        "enabled": false,
    });
    expect_json(&put(&app, "hourly", &hourly).await, 201);
    app.advance(1_800_000);
    let ran = expect_json(
        &app.post_json("/v1/schedules/hourly/run", &json!({})).await,
        201,
    );
    assert_eq!(
        ran["period_start"], "2026-11-30T12:00:00.000Z",
        "the period now is in"
    );
    assert_eq!(ran["event_id"], "cleanup:room-7:2026-11-30T12:00:00Z");
    let job = &ran["items"][0];
    assert_eq!(job["subscriber_id"], "room-7");
    assert_eq!(job["deliver_at"], "2026-11-30T12:30:00.000Z", "due at once");
    assert_eq!(job["schedule_id"], "hourly");
    let again = expect_json(
        &app.post_json("/v1/schedules/hourly/run", &json!({})).await,
        200,
    );
    assert_eq!(again["items"][0]["id"], job["id"], "the period's one job");
    let view = expect_json(&app.get("/v1/schedules/hourly").await, 200);
    assert_eq!(view["last_run"]["job"]["id"], job["id"]);

    let delete = app
        .send(app.request(Method::DELETE, "/v1/schedules/hourly"))
        .await;
    assert_eq!(delete.status, 204, "{}", delete.text);
    let delete = app
        .send(app.request(Method::DELETE, "/v1/schedules/hourly"))
        .await;
    expect_problem(&delete, 404);
    expect_problem(&app.get("/v1/schedules/hourly").await, 404);
    expect_problem(
        &app.post_json("/v1/schedules/hourly/run", &json!({})).await,
        404,
    );
    let jobs = expect_json(&app.get("/v1/jobs?schedule_id=hourly").await, 200);
    assert_eq!(jobs["items"][0]["id"], job["id"], "its jobs stay");
}

#[tokio::test]
async fn the_listing_pages_through_schedules_in_id_order() {
    let app = app_with().start().await;
    app.create_subscriber("room-7").await;
    for id in ["c", "a", "b"] {
        let mut body = cleanup();
        body["event_id"] = json!(format!("cleanup:{id}:{{period_start}}"));
        expect_json(&put(&app, id, &body).await, 201);
    }
    let first = expect_json(&app.get("/v1/schedules?limit=2").await, 200);
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["a", "b"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = expect_json(
        &app.get(&format!("/v1/schedules?limit=2&cursor={cursor}"))
            .await,
        200,
    );
    assert_eq!(ids(&second), ["c"]);
    assert_eq!(second["next_cursor"], Value::Null);
    expect_fields(&app.get("/v1/schedules?cursor=zz").await, 422, &["cursor"]);
}

crate::on_both_backends!(
    a_schedule_is_created_read_and_replaced,
    an_interval_keeps_its_anchor_when_put_again,
    the_periods_become_jobs_and_the_view_shows_the_last,
    run_makes_the_current_period_once_and_delete_keeps_the_jobs,
);

/// The payload changed after the period's job was made: the job made stays the
/// period's job (the README's order: put, run, put another payload, run).
#[tokio::test]
async fn a_period_made_before_its_payload_changed_keeps_its_job() {
    let app = app_with().start().await;
    app.create_subscriber("room-7").await;
    expect_json(&put(&app, "cleanup-room-7", &cleanup()).await, 201);
    let first = expect_json(
        &app.post_json("/v1/schedules/cleanup-room-7/run", &json!({}))
            .await,
        201,
    );
    let mut changed = cleanup();
    changed["payload"] = json!({"room": 7});
    expect_json(&put(&app, "cleanup-room-7", &changed).await, 200);
    let again = expect_json(
        &app.post_json("/v1/schedules/cleanup-room-7/run", &json!({}))
            .await,
        200,
    );
    assert_eq!(again["items"].as_array().unwrap().len(), 1, "{again}");
    assert_eq!(again["items"][0]["id"], first["items"][0]["id"]);
    let view = expect_json(&app.get("/v1/schedules/cleanup-room-7").await, 200);
    assert_eq!(view["last_run"]["jobs"], 1);
    assert_eq!(view["last_run"]["job"]["id"], first["items"][0]["id"]);
}

/// Two schedules whose periods would share jobs (one template, one subscriber, or an
/// event type on either side) are refused: the second PUT is a 422 naming `event_id`.
#[tokio::test]
async fn a_template_another_schedule_uses_for_the_same_targets_is_a_422() {
    let app = app_with().start().await;
    app.create_subscriber("room-7").await;
    app.create_subscriber("room-8").await;
    expect_json(&put(&app, "first", &cleanup()).await, 201);
    let problem = expect_fields(&put(&app, "second", &cleanup()).await, 422, &["event_id"]);
    assert!(
        problem.to_string().contains("schedule `first`"),
        "{problem}"
    );
    expect_problem(&app.get("/v1/schedules/second").await, 404);
    // Another subscriber may use the same template: its keys differ.
    let mut other = cleanup();
    other["subscriber_id"] = json!("room-8");
    expect_json(&put(&app, "room-8", &other).await, 201);
    // An event type's subscribers may include room-7: refused too.
    let mut typed = cleanup();
    typed.as_object_mut().unwrap().remove("subscriber_id");
    typed["event_type"] = json!("room.cleanup");
    expect_fields(&put(&app, "typed", &typed).await, 422, &["event_id"]);
    // The schedule itself may be put again.
    expect_json(&put(&app, "first", &cleanup()).await, 200);
}
