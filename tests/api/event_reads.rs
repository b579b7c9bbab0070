//! `GET /v1/events` (the affected events) and `GET /v1/events/{event_id}` (one event's
//! summary), on both backends: their exact shapes and figures after a fan-out whose
//! jobs fail in different ways, the listing's order and pages, and bad input (422
//! naming the field, 404 for an event no job has).

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use deferhook::store::ClaimedJob;
use serde_json::{Value, json};

use crate::app::Db;
use crate::support::{TestApp, app_with, at, expect_fields, expect_json, expect_problem};

/// How an attempt ends.
enum Answer {
    /// 503, retried 60 s later.
    Unavailable,
    /// 404: dead.
    NotFound,
    /// 200.
    Ok,
}

/// Records `claimed`'s attempt as ending now with `answer`.
async fn answer(app: &TestApp, claimed: &ClaimedJob, answer: Answer) {
    let now = app.now();
    let (event, outcome, status, class) = match answer {
        Answer::Unavailable => (
            JobEvent::RetryableFailure {
                retry_at: now.plus_ms(60_000),
            },
            AttemptOutcome::Retryable,
            503,
            Some(ErrorClass::Http5xx),
        ),
        Answer::NotFound => (
            JobEvent::TerminalFailure {
                reason: DeadReason::NonRetryableResponse,
            },
            AttemptOutcome::Terminal,
            404,
            Some(ErrorClass::Http4xx),
        ),
        Answer::Ok => (JobEvent::Delivered, AttemptOutcome::Delivered, 200, None),
    };
    let result = crate::app::answer(outcome, Some(status), class);
    app.record(claimed, event, result).await;
}

/// Fans event `event_id` out to `subscribers`, due now.
async fn fan_out(app: &TestApp, event_id: &str, subscribers: &[&str]) {
    let request = json!({
        "event_id": event_id,
        "payload": {"n": 1},
        "subscriber_ids": subscribers,
    });
    expect_json(&app.post_json("/v1/events", &request).await, 201);
}

async fn pause(app: &TestApp, id: &str) {
    let reply = app
        .patch_json(&format!("/v1/subscribers/{id}"), &json!({"enabled": false}))
        .await;
    expect_json(&reply, 200);
}

/// The keys of a JSON object, sorted.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// `evt-1` fanned out at `at(0)` to a (503, retrying until `at(60_000)`), b (404,
/// dead), c (200), d (paused: waits); `evt-ok` to c (200).
async fn incident(app: &TestApp) {
    for id in ["a", "b", "c", "d"] {
        app.create_subscriber(id).await;
    }
    pause(app, "d").await;
    fan_out(app, "evt-1", &["d", "c", "b", "a"]).await;
    fan_out(app, "evt-ok", &["c"]).await;
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 4, "d's job waits");
    for job in &claimed {
        let subscriber = app
            .store
            .get_job(job.job_id, app.now())
            .await
            .unwrap()
            .unwrap()
            .subscriber_id;
        let reply = match subscriber.as_str() {
            "a" => Answer::Unavailable,
            "b" => Answer::NotFound,
            _ => Answer::Ok,
        };
        answer(app, job, reply).await;
    }
}

