//! Operator queries and retention in SQLite: a subscriber's figures, and purging
//! finished jobs in batches.
//!
//! Partial indexes are named with `INDEXED BY` and their predicates repeated word for
//! word: SQLite uses a partial index only when the query's text implies its predicate,
//! and `INDEXED BY` turns a plan that cannot use it into an error instead of a scan.

use sqlx::SqlitePool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::maintenance_sql::maintenance_statements;
use crate::store::records::{PurgedJobs, SubscriberStats};

maintenance_statements!(sqlx::Sqlite);

/// Whether subscriber `?1` exists.
pub(super) const SUBSCRIBER_EXISTS: &str = "SELECT 1 FROM subscribers WHERE id = ?1";

/// Jobs of subscriber `?1` per state (`jobs_subscriber_state`, covering).
pub(super) const STATE_COUNTS: &str = "SELECT state, COUNT(*) AS n FROM jobs \
    INDEXED BY jobs_subscriber_state WHERE subscriber_id = ?1 GROUP BY state";

/// The earliest due time of subscriber `?1`'s waiting jobs due at `?2`, and its latest
/// delivered attempt (`attempts_subscriber_finished`, newest first).
pub(super) const ELIGIBLE_AND_SUCCESS: &str = "SELECT \
    (SELECT MIN(due_at) FROM jobs INDEXED BY jobs_subscriber_state \
     WHERE subscriber_id = ?1 AND state IN ('scheduled', 'retrying') AND due_at <= ?2) \
     AS oldest_eligible, \
    (SELECT finished_at FROM attempts INDEXED BY attempts_subscriber_finished \
     WHERE subscriber_id = ?1 AND finished_at IS NOT NULL AND outcome = 'delivered' \
     ORDER BY finished_at DESC LIMIT 1) AS last_success";

/// Subscriber `?1`'s latest finished attempt that failed.
pub(super) const LAST_FAILURE: &str = "SELECT finished_at, outcome, error_class, status, \
    reason FROM attempts INDEXED BY attempts_subscriber_finished \
    WHERE subscriber_id = ?1 AND finished_at IS NOT NULL \
      AND outcome IN ('retryable', 'terminal', 'blocked') \
    ORDER BY finished_at DESC LIMIT 1";

/// Deletes up to `?2` jobs in state `?3` (`delivered`, `cancelled` or `dead`) last
/// updated before `?1`, oldest first: a seek on `jobs_finished (state, updated_at)`
/// (the literal state list lets SQLite use that partial index); the outer condition
/// re-checks the state.
pub(super) const PURGE: &str = "DELETE FROM jobs WHERE id IN ( \
      SELECT id FROM jobs INDEXED BY jobs_finished \
      WHERE state IN ('delivered', 'cancelled', 'dead') \
        AND state = ?3 AND updated_at < ?1 \
      ORDER BY updated_at LIMIT ?2) \
    AND state = ?3 AND state IN ('delivered', 'cancelled', 'dead') \
    RETURNING state";

/// The figures of subscriber `id` at `now`, read in one snapshot.
pub async fn subscriber_stats(
    readers: &SqlitePool,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberStats>, StoreError> {
    let mut tx = readers.begin().await?;
    let stats = statements::stats(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(stats)
}

/// Deletes up to `limit` finished jobs in one write transaction (see
/// [`crate::store::Store::purge_finished`]).
pub async fn purge_finished(
    writer: &SqlitePool,
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
    limit: u32,
) -> Result<PurgedJobs, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let purged = statements::purge(&mut tx, finished_before, dead_before, limit).await?;
    tx.commit().await?;
    Ok(purged)
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::*;
    use crate::store::sqlite::SqliteStore;

    async fn count(pool: &SqlitePool, table: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM {table}"
        )))
        .fetch_one(pool)
        .await
        .unwrap()
        .get("n")
    }

    /// A purged job takes its attempts and replay entries with it: the store opens
    /// SQLite with foreign keys on (off, the delete would leave them behind).
    #[tokio::test]
    async fn a_purge_cascades_to_attempts_and_replay_entries() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("d.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        store.migrate().await.unwrap();
        for pool in [&store.writer, &store.readers] {
            let on: i64 = sqlx::query("PRAGMA foreign_keys")
                .fetch_one(pool)
                .await
                .unwrap()
                .get(0);
            assert_eq!(on, 1);
        }
        for statement in [
            "INSERT INTO subscribers (id, url, secret, created_at, updated_at) \
             VALUES ('s', 'https://s.example.test/', 'whsec_x', 0, 0)",
            "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, deliver_at, \
             deadline, created_at, updated_at, delivered_at) \
             VALUES ('j', 's', 'e', '{}', 'delivered', 0, 1, 0, 10, 10)",
            "INSERT INTO attempts (job_id, number, lease_token, lease_owner, started_at, \
             finished_at, outcome, subscriber_id) VALUES ('j', 1, 1, 'w', 0, 10, 'delivered', 's')",
            "INSERT INTO replays (id, filter, max_jobs, rate_per_second, ttl_ms, state, \
             matched, paced_until, next_at, created_at, updated_at) \
             VALUES ('r', '{}', 1, 1, 1, 'running', 1, 0, 0, 0, 0)",
            "INSERT INTO replay_jobs (replay_id, position, job_id) VALUES ('r', 0, 'j')",
        ] {
            sqlx::query(statement).execute(&store.writer).await.unwrap();
        }

        let purged = purge_finished(&store.writer, Some(Timestamp::from_millis(11)), None, 10)
            .await
            .unwrap();

        assert_eq!(purged.delivered, 1);
        assert_eq!(count(&store.writer, "jobs").await, 0);
        assert_eq!(count(&store.writer, "attempts").await, 0);
        assert_eq!(count(&store.writer, "replay_jobs").await, 0);
        assert_eq!(
            count(&store.writer, "replays").await,
            1,
            "the replay itself stays"
        );
    }
}
