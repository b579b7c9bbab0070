//! Replays in PostgreSQL: creation with its snapshot, progress, cancel and paced steps.
//! A step locks the replay rows it advances (`FOR UPDATE SKIP LOCKED`), so instances
//! sharing the database take turns on one token bucket: the pace holds across them.

use sqlx::{AssertSqlSafe, PgPool, Postgres, Row};
use uuid::Uuid;

use crate::domain::Timestamp;
use crate::domain::replay::{Pacing, ReplayFilter, ReplayState};
use crate::store::StoreError;
use crate::store::replays::{
    self, CANDIDATE_COLUMNS, DUE_REPLAY_COLUMNS, DueReplay, NewReplay, REPLAY_COLUMNS, Replay,
    ReplayProgress,
};

pub async fn count(pool: &PgPool, filter: &ReplayFilter, max_jobs: u32) -> Result<u64, StoreError> {
    let n: i64 = replays::count_matching::<Postgres>(filter, max_jobs, false)
        .build()
        .fetch_one(pool)
        .await?
        .try_get("n")?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub async fn create(pool: &PgPool, replay: NewReplay) -> Result<Replay, StoreError> {
    let now = replay.created_at;
    let (paced_until, next_at) = Pacing::new(replay.rate_per_second).start(now);
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO replays (id, filter, max_jobs, rate_per_second, ttl_ms, state, matched, \
         paced_until, next_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'running', 0, $6, $7, $8, $8)",
    )
    .bind(replay.id.to_string())
    .bind(replays::encode_filter(&replay.filter))
    .bind(i64::from(replay.max_jobs))
    .bind(i64::from(replay.rate_per_second))
    .bind(i64::try_from(replay.ttl_ms).unwrap_or(i64::MAX))
    .bind(paced_until.as_millis())
    .bind(next_at.as_millis())
    .bind(now.as_millis())
    .execute(&mut *tx)
    .await?;
    let matched = replays::snapshot_matching::<Postgres>(&replay, false)
        .build()
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sqlx::query(
        "UPDATE replays SET matched = $2, \
         state = CASE WHEN $2 = 0 THEN 'done' ELSE state END, \
         finished_at = CASE WHEN $2 = 0 THEN $3::BIGINT END WHERE id = $1",
    )
    .bind(replay.id.to_string())
    .bind(i64::try_from(matched).unwrap_or(i64::MAX))
    .bind(now.as_millis())
    .execute(&mut *tx)
    .await?;
    // Workers of every instance wake for it (sent at commit).
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(super::JOBS_CHANNEL)
        .execute(&mut *tx)
        .await?;
    let created = fetch(&mut tx, replay.id).await?;
    tx.commit().await?;
    created.ok_or_else(|| StoreError::Internal("the new replay vanished".into()))
}

pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Replay>, StoreError> {
    let mut conn = pool.acquire().await?;
    fetch(&mut conn, id).await
}

async fn fetch(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<Replay>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {REPLAY_COLUMNS} FROM replays WHERE id = $1"
    )))
    .bind(id.to_string())
    .fetch_optional(conn)
    .await?
    .map(|row| replays::replay(&row))
    .transpose()
}

pub async fn cancel(pool: &PgPool, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "UPDATE replays SET state = 'cancelled', finished_at = $2, updated_at = $2 \
         WHERE id = $1 AND state = 'running'",
    )
    .bind(id.to_string())
    .bind(now.as_millis())
    .execute(&mut *tx)
    .await?;
    let replay = fetch(&mut tx, id).await?;
    tx.commit().await?;
    Ok(replay)
}

/// When the next running replay may release jobs.
pub async fn next_at(pool: &PgPool) -> Result<Option<Timestamp>, StoreError> {
    let at: Option<i64> = sqlx::query(
        "SELECT MIN(next_at) AS at FROM replays \
         WHERE state = 'running'",
    )
    .fetch_one(pool)
    .await?
    .try_get("at")?;
    Ok(at.map(Timestamp::from_millis))
}

