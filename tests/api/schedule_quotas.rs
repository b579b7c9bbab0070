//! Quotas on recurring schedules (issue #34 item 4.6, docs/DESIGN.md §5.14): the
//! schedule after `--max-schedules` is refused naming `schedule_id` while a replace is
//! not; periods closer than `--schedule-min-period-ms`, or more jobs a minute than
//! `--schedule-max-jobs-per-minute`, are refused naming the timing; a schedule whose
//! event type gains subscribers past the cap skips periods and says why.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::app::Db;
use crate::support::{TestApp, app_with, expect_fields, expect_json, expect_problem};
use deferhook::domain::job_template::JobLimits;
use deferhook::domain::schedule_quota::ScheduleQuotas;
use deferhook::scheduler::{PassReport, Scheduler};

/// A schedule of subscriber `room-7` every minute, with an event id template of its
/// own.
fn minutely(id: &str) -> Value {
    json!({
        "subscriber_id": "room-7",
        "every_ms": 60_000,
        "event_id": format!("cleanup:{id}:{{period_start}}"),
        "payload": {"room": 7},
    })
}

async fn put(app: &TestApp, id: &str, body: &Value) -> crate::app::Reply {
    app.put_json(&format!("/v1/schedules/{id}"), body).await
}

/// Subscriber `id` of the event types `tick.*`.
async fn ticker(app: &TestApp, id: &str) {
    let url = format!("https://example.com/hooks/{id}");
    app.put_subscriber(id, &json!({"url": url, "event_types": ["tick.*"]}))
        .await;
}

/// Creates schedules `s-0000` … up to `count`, eight requests at a time.
async fn create_many(app: &TestApp, count: usize) {
    let client = reqwest::Client::new();
    let mut running = JoinSet::new();
    for lane in 0..8 {
        let (client, base) = (client.clone(), app.url("/v1/schedules"));
        running.spawn(async move {
            for n in (lane..count).step_by(8) {
                let id = format!("s-{n:04}");
                let reply = client
                    .put(format!("{base}/{id}"))
                    .json(&minutely(&id))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(reply.status(), 201, "{id}");
            }
        });
    }
    while let Some(done) = running.join_next().await {
        done.unwrap();
    }
}

/// The default quota keeps 1,000 schedules: the 1,001st is a 422 naming `schedule_id`
/// and writes nothing, a PUT replacing one of the 1,000 is accepted, and once one is
/// deleted another may be created.
async fn the_schedule_after_the_most_is_refused_and_a_replace_is_not(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("room-7").await;
    create_many(&app, 1_000).await;
    let refused = expect_fields(
        &put(&app, "one-more", &minutely("one-more")).await,
        422,
        &["schedule_id"],
    );
    let message = refused["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("1000 schedules") && message.contains("--max-schedules"),
        "{message}"
    );
    expect_problem(&app.get("/v1/schedules/one-more").await, 404);
    let mut replaced = minutely("s-0007");
    replaced["payload"] = json!({"room": 8});
    let view = expect_json(&put(&app, "s-0007", &replaced).await, 200);
    assert_eq!(view["payload"], json!({"room": 8}));
    let mut retimed = minutely("s-0008");
    retimed["every_ms"] = json!(120_000);
    expect_json(&put(&app, "s-0008", &retimed).await, 200);
    let deleted = app
        .send(app.request(reqwest::Method::DELETE, "/v1/schedules/s-0009"))
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    expect_json(&put(&app, "one-more", &minutely("one-more")).await, 201);
}

/// Periods closer than the shortest period are refused naming `every_ms` or `cron`;
/// so are more jobs a minute than the cap (the default, 10,000: 167 subscribers every
/// second make 10,020), with the figures; the same type every 2 s is accepted.
async fn too_frequent_or_too_large_schedules_are_refused(db: Db) {
    let app = app_with()
        .backend(db)
        .flag("--schedule-min-period-ms", 60_000)
        .start()
        .await;
    app.create_subscriber("room-7").await;
    let mut fast = minutely("fast");
    fast["every_ms"] = json!(30_000);
    let refused = expect_fields(&put(&app, "fast", &fast).await, 422, &["every_ms"]);
    assert!(refused.to_string().contains("60000 ms"), "{refused}");
    let mut cron = minutely("cron");
    cron.as_object_mut().unwrap().remove("every_ms");
    cron["cron"] = json!("*/30 * * * * *");
    expect_fields(&put(&app, "cron", &cron).await, 422, &["cron"]);
    expect_problem(&app.get("/v1/schedules/fast").await, 404);
    cron["cron"] = json!("* * * * *");
    expect_json(&put(&app, "cron", &cron).await, 201);

    let app = app_with().backend(db).start().await;
    for n in 0..167 {
        ticker(&app, &format!("t-{n:03}")).await;
    }
    let ticks = json!({
        "event_type": "tick.second",
        "every_ms": 1_000,
        "event_id": "tick:{period_start}",
        "payload": {},
    });
    let refused = expect_fields(&put(&app, "ticks", &ticks).await, 422, &["every_ms"]);
    let message = refused["errors"][0]["message"].as_str().unwrap();
    for figure in [
        "167 jobs a period",
        "10020 jobs a minute",
        "cap of 10000",
        "--schedule-max-jobs-per-minute",
        "at least 1002 ms apart",
    ] {
        assert!(message.contains(figure), "{figure}: {message}");
    }
    expect_problem(&app.get("/v1/schedules/ticks").await, 404);
    let mut slower = ticks.clone();
    slower["every_ms"] = json!(2_000);
    expect_json(&put(&app, "ticks", &slower).await, 201);
}

