//! Replays of a slice (issue #16 part 7), on both backends: `subscriber_ids`,
//! `error_class` and `last_status` filters and their 422s, `selects: retrying`, and
//! `GET /v1/replays` (the API-only server has no worker: the test advances replays
//! through the store with the clock).

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use serde_json::{Value, json};

use crate::app::Db;
use crate::support::{TestApp, app_with, at, expect_fields, expect_json, expect_problem, job};

async fn app(db: Db) -> TestApp {
    app_with().backend(db).start().await
}

/// Creates a job of `subscriber` (ttl `ttl_ms`), claims it now and records a failure
/// with `status` (5xx: `http_5xx`, else `http_4xx`) retried a minute later: it is
/// `retrying`, or `dead` (`deadline_exceeded`) when the ttl ends first. Returns its id.
async fn failed_job(
    app: &TestApp,
    subscriber: &str,
    event: &str,
    status: u16,
    ttl_ms: u64,
) -> String {
    let created = app
        .create_job(&job(subscriber, event, json!({"ttl_ms": ttl_ms})))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let claimed = app.claim().await.remove(0);
    assert_eq!(claimed.job_id.to_string(), id);
    let now = app.now();
    let class = if status >= 500 {
        ErrorClass::Http5xx
    } else {
        ErrorClass::Http4xx
    };
    let event = JobEvent::RetryableFailure {
        retry_at: now.plus_ms(60_000),
    };
    let result = crate::app::answer(AttemptOutcome::Retryable, Some(status), Some(class));
    app.record(&claimed, event, result).await;
    id
}

async fn read_job(app: &TestApp, id: &str) -> Value {
    expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200)
}

async fn replays(app: &TestApp, query: &str) -> Value {
    expect_json(&app.get(&format!("/v1/replays{query}")).await, 200)
}

async fn slice_filters_are_checked_and_nothing_is_created(db: Db) {
    let app = app(db).await;
    let base = json!({"max_jobs": 10, "rate_per_second": 5});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let ids = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>();
    let cases = [
        (
            with(json!({"subscriber_ids": ids(1_001)})),
            "subscriber_ids",
        ),
        (with(json!({"subscriber_ids": []})), "subscriber_ids"),
        (
            with(json!({"subscriber_id": "a", "subscriber_ids": ["b"]})),
            "subscriber_ids",
        ),
        (
            with(json!({"subscriber_ids": ["a", "a"]})),
            "subscriber_ids[1]",
        ),
        (with(json!({"error_class": "http_500"})), "error_class"),
        (with(json!({"last_status": 600})), "last_status"),
        (with(json!({"last_status": "503"})), "last_status"),
        (with(json!({"all": true, "selects": "zombie"})), "selects"),
        (
            with(
                json!({"selects": "retrying", "subscriber_id": "a", "dead_reason": "max_attempts"}),
            ),
            "dead_reason",
        ),
        (
            with(json!({"selects": "retrying", "subscriber_id": "a", "ttl_ms": 60_000})),
            "ttl_ms",
        ),
    ];
    for (body, field) in cases {
        let reply = app.post_json("/v1/replays", &body).await;
        let problem = expect_fields(&reply, 422, &[field]);
        if field == "error_class" {
            let detail = problem["errors"][0]["message"].as_str().unwrap();
            assert!(detail.contains("http_5xx"), "names the classes: {detail}");
        }
    }
    // 1,000 ids are accepted, unknown ones matching nothing.
    let most = with(json!({"subscriber_ids": ids(1_000), "dry_run": true}));
    let dry = expect_json(&app.post_json("/v1/replays", &most).await, 200);
    assert_eq!(dry, json!({"matched": 0}));
    assert_eq!(
        replays(&app, "").await,
        json!({"items": [], "next_cursor": null}),
        "no replay was created"
    );
}

async fn a_slice_of_subscribers_by_status_is_replayed(db: Db) {
    let app = app(db).await;
    for s in ["a", "b", "c"] {
        app.create_subscriber(s).await;
    }
    // Dead with their last error: a 503, b 503 and 500, c 503.
    let a = failed_job(&app, "a", "a-1", 503, 1_000).await;
    let b_503 = failed_job(&app, "b", "b-1", 503, 1_000).await;
    let b_500 = failed_job(&app, "b", "b-2", 500, 1_000).await;
    let c = failed_job(&app, "c", "c-1", 503, 1_000).await;
    app.advance(2_000);
    app.store.expire_deadlines(app.now(), 100).await.unwrap();
    assert_eq!(read_job(&app, &a).await["state"], "dead");

    let slice = json!({"subscriber_ids": ["a", "b", "ghost"], "error_class": "http_5xx",
        "last_status": 503, "max_jobs": 100, "rate_per_second": 20});
    let mut dry = slice.clone();
    dry["dry_run"] = json!(true);
    let counted = expect_json(&app.post_json("/v1/replays", &dry).await, 200);
    assert_eq!(counted["matched"], 2);

    let created = expect_json(&app.post_json("/v1/replays", &slice).await, 202);
    assert_eq!(created["matched"], 2);
    assert_eq!(created["selects"], "dead");
    assert_eq!(
        created["filter"],
        json!({"subscriber_id": null, "subscriber_ids": ["a", "b", "ghost"],
               "event_id": null, "error_class": "http_5xx", "last_status": 503,
               "dead_reason": null, "dead_after": null, "dead_before": null, "all": false})
    );
    app.store.advance_replays(app.now()).await.unwrap();
    for (id, state) in [
        (&a, "scheduled"),
        (&b_503, "scheduled"),
        (&b_500, "dead"),
        (&c, "dead"),
    ] {
        assert_eq!(read_job(&app, id).await["state"], state, "{id}");
    }
}

