//! Operator queries and retention in PostgreSQL: a subscriber's figures, and purging
//! finished jobs in batches. The same rules as the SQLite store (see there).

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::maintenance_sql::maintenance_statements;
use crate::store::records::{PurgedJobs, SubscriberStats};

maintenance_statements!(sqlx::Postgres);

/// Whether subscriber `$1` exists.
const SUBSCRIBER_EXISTS: &str = "SELECT 1 FROM subscribers WHERE id = $1";

/// Jobs of subscriber `$1` per state (`jobs_subscriber_state`).
const STATE_COUNTS: &str =
    "SELECT state, COUNT(*) AS n FROM jobs WHERE subscriber_id = $1 GROUP BY state";

/// The earliest due time of subscriber `$1`'s waiting jobs due at `$2`, and its latest
/// delivered attempt (`attempts_subscriber_finished`, newest first).
const ELIGIBLE_AND_SUCCESS: &str = "SELECT \
    (SELECT MIN(due_at) FROM jobs \
     WHERE subscriber_id = $1 AND state IN ('scheduled', 'retrying') AND due_at <= $2) \
     AS oldest_eligible, \
    (SELECT finished_at FROM attempts \
     WHERE subscriber_id = $1 AND finished_at IS NOT NULL AND outcome = 'delivered' \
     ORDER BY finished_at DESC LIMIT 1) AS last_success";

/// Subscriber `$1`'s latest finished attempt that failed.
const LAST_FAILURE: &str = "SELECT finished_at, outcome, error_class, status, reason \
    FROM attempts WHERE subscriber_id = $1 AND finished_at IS NOT NULL \
      AND outcome IN ('retryable', 'terminal', 'blocked') \
    ORDER BY finished_at DESC LIMIT 1";

/// Deletes up to `$2` jobs in state `$3` (`delivered`, `cancelled` or `dead`) last
/// updated before `$1`, oldest first (a seek on `jobs_finished (state, updated_at)`;
/// the literal state list lets the planner use that partial index). The batch is
/// chosen once (a materialized CTE: a `LIMIT` inside `IN (…)` may be re-evaluated and
/// delete more); rows another transaction holds (a replay, another instance's purge)
/// are skipped, and the delete re-checks the state.
const PURGE: &str = "WITH batch AS MATERIALIZED ( \
      SELECT id FROM jobs \
      WHERE state IN ('delivered', 'cancelled', 'dead') \
        AND state = $3 AND updated_at < $1 \
      ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
    DELETE FROM jobs j USING batch b \
    WHERE j.id = b.id AND j.state = $3 \
    RETURNING j.state";

/// The figures of subscriber `id` at `now`, read in one snapshot.
pub async fn subscriber_stats(
    pool: &PgPool,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberStats>, StoreError> {
    let mut tx = pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await?;
    let stats = statements::stats(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(stats)
}

/// Deletes up to `limit` finished jobs in one write transaction (see
/// [`crate::store::Store::purge_finished`]).
pub async fn purge_finished(
    pool: &PgPool,
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
    limit: u32,
) -> Result<PurgedJobs, StoreError> {
    let mut tx = pool.begin().await?;
    let purged = statements::purge(&mut tx, finished_before, dead_before, limit).await?;
    tx.commit().await?;
    Ok(purged)
}