pub async fn advance(pool: &PgPool, now: Timestamp) -> Result<ReplayProgress, StoreError> {
    // A read first, so an idle store costs no write transaction.
    if next_at(pool).await?.is_none_or(|at| at > now) {
        return Ok(ReplayProgress::default());
    }
    let mut tx = pool.begin().await?;
    let due = sqlx::query(AssertSqlSafe(format!(
        "SELECT {DUE_REPLAY_COLUMNS} FROM replays \
         WHERE state = 'running' AND next_at <= $1 ORDER BY next_at LIMIT $2 \
         FOR UPDATE SKIP LOCKED"
    )))
    .bind(now.as_millis())
    .bind(i64::from(replays::REPLAYS_PER_STEP))
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(replays::due_replay)
    .collect::<Result<Vec<DueReplay>, _>>()?;
    let mut progress = ReplayProgress::default();
    for replay in due {
        step(&mut tx, &replay, now, &mut progress).await?;
    }
    tx.commit().await?;
    Ok(progress)
}

async fn step(
    tx: &mut sqlx::PgConnection,
    replay: &DueReplay,
    now: Timestamp,
    progress: &mut ReplayProgress,
) -> Result<(), StoreError> {
    let allowance = replay.pacing.allowance(replay.paced_until, now);
    if allowance.jobs == 0 {
        sqlx::query("UPDATE replays SET next_at = $2 WHERE id = $1")
            .bind(replay.id.to_string())
            .bind(allowance.next_at.as_millis())
            .execute(&mut *tx)
            .await?;
        return Ok(());
    }
    let candidates = sqlx::query(AssertSqlSafe(format!(
        "SELECT {CANDIDATE_COLUMNS} FROM replay_jobs rj JOIN jobs j ON j.id = rj.job_id \
         WHERE rj.replay_id = $1 AND rj.position >= $2 ORDER BY rj.position LIMIT $3"
    )))
    .bind(replay.id.to_string())
    .bind(replay.next_position)
    .bind(i64::from(replays::scan_size(&allowance)))
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(replays::candidate)
    .collect::<Result<Vec<_>, _>>()?;
    let plan = replays::plan_step(replay, &allowance, &candidates, now);
    let mut requeued = 0u64;
    let mut skipped = plan.skipped;
    for (job_id, transition) in &plan.requeue {
        let moved = sqlx::query(REQUEUE)
            .bind(job_id.to_string())
            .bind(transition.to.as_str())
            .bind(transition.due_at.map(Timestamp::as_millis))
            .bind(transition.deadline.as_millis())
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved == 1 {
            requeued += 1;
        } else {
            skipped += 1;
        }
    }
    // The bucket is spent only by a burst that requeued something.
    let (paced_until, next_at) = if requeued > 0 {
        (allowance.paced_until, allowance.next_at)
    } else {
        (replay.paced_until, now)
    };
    let finished = sqlx::query(
        "UPDATE replays SET next_position = $2, requeued = requeued + $3, \
         skipped = skipped + $4, paced_until = $5, next_at = $6, updated_at = $7, \
         state = CASE WHEN $8 THEN 'done' ELSE state END, \
         finished_at = CASE WHEN $8 THEN $7::BIGINT END \
         WHERE id = $1 RETURNING state",
    )
    .bind(replay.id.to_string())
    .bind(plan.next_position)
    .bind(i64::try_from(requeued).unwrap_or(i64::MAX))
    .bind(i64::try_from(skipped).unwrap_or(i64::MAX))
    .bind(paced_until.as_millis())
    .bind(next_at.as_millis())
    .bind(now.as_millis())
    .bind(plan.exhausted)
    .fetch_one(&mut *tx)
    .await?
    .try_get::<String, _>("state")?
        == ReplayState::Done.as_str();
    progress.requeued += requeued;
    progress.skipped += skipped;
    progress.finished += u32::from(finished);
    Ok(())
}

/// Moves a dead job back to `scheduled` (`$2`), eligible again (`deliver_at` and
/// `due_at`) at `$3`, with deadline `$4`, keeping its id, payload and attempt history
/// (so its age, SLO and near-deadline figures count from the replay), with a fresh
/// attempt budget: `max_attempts` becomes the attempts so far
/// plus the producer's budget (kept in `attempt_budget`). Only if it is still dead.
const REQUEUE: &str = "UPDATE jobs SET state = $2, due_at = $3, deliver_at = $3, deadline = $4, \
    dead_reason = NULL, dead_at = NULL, updated_at = $5, \
    attempt_budget = COALESCE(attempt_budget, max_attempts), \
    max_attempts = attempts + COALESCE(attempt_budget, max_attempts) \
    WHERE id = $1 AND state = 'dead'";
