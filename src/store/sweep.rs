//! The deadline sweep, for both backends: jobs past their deadline go `dead`
//! (`deadline_exceeded`), expired leases on their last allowed attempt go `dead`
//! (`max_attempts`), and expired leases of paused subscribers go back to `retrying`;
//! an expired lease's attempt is recorded as `unknown`.

use std::future::Future;

use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::StoreError;
use crate::store::records::ExpiredJobs;
use crate::store::transactions::Transactions;

/// A job a sweep moves.
#[derive(sqlx::FromRow)]
pub struct OverdueRow {
    id: String,
    state: String,
    past_deadline: bool,
    used_up: bool,
}

/// The statements of a sweep.
pub(crate) trait SweepStatements: Transactions {
    /// The jobs a sweep at `now` moves, at most `limit`, deadline first.
    fn overdue(
        tx: &mut Self::Tx,
        now: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<OverdueRow>, StoreError>> + Send;

    /// Records job `job_id`'s attempt in progress as `unknown` at `now` (its lease
    /// expired).
    fn mark_attempt_unknown(
        tx: &mut Self::Tx,
        job_id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Moves job `job_id` to `dead` for `reason` at `now`, or with no reason back to
    /// `retrying`, due now; ends its lease.
    fn expire(
        tx: &mut Self::Tx,
        job_id: &str,
        now: Timestamp,
        reason: Option<DeadReason>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Moves up to `limit` overdue jobs at `now`, in one write transaction (see
/// [`crate::store::Store::expire_deadlines`]).
pub(crate) async fn expire_deadlines<S: SweepStatements>(
    db: &S,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    let mut tx = db.write().await?;
    let overdue = S::overdue(&mut tx, now, limit).await?;
    let mut expired = ExpiredJobs::default();
    for job in overdue {
        if job.state == JobState::InFlight.as_str() {
            S::mark_attempt_unknown(&mut tx, &job.id, now).await?;
            expired.lease_expired += 1;
        }
        let reason = if job.past_deadline {
            expired.dead += 1;
            Some(DeadReason::DeadlineExceeded)
        } else if job.used_up {
            expired.max_attempts += 1;
            Some(DeadReason::MaxAttempts)
        } else {
            // An expired lease of a paused subscriber: back to waiting, due now.
            expired.released += 1;
            None
        };
        S::expire(&mut tx, &job.id, now, reason).await?;
    }
    S::commit(tx).await?;
    Ok(expired)
}
