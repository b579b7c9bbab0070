//! Replays in PostgreSQL: the shared statements ([`crate::store::replay_sql`]) in a
//! transaction. A step locks the replay rows it advances (`FOR UPDATE SKIP LOCKED`),
//! so instances sharing the database take turns on one token bucket: the pace holds
//! across them.

use sqlx::{PgPool, Postgres, Row};
use uuid::Uuid;

use crate::domain::Timestamp;
use crate::domain::replay::ReplayFilter;
use crate::store::StoreError;
use crate::store::replay_sql::replay_statements;
use crate::store::replays::{self, NewReplay, Replay, ReplayProgress};

replay_statements!(sqlx::Postgres, Dialect::Postgres);

pub async fn count(pool: &PgPool, filter: &ReplayFilter, max_jobs: u32) -> Result<u64, StoreError> {
    let n: i64 = replays::count_matching::<Postgres>(filter, max_jobs, false)
        .build()
        .fetch_one(pool)
        .await?
        .try_get("n")?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub async fn create(pool: &PgPool, replay: NewReplay) -> Result<Replay, StoreError> {
    let mut tx = pool.begin().await?;
    let created = statements::create(&mut tx, &replay).await?;
    // Workers of every instance wake for it (sent at commit).
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(super::JOBS_CHANNEL)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(created)
}

pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Replay>, StoreError> {
    statements::fetch(&mut *pool.acquire().await?, id).await
}

pub async fn cancel(pool: &PgPool, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
    let mut tx = pool.begin().await?;
    let replay = statements::cancel(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(replay)
}

pub async fn next_at(pool: &PgPool) -> Result<Option<Timestamp>, StoreError> {
    statements::next_at(&mut *pool.acquire().await?).await
}

pub async fn advance(pool: &PgPool, now: Timestamp) -> Result<ReplayProgress, StoreError> {
    // A read first, so an idle store costs no transaction.
    if next_at(pool).await?.is_none_or(|at| at > now) {
        return Ok(ReplayProgress::default());
    }
    let mut tx = pool.begin().await?;
    let progress = statements::advance(&mut tx, now).await?;
    tx.commit().await?;
    Ok(progress)
}
