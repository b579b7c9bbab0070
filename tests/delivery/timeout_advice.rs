//! Advice that tells the truth about a receiver slower than its attempt timeout (issue
//! #33): once its recent attempts all time out, every job of it, and the subscriber,
//! say `no` with the measured reason and the two fixes, whether the job backs off, waits
//! for its endpoint circuit or is dead; raising its own `attempt_timeout_ms` delivers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::instance;

/// The advice of `job` now, as (verdict, reason).
async fn advice(app: &TestApp, job: &Value) -> (String, String) {
    let now = app.job_now(job).await;
    let advice = &now["retry_advice"];
    (
        advice["verdict"].as_str().unwrap_or("none").to_owned(),
        advice["reason"].as_str().unwrap_or("").to_owned(),
    )
}

async fn a_receiver_slower_than_its_timeout_gets_no_and_the_fixes(db: Db) {
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(700))]).await;
    let app = instance(db)
        .flags(&["--attempt-timeout-ms", "200"])
        .start()
        .await;
    app.subscriber("slow", &receiver.url("/slow"), None).await;
    let mut jobs = Vec::new();
    for n in 0..5 {
        let job = app
            .job("slow", &format!("evt-{n}"), json!({"ttl_ms": 20_000}))
            .await;
        jobs.push(job);
    }
    // Two timeouts may be a blip: a retry is worth it.
    let two = json!({"max_in_flight": 2});
    assert_eq!(
        app.patch_json("/v1/subscribers/slow", &two).await.status,
        200
    );
    assert_eq!(app.run_pending().await.attempted(), 2);
    assert_eq!(advice(&app, &jobs[0]).await.0, "yes");

    // Five timeouts, no answer between: every job says no, the same way.
    let all = json!({"max_in_flight": 16});
    assert_eq!(
        app.patch_json("/v1/subscribers/slow", &all).await.status,
        200
    );
    assert_eq!(app.run_pending().await.attempted(), 3);
    let mut seen = Vec::new();
    for job in &jobs {
        seen.push(advice(&app, job).await);
    }
    let (verdict, reason) = &seen[0];
    assert_eq!(verdict, "no", "{reason}");
    assert!(
        reason.starts_with(
            "answers slower than the 200 ms attempt timeout: its last 5 attempts all timed out"
        ),
        "{reason}"
    );
    assert!(
        reason.contains("p50 of recent attempts ≥ 200 ms"),
        "{reason}"
    );
    assert!(reason.contains("attempt_timeout_ms"), "{reason}");
    for other in &seen {
        assert_eq!(other, &seen[0]);
    }
    let subscriber = app.get("/v1/subscribers/slow").await.json();
    assert_eq!(subscriber["health"]["retry_advice"]["verdict"], "no");
    assert_eq!(
        subscriber["health"]["retry_advice"]["reason"],
        reason.as_str()
    );

    // Its endpoint circuit is open (5 of 5 failed): the jobs wait for it, and the
    // advice does not turn into not_before.
    app.advance(2_000);
    let held = app.job_now(&jobs[0]).await;
    assert_eq!(held["waiting_reason"], "subscriber_circuit_open", "{held}");
    assert_eq!(advice(&app, &jobs[0]).await, seen[0]);

    // Dead at its deadline: still no (a replay would time out the same), not replay.
    app.advance(20_000);
    app.run_pending().await;
    let dead = app.job_now(&jobs[0]).await;
    assert_eq!(dead["state"], "dead", "{dead}");
    assert_eq!(advice(&app, &jobs[0]).await, seen[0]);
    let summary = app.get("/v1/events/evt-0").await.json();
    assert_eq!(summary["retry_advice"], json!({"no": 1}), "{summary}");

    // The first fix: its own, longer attempt timeout; a replay then delivers.
    let fixed = app
        .patch_json(
            "/v1/subscribers/slow",
            &json!({"attempt_timeout_ms": 1_500}),
        )
        .await;
    assert_eq!(fixed.status, 200, "{}", fixed.text);
    // Its timeout is now above the one its attempts hit: the advice no longer says no
    // (the next attempt will tell); the dead job is a replay's.
    assert_eq!(advice(&app, &jobs[0]).await.0, "replay");
    let replay = app
        .post_json(
            "/v1/replays",
            &json!({"subscriber_ids": ["slow"], "rate_per_second": 100, "max_jobs": 10}),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.text);
    for _ in 0..20 {
        app.run_pending().await;
        if app.job_now(&jobs[0]).await["state"] == "delivered" {
            break;
        }
        app.advance(100);
    }
    assert_eq!(app.job_now(&jobs[0]).await["state"], "delivered");
}

crate::on_both_backends!(a_receiver_slower_than_its_timeout_gets_no_and_the_fixes);
