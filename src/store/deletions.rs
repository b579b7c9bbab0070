//! Deleting a subscriber, for both backends (docs/DESIGN.md §5.3): in one write
//! transaction, its waiting jobs end `dead` (`subscriber_deleted`), and its row, jobs
//! and attempts move to a tombstone ([`crate::domain::tombstone`]), so its history
//! stays readable while its id is free for a new subscriber that inherits nothing.
//!
//! A job in flight ends `dead` too: its worker's result is then fenced out (an outcome
//! or a renewal applies only to a job still `in_flight` under its token,
//! docs/DESIGN.md §2.2), and its attempt reads `unknown` until that late result, if it
//! comes, lands on the attempt row. A late `410` pauses the tombstone, never the new
//! subscriber: the job now belongs to the tombstone.

use crate::domain::tombstone;
use crate::domain::{Timestamp, ids};
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::records::SubscriberDeleted;
use crate::store::transactions::Transactions;

/// The reason recorded on the attempt in flight when its subscriber is deleted.
pub const DELETED_IN_FLIGHT: &str = "the subscriber was deleted while the attempt was in flight";

/// The statements of a deletion, in the backend's dialect.
pub(crate) trait DeletionStatements: Transactions {
    /// Live subscriber `$1`, its row held until the transaction ends (PostgreSQL:
    /// `FOR UPDATE`, so a concurrent create of its jobs waits, then finds it gone).
    const LOCK: &'static str;
    /// Copies subscriber `$1` as tombstone `$2` deleted at `$3`: disabled, without a
    /// secret, a pause reason or a destination.
    const TOMBSTONE: &'static str;
    /// Moves subscriber `$1`'s waiting jobs (`scheduled`, `retrying`, `in_flight`) to
    /// `dead` with reason `subscriber_deleted` at `$2`, ending their leases.
    const KILL_JOBS: &'static str;
    /// Records the attempts of subscriber `$1` still in progress as `unknown` at `$2`,
    /// for reason `$3`.
    const ABANDON_ATTEMPTS: &'static str;
    /// Moves subscriber `$1`'s jobs to tombstone `$2`.
    const MOVE_JOBS: &'static str;
    /// Moves subscriber `$1`'s attempts to tombstone `$2`.
    const MOVE_ATTEMPTS: &'static str;
    /// Deletes subscriber `$1`'s row.
    const DELETE: &'static str;
    /// Deletes up to `$2` tombstones deleted before `$1` that no job belongs to any
    /// more (retention purged them); returns one row per tombstone.
    const PURGE_TOMBSTONES: &'static str;
}

/// Deletes subscriber `id` at `now` (see [`crate::store::Store::delete_subscriber`]);
/// `None` when it does not exist, nothing written then.
pub(crate) async fn delete<S: DeletionStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberDeleted>, StoreError> {
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let mut tx = db.write().await?;
    let found: Option<(i64,)> = S::fetch_optional(&mut tx, Query::new(S::LOCK).text(id)).await?;
    if found.is_none() {
        return Ok(None);
    }
    let tomb = tombstone::tombstone_id(id, ids::new_id(now));
    let at = now.as_millis();
    let step = |sql: &'static str| Query::new(sql).text(id).text(tomb.as_str());
    S::execute(
        &mut tx,
        Query::new(S::TOMBSTONE)
            .text(id)
            .text(tomb.as_str())
            .int(at),
    )
    .await?;
    // Jobs first: their rows are then held, so no claim starts an attempt after the
    // attempts in progress are marked.
    let jobs_dead = S::execute(&mut tx, Query::new(S::KILL_JOBS).text(id).int(at)).await?;
    let query = Query::new(S::ABANDON_ATTEMPTS)
        .text(id)
        .int(at)
        .text(DELETED_IN_FLIGHT);
    S::execute(&mut tx, query).await?;
    S::execute(&mut tx, step(S::MOVE_JOBS)).await?;
    S::execute(&mut tx, step(S::MOVE_ATTEMPTS)).await?;
    S::execute(&mut tx, Query::new(S::DELETE).text(id)).await?;
    S::commit(tx).await?;
    Ok(Some(SubscriberDeleted {
        subscriber_id: id.to_owned(),
        jobs_dead,
        deleted_at: now,
    }))
}

/// Deletes up to `limit` tombstones deleted before `before` whose jobs retention has
/// all purged; returns how many.
pub(crate) async fn purge_tombstones<S: DeletionStatements>(
    db: &S,
    before: Timestamp,
    limit: u32,
) -> Result<u64, StoreError> {
    let query = Query::new(S::PURGE_TOMBSTONES)
        .int(before.as_millis())
        .int(i64::from(limit));
    db.write_alone(query).await
}
