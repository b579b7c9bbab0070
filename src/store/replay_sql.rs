//! The replay statements, written once for both backends: [`replay_statements!`]
//! expands them for one sqlx database, with `$n` placeholders that [`Dialect::sql`]
//! turns into SQLite's `?n`. Each backend only opens the transaction (SQLite
//! `BEGIN IMMEDIATE` on its one writer; PostgreSQL row locks) and runs them in it.
//! (A macro rather than generics: sqlx's bounds for a generic executor would have to
//! be repeated on every function.)

use sqlx::AssertSqlSafe;

use crate::store::replays::DUE_REPLAY_COLUMNS;

/// How a backend spells what differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `?n` placeholders; the planner is told which index serves the due replays.
    Sqlite,
    /// `$n` placeholders; due replays are row-locked, skipping those another instance
    /// is advancing.
    Postgres,
}

impl Dialect {
    /// `sql` (written with `$n` placeholders) in this dialect.
    pub fn sql(self, sql: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(match self {
            Dialect::Sqlite => sql.replace('$', "?"),
            Dialect::Postgres => sql.to_owned(),
        })
    }

    /// The running replays whose next burst is due at `$1`, at most `$2`.
    pub fn due_replays(self) -> String {
        let (hint, lock) = match self {
            Dialect::Sqlite => (" INDEXED BY replays_running", ""),
            Dialect::Postgres => ("", " FOR UPDATE SKIP LOCKED"),
        };
        format!(
            "SELECT {DUE_REPLAY_COLUMNS} FROM replays{hint} \
             WHERE state = 'running' AND next_at <= $1 ORDER BY next_at LIMIT $2{lock}"
        )
    }
}

/// Marks a replay created: counts the snapshot (`matched`), and ends it at once when
/// nothing matched. Runs in the creating transaction, after the snapshot insert.
pub const MARK_CREATED: &str = "UPDATE replays SET matched = $2, \
    state = CASE WHEN $2 = 0 THEN 'done' ELSE state END, \
    finished_at = CASE WHEN $2 = 0 THEN CAST($3 AS BIGINT) END WHERE id = $1";

/// Stops a running replay.
pub const CANCEL: &str = "UPDATE replays SET state = 'cancelled', finished_at = $2, \
    updated_at = $2 WHERE id = $1 AND state = 'running'";

/// Moves a dead job back to `scheduled` (`$2`), eligible again (`deliver_at` and
/// `due_at`) at `$3`, with deadline `$4`, keeping its id, payload and attempt history
/// (so its age, SLO and near-deadline figures count from the replay), with a fresh
/// attempt budget: `max_attempts` becomes the attempts so far plus the producer's
/// budget (kept in `attempt_budget`). Only if it is still dead.
pub const REQUEUE: &str = "UPDATE jobs SET state = $2, due_at = $3, deliver_at = $3, \
    deadline = $4, dead_reason = NULL, dead_at = NULL, updated_at = $5, \
    attempt_budget = COALESCE(attempt_budget, max_attempts), \
    max_attempts = attempts + COALESCE(attempt_budget, max_attempts) \
    WHERE id = $1 AND state = 'dead' RETURNING id";

/// Whether a job of the replay's last burst (positions `$2..$3`) still waits to be
/// claimed or retried: the replay then holds its next burst.
pub const LAST_BURST_WAITING: &str = "SELECT 1 AS waiting FROM replay_jobs rj \
    JOIN jobs j ON j.id = rj.job_id \
    WHERE rj.replay_id = $1 AND rj.position >= $2 AND rj.position < $3 \
      AND j.state IN ('scheduled', 'retrying') LIMIT 1";

/// Records a step of a replay.
pub const RECORD_STEP: &str = "UPDATE replays SET next_position = $2, burst_position = $9, \
    requeued = requeued + $3, skipped = skipped + $4, paced_until = $5, next_at = $6, \
    updated_at = $7, state = CASE WHEN $8 THEN 'done' ELSE state END, \
    finished_at = CASE WHEN $8 THEN CAST($7 AS BIGINT) END \
    WHERE id = $1 RETURNING state";

