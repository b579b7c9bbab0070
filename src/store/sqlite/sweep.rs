//! The deadline sweep in SQLite: the statements (see [`crate::store::sweep`]), after a
//! read that skips the write transaction when nothing is overdue.

use super::Pools;
use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::ExpiredJobs;
use crate::store::sweep::{self, OverdueRow, SweepStatements};

pub async fn expire_deadlines(
    db: &Pools,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    // A read first, so a sweep with nothing to do costs no write transaction (the
    // writer is shared with creates, claims and outcomes).
    let anything: Option<OverdueRow> = sqlx::query_as(<Pools as SweepStatements>::OVERDUE)
        .bind(now.as_millis())
        .bind(1_i64)
        .fetch_optional(&db.readers)
        .await?;
    if anything.is_none() {
        return Ok(ExpiredJobs::default());
    }
    sweep::expire_deadlines(db, now, limit).await
}

impl SweepStatements for Pools {
    /// The jobs a sweep at `?1` moves, at most `?2`, deadline first: two range scans
    /// (deadlines passed; expired leases), so far-future jobs cost nothing. An expired
    /// lease no claim would take over now (its subscriber or its destination paused, or
    /// the destination's circuit not closed) goes back to waiting.
    const OVERDUE: &'static str = "SELECT j.id, j.state, j.deadline, j.deadline <= ?1 AS past_deadline, \
             j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts AS used_up, \
             CASE WHEN s.enabled = 0 THEN 'subscriber_paused' \
               ELSE (SELECT CASE WHEN dd.paused = 1 THEN 'destination_paused' \
                     WHEN dd.forced_circuit = 'open' OR (dd.forced_circuit IS NULL \
                       AND dd.circuit <> 'closed') THEN 'destination_circuit_open' END \
                     FROM destinations dd WHERE dd.key = s.destination) END AS waited_on \
             FROM jobs j INDEXED BY jobs_deadline JOIN subscribers s ON s.id = j.subscriber_id \
             WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.deadline <= ?1 \
               AND (j.state <> 'in_flight' OR j.due_at <= ?1) \
             UNION ALL \
             SELECT j.id, j.state, j.deadline, 0 AS past_deadline, \
             j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts AS used_up, \
             NULL AS waited_on \
             FROM jobs j INDEXED BY jobs_due JOIN subscribers s ON s.id = j.subscriber_id \
             WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= ?1 \
               AND j.state = 'in_flight' AND j.deadline > ?1 \
               AND (s.enabled = 0 OR (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts) \
                    OR EXISTS (SELECT 1 FROM destinations dd WHERE dd.key = j.destination \
                               AND (dd.paused = 1 OR dd.forced_circuit = 'open' \
                         OR (dd.forced_circuit IS NULL AND dd.circuit <> 'closed')))) \
             ORDER BY deadline LIMIT CAST(?2 AS INTEGER)";
    /// Records job `?1`'s attempt in progress as `unknown` at `?2`, for reason `?3`.
    const MARK_UNKNOWN: &'static str = "UPDATE attempts SET outcome = 'unknown', finished_at = ?2, \
        reason = ?3 WHERE job_id = ?1 AND outcome = 'in_progress'";
    /// Moves job `?1` to `dead` for reason `?3` (with detail `?4`) at `?2`, or without one
    /// back to `retrying`, due at `?2`.
    const EXPIRE: &'static str = "UPDATE jobs SET state = CASE WHEN ?3 IS NULL THEN 'retrying' ELSE 'dead' END, \
        dead_reason = ?3, dead_detail = ?4, dead_at = CASE WHEN ?3 IS NULL THEN NULL ELSE ?2 END, \
        due_at = CASE WHEN ?3 IS NULL THEN ?2 ELSE NULL END, \
        lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2, \
        possible_duplicate = CASE WHEN state = 'in_flight' THEN 1 ELSE possible_duplicate END \
        WHERE id = ?1";
}
