//! Retention in PostgreSQL: purging finished jobs in batches (see
//! [`crate::store::maintenance`]).

use sqlx::PgPool;

use crate::store::maintenance::PurgeStatements;

impl PurgeStatements for PgPool {
    /// Deletes up to `$2` jobs in state `$3` (`delivered`, `cancelled` or `dead`) last
    /// updated before `$1`, oldest first (a seek on `jobs_finished (state, updated_at)`;
    /// the literal state list lets the planner use that partial index). The batch is
    /// chosen once (a materialized CTE: a `LIMIT` inside `IN (…)` may be re-evaluated and
    /// delete more); rows another transaction holds (a replay, another instance's purge)
    /// are skipped, and the delete re-checks the state. The deleted jobs' attempt rows
    /// go in the same statement, after their jobs (the store's lock order): attempts
    /// have no foreign key to cascade it (migration 0023).
    const PURGE: &'static str = "WITH batch AS MATERIALIZED ( \
          SELECT id FROM jobs \
          WHERE state IN ('delivered', 'cancelled', 'dead') \
            AND state = $3 AND updated_at < $1 \
          ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED), \
        gone AS (DELETE FROM jobs j USING batch b \
          WHERE j.id = b.id AND j.state = $3 \
          RETURNING j.id, j.state, j.payload_id), \
        attempts_gone AS (DELETE FROM attempts a USING gone g WHERE a.job_id = g.id) \
        SELECT state, payload_id FROM gone";
    const HOLD_PAYLOADS: Option<&'static str> = Some(
        "SELECT id FROM payloads WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)) \
         ORDER BY id FOR UPDATE",
    );
    const FORGET_PAYLOADS: &'static str = "DELETE FROM payloads p \
        WHERE p.id IN (SELECT jsonb_array_elements_text($1::jsonb)) \
          AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.payload_id = p.id)";
}
