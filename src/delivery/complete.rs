//! The complete step of one attempt: record its outcome with a write fenced by the
//! lease token, retried while the store is unreachable (CASES C-03), then let the
//! lease go.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::attempt::{AttemptContext, Executed};
use crate::domain::attempt::AttemptOutcome;
use crate::domain::{JobState, Timestamp};
use crate::metrics;
use crate::store::{Fenced, OutcomeRecord};

/// How one attempt ended, as the complete step recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The job.
    pub job_id: Uuid,
    /// The attempt's number (1-based).
    pub attempt: u32,
    /// The attempt's outcome.
    pub outcome: AttemptOutcome,
    /// The state the outcome moves the job to (when `stored` is `Applied`).
    pub state: JobState,
    /// What the fenced write did: `Applied`, `Late` (the lease had moved on: the
    /// attempt row only), or `None` when the store could not be reached in time (the
    /// lease then expires and the job is attempted again).
    pub stored: Option<Fenced>,
}

/// Records `executed`, releases its lease, and counts a job that reached a terminal
/// state. `hard_stop` (shutdown's grace period over) ends the retries after one last
/// try.
pub async fn complete(
    ctx: &AttemptContext,
    executed: Executed,
    hard_stop: &CancellationToken,
) -> Completed {
    let Executed {
        event_id,
        subscriber_id,
        record,
    } = executed;
    let job_id = record.lease.job_id;
    let transition = record.transition;
    let stored = record_until_stored(ctx, &record, hard_stop).await;
    ctx.leases.release(job_id);
    match stored {
        Some(Fenced::Applied) if transition.to.is_terminal() => {
            metrics::job_finished(transition.attempts, transition.dead_reason);
            if let Some(reason) = transition.dead_reason {
                tracing::warn!(%job_id, %subscriber_id, event_id = event_id.as_str(),
                    reason = reason.as_str(),
                    "job is a dead letter");
            }
        }
        Some(Fenced::Applied) => {}
        Some(Fenced::Late) => {
            tracing::info!(%job_id, "late result: recorded on the attempt only");
            metrics::late_result();
        }
        None => {}
    }
    Completed {
        job_id,
        attempt: record.attempt,
        outcome: record.result.outcome,
        state: transition.to,
        stored,
    }
}

/// Writes the outcome, retrying transient store errors with backoff (50 ms doubling
/// to 2 s) until it is stored, until a lease length has passed since the lease's last
/// known expiry (by then another worker has surely reclaimed the job, so the write
/// could only be late), or, after the hard stop of shutdown, one last try. Returns
/// `None` when it gave up: the lease then expires and the job is attempted again.
async fn record_until_stored(
    ctx: &AttemptContext,
    record: &OutcomeRecord,
    hard_stop: &CancellationToken,
) -> Option<Fenced> {
    let expiry = ctx
        .leases
        .expires_at(record.lease.job_id)
        .unwrap_or(record.finished_at);
    let give_up_at: Timestamp = expiry.plus_ms(ctx.settings.lease_ms);
    let mut delay = Duration::from_millis(50);
    loop {
        let now = ctx.clock.now();
        match ctx.store.record_outcome(record.clone(), now).await {
            Ok(fenced) => return Some(fenced),
            Err(error) if error.is_transient() && now < give_up_at && !hard_stop.is_cancelled() => {
                tracing::warn!(job_id = %record.lease.job_id, %error,
                    "cannot record the outcome yet; retrying");
            }
            Err(error) => {
                tracing::error!(job_id = %record.lease.job_id, %error,
                    "giving up recording the outcome; the lease will expire and the job \
                     will be attempted again");
                return None;
            }
        }
        // At the hard stop, one last try; then the lease is left to expire.
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = hard_stop.cancelled() => {}
        }
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
