//! Retention, for both backends: purging finished jobs in batches, oldest first.

use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::PurgedJobs;
use crate::store::transactions::Transactions;

/// The statement of a purge, in the backend's dialect.
pub(crate) trait PurgeStatements: Transactions {
    /// Deletes up to `$2` jobs in state `$3` last updated before `$1`, oldest first,
    /// with their attempts and replay entries (foreign keys cascade); returns the
    /// state of each deleted job.
    const PURGE: &'static str;
}

/// Deletes up to `limit` finished jobs in one write transaction (see
/// [`crate::store::Store::purge_finished`]): delivered and cancelled ones before
/// `finished_before`, then dead ones before `dead_before`.
pub(crate) async fn purge_finished<S: PurgeStatements>(
    db: &S,
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
    limit: u32,
) -> Result<PurgedJobs, StoreError> {
    db.transaction(move |tx| Box::pin(purge_in::<S>(tx, finished_before, dead_before, limit)))
        .await
}

/// [`purge_finished`]'s statements, in `tx`.
async fn purge_in<S: PurgeStatements>(
    tx: &mut S::Tx,
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
    limit: u32,
) -> Result<PurgedJobs, StoreError> {
    let mut purged = PurgedJobs::default();
    for (state, before) in purge_order(finished_before, dead_before) {
        let left = u64::from(limit).saturating_sub(purged.total());
        let Some(before) = before.filter(|_| left > 0) else {
            continue;
        };
        let query = Query::new(S::PURGE)
            .int(before.as_millis())
            .int(i64::try_from(left).unwrap_or(i64::MAX))
            .text(state.as_str());
        let deleted: Vec<(String,)> = S::fetch_all(tx, query).await?;
        for (state,) in deleted {
            count_purged(&mut purged, &state)?;
        }
    }
    Ok(purged)
}

/// The states retention purges, each with its cutoff: delivered and cancelled jobs
/// before `finished_before`, dead ones before `dead_before` (`None`: kept).
fn purge_order(
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
) -> [(JobState, Option<Timestamp>); 3] {
    [
        (JobState::Delivered, finished_before),
        (JobState::Cancelled, finished_before),
        (JobState::Dead, dead_before),
    ]
}

/// Counts a job a purge deleted; a state that is not terminal is a fault (the caller
/// rolls back).
fn count_purged(purged: &mut PurgedJobs, state: &str) -> Result<(), StoreError> {
    let state: JobState = decode::named("state", state)?;
    if !state.is_terminal() {
        return Err(StoreError::Internal(format!(
            "a purge matched a job in state {state}; nothing was deleted"
        )));
    }
    purged.add(state);
    Ok(())
}
