//! `deferhook_dead_jobs{reason}` (docs/DESIGN.md §7): the dead jobs in the store now,
//! per reason, read at each scrape (unlike `deferhook_dead_letters_total`, which counts
//! what this process saw go dead since it started).

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use deferhook::store::{AttemptResult, LeaseRef, OutcomeRecord};
use serde_json::json;

use crate::app::{Db, metric};
use crate::support::{TestApp, app_with, job};

/// Creates a job due now and records its first attempt as a terminal failure.
async fn kill(app: &TestApp, event_id: &str, reason: DeadReason, class: ErrorClass) {
    app.create_job(&job("s", event_id, json!({}))).await;
    let claimed = app.claim().await.remove(0);
    let now = app.now();
    let record = OutcomeRecord {
        lease: LeaseRef {
            job_id: claimed.job_id,
            token: claimed.lease_token,
        },
        attempt: claimed.attempt,
        started_at: now,
        finished_at: now,
        result: AttemptResult {
            outcome: AttemptOutcome::Terminal,
            status: None,
            error_class: Some(class),
            reason: Some("refused".into()),
            body_excerpt: None,
            resent: false,
        },
        transition: transition(&claimed.snapshot, JobEvent::TerminalFailure { reason }, now)
            .unwrap(),
        pause_subscriber: false,
    };
    app.store.record_outcomes(&[record], now).await.unwrap();
}

fn dead(text: &str, reason: DeadReason) -> f64 {
    metric(
        text,
        &format!("deferhook_dead_jobs{{reason=\"{}\"}}", reason.as_str()),
    )
}

async fn the_gauge_counts_the_dead_jobs_in_the_store_per_reason(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("s").await;
    let fresh = app.metrics().await;
    for reason in DeadReason::ALL {
        assert_eq!(dead(&fresh, reason), 0.0, "{reason}");
    }
    kill(
        &app,
        "a",
        DeadReason::NonRetryableResponse,
        ErrorClass::Http4xx,
    )
    .await;
    kill(
        &app,
        "b",
        DeadReason::NonRetryableResponse,
        ErrorClass::Http4xx,
    )
    .await;
    kill(&app, "c", DeadReason::TargetRejected, ErrorClass::Blocked).await;

    let text = app.metrics().await;
    assert_eq!(dead(&text, DeadReason::NonRetryableResponse), 2.0);
    assert_eq!(dead(&text, DeadReason::TargetRejected), 1.0);
    assert_eq!(dead(&text, DeadReason::DeadlineExceeded), 0.0);
    assert_eq!(dead(&text, DeadReason::MaxAttempts), 0.0);
    assert_eq!(metric(&text, "deferhook_jobs{state=\"dead\"}"), 3.0);
}

crate::on_both_backends!(the_gauge_counts_the_dead_jobs_in_the_store_per_reason);
