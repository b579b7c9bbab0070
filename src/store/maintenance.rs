//! Retention, for both backends: purging finished jobs in batches, oldest first.

use std::collections::BTreeSet;

use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::PurgedJobs;
use crate::store::transactions::Transactions;

/// The statement of a purge, in the backend's dialect.
pub(crate) trait PurgeStatements: Transactions {
    /// Deletes up to `$2` jobs in state `$3` last updated before `$1`, oldest first,
    /// with their attempts (deleted by the statement on PostgreSQL, by the foreign
    /// key's cascade on SQLite) and replay entries (cascade); returns the
    /// state of each deleted job and its shared payload's id (`payload_id`).
    const PURGE: &'static str;
    /// Holds the shared payloads `$1` (a JSON array of ids) in id order, so that of
    /// two purges deleting the last jobs of one payload at once, the second waits and
    /// then sees the first's deletions ([`PurgeStatements::FORGET_PAYLOADS`] runs as a
    /// later statement, with a newer snapshot); `None` where writes do not run at once
    /// (SQLite: one writer).
    const HOLD_PAYLOADS: Option<&'static str>;
    /// Deletes the shared payloads `$1` (a JSON array of ids) that no job references.
    const FORGET_PAYLOADS: &'static str;
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
    let mut payloads = BTreeSet::new();
    for (state, before) in purge_order(finished_before, dead_before) {
        let left = u64::from(limit).saturating_sub(purged.total());
        let Some(before) = before.filter(|_| left > 0) else {
            continue;
        };
        let query = Query::new(S::PURGE)
            .int(before.as_millis())
            .int(i64::try_from(left).unwrap_or(i64::MAX))
            .text(state.as_str());
        let deleted: Vec<(String, Option<String>)> = S::fetch_all(tx, query).await?;
        for (state, payload_id) in deleted {
            count_purged(&mut purged, &state)?;
            payloads.extend(payload_id);
        }
    }
    forget_payloads::<S>(tx, payloads).await?;
    Ok(purged)
}

/// Deletes the shared payloads `ids` (of jobs just purged) that no job references any
/// more: a payload stays while any job of its fan-out or period is kept.
async fn forget_payloads<S: PurgeStatements>(
    tx: &mut S::Tx,
    ids: BTreeSet<String>,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let ids = serde_json::Value::from(ids.into_iter().collect::<Vec<_>>()).to_string();
    if let Some(hold) = S::HOLD_PAYLOADS {
        let _: Vec<(String,)> = S::fetch_all(tx, Query::new(hold).text(ids.clone())).await?;
    }
    S::execute(tx, Query::new(S::FORGET_PAYLOADS).text(ids)).await?;
    Ok(())
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
