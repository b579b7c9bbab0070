//! Quotas on recurring schedules (issue #34 item 4.6, docs/DESIGN.md §5.14): the
//! schedule after `--max-schedules` is refused naming `schedule_id` while a replace is
//! not; periods closer than `--schedule-min-period-ms`, or more jobs a minute than
//! `--schedule-max-jobs-per-minute`, are refused naming the timing; a schedule whose
//! event type gains subscribers past the cap skips periods and says why; PUTs that
//! re-time a schedule over and over do not make a period after each PUT; a cron
//! pattern whose pace the PUT cannot see (every second of 29 February) is held to the
//! cap when its periods come.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::app::Db;
use crate::support::{TestApp, app_with, expect_fields, expect_json, expect_problem};
use deferhook::domain::Timestamp;
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

/// The `deliver_at` (the period's start) of every job schedule `id` made, in
/// milliseconds, read page by page.
async fn starts_of_jobs(app: &TestApp, id: &str) -> Vec<i64> {
    let mut starts = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = expect_json(
            &app.get(&format!("/v1/jobs?schedule_id={id}&limit=1000{cursor}"))
                .await,
            200,
        );
        for job in page["items"].as_array().unwrap() {
            let at = Timestamp::parse_rfc3339(job["deliver_at"].as_str().unwrap()).unwrap();
            starts.push(at.as_millis());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    starts.sort_unstable();
    starts
}

/// The most jobs whose periods start within any one minute (`[t, t + 60 s)`).
fn busiest_minute(starts: &[i64]) -> usize {
    (0..starts.len())
        .map(|first| {
            starts[first..]
                .iter()
                .take_while(|&&at| at < starts[first] + 60_000)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Issue #34 item 4.6's probe: a cap of 120 jobs a minute, six subscribers of `z.*`, a
/// schedule of `z.a` every 3 s (exactly the cap, so accepted), put again 300 times 20
/// to 200 ms apart with its anchor shifted 7 ms each time, a scheduler's pass after
/// each PUT. Each PUT restarts the periods; spaced from the new timing's previous
/// period, a period was made after nearly every PUT (hundreds of jobs a minute). The
/// run-time bound measures from the last period made, so the periods of any minute
/// (by start) make at most 120 jobs, during the PUTs and after them.
async fn putting_a_schedule_again_and_again_does_not_pass_its_cap(db: Db) {
    let app = app_with()
        .backend(db)
        .flag("--schedule-max-jobs-per-minute", 120)
        .start()
        .await;
    let quotas = ScheduleQuotas {
        max_jobs_per_minute: 120,
        ..ScheduleQuotas::default()
    };
    for n in 1..=6 {
        let url = format!("https://example.com/hooks/z-{n}");
        app.put_subscriber(
            &format!("z-{n}"),
            &json!({"url": url, "event_types": ["z.*"]}),
        )
        .await;
    }
    let start = deferhook::testing::START;
    for round in 0..300_u64 {
        let body = json!({
            "event_type": "z.a",
            "every_ms": 3_000,
            "anchor": start.plus_ms(round * 7).to_rfc3339(),
            "event_id": "r27:{period_start}",
            "payload": {},
        });
        let reply = put(&app, "r27", &body).await;
        assert!(reply.status == 200 || reply.status == 201, "{}", reply.text);
        pass(&app, quotas).await;
        app.advance(i64::try_from(20 + round * 37 % 181).unwrap());
    }
    // Then a minute and more of the last timing, without PUTs.
    for _ in 0..70 {
        pass(&app, quotas).await;
        app.advance(1_000);
    }
    let starts = starts_of_jobs(&app, "r27").await;
    let busiest = busiest_minute(&starts);
    assert!(
        busiest <= 120,
        "{busiest} jobs in one minute against a cap of 120 ({} jobs in all)",
        starts.len()
    );
    // Bounded, not starved: about one period every 3 s.
    assert!(busiest >= 96, "{busiest} jobs in the busiest minute");
}

/// The PUT's pace check reads a cron pattern's next 1,000 periods within 400 days, so
/// every second of 29 February (`* * * 29 2 *`, 15 months ahead) passes it for three
/// subscribers under a cap of 120 (180 jobs a minute). The bound when periods are
/// made holds it: on 29 February 2028 a period is made every 2 s (1.5 s or more after
/// the last one made), 90 jobs a minute.
async fn a_leap_day_pattern_the_put_cannot_see_is_held_to_the_cap(db: Db) {
    let app = app_with()
        .backend(db)
        .flag("--schedule-max-jobs-per-minute", 120)
        .start()
        .await;
    let quotas = ScheduleQuotas {
        max_jobs_per_minute: 120,
        ..ScheduleQuotas::default()
    };
    for n in 1..=3 {
        let url = format!("https://example.com/hooks/leap-{n}");
        app.put_subscriber(
            &format!("leap-{n}"),
            &json!({"url": url, "event_types": ["leap.*"]}),
        )
        .await;
    }
    let body = json!({
        "event_type": "leap.day",
        "cron": "* * * 29 2 *",
        "event_id": "leap:{period_start}",
        "payload": {},
    });
    expect_json(&put(&app, "leap", &body).await, 201);
    let eve = Timestamp::parse_rfc3339("2028-02-28T23:59:58Z").unwrap();
    app.advance(eve.millis_since(app.now()));
    for _ in 0..130 {
        pass(&app, quotas).await;
        app.advance(1_000);
    }
    let starts = starts_of_jobs(&app, "leap").await;
    assert_eq!(busiest_minute(&starts), 90);
    let view = expect_json(&app.get("/v1/schedules/leap").await, 200);
    let error = view["last_error"].as_str().unwrap();
    assert!(error.contains("1500 ms"), "{error}");
}

crate::on_both_backends!(
    the_schedule_after_the_most_is_refused_and_a_replace_is_not,
    too_frequent_or_too_large_schedules_are_refused,
    a_schedule_grown_past_its_cap_skips_periods_and_says_why,
    putting_a_schedule_again_and_again_does_not_pass_its_cap,
    a_leap_day_pattern_the_put_cannot_see_is_held_to_the_cap,
);