/// One pass of a scheduler bounded by `quotas` over the app's store at its `now`.
async fn pass(app: &TestApp, quotas: ScheduleQuotas) -> PassReport {
    let limits = JobLimits {
        max_payload_bytes: 65_536,
        default_ttl_ms: 86_400_000,
    };
    Scheduler::new(app.store.clone(), Arc::new(app.manual_clock()), limits)
        .with_quotas(quotas)
        .pass(app.now())
        .await
        .unwrap()
}

/// The event ids of schedule `ticks`'s jobs with how many jobs each has, in period
/// order (the event ids hold the periods' starts).
async fn periods_made(app: &TestApp) -> Vec<(String, usize)> {
    let jobs = expect_json(&app.get("/v1/jobs?schedule_id=ticks&limit=1000").await, 200);
    let mut periods: BTreeMap<String, usize> = BTreeMap::new();
    for job in jobs["items"].as_array().unwrap() {
        *periods
            .entry(job["event_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    periods.into_iter().collect()
}

/// A schedule accepted with one subscriber (60 jobs a minute, under a cap of 120)
/// whose type gains two more (180 a minute) is bounded: a period is made only 1.5 s or
/// more after the last one made, each with every subscriber's job, the others skipped
/// and counted; its `last_error` says why; back within the cap, every period is made.
async fn a_schedule_grown_past_its_cap_skips_periods_and_says_why(db: Db) {
    let app = app_with().backend(db).start().await;
    let quotas = ScheduleQuotas {
        max_jobs_per_minute: 120,
        ..ScheduleQuotas::default()
    };
    ticker(&app, "t-1").await;
    let ticks = json!({
        "event_type": "tick.second",
        "every_ms": 1_000,
        "event_id": "tick:{period_start}",
        "payload": {},
    });
    expect_json(&put(&app, "ticks", &ticks).await, 201);
    // 12:00:01 to 12:00:05, one job each.
    let first = pass(&app, quotas).await;
    assert_eq!((first.periods, first.skipped), (5, 0));
    ticker(&app, "t-2").await;
    ticker(&app, "t-3").await;
    app.advance(5_000);
    // 12:00:06 to 12:00:10 with three jobs a period: 06 is 1 s after 05 (skipped), 07
    // is 2 s after (made), 08 skipped, 09 made, 10 skipped.
    let bounded = pass(&app, quotas).await;
    assert_eq!((bounded.periods, bounded.skipped), (2, 3));
    let made = periods_made(&app).await;
    let tail: Vec<(&str, usize)> = made[5..].iter().map(|(p, n)| (p.as_str(), *n)).collect();
    assert_eq!(
        tail,
        [
            ("tick:2026-11-30T12:00:07Z", 3),
            ("tick:2026-11-30T12:00:09Z", 3)
        ]
    );
    let view = expect_json(&app.get("/v1/schedules/ticks").await, 200);
    let error = view["last_error"].as_str().unwrap();
    assert!(
        error.contains("over this server's quota") && error.contains("1500 ms"),
        "{error}"
    );
    // Two subscribers leave the type: 60 jobs a minute again, every period made.
    for id in ["t-2", "t-3"] {
        let reply = app
            .patch_json(
                &format!("/v1/subscribers/{id}"),
                &json!({"event_types": []}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    app.advance(5_000);
    let within = pass(&app, quotas).await;
    assert_eq!((within.periods, within.skipped), (5, 0));
    let view = expect_json(&app.get("/v1/schedules/ticks").await, 200);
    assert_eq!(view["last_error"], Value::Null);
}

crate::on_both_backends!(
    the_schedule_after_the_most_is_refused_and_a_replace_is_not,
    too_frequent_or_too_large_schedules_are_refused,
    a_schedule_grown_past_its_cap_skips_periods_and_says_why,
);
