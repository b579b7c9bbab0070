//! Deleting a subscriber, for both backends (docs/DESIGN.md §5.3.1), in two steps so
//! that its cost to other writers is bounded whatever its history:
//!
//! 1. [`begin`], one short write transaction: a tombstone row is inserted
//!    ([`crate::domain::tombstone`]), the subscriber's waiting jobs end `dead`
//!    (`subscriber_deleted`), and its row is marked as being deleted (`deleted_at`
//!    set, disabled, secret wiped, `deleting_to` naming the tombstone). From then on
//!    no read, change or claim finds it, and a `PUT` of its id is refused.
//! 2. [`move_batch`], repeated: each write transaction moves at most a batch of its
//!    jobs, then of its attempts, to the tombstone; the one that finds nothing left
//!    deletes the row, freeing the id. A crash between batches leaves the row marked:
//!    [`in_progress`] finds it again.
//!
//! A job in flight ends `dead` too: its worker's result is then fenced out (an outcome
//! or a renewal applies only to a job still `in_flight` under its token,
//! docs/DESIGN.md §2.2), and its attempt reads `unknown` until that late result, if it
//! comes, lands on the attempt row. A late `410` pauses the tombstone (or the marked
//! row), never a new subscriber of that id.

use crate::domain::tombstone;
use crate::domain::{Timestamp, ids};
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::records::{HistoryMoved, SubscriberDeleted};
use crate::store::transactions::Transactions;

/// The reason recorded on the attempt in flight when its subscriber is deleted.
pub const DELETED_IN_FLIGHT: &str = "the subscriber was deleted while the attempt was in flight";

/// Rows (jobs, then attempts) one write transaction of a deletion moves at most.
pub const MOVE_BATCH: u32 = 2_000;

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
    /// Marks subscriber `$1` as being deleted into tombstone `$2` at `$3`: deleted_at
    /// and updated_at `$3`, disabled, without a secret, pause reason or destination.
    const MARK: &'static str;
    /// The tombstone (one text column) of subscriber `$1` if it is being deleted, its
    /// row held until the transaction ends (PostgreSQL: `FOR UPDATE`, so two movers of
    /// one subscriber take turns).
    const MOVING_TO: &'static str;
    /// Moves at most `$3` of subscriber `$1`'s jobs to tombstone `$2`.
    const MOVE_JOBS: &'static str;
    /// Moves at most `$3` of subscriber `$1`'s attempts to tombstone `$2`.
    const MOVE_ATTEMPTS: &'static str;
    /// Deletes subscriber `$1`'s row if it is being deleted and no job or attempt
    /// refers to it any more.
    const DELETE: &'static str;
    /// Deletes subscriber `$1`'s endpoint circuit row, once the subscriber is gone.
    const FORGET_ENDPOINT: &'static str;
    /// The subscribers being deleted (one text column), in id order, at most `$1`.
    const IN_PROGRESS: &'static str;
    /// Deletes up to `$2` tombstones deleted before `$1` that no job belongs to any
    /// more (retention purged them); returns one row per tombstone. Never a row still
    /// being deleted, nor the tombstone of one (its jobs may not have moved in yet).
    const PURGE_TOMBSTONES: &'static str;
}

/// Step 1 of deleting subscriber `id` at `now` (see
/// [`crate::store::Store::begin_subscriber_deletion`]), one short write transaction;
/// `None` when it does not exist (or is already being deleted), nothing written then.
pub(crate) async fn begin<S: DeletionStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberDeleted>, StoreError> {
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let id = id.to_owned();
    db.transaction(move |tx| {
        Box::pin(async move {
            let id = id.as_str();
            let found: Option<(i64,)> = S::fetch_optional(tx, Query::new(S::LOCK).text(id)).await?;
            if found.is_none() {
                return Ok(None);
            }
            let tomb = tombstone::tombstone_id(id, ids::new_id(now));
            let at = now.as_millis();
            let marked = |sql: &'static str| Query::new(sql).text(id).text(tomb.as_str()).int(at);
            S::execute(tx, marked(S::TOMBSTONE)).await?;
            // Jobs first: their rows are then held, so no claim starts an attempt after the
            // attempts in progress are marked.
            let jobs_dead = S::execute(tx, Query::new(S::KILL_JOBS).text(id).int(at)).await?;
            let query = Query::new(S::ABANDON_ATTEMPTS)
                .text(id)
                .int(at)
                .text(DELETED_IN_FLIGHT);
            S::execute(tx, query).await?;
            S::execute(tx, marked(S::MARK)).await?;
            Ok(Some(SubscriberDeleted {
                subscriber_id: id.to_owned(),
                jobs_dead,
                deleted_at: now,
            }))
        })
    })
    .await
}

/// Step 2 of a deletion, once (see [`crate::store::Store::move_deleted_history`]): in
/// one write transaction, moves at most `limit` of subscriber `id`'s jobs, then of its
/// attempts (with what the jobs left of the batch), to its tombstone; when fewer than
/// `limit` rows were left, deletes its row. `None` when `id` is not being deleted.
pub(crate) async fn move_batch<S: DeletionStatements>(
    db: &S,
    id: &str,
    limit: u32,
) -> Result<Option<HistoryMoved>, StoreError> {
    let limit = u64::from(limit.max(1));
    let id = id.to_owned();
    db.transaction(move |tx| {
        Box::pin(async move {
            let id = id.as_str();
            let tomb: Option<(String,)> =
                S::fetch_optional(tx, Query::new(S::MOVING_TO).text(id)).await?;
            let Some((tomb,)) = tomb else {
                return Ok(None);
            };
            let batch = |sql: &'static str, n: u64| {
                Query::new(sql)
                    .text(id)
                    .text(tomb.as_str())
                    .int(i64::try_from(n).unwrap_or(i64::MAX))
            };
            let jobs = S::execute(tx, batch(S::MOVE_JOBS, limit)).await?;
            let mut attempts = 0;
            if jobs < limit {
                attempts = S::execute(tx, batch(S::MOVE_ATTEMPTS, limit - jobs)).await?;
            }
            let mut finished = false;
            if jobs + attempts < limit {
                finished = S::execute(tx, Query::new(S::DELETE).text(id)).await? > 0;
            }
            if finished {
                // Its endpoint breaker goes with it: an id registered again is a new
                // endpoint (issue #33), judged by its own results.
                S::execute(tx, Query::new(S::FORGET_ENDPOINT).text(id)).await?;
            }
            Ok(Some(HistoryMoved {
                jobs,
                attempts,
                finished,
            }))
        })
    })
    .await
}

/// Both steps of deleting subscriber `id` at `now` (see
/// [`crate::store::Store::delete_subscriber`]): [`begin`], then [`move_batch`] of
/// [`MOVE_BATCH`] rows until the row is gone, each batch its own transaction.
pub(crate) async fn delete<S: DeletionStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberDeleted>, StoreError> {
    let Some(deleted) = begin(db, id, now).await? else {
        return Ok(None);
    };
    while let Some(moved) = move_batch(db, id, MOVE_BATCH).await? {
        if moved.finished {
            break;
        }
    }
    Ok(Some(deleted))
}

/// Up to `limit` ids of subscribers being deleted (step 1 committed, not step 2), in
/// id order.
pub(crate) async fn in_progress<S: DeletionStatements>(
    db: &S,
    limit: u32,
) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = db
        .read_all(Query::new(S::IN_PROGRESS).int(i64::from(limit)))
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
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
