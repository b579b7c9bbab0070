//! What a delivery test's instance starts from, on the one harness
//! (`tests/common/app.rs`).

use deferhook::domain::Timestamp;
use serde_json::Value;

use crate::app::{AppBuilder, Db, TestApp};

/// Short settings so the real waits of a test (an attempt's timeout, a shutdown's
/// grace) stay short, and backoffs are milliseconds; a test's own flags override them.
pub const FAST: &[&str] = &[
    "--backoff-base-ms",
    "100",
    "--backoff-max-ms",
    "1000",
    "--attempt-timeout-ms",
    "2000",
    "--lease-ms",
    "3000",
    "--shutdown-grace-ms",
    "1000",
];

/// An instance on a fresh database on `db`: [`FAST`] settings, receivers on 127.0.0.1
/// allowed (CASES C-08 refuses them by default), a manual clock at
/// `deferhook::testing::START`, and a worker the test steps.
pub fn instance(db: Db) -> AppBuilder {
    TestApp::builder()
        .backend(db)
        .defaults(FAST)
        .allow_private_targets()
}

/// Another instance like [`instance`], on the existing database at `database_url`.
pub fn instance_on(database_url: &str) -> AppBuilder {
    TestApp::builder()
        .on(database_url)
        .defaults(FAST)
        .allow_private_targets()
}

/// When the job next needs the worker: its next attempt (or, when a hold with a known
/// end keeps it back, that end: `retry_advice.at` of a `not_before` advice), or its
/// deadline (the sweep), whichever comes first.
pub fn next_due(job: &Value) -> Timestamp {
    let parse = |value: &Value| {
        value
            .as_str()
            .map(|text| Timestamp::parse_rfc3339(text).unwrap())
    };
    let deadline = parse(&job["deadline"]).expect("a deadline");
    let held_until = Some(&job["retry_advice"])
        .filter(|advice| advice["verdict"] == "not_before")
        .and_then(|advice| parse(&advice["at"]));
    parse(&job["next_attempt_at"])
        .map(|next| held_until.map_or(next, |until| next.max(until)))
        .map_or(deadline, |next| next.min(deadline))
}

/// Steps the worker until `job` is in `state`: runs what is pending, then moves the
/// clock to the job's next due time ([`next_due`]), at most `steps` times. Returns the
/// job.
pub async fn step_until(app: &TestApp, job: &Value, state: &str, steps: usize) -> Value {
    for _ in 0..steps {
        app.run_pending().await;
        let current = app.job_now(job).await;
        if current["state"] == state {
            return current;
        }
        app.advance(next_due(&current).millis_since(app.now()).max(1));
    }
    panic!(
        "not {state} after {steps} steps: {}",
        app.job_now(job).await
    );
}

/// Asserts that the next attempt comes `from_ms` to `to_ms` after the clock's now: a
/// step at `from_ms - 1` attempts nothing, one at `to_ms` attempts one job. Leaves the
/// clock at `to_ms`.
pub async fn assert_next_attempt_within(app: &TestApp, from_ms: i64, to_ms: i64) {
    app.advance(from_ms - 1);
    let early = app.run_pending().await.attempted();
    assert_eq!(early, 0, "attempted before {from_ms} ms");
    app.advance(to_ms - from_ms + 1);
    let due = app.run_pending().await.attempted();
    assert_eq!(due, 1, "not attempted by {to_ms} ms");
}
