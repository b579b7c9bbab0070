//! Replays in PostgreSQL: the statements (see [`crate::store::replays`]) in a
//! transaction. A step locks the replay rows it advances (`FOR UPDATE SKIP LOCKED`),
//! so instances sharing the database take turns on one token bucket: the pace holds
//! across them.

use sqlx::PgPool;

use crate::store::replays::ReplayStatements;

/// One creation at a time, so two concurrent replays cannot both fit the budget's
/// last room.
const LOCK_CREATIONS: &str = "LOCK TABLE replays IN SHARE ROW EXCLUSIVE MODE";

impl ReplayStatements for PgPool {
    /// When the next running replay may release jobs.
    const NEXT_AT: &'static str = "SELECT MIN(next_at) AS at FROM replays WHERE state = 'running'";
    /// Replay `$1`.
    const FETCH: &'static str = "SELECT id, filter, max_jobs, rate_per_second, ttl_ms, state, \
        matched, requeued, skipped, created_at, updated_at, finished_at FROM replays WHERE id = $1";
    /// The summed rate of the running replays that still have jobs to release (a replay
    /// whose every matched job was requeued or skipped only waits for its last burst to
    /// be taken: it leaves its share to a new one).
    const USED_RATE: &'static str = "SELECT CAST(COALESCE(SUM(rate_per_second), 0) AS BIGINT) AS used \
        FROM replays WHERE state = 'running' AND matched > requeued + skipped";
    /// A new replay, `running`.
    const INSERT: &'static str = "INSERT INTO replays (id, filter, max_jobs, rate_per_second, ttl_ms, \
        state, matched, paced_until, next_at, created_at, updated_at) \
        VALUES ($1, $2, $3, $4, $5, 'running', 0, $6, $7, $8, $8)";
    /// How many jobs replay `$1` snapshotted.
    const SNAPSHOT_SIZE: &'static str =
        "SELECT COUNT(*) AS n FROM replay_jobs WHERE replay_id = $1";
    /// The open endpoint circuits of replay `$1`'s subscribers probe from `$2` on, held in
    /// subscriber order first (the lock order of the outcome groups).
    const PROBE_NOW: &'static str = "WITH held AS MATERIALIZED (SELECT e.subscriber_id \
          FROM endpoint_circuits e WHERE e.circuit = 'open' AND e.retry_at > $2 \
            AND e.subscriber_id IN (SELECT j.subscriber_id FROM replay_jobs r \
              JOIN jobs j ON j.id = r.job_id WHERE r.replay_id = $1) \
          ORDER BY e.subscriber_id FOR UPDATE) \
        UPDATE endpoint_circuits e SET retry_at = $2 FROM held \
        WHERE e.subscriber_id = held.subscriber_id";
    /// Marks a replay created: counts the snapshot (`matched`), and ends it at once when
    /// nothing matched. Runs in the creating transaction, after the snapshot insert.
    const MARK_CREATED: &'static str = "UPDATE replays SET matched = $2, \
        state = CASE WHEN $2 = 0 THEN 'done' ELSE state END, \
        finished_at = CASE WHEN $2 = 0 THEN CAST($3 AS BIGINT) END WHERE id = $1";
    /// Stops a running replay.
    const CANCEL: &'static str = "UPDATE replays SET state = 'cancelled', finished_at = $2, \
        updated_at = $2 WHERE id = $1 AND state = 'running'";
    /// The running replays whose next burst is due at `$1`, at most `$2`, row-locked,
    /// skipping those another instance is advancing.
    const DUE: &'static str = "SELECT id, filter, rate_per_second, ttl_ms, next_position, burst_position, \
        paced_until FROM replays \
        WHERE state = 'running' AND next_at <= $1 ORDER BY next_at LIMIT $2 \
        FOR UPDATE SKIP LOCKED";
    /// Looks at replay `$1` again at `$2`.
    const WAIT_UNTIL: &'static str = "UPDATE replays SET next_at = $2 WHERE id = $1";
    /// Whether a job of the replay's last burst (positions `$2..$3`) still waits to be
    /// claimed or retried: the replay then holds its next burst.
    /// Each job is one primary-key probe (`OFFSET 0`, `COALESCE` keeping the state
    /// indexes out): joined, a generic plan made on an empty table read every waiting
    /// job once per snapshotted row.
    const LAST_BURST_WAITING: &'static str = "SELECT 1 AS waiting FROM replay_jobs rj \
        CROSS JOIN LATERAL (SELECT 1 FROM jobs j WHERE j.id = rj.job_id \
          AND COALESCE(j.state, '') IN ('scheduled', 'retrying') OFFSET 0) j \
        WHERE rj.replay_id = $1 AND rj.position >= $2 AND rj.position < $3 LIMIT 1";
    /// Replay `$1`'s snapshotted jobs from position `$2`, at most `$3`.
    const CANDIDATES: &'static str = "SELECT rj.position, j.id, j.state, j.attempts, j.max_attempts, \
        j.due_at, j.deadline, j.updated_at FROM replay_jobs rj \
        JOIN jobs j ON j.id = rj.job_id \
        WHERE rj.replay_id = $1 AND rj.position >= $2 \
        ORDER BY rj.position LIMIT $3";
    /// Moves a dead job back to `scheduled` (`$2`), eligible again (`deliver_at` and
    /// `due_at`) at `$3`, with deadline `$4`, keeping its id, payload and attempt history
    /// (so its age, SLO and near-deadline figures count from the replay), with a fresh
    /// attempt budget: `max_attempts` becomes the attempts so far plus the producer's
    /// budget (kept in `attempt_budget`). Only if it is still dead and its subscriber was
    /// not deleted (its tombstone's jobs are history).
    /// `COALESCE(state, '')` keeps the partial indexes of dead jobs out: in a generic
    /// plan made on an empty table (the worker's sessions plan generically) the update
    /// read `jobs_subscriber_dead` whole instead of probing the primary key.
    const REQUEUE: &'static str = "UPDATE jobs SET state = $2, due_at = $3, deliver_at = $3, \
        deadline = $4, dead_reason = NULL, dead_detail = NULL, dead_at = NULL, updated_at = $5, \
        attempt_budget = COALESCE(attempt_budget, max_attempts), \
        max_attempts = attempts + COALESCE(attempt_budget, max_attempts) \
        WHERE id = $1 AND COALESCE(state, '') = 'dead' \
        AND NOT EXISTS (SELECT 1 FROM subscribers s WHERE s.id = jobs.subscriber_id \
          AND s.deleted_at IS NOT NULL) RETURNING id";
    /// Records a step of a replay.
    const RECORD_STEP: &'static str = "UPDATE replays SET next_position = $2, burst_position = $9, \
        requeued = requeued + $3, skipped = skipped + $4, paced_until = $5, next_at = $6, \
        updated_at = $7, state = CASE WHEN $8 THEN 'done' ELSE state END, \
        finished_at = CASE WHEN $8 THEN CAST($7 AS BIGINT) END \
        WHERE id = $1 RETURNING state";
    /// The replays newest first: in state `$1` (`''`: any), with an id below `$2` (`''`:
    /// from the newest), at most `$3`. Ids are lowercase UUIDv7 text, so their order is
    /// their creation order.
    const LIST: &'static str = "SELECT id, filter, max_jobs, rate_per_second, ttl_ms, state, \
        matched, requeued, skipped, created_at, updated_at, finished_at FROM replays \
        WHERE ($1 = '' OR state = $1) AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3";
    const LOCK_CREATIONS: Option<&'static str> = Some(LOCK_CREATIONS);
}
