//! Replays in PostgreSQL: the statements (see [`crate::store::replays`]) in a
//! transaction. A step locks the replay rows it advances (`FOR UPDATE SKIP LOCKED`),
//! so instances sharing the database take turns on one token bucket: the pace holds
//! across them.

use sqlx::PgPool;
use uuid::Uuid;

use super::{Tx, binds};
use crate::domain::replay::ReplayFilter;
use crate::domain::{Timestamp, Transition};
use crate::store::StoreError;
use crate::store::dialect::Dialect;
use crate::store::dialect::matching::{count_matching, snapshot_matching};
use crate::store::records::NewReplay;
use crate::store::replays::{CandidateRow, DueReplayRow, ReplayRow, ReplayStatements, StepRecord};

/// When the next running replay may release jobs.
const NEXT_AT: &str = "SELECT MIN(next_at) AS at FROM replays WHERE state = 'running'";

/// Replay `$1`.
const FETCH: &str = "SELECT id, filter, max_jobs, rate_per_second, ttl_ms, state, \
    matched, requeued, skipped, created_at, updated_at, finished_at FROM replays WHERE id = $1";

/// The summed rate of the running replays.
const USED_RATE: &str = "SELECT CAST(COALESCE(SUM(rate_per_second), 0) AS BIGINT) AS used \
    FROM replays WHERE state = 'running'";

/// A new replay, `running`.
const INSERT: &str = "INSERT INTO replays (id, filter, max_jobs, rate_per_second, ttl_ms, \
    state, matched, paced_until, next_at, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, 'running', 0, $6, $7, $8, $8)";

/// How many jobs replay `$1` snapshotted.
const SNAPSHOT_SIZE: &str = "SELECT COUNT(*) AS n FROM replay_jobs WHERE replay_id = $1";

/// Marks a replay created: counts the snapshot (`matched`), and ends it at once when
/// nothing matched. Runs in the creating transaction, after the snapshot insert.
const MARK_CREATED: &str = "UPDATE replays SET matched = $2, \
    state = CASE WHEN $2 = 0 THEN 'done' ELSE state END, \
    finished_at = CASE WHEN $2 = 0 THEN CAST($3 AS BIGINT) END WHERE id = $1";

/// Stops a running replay.
const CANCEL: &str = "UPDATE replays SET state = 'cancelled', finished_at = $2, \
    updated_at = $2 WHERE id = $1 AND state = 'running'";

/// The running replays whose next burst is due at `$1`, at most `$2`, row-locked,
/// skipping those another instance is advancing.
const DUE: &str = "SELECT id, rate_per_second, ttl_ms, next_position, burst_position, \
    paced_until FROM replays \
    WHERE state = 'running' AND next_at <= $1 ORDER BY next_at LIMIT $2 \
    FOR UPDATE SKIP LOCKED";

/// One creation at a time, so two concurrent replays cannot both fit the budget's
/// last room.
const LOCK_CREATIONS: &str = "LOCK TABLE replays IN SHARE ROW EXCLUSIVE MODE";

/// Looks at replay `$1` again at `$2`.
const WAIT_UNTIL: &str = "UPDATE replays SET next_at = $2 WHERE id = $1";

/// Whether a job of the replay's last burst (positions `$2..$3`) still waits to be
/// claimed or retried: the replay then holds its next burst.
const LAST_BURST_WAITING: &str = "SELECT 1 AS waiting FROM replay_jobs rj \
    JOIN jobs j ON j.id = rj.job_id \
    WHERE rj.replay_id = $1 AND rj.position >= $2 AND rj.position < $3 \
      AND j.state IN ('scheduled', 'retrying') LIMIT 1";

/// Replay `$1`'s snapshotted jobs from position `$2`, at most `$3`.
const CANDIDATES: &str = "SELECT rj.position, j.id, j.state, j.attempts, j.max_attempts, \
    j.due_at, j.deadline FROM replay_jobs rj \
    JOIN jobs j ON j.id = rj.job_id \
    WHERE rj.replay_id = $1 AND rj.position >= $2 \
    ORDER BY rj.position LIMIT $3";

/// Moves a dead job back to `scheduled` (`$2`), eligible again (`deliver_at` and
/// `due_at`) at `$3`, with deadline `$4`, keeping its id, payload and attempt history
/// (so its age, SLO and near-deadline figures count from the replay), with a fresh
/// attempt budget: `max_attempts` becomes the attempts so far plus the producer's
/// budget (kept in `attempt_budget`). Only if it is still dead.
const REQUEUE: &str = "UPDATE jobs SET state = $2, due_at = $3, deliver_at = $3, \
    deadline = $4, dead_reason = NULL, dead_at = NULL, updated_at = $5, \
    attempt_budget = COALESCE(attempt_budget, max_attempts), \
    max_attempts = attempts + COALESCE(attempt_budget, max_attempts) \
    WHERE id = $1 AND state = 'dead' RETURNING id";

/// Records a step of a replay.
const RECORD_STEP: &str = "UPDATE replays SET next_position = $2, burst_position = $9, \
    requeued = requeued + $3, skipped = skipped + $4, paced_until = $5, next_at = $6, \
    updated_at = $7, state = CASE WHEN $8 THEN 'done' ELSE state END, \
    finished_at = CASE WHEN $8 THEN CAST($7 AS BIGINT) END \
    WHERE id = $1 RETURNING state";

