//! The deadline sweep in PostgreSQL: the statements (see [`crate::store::sweep`]). The
//! overdue jobs are locked (`FOR UPDATE SKIP LOCKED`), so instances sweeping at once
//! take disjoint sets.

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::ExpiredJobs;
use crate::store::sweep::{self, SweepStatements};

pub async fn expire_deadlines(
    pool: &PgPool,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    sweep::expire_deadlines(pool, now, limit).await
}

impl SweepStatements for PgPool {
    /// The jobs a sweep at `$1` moves, at most `$2`, deadline first. The candidates
    /// come from two index reads, each in deadline order and at most `$2`: jobs waiting
    /// past their deadline (`jobs_deadline`), and expired leases that the sweep moves
    /// (`jobs_in_flight_subscriber`, every open request read by `due_at`). Each
    /// candidate is then one primary-key probe that locks it (`FOR UPDATE SKIP
    /// LOCKED`, so instances sweeping at once take disjoint sets) only while it still
    /// is as read: under READ COMMITTED a row committed by another transaction meanwhile
    /// is re-checked against the probe's conditions. Its subscriber and destination are
    /// probes too (`OFFSET 0` keeps each subquery a probe per row: in a generic plan
    /// made on empty tables they were hashed whole, `subscribers` once per candidate). Written so for a generic plan (the
    /// sweep runs on the worker's sessions): as one `OR` over `jobs` it was a whole scan
    /// of the table in a plan made on an empty database, and PostgreSQL planned it anew
    /// on almost every run otherwise (5.7 ms of planning per run, two instances).
    const OVERDUE: &'static str = "SELECT l.* FROM ( \
          (SELECT o.id, o.deadline FROM jobs o \
           WHERE o.state IN ('scheduled', 'retrying') AND o.deadline <= $1 \
           ORDER BY o.deadline LIMIT $2) \
          UNION ALL \
          (SELECT o.id, o.deadline FROM jobs o \
           WHERE o.state = 'in_flight' AND o.subscriber_id IS NOT NULL AND o.due_at <= $1 \
             AND (o.deadline <= $1 \
               OR (o.max_attempts IS NOT NULL AND o.attempts >= o.max_attempts) \
               OR EXISTS (SELECT 1 FROM subscribers s WHERE s.id = o.subscriber_id \
                          AND NOT s.enabled OFFSET 0) \
               OR EXISTS (SELECT 1 FROM destinations dd WHERE dd.key = o.destination \
                          AND (dd.paused OR dd.forced_circuit = 'open' \
                            OR (dd.forced_circuit IS NULL AND dd.circuit <> 'closed')) \
                          OFFSET 0)) \
           ORDER BY o.deadline LIMIT $2) \
          ORDER BY 2 LIMIT $2 \
        ) c CROSS JOIN LATERAL ( \
          SELECT j.id, j.state, j.deadline <= $1 AS past_deadline, \
            (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts) AS used_up, \
            CASE WHEN NOT s.enabled THEN 'subscriber_paused' \
              ELSE (SELECT CASE WHEN dd.paused THEN 'destination_paused' \
                    WHEN dd.forced_circuit = 'open' OR (dd.forced_circuit IS NULL \
                      AND dd.circuit <> 'closed') THEN 'destination_circuit_open' END \
                    FROM destinations dd WHERE dd.key = s.destination) END AS waited_on \
          FROM jobs j CROSS JOIN LATERAL (SELECT s.enabled, s.destination \
            FROM subscribers s WHERE s.id = j.subscriber_id OFFSET 0) s \
          WHERE j.id = c.id AND COALESCE(j.state, '') <> '' \
            AND ((j.state IN ('scheduled', 'retrying') AND j.deadline <= $1) \
            OR (j.state = 'in_flight' AND j.subscriber_id IS NOT NULL AND j.due_at <= $1 \
              AND (j.deadline <= $1 OR NOT s.enabled \
                OR (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts) \
                OR EXISTS (SELECT 1 FROM destinations dd WHERE dd.key = j.destination \
                           AND (dd.paused OR dd.forced_circuit = 'open' \
                             OR (dd.forced_circuit IS NULL AND dd.circuit <> 'closed')) \
                           OFFSET 0)))) \
          FOR UPDATE OF j SKIP LOCKED \
        ) l";
    /// Records job `$1`'s attempt in progress as `unknown` at `$2`, for reason `$3`.
    const MARK_UNKNOWN: &'static str = "UPDATE attempts SET outcome = 'unknown', finished_at = $2, \
        reason = $3 WHERE job_id = $1 AND outcome = 'in_progress'";
    /// Moves job `$1` to `dead` for reason `$3` (with detail `$4`) at `$2`, or without one
    /// back to `retrying`, due at `$2`.
    const EXPIRE: &'static str = "UPDATE jobs SET \
        state = CASE WHEN $3::text IS NULL THEN 'retrying' ELSE 'dead' END, \
        dead_reason = $3, dead_detail = $4, \
        dead_at = CASE WHEN $3::text IS NULL THEN NULL ELSE $2::BIGINT END, \
        due_at = CASE WHEN $3::text IS NULL THEN $2::BIGINT ELSE NULL END, \
        lease_owner = NULL, lease_expires_at = NULL, updated_at = $2, \
        possible_duplicate = possible_duplicate OR state = 'in_flight' \
        WHERE id = $1";
}
