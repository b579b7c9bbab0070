//! The SQLite store: the embedded default.
//!
//! One connection owns every write (a pool of one), so writers queue in the process
//! instead of failing with "database is locked"; reads use a separate pool and, under
//! WAL, never wait for the writer. The file is opened with WAL, `synchronous = FULL`
//! (a 2xx means the row is on disk), a busy timeout and foreign keys on.
//!
//! Each file holds one subject's statements, as constants in SQLite's dialect; the
//! PostgreSQL store has the same files.

mod attempts;
mod audit;
mod binds;
mod claims;
mod clock;
mod creates;
mod dead_letters;
mod deletions;
mod destinations;
pub(crate) mod direct;
mod endpoints;
mod event_types;
mod events;
mod figures;
mod health;
mod instances;
mod jobs;
mod maintenance;
mod outcomes;
#[cfg(test)]
mod plan_tests;
mod renewals;
pub(crate) mod replays;
mod schedules;
mod secrets;
pub use secrets::holds_sealed_secrets;
mod server_keys;
mod sessions;
mod subscribers;
mod sweep;
mod throughput;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};
use uuid::Uuid;

use super::creates::Created;
use super::dialect::{Dialect, Query};
use super::group_commit::GroupCommit;
use super::records::*;
use super::transactions::{Row, Transactions, TxFuture};
use super::{Sealer, Store, StoreError, Wake};
use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::replay::{ReplayFilter, ReplayState};
use crate::domain::waiting::SubscriberLoad;
use crate::store as shared;
use direct::readers::Readers;
use direct::writer::Writer;

/// How long a connection waits on a lock held by another process (the batch writer's
/// `BEGIN IMMEDIATE` included), and how long a caller waits for sqlx's connection (an
/// in-memory database, a snapshot) before the store reports itself unavailable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Read connections.
const READERS: u32 = 4;

/// An open SQLite transaction: on a pooled sqlx connection (a snapshot on a reader;
/// every write of an in-memory database), or on the batch writer's own connection.
pub(crate) enum Tx {
    /// A sqlx transaction.
    Pooled(sqlx::Transaction<'static, Sqlite>),
    /// The batch writer's connection, inside its batch's transaction.
    Direct(rusqlite::Connection),
}

/// The connections. A database file: the batch writer runs every write, the reader
/// threads every read outside a transaction, and sqlx's readers the snapshots. sqlx's
/// one writer runs the migrations and the start-up maintenance, and, for an in-memory
/// database (which lives in that one connection), every statement.
#[derive(Debug, Clone)]
struct Pools {
    writer: SqlitePool,
    readers: SqlitePool,
    batches: Option<Writer>,
    reads: Option<Readers>,
}

impl Transactions for Pools {
    type Tx = Tx;
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn transaction<R, F>(&self, body: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(&'a mut Tx) -> TxFuture<'a, R> + Send + 'static,
    {
        if let Some(batches) = &self.batches {
            return batches.run(body).await;
        }
        let mut tx = Tx::Pooled(self.writer.begin_with("BEGIN IMMEDIATE").await?);
        let result = body(&mut tx).await?;
        Self::commit(tx).await?;
        Ok(result)
    }

    async fn snapshot(&self) -> Result<Tx, StoreError> {
        Ok(Tx::Pooled(self.readers.begin().await?))
    }

    async fn commit(tx: Tx) -> Result<(), StoreError> {
        match tx {
            Tx::Pooled(tx) => Ok(tx.commit().await?),
            Tx::Direct(_) => Err(StoreError::Internal(
                "the batch writer commits its own transactions".into(),
            )),
        }
    }

    /// One instance per file: its own worker is woken through [`Wake`].
    async fn announce(_tx: &mut Tx) -> Result<(), StoreError> {
        Ok(())
    }

    async fn execute(tx: &mut Tx, query: Query) -> Result<u64, StoreError> {
        match tx {
            Tx::Direct(conn) => direct::statements::execute(conn, query),
            Tx::Pooled(tx) => {
                let (sql, arguments) = binds::bound(query)?;
                Ok(sqlx::query_with(sql, arguments)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected())
            }
        }
    }

    async fn fetch_all<T: Row>(tx: &mut Tx, query: Query) -> Result<Vec<T>, StoreError> {
        match tx {
            Tx::Direct(conn) => direct::statements::fetch(conn, query, None),
            Tx::Pooled(tx) => {
                let (sql, arguments) = binds::bound(query)?;
                Ok(sqlx::query_as_with(sql, arguments)
                    .fetch_all(&mut **tx)
                    .await?)
            }
        }
    }

    async fn fetch_optional<T: Row>(tx: &mut Tx, query: Query) -> Result<Option<T>, StoreError> {
        match tx {
            Tx::Direct(conn) => Ok(direct::statements::fetch(conn, query, Some(1))?.pop()),
            Tx::Pooled(tx) => {
                let (sql, arguments) = binds::bound(query)?;
                Ok(sqlx::query_as_with(sql, arguments)
                    .fetch_optional(&mut **tx)
                    .await?)
            }
        }
    }

    async fn fetch_one<T: Row>(tx: &mut Tx, query: Query) -> Result<T, StoreError> {
        Self::fetch_optional(tx, query).await?.ok_or_else(|| {
            StoreError::Internal("no rows returned by a query that expected one".into())
        })
    }

    async fn read_all<T: Row>(&self, query: Query) -> Result<Vec<T>, StoreError> {
        if let Some(reads) = &self.reads {
            return reads
                .run(move |conn| direct::statements::fetch(conn, query, None))
                .await;
        }
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_all(&self.readers)
            .await?)
    }

    async fn read_optional<T: Row>(&self, query: Query) -> Result<Option<T>, StoreError> {
        if let Some(reads) = &self.reads {
            return reads
                .run(move |conn| Ok(direct::statements::fetch(conn, query, Some(1))?.pop()))
                .await;
        }
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_optional(&self.readers)
            .await?)
    }