impl ReplayStatements for PgPool {
    async fn next_replay_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let at: Option<i64> = sqlx::query_scalar(NEXT_AT).fetch_one(self).await?;
        Ok(at.map(Timestamp::from_millis))
    }

    async fn count_matches(&self, filter: &ReplayFilter, max_jobs: u32) -> Result<u64, StoreError> {
        let (sql, arguments) = binds::bound(&count_matching(Dialect::Postgres, filter, max_jobs))?;
        let n: i64 = sqlx::query_scalar_with(sql, arguments)
            .fetch_one(self)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn get(&self, id: Uuid) -> Result<Option<ReplayRow>, StoreError> {
        Ok(sqlx::query_as(FETCH)
            .bind(id.to_string())
            .fetch_optional(self)
            .await?)
    }

    async fn fetch(tx: &mut Tx, id: Uuid) -> Result<Option<ReplayRow>, StoreError> {
        Ok(sqlx::query_as(FETCH)
            .bind(id.to_string())
            .fetch_optional(&mut **tx)
            .await?)
    }

    async fn lock_creations(tx: &mut Tx) -> Result<(), StoreError> {
        sqlx::query(LOCK_CREATIONS).execute(&mut **tx).await?;
        Ok(())
    }

    async fn used_rate(tx: &mut Tx) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(USED_RATE).fetch_one(&mut **tx).await?)
    }

    async fn insert(
        tx: &mut Tx,
        replay: &NewReplay,
        paced_until: Timestamp,
        next_at: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(INSERT)
            .bind(replay.id.to_string())
            .bind(crate::store::replays::encode_filter(&replay.filter))
            .bind(i64::from(replay.max_jobs))
            .bind(i64::from(replay.rate_per_second))
            .bind(i64::try_from(replay.ttl_ms).unwrap_or(i64::MAX))
            .bind(paced_until.as_millis())
            .bind(next_at.as_millis())
            .bind(replay.created_at.as_millis())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn snapshot_matches(tx: &mut Tx, replay: &NewReplay) -> Result<(), StoreError> {
        let (sql, arguments) = binds::bound(&snapshot_matching(Dialect::Postgres, replay))?;
        sqlx::query_with(sql, arguments).execute(&mut **tx).await?;
        Ok(())
    }

    async fn snapshot_size(tx: &mut Tx, id: Uuid) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(SNAPSHOT_SIZE)
            .bind(id.to_string())
            .fetch_one(&mut **tx)
            .await?)
    }

    async fn mark_created(
        tx: &mut Tx,
        id: Uuid,
        matched: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(MARK_CREATED)
            .bind(id.to_string())
            .bind(matched)
            .bind(now.as_millis())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn cancel(tx: &mut Tx, id: Uuid, now: Timestamp) -> Result<(), StoreError> {
        sqlx::query(CANCEL)
            .bind(id.to_string())
            .bind(now.as_millis())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn due(tx: &mut Tx, now: Timestamp, limit: u32) -> Result<Vec<DueReplayRow>, StoreError> {
        Ok(sqlx::query_as(DUE)
            .bind(now.as_millis())
            .bind(i64::from(limit))
            .fetch_all(&mut **tx)
            .await?)
    }

    async fn wait_until(tx: &mut Tx, id: Uuid, at: Timestamp) -> Result<(), StoreError> {
        sqlx::query(WAIT_UNTIL)
            .bind(id.to_string())
            .bind(at.as_millis())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn last_burst_waiting(
        tx: &mut Tx,
        id: Uuid,
        from: i64,
        to: i64,
    ) -> Result<bool, StoreError> {
        let waiting = sqlx::query(LAST_BURST_WAITING)
            .bind(id.to_string())
            .bind(from)
            .bind(to)
            .fetch_optional(&mut **tx)
            .await?;
        Ok(waiting.is_some())
    }

    async fn candidates(
        tx: &mut Tx,
        id: Uuid,
        from: i64,
        limit: u32,
    ) -> Result<Vec<CandidateRow>, StoreError> {
        Ok(sqlx::query_as(CANDIDATES)
            .bind(id.to_string())
            .bind(from)
            .bind(i64::from(limit))
            .fetch_all(&mut **tx)
            .await?)
    }

    async fn requeue(
        tx: &mut Tx,
        job_id: Uuid,
        transition: &Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let moved: Option<String> = sqlx::query_scalar(REQUEUE)
            .bind(job_id.to_string())
            .bind(transition.to.as_str())
            .bind(transition.due_at.unwrap_or(now).as_millis())
            .bind(transition.deadline.as_millis())
            .bind(now.as_millis())
            .fetch_optional(&mut **tx)
            .await?;
        Ok(moved.is_some())
    }

    async fn record_step(tx: &mut Tx, step: &StepRecord) -> Result<String, StoreError> {
        Ok(sqlx::query_scalar(RECORD_STEP)
            .bind(step.id.to_string())
            .bind(step.next_position)
            .bind(step.requeued)
            .bind(step.skipped)
            .bind(step.paced_until.as_millis())
            .bind(step.next_at.as_millis())
            .bind(step.now.as_millis())
            .bind(step.exhausted)
            .bind(step.burst_position)
            .fetch_one(&mut **tx)
            .await?)
    }
}
