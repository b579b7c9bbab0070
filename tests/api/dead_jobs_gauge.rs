//! `deferhook_dead_jobs{reason}` (docs/DESIGN.md §7): the dead jobs in the store now,
//! per reason, read at each scrape (unlike `deferhook_dead_letters_total`, which counts
//! what this process saw go dead since it started).

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use serde_json::json;

use crate::app::{Db, answer, metric};
use crate::support::{TestApp, app_with, job};

/// Creates a job due now and records its first attempt as a terminal failure.
async fn kill(app: &TestApp, event_id: &str, reason: DeadReason, class: ErrorClass) {
    app.create_job(&job("s", event_id, json!({}))).await;
    let claimed = app.claim().await.remove(0);
    let result = answer(AttemptOutcome::Terminal, None, Some(class));
    app.record(&claimed, JobEvent::TerminalFailure { reason }, result)
        .await;
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
