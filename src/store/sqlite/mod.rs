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
pub(crate) mod outcomes;
#[cfg(test)]
mod plan_tests;
mod renewals;
mod replays;
mod schedules;
mod secrets;
pub use replays::push_matching;
pub use secrets::holds_sealed_secrets;
mod server_keys;
mod sessions;
mod subscribers;
mod sweep;
mod throughput;

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};

use super::backend::Backend;
use super::dialect::{Dialect, Query};
use super::records::*;
use super::sql_store::SqlStore;
use super::transactions::{Row, Transactions, TxFuture};
use super::{Sealer, StoreError};
use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;
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
pub struct Pools {
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

/// The SQLite store: [`SqlStore`] over SQLite's connections.
pub type SqliteStore = SqlStore<Pools>;

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
        super::sql_store::assemble(db.clone(), db, sealer, policy).await
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
    use crate::store::Store;
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

impl Backend for Pools {
    const CREATE_GROUPS: usize = 1;

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.readers).await?;
        Ok(())
    }

    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(clock::now())
    }

    async fn put_subscriber(
        &self,
        sealer: &Sealer,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        subscribers::put(self, sealer, put, now).await
    }

    async fn claim(
        &self,
        sealer: &Sealer,
        policy: &DestinationPolicy,
        request: ClaimRequest,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        claims::claim(self, sealer, policy, request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        renewals::renew(self, leases, until, now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        sweep::expire_deadlines(self, now, limit).await
    }
}
