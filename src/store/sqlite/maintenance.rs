//! Retention in SQLite: purging finished jobs in batches (see
//! [`crate::store::maintenance`]).

use super::Pools;
use crate::store::maintenance::PurgeStatements;

impl PurgeStatements for Pools {
    /// Deletes up to `?2` jobs in state `?3` (`delivered`, `cancelled` or `dead`) last
    /// updated before `?1`, oldest first: a seek on `jobs_finished (state, updated_at)`
    /// (the literal state list lets SQLite use that partial index); the outer condition
    /// re-checks the state.
    const PURGE: &'static str = "DELETE FROM jobs WHERE id IN ( \
          SELECT id FROM jobs INDEXED BY jobs_finished \
          WHERE state IN ('delivered', 'cancelled', 'dead') \
            AND state = ?3 AND updated_at < ?1 \
          ORDER BY updated_at LIMIT CAST(?2 AS INTEGER)) \
        AND state = ?3 AND state IN ('delivered', 'cancelled', 'dead') \
        RETURNING state, payload_id";
    const HOLD_PAYLOADS: Option<&'static str> = None;
    const FORGET_PAYLOADS: &'static str = "DELETE FROM payloads \
        WHERE id IN (SELECT value FROM json_each(?1)) \
          AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.payload_id = payloads.id)";
}

#[cfg(test)]
mod tests {
    use sqlx::{Row, SqlitePool};

    use crate::domain::Timestamp;
    use crate::store::Sealer;
    use crate::store::maintenance::purge_finished;
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
        let store = SqliteStore::open(&url, Sealer::plaintext()).await.unwrap();
        for pool in [&store.db.writer, &store.db.readers] {
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
            sqlx::query(statement)
                .execute(&store.db.writer)
                .await
                .unwrap();
        }

        let purged = purge_finished(&store.db, Some(Timestamp::from_millis(11)), None, 10)
            .await
            .unwrap();

        assert_eq!(purged.delivered, 1);
        assert_eq!(count(&store.db.writer, "jobs").await, 0);
        assert_eq!(count(&store.db.writer, "attempts").await, 0);
        assert_eq!(count(&store.db.writer, "replay_jobs").await, 0);
        assert_eq!(
            count(&store.db.writer, "replays").await,
            1,
            "the replay itself stays"
        );
    }
}
