//! The PostgreSQL store: production, and several instances sharing one database.
//!
//! Claims use `FOR UPDATE SKIP LOCKED` in one statement that marks and returns the
//! batch, so concurrent workers take disjoint jobs without waiting on each other. A
//! created job is announced with `NOTIFY deferhook_jobs` (sent at commit), which wakes
//! the workers of every instance; polling stays as the fallback. Lost connections are
//! replaced by the pool; calls made while the server is down fail as
//! [`StoreError::Unavailable`].

mod jobs;
mod leases;
mod maintenance;
mod replays;
mod rows;
mod stats;
mod subscribers;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::batch::{self, Created};
use super::group_commit::GroupCommit;
use super::records::*;
use super::{Sealer, Store, StoreError};
use crate::domain::Timestamp;

/// The channel a job creation is announced on.
pub const JOBS_CHANNEL: &str = "deferhook_jobs";
/// Connections per instance.
const MAX_CONNECTIONS: u32 = 16;
/// Group commits of creates running at once, each on its own connection: PostgreSQL
/// flushes concurrent commits together, so a few groups overlap their round trips.
const CREATE_GROUPS_AT_ONCE: usize = 4;
/// How long a call waits for a connection before the store reports itself unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    sealer: Sealer,
    /// Creates, group-committed over a few connections at once.
    creates: GroupCommit<Vec<NewJob>, Created>,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`). Does not migrate. Errors
    /// never include the URL (it may carry a password).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        let creates = batch::spawn_creates(pool.clone(), CREATE_GROUPS_AT_ONCE);
        Ok(PostgresStore {
            pool,
            sealer: Sealer::plaintext(),
            creates,
        })
    }

    /// Writes and reads subscriber secrets through `sealer` (sealed at rest when it
    /// has a key).
    pub fn with_sealer(self, sealer: Sealer) -> Self {
        PostgresStore { sealer, ..self }
    }

    /// Checks the stored signing secrets against this store's sealer and seals the
    /// plaintext ones when it has a key (see [`crate::store::sealing::Sealer::check_stored`]):
    /// fails when sealed secrets do not open. Returns how many subscribers were sealed.
    pub async fn prepare_secrets(&self) -> Result<usize, StoreError> {
        let rows: Vec<(String, String, Option<String>)> =
            sqlx::query_as("SELECT id, secret, previous_secret FROM subscribers")
                .fetch_all(&self.pool)
                .await?;
        let reseal = self
            .sealer
            .check_stored(&rows)
            .map_err(StoreError::Config)?;
        if reseal.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin().await?;
        for row in &reseal {
            sqlx::query(
                "UPDATE subscribers SET secret = $2, \
                 previous_secret = COALESCE($3, previous_secret) \
                 WHERE id = $1 AND secret = $4",
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

    /// Applies the embedded migrations of `migrations/postgres` that are not applied
    /// yet (sqlx takes an advisory lock, so instances starting together are safe).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        subscribers::put(&self.pool, &self.sealer, put, now).await
    }

    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        subscribers::rotate_secret(&self.pool, &self.sealer, rotation, now).await
    }

    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        subscribers::get(&self.pool, id).await
    }

    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        subscribers::list(&self.pool, page).await
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        self.creates.submit(jobs).await
    }

    async fn get_job(&self, id: Uuid) -> Result<Option<Job>, StoreError> {
        jobs::get(&self.pool, id).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<Job>, StoreError> {
        jobs::list(&self.pool, filter, page).await
    }

    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: crate::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        jobs::transition_waiting(&self.pool, id, seen, transition, now).await
    }

    async fn list_attempts(&self, job_id: Uuid) -> Result<Vec<Attempt>, StoreError> {
        jobs::attempts(&self.pool, job_id).await
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        leases::claim(&self.pool, &self.sealer, request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        leases::renew(&self.pool, leases, until, now).await
    }

    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        leases::record_outcomes(&self.pool, records, now).await
    }

    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let jobs = stats::next_wake_at(&self.pool, now).await?;
        let replay = replays::next_at(&self.pool).await?;
        Ok(jobs.into_iter().chain(replay).min())
    }

    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<crate::domain::waiting::SubscriberLoad>, StoreError> {
        stats::subscriber_load(&self.pool, id, now).await
    }

    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        stats::gauges(&self.pool, now, slo_ms).await
    }

    async fn count_replay_matches(
        &self,
        filter: &crate::domain::replay::ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        replays::count(&self.pool, filter, max_jobs).await
    }

    async fn create_replay(
        &self,
        replay: crate::store::NewReplay,
    ) -> Result<crate::store::Replay, StoreError> {
        replays::create(&self.pool, replay).await
    }

    async fn get_replay(&self, id: Uuid) -> Result<Option<crate::store::Replay>, StoreError> {
        replays::get(&self.pool, id).await
    }

    async fn cancel_replay(
        &self,
        id: Uuid,
        now: Timestamp,
    ) -> Result<Option<crate::store::Replay>, StoreError> {
        replays::cancel(&self.pool, id, now).await
    }

    async fn advance_replays(
        &self,
        now: Timestamp,
    ) -> Result<crate::store::ReplayProgress, StoreError> {
        replays::advance(&self.pool, now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        leases::expire_deadlines(&self.pool, now, limit).await
    }

    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        maintenance::subscriber_stats(&self.pool, id, now).await
    }

    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        maintenance::purge_finished(&self.pool, finished_before, dead_before, limit).await
    }

    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        let mut pause = Duration::from_millis(100);
        while !stop.is_cancelled() {
            let listening = forward_notifications(&self.pool, &wake);
            tokio::select! {
                () = stop.cancelled() => return,
                result = listening => {
                    let Err(error) = result;
                    tracing::warn!(%error, "job notifications interrupted; reconnecting");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}

/// Listens on [`JOBS_CHANNEL`] and wakes the worker for every notification, and once
/// when listening starts (anything created meanwhile is found by that wake-up).
async fn forward_notifications(
    pool: &PgPool,
    wake: &Notify,
) -> Result<std::convert::Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(JOBS_CHANNEL).await?;
    wake.notify_one();
    loop {
        listener.recv().await?;
        wake.notify_one();
    }
}