    async fn read_one<T: Row>(&self, query: Query) -> Result<T, StoreError> {
        self.read_optional(query).await?.ok_or_else(|| {
            StoreError::Internal("no rows returned by a query that expected one".into())
        })
    }
}

/// The SQLite implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Pools,
    sealer: Sealer,
    /// The destinations' default limit and circuit breaker.
    policy: DestinationPolicy,
    /// Creates, group-committed on the writer.
    creates: GroupCommit<Vec<NewJob>, Created>,
    /// Outcomes recorded one by one, group-committed on the writer.
    outcomes: GroupCommit<(OutcomeRecord, Timestamp), Fenced>,
    /// Long attempts noted one by one, group-committed one group at a time.
    long_attempts: GroupCommit<(LeaseRef, Timestamp), ()>,
    wake: Arc<Wake>,
}

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` (`sqlite://path`,
    /// `sqlite:path` or `sqlite::memory:`) and applies the migrations of
    /// `migrations/sqlite` not applied yet; subscriber secrets are written and read
    /// through `sealer`, under the default [`DestinationPolicy`].
    pub async fn open(url: &str, sealer: Sealer) -> Result<Self, StoreError> {
        Self::open_with(url, sealer, DestinationPolicy::default()).await
    }

    /// [`SqliteStore::open`] under `policy`; subscribers stored before destinations
    /// existed are assigned theirs.
    pub async fn open_with(
        url: &str,
        sealer: Sealer,
        policy: DestinationPolicy,
    ) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Config(format!("invalid SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let in_memory = in_memory(url);
        if !in_memory {
            create_private(options.get_filename())?;
        }
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
                .connect_with(options.clone())
                .await
                .map_err(|e| StoreError::Unavailable(format!("cannot open {url}: {e}")))?
        };
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        // A file's writes go to the batch writer and its reads to the reader threads,
        // opened once the migrations made it.
        let (batches, reads) = if in_memory {
            (None, None)
        } else {
            let path = options.get_filename();
            let readers = usize::try_from(READERS).unwrap_or(1);
            (
                Some(Writer::open(path, BUSY_TIMEOUT)?),
                Some(Readers::open(path, BUSY_TIMEOUT, readers)?),
            )
        };
        let db = Pools {
            writer,
            readers,
            batches,
            reads,
        };
        shared::destinations::backfill(&db, crate::domain::Clock::now(&crate::domain::SystemClock))
            .await?;
        let wake = Wake::new();
        Ok(SqliteStore {
            // One group at a time: SQLite has one writer.
            creates: shared::creates::spawn(db.clone(), 1, wake.clone()),
            outcomes: shared::outcomes::spawn(db.clone(), policy),
            long_attempts: shared::endpoints::spawn_long_attempts(db.clone()),
            db,
            sealer,
            policy,
            wake,
        })
    }

    /// Checks the stored signing secrets against this store's sealer and seals the
    /// plaintext ones when it has a key (see [`crate::store::sealing::Sealer::check_stored`]):
    /// fails when sealed secrets do not open. Returns how many subscribers were sealed.
    pub async fn prepare_secrets(&self) -> Result<usize, StoreError> {
        shared::secrets::prepare(&self.db, &self.sealer).await
    }
}