async fn an_events_summary_answers_the_incident(db: Db) {
    let app = app_with().backend(db).start().await;
    incident(&app).await;
    app.advance(1_000);
    let body = expect_json(&app.get("/v1/events/evt-1").await, 200);
    assert_eq!(
        keys(&body),
        [
            "dead_reasons",
            "error_classes",
            "event_id",
            "failing_subscribers",
            "jobs",
            "retry_advice",
            "waiting_reasons"
        ]
    );
    assert_eq!(body["event_id"], "evt-1");
    assert_eq!(
        body["jobs"],
        json!({"scheduled": 1, "in_flight": 0, "retrying": 1, "delivered": 1, "dead": 1,
               "cancelled": 0})
    );
    assert_eq!(
        body["waiting_reasons"],
        json!({"backing_off": 1, "subscriber_paused": 1})
    );
    assert_eq!(body["dead_reasons"], json!({"non_retryable_response": 1}));
    assert_eq!(body["error_classes"], json!({"http_4xx": 1, "http_5xx": 1}));
    assert_eq!(
        body["retry_advice"],
        json!({"after_resume": 1, "no": 1, "yes": 1})
    );
    let failing = &body["failing_subscribers"];
    assert_eq!(keys(failing), ["items", "total"]);
    assert_eq!(failing["total"], 3);
    let items = failing["items"].as_array().unwrap();
    let ids: Vec<&str> = items
        .iter()
        .map(|i| i["subscriber_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "d"], "subscriber id order; c delivered");
    for item in items {
        assert_eq!(
            keys(item),
            [
                "dead_reason",
                "job_id",
                "last_error",
                "retry_advice",
                "state",
                "subscriber_id",
                "waiting_reason"
            ]
        );
    }
    let (a, b, d) = (&items[0], &items[1], &items[2]);
    assert_eq!(a["state"], "retrying");
    assert_eq!(a["waiting_reason"], "backing_off");
    assert_eq!(a["dead_reason"], Value::Null);
    assert_eq!(
        a["last_error"],
        json!({"class": "http_5xx", "status": 503, "reason": "HTTP 503", "at": at(0)})
    );
    assert_eq!(a["retry_advice"]["verdict"], "yes");
    assert_eq!(a["retry_advice"]["at"], at(60_000));
    assert_eq!(b["state"], "dead");
    assert_eq!(b["dead_reason"], "non_retryable_response");
    assert_eq!(b["waiting_reason"], Value::Null);
    assert_eq!(b["last_error"]["status"], 404);
    assert_eq!(b["retry_advice"]["verdict"], "no");
    assert_eq!(d["state"], "scheduled");
    assert_eq!(d["waiting_reason"], "subscriber_paused");
    assert_eq!(d["last_error"], Value::Null);
    assert_eq!(d["retry_advice"]["verdict"], "after_resume");
    let job = app
        .get_json(&format!("/v1/jobs/{}", a["job_id"].as_str().unwrap()))
        .await;
    assert_eq!(job["subscriber_id"], "a", "job_id names the job");

    // An event whose jobs are all delivered has no failing subscriber.
    let ok = expect_json(&app.get("/v1/events/evt-ok").await, 200);
    assert_eq!(ok["failing_subscribers"], json!({"items": [], "total": 0}));
    assert_eq!(ok["waiting_reasons"], json!({}));
}

async fn the_affected_events_are_listed(db: Db) {
    let app = app_with().backend(db).start().await;
    incident(&app).await;
    app.advance(1_000);
    let body = expect_json(&app.get("/v1/events").await, 200);
    assert_eq!(keys(&body), ["items", "next_cursor"]);
    assert_eq!(body["next_cursor"], Value::Null);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "evt-ok is delivered: {body}");
    let item = &items[0];
    assert_eq!(keys(item), ["affected", "created_at", "event_id", "jobs"]);
    assert_eq!(item["event_id"], "evt-1");
    assert_eq!(
        item["affected"], 3,
        "retrying, dead in the last hour, paused"
    );
    assert_eq!(item["created_at"], at(0));
    assert_eq!(
        item["jobs"],
        json!({"scheduled": 1, "in_flight": 0, "retrying": 1, "delivered": 1, "dead": 1,
               "cancelled": 0})
    );

    // Dead before `affected_since`: not counted (an offset written as %2B).
    let since = "2026-11-30T13:00:00.500%2B01:00";
    let later = expect_json(
        &app.get(&format!("/v1/events?affected_since={since}")).await,
        200,
    );
    assert_eq!(later["items"][0]["affected"], 2, "{later}");
    // Past the default hour, the dead letter no longer counts either.
    app.advance(3_600_000);
    let hour = expect_json(&app.get("/v1/events").await, 200);
    assert_eq!(hour["items"][0]["affected"], 2, "{hour}");
}

async fn the_listing_pages_newest_first(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("p").await;
    pause(&app, "p").await;
    for n in 1..=3 {
        fan_out(&app, &format!("evt-{n}"), &["p"]).await;
        app.advance(10);
    }
    let first = expect_json(&app.get("/v1/events?limit=2").await, 200);
    let names = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&first), ["evt-3", "evt-2"]);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = expect_json(
        &app.get(&format!("/v1/events?limit=2&cursor={cursor}"))
            .await,
        200,
    );
    assert_eq!(names(&second), ["evt-1"]);
    assert_eq!(second["next_cursor"], Value::Null);
}

async fn a_summary_lists_the_first_hundred_failing_subscribers(db: Db) {
    let app = app_with().backend(db).start().await;
    let ids: Vec<String> = (0..101).map(|n| format!("s-{n:03}")).collect();
    for id in ids.iter().rev() {
        app.create_subscriber(id).await;
        pause(&app, id).await;
    }
    let all: Vec<&str> = ids.iter().map(String::as_str).collect();
    fan_out(&app, "wide", &all).await;
    let body = expect_json(&app.get("/v1/events/wide").await, 200);
    let failing = &body["failing_subscribers"];
    assert_eq!(failing["total"], 101);
    let items = failing["items"].as_array().unwrap();
    assert_eq!(items.len(), 100);
    assert_eq!(items[0]["subscriber_id"], "s-000");
    assert_eq!(items[99]["subscriber_id"], "s-099");
    assert_eq!(body["waiting_reasons"], json!({"subscriber_paused": 101}));
}

async fn bad_input_is_named(db: Db) {
    let app = app_with().backend(db).start().await;
    for (query, field) in [
        ("affected_since=yesterday", "affected_since"),
        ("affected_since=2026-11-30T12:00:00", "affected_since"),
        ("limit=0", "limit"),
        ("cursor=!!", "cursor"),
    ] {
        let reply = app.get(&format!("/v1/events?{query}")).await;
        expect_fields(&reply, 422, &[field]);
    }
    let unknown = app.get("/v1/events?state=dead").await;
    expect_problem(&unknown, 422);
    expect_fields(&app.get("/v1/events/two%20words").await, 422, &["event_id"]);
    let long = "e".repeat(257);
    expect_fields(
        &app.get(&format!("/v1/events/{long}")).await,
        422,
        &["event_id"],
    );
    // Any visible ASCII is an event id: `/` and `?` percent-encoded in the path.
    app.create_subscriber("s").await;
    fan_out(&app, "room/7?closed#1", &["s"]).await;
    let odd = expect_json(&app.get("/v1/events/room%2F7%3Fclosed%231").await, 200);
    assert_eq!(odd["event_id"], "room/7?closed#1");
    assert_eq!(odd["jobs"]["scheduled"], 1);
    let missing = expect_problem(&app.get("/v1/events/never-sent").await, 404);
    assert!(
        missing["detail"].as_str().unwrap().contains("never-sent"),
        "{missing}"
    );
}

crate::on_both_backends!(
    an_events_summary_answers_the_incident,
    the_affected_events_are_listed,
    the_listing_pages_newest_first,
    a_summary_lists_the_first_hundred_failing_subscribers,
    bad_input_is_named,
);