/// Expands, in a module `statements`, the replay functions for database `$db` in
/// dialect `$dialect`: `create`, `fetch`, `cancel`, `next_at`, `advance`. Each takes
/// the connection (or transaction) to run on.
macro_rules! replay_statements {
    ($db:ty, $dialect:expr) => {
        mod statements {
            use sqlx::AssertSqlSafe;
            use uuid::Uuid;

            use $crate::domain::Timestamp;
            use $crate::domain::replay::{Pacing, ReplayState};
            use $crate::store::StoreError;
            use $crate::store::replay_sql::{
                CANCEL, Dialect, LAST_BURST_WAITING, MARK_CREATED, RECORD_STEP, REQUEUE,
            };
            use $crate::store::replays::{
                self, CANDIDATE_COLUMNS, DueReplay, NewReplay, REPLAY_COLUMNS, Replay,
                ReplayProgress,
            };
            use $crate::store::rows::Columns;

            /// Creates `replay` with its snapshot (see [`crate::store::Store::create_replay`]), in
            /// the caller's transaction `conn`.
            pub async fn create(
                conn: &mut <$db as sqlx::Database>::Connection,
                replay: &NewReplay,
            ) -> Result<Replay, StoreError> {
                let now = replay.created_at;
                // One creation at a time (PostgreSQL; SQLite has one writer), so two
                // concurrent replays cannot both fit the budget's last room.
                if $dialect == Dialect::Postgres {
                    sqlx::query::<$db>("LOCK TABLE replays IN SHARE ROW EXCLUSIVE MODE")
                        .execute(&mut *conn)
                        .await?;
                }
                let used = sqlx::query::<$db>(
                    "SELECT CAST(COALESCE(SUM(rate_per_second), 0) AS BIGINT) AS used \
                     FROM replays WHERE state = 'running'",
                )
                .fetch_one(&mut *conn)
                .await?
                .int("used")?;
                let used = u64::try_from(used).unwrap_or(0);
                if used + u64::from(replay.rate_per_second) > u64::from(replay.rate_budget) {
                    return Err(StoreError::ReplayRateBudget {
                        used,
                        budget: replay.rate_budget,
                    });
                }
                let (paced_until, next_at) = Pacing::new(replay.rate_per_second).start(now);
                sqlx::query::<$db>($dialect.sql(
                    "INSERT INTO replays (id, filter, max_jobs, rate_per_second, ttl_ms, state, \
                     matched, paced_until, next_at, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, 'running', 0, $6, $7, $8, $8)",
                ))
                .bind(replay.id.to_string())
                .bind(replays::encode_filter(&replay.filter))
                .bind(i64::from(replay.max_jobs))
                .bind(i64::from(replay.rate_per_second))
                .bind(i64::try_from(replay.ttl_ms).unwrap_or(i64::MAX))
                .bind(paced_until.as_millis())
                .bind(next_at.as_millis())
                .bind(now.as_millis())
                .execute(&mut *conn)
                .await?;
                replays::snapshot_matching::<$db>(replay, $dialect == Dialect::Sqlite)
                    .build()
                    .execute(&mut *conn)
                    .await?;
                let matched = sqlx::query::<$db>(
                    $dialect.sql("SELECT COUNT(*) AS n FROM replay_jobs WHERE replay_id = $1"),
                )
                .bind(replay.id.to_string())
                .fetch_one(&mut *conn)
                .await?
                .int("n")?;
                sqlx::query::<$db>($dialect.sql(MARK_CREATED))
                    .bind(replay.id.to_string())
                    .bind(matched)
                    .bind(now.as_millis())
                    .execute(&mut *conn)
                    .await?;
                fetch(conn, replay.id)
                    .await?
                    .ok_or_else(|| StoreError::Internal("the new replay vanished".into()))
            }

            /// One replay, or `None`.
            pub async fn fetch(
                conn: &mut <$db as sqlx::Database>::Connection,
                id: Uuid,
            ) -> Result<Option<Replay>, StoreError> {
                sqlx::query::<$db>($dialect.sql(&format!(
                    "SELECT {REPLAY_COLUMNS} FROM replays WHERE id = $1"
                )))
                .bind(id.to_string())
                .fetch_optional(&mut *conn)
                .await?
                .map(|row| replays::replay(&row))
                .transpose()
            }

            /// Stops replay `id` if it is running; answers it as it now is.
            pub async fn cancel(
                conn: &mut <$db as sqlx::Database>::Connection,
                id: Uuid,
                now: Timestamp,
            ) -> Result<Option<Replay>, StoreError> {
                sqlx::query::<$db>($dialect.sql(CANCEL))
                    .bind(id.to_string())
                    .bind(now.as_millis())
                    .execute(&mut *conn)
                    .await?;
                fetch(conn, id).await
            }

            /// When the next running replay may release jobs.
            pub async fn next_at(
                conn: &mut <$db as sqlx::Database>::Connection,
            ) -> Result<Option<Timestamp>, StoreError> {
                let hint = match $dialect {
                    Dialect::Sqlite => " INDEXED BY replays_running",
                    Dialect::Postgres => "",
                };
                let row = sqlx::query::<$db>(AssertSqlSafe(format!(
                    "SELECT MIN(next_at) AS at FROM replays{hint} WHERE state = 'running'"
                )))
                .fetch_one(&mut *conn)
                .await?;
                Ok(row.opt_int("at")?.map(Timestamp::from_millis))
            }

            /// Advances the replays due at `now` (see [`crate::store::Store::advance_replays`]),
            /// in the caller's transaction `conn`.
            pub async fn advance(
                conn: &mut <$db as sqlx::Database>::Connection,
                now: Timestamp,
            ) -> Result<ReplayProgress, StoreError> {
                let due = sqlx::query::<$db>($dialect.sql(&$dialect.due_replays()))
                    .bind(now.as_millis())
                    .bind(i64::from(replays::REPLAYS_PER_STEP))
                    .fetch_all(&mut *conn)
                    .await?
                    .iter()
                    .map(replays::due_replay)
                    .collect::<Result<Vec<DueReplay>, _>>()?;
                let mut progress = ReplayProgress::default();
                for replay in due {
                    step(conn, &replay, now, &mut progress).await?;
                }
                Ok(progress)
            }

            /// Looks at replay `id` again at `at`.
            async fn wait_until(
                conn: &mut <$db as sqlx::Database>::Connection,
                id: Uuid,
                at: Timestamp,
            ) -> Result<(), StoreError> {
                sqlx::query::<$db>($dialect.sql("UPDATE replays SET next_at = $2 WHERE id = $1"))
                    .bind(id.to_string())
                    .bind(at.as_millis())
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            /// One step of `replay` at `now`: take the token bucket's allowance, requeue that many
            /// of the next snapshotted jobs still dead, and store the progress and the bucket.
            async fn step(
                conn: &mut <$db as sqlx::Database>::Connection,
                replay: &DueReplay,
                now: Timestamp,
                progress: &mut ReplayProgress,
            ) -> Result<(), StoreError> {
                let allowance = replay.pacing.allowance(replay.paced_until, now);
                if allowance.jobs == 0 {
                    return wait_until(conn, replay.id, allowance.next_at).await;
                }
                // The last burst not taken yet (its subscriber paused or at its limit) or
                // failing: hold, so replayed jobs never pile up nor retry en masse.
                let waiting = sqlx::query::<$db>($dialect.sql(LAST_BURST_WAITING))
                    .bind(replay.id.to_string())
                    .bind(replay.burst_position)
                    .bind(replay.next_position)
                    .fetch_optional(&mut *conn)
                    .await?;
                if waiting.is_some() {
                    let recheck = now.plus_ms((replay.pacing.burst_interval_ms() / 4).max(10));
                    return wait_until(conn, replay.id, recheck).await;
                }
                let candidates = sqlx::query::<$db>($dialect.sql(&format!(
                    "SELECT {CANDIDATE_COLUMNS} FROM replay_jobs rj \
                     JOIN jobs j ON j.id = rj.job_id \
                     WHERE rj.replay_id = $1 AND rj.position >= $2 \
                     ORDER BY rj.position LIMIT $3"
                )))
                .bind(replay.id.to_string())
                .bind(replay.next_position)
                .bind(i64::from(replays::scan_size(&allowance)))
                .fetch_all(&mut *conn)
                .await?
                .iter()
                .map(replays::candidate)
                .collect::<Result<Vec<_>, _>>()?;
                let plan = replays::plan_step(replay, &allowance, &candidates, now);
                let mut requeued = 0u64;
                for (job_id, transition) in &plan.requeue {
                    let moved = sqlx::query::<$db>($dialect.sql(REQUEUE))
                        .bind(job_id.to_string())
                        .bind(transition.to.as_str())
                        .bind(transition.due_at.unwrap_or(now).as_millis())
                        .bind(transition.deadline.as_millis())
                        .bind(now.as_millis())
                        .fetch_optional(&mut *conn)
                        .await?;
                    requeued += u64::from(moved.is_some());
                }
                let skipped = plan.skipped + (plan.requeue.len() as u64 - requeued);
                // The bucket is spent only by a burst that requeued something.
                let (paced_until, next_at) = if requeued > 0 {
                    (allowance.paced_until, allowance.next_at)
                } else {
                    (replay.paced_until, now)
                };
                let state = sqlx::query::<$db>($dialect.sql(RECORD_STEP))
                    .bind(replay.id.to_string())
                    .bind(plan.next_position)
                    .bind(i64::try_from(requeued).unwrap_or(i64::MAX))
                    .bind(i64::try_from(skipped).unwrap_or(i64::MAX))
                    .bind(paced_until.as_millis())
                    .bind(next_at.as_millis())
                    .bind(now.as_millis())
                    .bind(plan.exhausted)
                    .bind(if requeued > 0 {
                        replay.next_position
                    } else {
                        replay.burst_position
                    })
                    .fetch_one(&mut *conn)
                    .await?;
                progress.requeued += requeued;
                progress.skipped += skipped;
                progress.finished += u32::from(state.text("state")? == ReplayState::Done.as_str());
                Ok(())
            }
        }
    };
}

pub(crate) use replay_statements;