/// Whether `url` names an in-memory database (`sqlite::memory:`, `mode=memory`), which
/// lives in one connection and dies with it.
fn in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

/// The file that the SQLite database at `url` (`sqlite://path`, `sqlite:path`) lives
/// in, as [`SqliteStore::open`] opens it; `None` for an in-memory database. Fails on a
/// URL that is not SQLite's.
pub fn database_file(url: &str) -> Result<Option<std::path::PathBuf>, StoreError> {
    if in_memory(url) {
        return Ok(None);
    }
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid SQLite URL: {e}")))?;
    Ok(Some(options.get_filename().to_path_buf()))
}

/// Creates the database file at `path`, empty and readable by its owner only (0600),
/// unless it exists: SQLite would create it 0644 (less the umask), and it creates the
/// `-wal` and `-shm` files with the database file's mode. The file holds subscriber
/// secrets (sealed with a key, in plaintext without one) and every payload. An existing
/// file keeps its mode; one readable by others is logged.
fn create_private(path: &std::path::Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        match created {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode());
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        mode = format!("{:o}", mode & 0o777),
                        "the database file is open to other users; restrict it (chmod 600, \
                         and its -wal and -shm files)"
                    );
                }
            }
            Err(error) => {
                return Err(StoreError::Unavailable(format!(
                    "cannot open {}: {error}",
                    path.display()
                )));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// A store in memory with subscriber `s`, for this module's tests.
#[cfg(test)]
async fn test_store() -> SqliteStore {
    use crate::domain::secret::SigningSecret;
    let store = SqliteStore::open("sqlite::memory:", Sealer::plaintext())
        .await
        .unwrap();
    let put = SubscriberPut {
        id: "s".into(),
        url: "https://s.example.test/".into(),
        secret: None,
        generated_secret: SigningSecret::generate(),
        max_in_flight: None,
        rate_limit_per_second: None,
        enabled: None,
        event_types: None,
        attempt_timeout_ms: None,
    };
    store
        .put_subscriber(put, crate::testing::START)
        .await
        .unwrap();
    store
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.db.readers).await?;
        Ok(())
    }

    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(clock::now())
    }

    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        subscribers::put(&self.db, &self.sealer, put, now).await
    }

    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        shared::subscribers::rotate_secret(&self.db, &self.sealer, rotation, now).await
    }

    async fn patch_subscriber(
        &self,
        id: &str,
        patch: SubscriberPatch,
        now: Timestamp,
    ) -> Result<Option<Subscriber>, StoreError> {
        shared::subscribers::patch(&self.db, id, patch, now).await
    }

    async fn resume_subscribers(
        &self,
        selection: ResumeSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        shared::subscribers::resume(&self.db, selection, now).await
    }

    async fn pause_subscribers(
        &self,
        selection: PauseSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        shared::subscribers::pause(&self.db, selection, now).await
    }

    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        shared::subscribers::get(&self.db, id).await
    }

    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        shared::subscribers::list(&self.db, page).await
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        self.creates.submit(jobs).await
    }

    async fn get_job(&self, id: Uuid, now: Timestamp) -> Result<Option<Job>, StoreError> {
        shared::jobs::get(&self.db, id, now).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<Job>, StoreError> {
        shared::jobs::list(&self.db, filter, page, now).await
    }

    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: crate::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        shared::jobs::transition_waiting(&self.db, id, seen, transition, now).await
    }

    async fn list_attempts(
        &self,
        job_id: Uuid,
        now: Timestamp,
    ) -> Result<Vec<Attempt>, StoreError> {
        shared::attempts::list(&self.db, job_id, now).await
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        claims::claim(&self.db, &self.sealer, &self.policy, request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        renewals::renew(&self.db, leases, until, now).await
    }

    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        shared::outcomes::record(&self.db, records, now, &self.policy).await
    }

    async fn record_outcome(
        &self,
        record: OutcomeRecord,
        now: Timestamp,
    ) -> Result<Fenced, StoreError> {
        self.outcomes.submit((record, now)).await
    }

    async fn note_long_attempt(&self, lease: LeaseRef, now: Timestamp) -> Result<(), StoreError> {
        self.long_attempts.submit((lease, now)).await
    }

    fn wake(&self) -> Arc<Wake> {
        self.wake.clone()
    }

    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        shared::figures::next_wake_at(&self.db, now, &self.policy).await
    }

    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberLoad>, StoreError> {
        shared::figures::subscriber_load(&self.db, id, now, &self.policy).await
    }

    async fn list_destinations(
        &self,
        page: PageRequest<String>,
        now: Timestamp,
    ) -> Result<Vec<DestinationView>, StoreError> {
        shared::destinations::list(&self.db, page, now, &self.policy).await
    }

    async fn get_destination(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        shared::destinations::get(&self.db, key, now, &self.policy).await
    }

    async fn put_destination(
        &self,
        key: &str,
        put: DestinationPut,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        shared::destinations::put(&self.db, key, put, now, &self.policy).await
    }

    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        shared::figures::gauges(&self.db, now, slo_ms, &self.policy).await
    }

    async fn count_replay_matches(
        &self,
        filter: &ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        shared::replays::count_matches(&self.db, filter, max_jobs).await
    }

    async fn create_replay(&self, replay: NewReplay) -> Result<Replay, StoreError> {
        shared::replays::create(&self.db, &self.wake, replay).await
    }

    async fn get_replay(&self, id: Uuid) -> Result<Option<Replay>, StoreError> {
        shared::replays::get(&self.db, id).await
    }

    async fn cancel_replay(&self, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
        shared::replays::cancel(&self.db, id, now).await
    }

    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError> {
        shared::replays::advance(&self.db, now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        sweep::expire_deadlines(&self.db, now, limit).await
    }

    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        shared::figures::subscriber_stats(&self.db, id, now).await
    }

    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        shared::maintenance::purge_finished(&self.db, finished_before, dead_before, limit).await
    }

    // --- events: affected events and an event's summary (issue #16 parts 1 and 2) ---

    async fn list_affected_events(
        &self,
        since: Timestamp,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<AffectedEvent>, StoreError> {
        shared::events::list_affected(&self.db, since, page, now, &self.policy).await
    }

    async fn event_jobs(
        &self,
        event_id: &str,
        now: Timestamp,
    ) -> Result<Option<EventJobs>, StoreError> {
        shared::events::event_jobs(&self.db, event_id, now, &self.policy).await
    }

    // --- issue #16 part 7: replays of a slice ---

    async fn list_replays(
        &self,
        state: Option<ReplayState>,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<Replay>, StoreError> {
        shared::replays::list(&self.db, state, page).await
    }

    // --- subscriber health (issue #16 part 3) ---

    async fn subscriber_health(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, HealthFigures>, StoreError> {
        shared::health::figures(&self.db, ids, now, &self.policy).await
    }

    async fn list_subscribers_by_health(
        &self,
        status: crate::domain::health::HealthStatus,
        page: PageRequest<HealthCursor>,
        now: Timestamp,
    ) -> Result<Vec<SubscriberHealth>, StoreError> {
        shared::health::list_by_health(&self.db, status, page, now, &self.policy).await
    }

    // --- issue #16 parts 8 and 9: deleting subscribers, the audit trail ---

    async fn delete_subscriber(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        shared::deletions::delete(&self.db, id, now).await
    }

    async fn purge_tombstones(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        shared::deletions::purge_tombstones(&self.db, before, limit).await
    }

    async fn record_audit(&self, entry: NewAuditEntry) -> Result<(), StoreError> {
        shared::audit::insert(&self.db, entry).await
    }

    async fn settle_audit(&self, id: Uuid, settlement: AuditSettlement) -> Result<(), StoreError> {
        shared::audit::settle(&self.db, id, settlement).await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        shared::audit::list(&self.db, filter, page).await
    }

    async fn purge_audit(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        shared::audit::purge(&self.db, before, limit).await
    }

    // --- issue #16 part 8, bounded deletes: a deletion's two steps (§5.3.1) ---

    async fn begin_subscriber_deletion(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        shared::deletions::begin(&self.db, id, now).await
    }

    async fn move_deleted_history(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Option<HistoryMoved>, StoreError> {
        shared::deletions::move_batch(&self.db, id, limit).await
    }

    async fn deletions_in_progress(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        shared::deletions::in_progress(&self.db, limit).await
    }

    // --- issue #19: the operator console's reads, heartbeats and sessions ---

    async fn record_heartbeat(&self, beat: Heartbeat, now: Timestamp) -> Result<(), StoreError> {
        shared::instances::record(&self.db, beat, now).await
    }

    async fn forget_instance(&self, id: &str) -> Result<(), StoreError> {
        shared::instances::forget(&self.db, id).await
    }

    async fn live_instances(&self, since: Timestamp) -> Result<Vec<InstanceSeen>, StoreError> {
        shared::instances::live(&self.db, since).await
    }

    async fn jobs_per_minute(
        &self,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<MinuteCounts>, StoreError> {
        shared::throughput::per_minute(&self.db, since, now).await
    }

    async fn dead_letters(&self, offset: u32, limit: u32) -> Result<DeadLetters, StoreError> {
        shared::dead_letters::read(&self.db, offset, limit).await
    }

    async fn end_console_session(
        &self,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        shared::sessions::end(&self.db, id, expires_at, now).await
    }

    async fn server_key(
        &self,
        name: &str,
        candidate: String,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        shared::server_keys::get_or_make(&self.db, name, candidate, now).await
    }

    async fn console_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        shared::sessions::ended(&self.db, id).await
    }

    async fn recent_attempts(
        &self,
        subscriber_id: &str,
        limit: u32,
    ) -> Result<Vec<RecentAttempt>, StoreError> {
        shared::attempts::recent(&self.db, subscriber_id, limit).await
    }

    async fn subscribers_of_event_type(
        &self,
        event_type: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        shared::event_types::subscribers_of(&self.db, event_type, limit).await
    }

    async fn put_schedule(&self, put: SchedulePut, now: Timestamp) -> Result<Schedule, StoreError> {
        shared::schedules::put(&self.db, put, now).await
    }

    async fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        shared::schedules::get(&self.db, id).await
    }

    async fn list_schedules(&self, page: PageRequest<String>) -> Result<Vec<Schedule>, StoreError> {
        shared::schedules::list(&self.db, page).await
    }

    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        shared::schedules::delete(&self.db, id).await
    }

    async fn due_schedules(
        &self,
        until: Timestamp,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<Schedule>, StoreError> {
        shared::schedules::due(&self.db, until, limit, now).await
    }

    async fn lease_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        shared::schedules::lease(&self.db, id, seen, until, now).await
    }

    async fn advance_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        advance: ScheduleAdvance,
    ) -> Result<bool, StoreError> {
        shared::schedules::advance(&self.db, id, seen, advance).await
    }

    async fn make_schedule_period(
        &self,
        fence: Option<PeriodFence>,
        jobs: Vec<NewJob>,
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError> {
        shared::schedule_periods::make(&self.db, &self.wake, fence, jobs).await
    }

    async fn schedule_sharing_template(
        &self,
        definition: &ScheduleDefinition,
    ) -> Result<Option<String>, StoreError> {
        shared::schedules::sharing_template(&self.db, definition).await
    }

    async fn record_schedule_run(&self, id: &str, run: ScheduleRun) -> Result<bool, StoreError> {
        shared::schedules::record_run(&self.db, id, run).await
    }
}