async fn a_retrying_replay_brings_jobs_forward(db: Db) {
    let app = app(db).await;
    app.create_subscriber("s").await;
    let first = failed_job(&app, "s", "e-1", 503, 3_600_000).await;
    let second = failed_job(&app, "s", "e-2", 503, 3_600_000).await;
    let before = read_job(&app, &first).await;
    assert_eq!(before["state"], "retrying");
    assert_eq!(before["next_attempt_at"], at(60_000));

    let body = json!({"selects": "retrying", "subscriber_id": "s", "error_class": "http_5xx",
        "max_jobs": 10, "rate_per_second": 1});
    let created = expect_json(&app.post_json("/v1/replays", &body).await, 202);
    assert_eq!(
        (created["selects"].clone(), created["matched"].clone()),
        (json!("retrying"), json!(2))
    );
    app.advance(1_000);
    app.store.advance_replays(app.now()).await.unwrap();
    let brought = read_job(&app, &first).await;
    assert_eq!(brought["state"], "retrying");
    assert_eq!(brought["next_attempt_at"], at(1_000));
    assert_eq!(brought["attempts"], before["attempts"]);
    assert_eq!(brought["deadline"], before["deadline"]);
    assert_eq!(
        read_job(&app, &second).await["next_attempt_at"],
        at(60_000),
        "one per second: not yet"
    );
    let id = created["id"].as_str().unwrap();
    let progress = expect_json(&app.get(&format!("/v1/replays/{id}")).await, 200);
    assert_eq!(
        (progress["requeued"].clone(), progress["state"].clone()),
        (json!(1), json!("running"))
    );
}

async fn replays_are_listed_newest_first(db: Db) {
    let app = app(db).await;
    app.create_subscriber("s").await;
    failed_job(&app, "s", "e-1", 503, 1_000).await;
    app.advance(2_000);
    app.store.expire_deadlines(app.now(), 100).await.unwrap();
    let body = json!({"subscriber_id": "s", "max_jobs": 10, "rate_per_second": 1});
    let mut made = Vec::new();
    for _ in 0..3 {
        let created = expect_json(&app.post_json("/v1/replays", &body).await, 202);
        made.push(created["id"].as_str().unwrap().to_owned());
        app.advance(10);
    }
    let nothing = json!({"subscriber_id": "nobody", "max_jobs": 10, "rate_per_second": 1});
    let done = expect_json(&app.post_json("/v1/replays", &nothing).await, 202);
    assert_eq!(done["state"], "done");
    made.push(done["id"].as_str().unwrap().to_owned());

    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    let all = replays(&app, "").await;
    assert_eq!(ids(&all), newest_first);
    assert_eq!(all["items"][0]["selects"], "dead");
    let first = replays(&app, "?limit=3").await;
    assert_eq!(ids(&first), newest_first[..3]);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let rest = replays(&app, &format!("?limit=3&cursor={cursor}")).await;
    assert_eq!(ids(&rest), newest_first[3..]);
    assert_eq!(rest["next_cursor"], Value::Null);
    let running = replays(&app, "?state=running").await;
    assert_eq!(ids(&running), newest_first[1..]);
    assert_eq!(ids(&replays(&app, "?state=done").await), [made[3].clone()]);
    assert!(ids(&replays(&app, "?state=cancelled").await).is_empty());

    expect_fields(&app.get("/v1/replays?state=paused").await, 422, &["state"]);
    expect_fields(&app.get("/v1/replays?limit=0").await, 422, &["limit"]);
    expect_fields(&app.get("/v1/replays?cursor=nope").await, 422, &["cursor"]);
    expect_problem(&app.get("/v1/replays?colour=red").await, 422);
}

crate::on_both_backends!(
    slice_filters_are_checked_and_nothing_is_created,
    a_slice_of_subscribers_by_status_is_replayed,
    a_retrying_replay_brings_jobs_forward,
    replays_are_listed_newest_first,
);
