//! The deadline sweep, for both backends: jobs past their deadline go `dead`
//! (`deadline_exceeded`), expired leases on their last allowed attempt go `dead`
//! (`max_attempts`), and expired leases of paused subscribers or destinations go back
//! to `retrying`; an expired lease's attempt is recorded as `unknown`.

use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::StoreError;
use crate::store::claims::LEASE_EXPIRED_REASON;
use crate::store::dialect::{Query, Value};
use crate::store::records::ExpiredJobs;
use crate::store::transactions::Transactions;

crate::store::lite_rows::row! {
    /// A job a sweep moves.
    pub struct OverdueRow {
        id: String,
        state: String,
        past_deadline: bool,
        used_up: bool,
        /// Why it waited, as a waiting reason's wire name: its subscriber paused, or its
        /// subscriber's destination paused or its circuit not closed (`dead_detail`).
        waited_on: Option<String>,
    }
}

/// The statements of a sweep, in the backend's dialect.
pub(crate) trait SweepStatements: Transactions {
    /// The jobs a sweep at `$1` moves ([`OverdueRow`]), at most `$2`, deadline first.
    const OVERDUE: &'static str;
    /// Records job `$1`'s attempt in progress as `unknown` at `$2`, for reason `$3`.
    const MARK_UNKNOWN: &'static str;
    /// Moves job `$1` to `dead` for reason `$3` with detail `$4` at `$2`, or without
    /// one back to `retrying`, due at `$2`; ends its lease.
    const EXPIRE: &'static str;
}

/// Records job `job_id`'s attempt in progress as `unknown` at `now` (its lease
/// expired).
pub(crate) async fn mark_attempt_unknown<S: SweepStatements>(
    tx: &mut S::Tx,
    job_id: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let query = Query::new(S::MARK_UNKNOWN)
        .text(job_id)
        .int(now.as_millis())
        .text(LEASE_EXPIRED_REASON);
    S::execute(tx, query).await?;
    Ok(())
}

/// Moves up to `limit` overdue jobs at `now`, in one write transaction (see
/// [`crate::store::WorkerStore::expire_deadlines`]).
pub(crate) async fn expire_deadlines<S: SweepStatements>(
    db: &S,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    db.transaction(move |tx| Box::pin(expire_in::<S>(tx, now, limit)))
        .await
}

async fn expire_in<S: SweepStatements>(
    tx: &mut S::Tx,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    let query = Query::new(S::OVERDUE)
        .int(now.as_millis())
        .int(i64::from(limit));
    let overdue: Vec<OverdueRow> = S::fetch_all(tx, query).await?;
    let mut expired = ExpiredJobs::default();
    for job in overdue {
        if job.state == JobState::InFlight.as_str() {
            mark_attempt_unknown::<S>(tx, &job.id, now).await?;
            expired.lease_expired += 1;
        }
        // Only a job that dies at its deadline keeps why it waited (docs/DESIGN.md §2.1).
        let mut detail = None;
        let reason = if job.past_deadline {
            expired.dead += 1;
            detail = job.waited_on;
            Some(DeadReason::DeadlineExceeded)
        } else if job.used_up {
            expired.max_attempts += 1;
            Some(DeadReason::MaxAttempts)
        } else {
            // An expired lease no claim would take over now (a paused subscriber, a
            // paused destination or one whose circuit is not closed): back to waiting,
            // due now.
            expired.released += 1;
            None
        };
        let query = Query::new(S::EXPIRE)
            .text(&job.id)
            .int(now.as_millis())
            .bind(Value::OptText(reason.map(|r| r.as_str().to_owned())))
            .bind(Value::OptText(detail));
        S::execute(tx, query).await?;
    }
    Ok(expired)
}
