//! Replays in SQLite: the shared statements ([`crate::store::replay_sql`]) run on the
//! single writer connection in `BEGIN IMMEDIATE` transactions, so a step's read of the
//! token bucket and its update cannot interleave with another writer.

use sqlx::{Row, Sqlite, SqlitePool};
use uuid::Uuid;

use crate::domain::Timestamp;
use crate::domain::replay::ReplayFilter;
use crate::store::StoreError;
use crate::store::replay_sql::replay_statements;
use crate::store::replays::{self, NewReplay, Replay, ReplayProgress};

replay_statements!(sqlx::Sqlite, Dialect::Sqlite);

pub async fn count(
    readers: &SqlitePool,
    filter: &ReplayFilter,
    max_jobs: u32,
) -> Result<u64, StoreError> {
    let n: i64 = replays::count_matching::<Sqlite>(filter, max_jobs, true)
        .build()
        .fetch_one(readers)
        .await?
        .try_get("n")?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub async fn create(writer: &SqlitePool, replay: NewReplay) -> Result<Replay, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let created = statements::create(&mut tx, &replay).await?;
    tx.commit().await?;
    Ok(created)
}

pub async fn get(readers: &SqlitePool, id: Uuid) -> Result<Option<Replay>, StoreError> {
    statements::fetch(&mut *readers.acquire().await?, id).await
}

pub async fn cancel(
    writer: &SqlitePool,
    id: Uuid,
    now: Timestamp,
) -> Result<Option<Replay>, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let replay = statements::cancel(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(replay)
}

pub async fn next_at(readers: &SqlitePool) -> Result<Option<Timestamp>, StoreError> {
    statements::next_at(&mut *readers.acquire().await?).await
}

pub async fn advance(
    writer: &SqlitePool,
    readers: &SqlitePool,
    now: Timestamp,
) -> Result<ReplayProgress, StoreError> {
    // A read first, so an idle store costs no write transaction.
    if next_at(readers).await?.is_none_or(|at| at > now) {
        return Ok(ReplayProgress::default());
    }
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let progress = statements::advance(&mut tx, now).await?;
    tx.commit().await?;
    Ok(progress)
}
