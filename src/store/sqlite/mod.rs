//! The SQLite store: the embedded default.
//!
//! One connection owns every write (a pool of one), so writers queue in the process
//! instead of failing with "database is locked"; reads use a separate pool and, under
//! WAL, never wait for the writer. The file is opened with WAL, `synchronous = FULL`
//! (a 2xx means the row is on disk), a busy timeout and foreign keys on.

mod attempts;
mod jobs;
mod leases;
mod maintenance;
#[cfg(test)]
mod plan_tests;
mod replays;
mod rows;
mod stats;
mod subscribers;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use uuid::Uuid;

use super::batch::{self, Created};
use super::group_commit::GroupCommit;
use super::records::*;
use super::{Sealer, Store, StoreError};
use crate::domain::Timestamp;

/// How long a connection waits on a lock held by another process, and how long a
/// caller waits for the writer connection before the store reports itself unavailable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Read connections.
const READERS: u32 = 4;

/// The SQLite implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    readers: SqlitePool,
    sealer: Sealer,
    /// Creates, group-committed on the writer.
    creates: GroupCommit<Vec<NewJob>, Created>,
}

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` (`sqlite://path`,
    /// `sqlite:path` or `sqlite::memory:`). Does not migrate.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Config(format!("invalid SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        // An in-memory database dies with its last connection: never retire it.
        let lifetime = (!in_memory).then_some(Duration::from_secs(30 * 60));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(BUSY_TIMEOUT)
            .idle_timeout(lifetime.map(|_| Duration::from_secs(10 * 60)))
            .max_lifetime(lifetime)
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot open {url}: {e}")))?;
        // An in-memory database lives in one connection: readers must share it.
        let readers = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READERS)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(options)
                .await
                .map_err(|e| StoreError::Unavailable(format!("cannot open {url}: {e}")))?
        };
        // One group at a time: SQLite has one writer.
        let creates = batch::spawn_creates(writer.clone(), 1);
        Ok(SqliteStore {
            writer,
            readers,
            sealer: Sealer::plaintext(),
            creates,
        })
    }

    /// Writes and reads subscriber secrets through `sealer` (sealed at rest when it
    /// has a key).
    pub fn with_sealer(self, sealer: Sealer) -> Self {
        SqliteStore { sealer, ..self }
    }

    /// Checks the stored signing secrets against this store's sealer and seals the
    /// plaintext ones when it has a key (see [`crate::store::sealing::Sealer::check_stored`]):
    /// fails when sealed secrets do not open. Returns how many subscribers were sealed.
    pub async fn prepare_secrets(&self) -> Result<usize, StoreError> {
        let rows: Vec<(String, String, Option<String>)> =
            sqlx::query_as("SELECT id, secret, previous_secret FROM subscribers")
                .fetch_all(&self.writer)
                .await?;
        let reseal = self
            .sealer
            .check_stored(&rows)
            .map_err(StoreError::Config)?;
        if reseal.is_empty() {
            return Ok(0);
        }
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        for row in &reseal {
            sqlx::query(
                "UPDATE subscribers SET secret = ?2, \
                 previous_secret = COALESCE(?3, previous_secret) \
                 WHERE id = ?1 AND secret = ?4",
            )
            .bind(&row.subscriber_id)
            .bind(&row.new_secret)
            .bind(row.new_previous.as_deref())
            .bind(&row.old_secret)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(reseal.len())
    }

    /// Applies the embedded migrations of `migrations/sqlite` that are not applied yet.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.writer)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.readers).await?;
        Ok(())
    }

    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        subscribers::put(&self.writer, &self.sealer, put, now).await
    }

    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        subscribers::rotate_secret(&self.writer, &self.sealer, rotation, now).await
    }

    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        subscribers::get(&self.readers, id).await
    }

    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        subscribers::list(&self.readers, page).await
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        self.creates.submit(jobs).await
    }

    async fn get_job(&self, id: Uuid) -> Result<Option<Job>, StoreError> {
        jobs::get(&self.readers, id).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<Job>, StoreError> {
        jobs::list(&self.readers, filter, page).await
    }

    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: crate::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        jobs::transition_waiting(&self.writer, id, seen, transition, now).await
    }

    async fn list_attempts(&self, job_id: Uuid) -> Result<Vec<Attempt>, StoreError> {
        attempts::list(&self.readers, job_id).await
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        leases::claim(&self.writer, &self.sealer, request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        leases::renew(&self.writer, leases, until, now).await
    }

    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        leases::record_outcomes(&self.writer, records, now).await
    }

    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let jobs = stats::next_wake_at(&self.readers, now).await?;
        let replay = replays::next_at(&self.readers).await?;
        Ok(jobs.into_iter().chain(replay).min())
    }

    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<crate::domain::waiting::SubscriberLoad>, StoreError> {
        stats::subscriber_load(&self.readers, id, now).await
    }

    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        stats::gauges(&self.readers, now, slo_ms).await
    }

    async fn count_replay_matches(
        &self,
        filter: &crate::domain::replay::ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        replays::count(&self.readers, filter, max_jobs).await
    }

    async fn create_replay(
        &self,
        replay: crate::store::NewReplay,
    ) -> Result<crate::store::Replay, StoreError> {
        replays::create(&self.writer, replay).await
    }

    async fn get_replay(&self, id: Uuid) -> Result<Option<crate::store::Replay>, StoreError> {
        replays::get(&self.readers, id).await
    }

    async fn cancel_replay(
        &self,
        id: Uuid,
        now: Timestamp,
    ) -> Result<Option<crate::store::Replay>, StoreError> {
        replays::cancel(&self.writer, id, now).await
    }

    async fn advance_replays(
        &self,
        now: Timestamp,
    ) -> Result<crate::store::ReplayProgress, StoreError> {
        replays::advance(&self.writer, &self.readers, now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        leases::expire_deadlines(&self.writer, &self.readers, now, limit).await
    }

    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        maintenance::subscriber_stats(&self.readers, id, now).await
    }

    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        maintenance::purge_finished(&self.writer, finished_before, dead_before, limit).await
    }
}
