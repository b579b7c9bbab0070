//! The PostgreSQL store: production, and several instances sharing one database.
//!
//! Claims use `FOR UPDATE SKIP LOCKED` in one statement that marks and returns the
//! batch, so concurrent workers take disjoint jobs without waiting on each other. A
//! created job is announced with `NOTIFY deferhook_jobs` (sent at commit), which wakes
//! the workers of every instance; polling stays as the fallback. Lost connections are
//! replaced by the pool; calls made while the server is down fail as
//! [`StoreError::Unavailable`].
//!
//! A transaction that waits for row locks takes them in one order: subscribers
//! (ascending id), jobs (ascending id), attempts (ascending job, number), destinations
//! (ascending key); claims and the deadline sweep never wait for a subscriber,
//! destination or job row (`SKIP LOCKED`). So the writers of the delivery path cannot
//! deadlock (docs/DESIGN.md §3, lock order, which lists the rarer paths left).
//!
//! Each file holds one subject's statements, as constants in PostgreSQL's dialect;
//! the SQLite store has the same files.
//!
//! In-flight rows are read on two partial indexes that only their own reads can use
//! (docs/DESIGN.md §3.6): `jobs_in_flight_subscriber` (a statement names
//! `subscriber_id`, by `=` or by `IS NOT NULL`, always true, when it reads every
//! in-flight row) and `jobs_in_flight_destination` (a statement names `destination`).

mod attempts;
mod audit;
mod binds;
mod claims;
mod clock;
mod creates;
mod dead_letters;
mod deletions;
mod destinations;
mod endpoints;
mod event_types;
mod events;
mod figures;
mod health;
mod instances;
mod jobs;
mod maintenance;
pub mod outcomes;
mod pooler;
mod renewals;
mod replays;
mod schedules;
mod secrets;
mod server_keys;
mod sessions;
mod subscribers;
mod sweep;
mod throughput;
pub(crate) mod writable;

/// The statements of the claim, the next wake-up and the figures that read in-flight or
/// due rows, with their parameter types as bound: `(name, parameter types,
/// statement)`. `tests/store/pg_plans.rs` pins their generic plans on a new database:
/// each counts a subscriber's open requests on `jobs_in_flight_subscriber` and a
/// destination's on `jobs_in_flight_destination`, never one on the other's index, and
/// finds a destination's due work from its subscribers (`subscribers_destination`).
#[doc(hidden)]
pub const PINNED_READS: &[(&str, &str, &str)] = &[
    (
        "claim: lock subscribers",
        "bigint, bigint, text[], bigint[], bigint[]",
        claims::LOCK_SUBSCRIBERS,
    ),
    (
        "claim",
        "bigint, bigint, text, bigint, text, text[], text[], bigint[], bigint[]",
        claims::CLAIM,
    ),
    (
        "claim: hold due destinations",
        "bigint",
        destinations::HOLD_DUE,
    ),
    (
        "claim: held loads",
        "bigint, text[], bigint",
        destinations::HELD_LOADS,
    ),
    (
        "next wake-up: due destinations",
        "bigint, bigint",
        destinations::DUE,
    ),
    ("next wake-up", "bigint, jsonb", figures::NEXT_WAKE),
    (
        "gauges",
        "bigint, bigint",
        <PgPool as FigureStatements>::GAUGES,
    ),
    (
        "expired leases",
        "bigint",
        <PgPool as FigureStatements>::EXPIRED_LEASES_ALL,
    ),
    (
        "deadline sweep",
        "bigint, bigint",
        <PgPool as SweepStatements>::OVERDUE,
    ),
    (
        "affected events",
        "bigint, bigint, text, text, bigint",
        <PgPool as EventStatements>::AFFECTED,
    ),
];

/// Every statement of the delivery path that reads or writes `jobs` or `attempts`
/// (claims, outcomes, lease renewals, the sweep, the next wake-up, replays, long
/// attempts): `(name, statement)`. They run on the worker pool, whose sessions plan
/// generically (`WORKER_PLANS`), so PostgreSQL makes each one's plan at its first run,
/// on whatever the tables then hold, and keeps it until `ANALYZE` (or DDL).
/// `tests/store/pg_plans.rs` prepares each on a new, empty database and pins that
/// none reads `jobs` or `attempts` whole.
#[doc(hidden)]
pub const WORKER_STATEMENTS: &[(&str, &str)] = &[
    ("claim: hold due destinations", destinations::HOLD_DUE),
    ("claim: held loads", destinations::HELD_LOADS),
    ("claim: lock subscribers", claims::LOCK_SUBSCRIBERS),
    ("claim", claims::CLAIM),
    (
        "claim: jobs in flight without a destination",
        <PgPool as DestinationStatements>::ASSIGN_IN_FLIGHT,
    ),
    ("next wake-up", figures::NEXT_WAKE),
    ("next wake-up: due destinations", destinations::DUE),
    ("sweep: overdue", <PgPool as SweepStatements>::OVERDUE),
    (
        "sweep: mark unknown",
        <PgPool as SweepStatements>::MARK_UNKNOWN,
    ),
    ("sweep: expire", <PgPool as SweepStatements>::EXPIRE),
    ("renewal", renewals::RENEW),
    ("outcome: lock subscribers", outcomes::LOCK_SUBSCRIBERS),
    ("outcome", outcomes::APPLY_TRANSITIONS),
    (
        "outcome: pause",
        <PgPool as OutcomeStatements>::PAUSE_SUBSCRIBER,
    ),
    (
        "outcome: destination spread",
        <PgPool as DestinationStatements>::SPREAD,
    ),
    ("long attempts", <PgPool as EndpointStatements>::MARK_LONG),
    ("replays: due", <PgPool as ReplayStatements>::DUE),
    (
        "replays: candidates",
        <PgPool as ReplayStatements>::CANDIDATES,
    ),
    (
        "replays: last burst waiting",
        <PgPool as ReplayStatements>::LAST_BURST_WAITING,
    ),
    ("replays: requeue", <PgPool as ReplayStatements>::REQUEUE),
];

use crate::store::destinations::DestinationStatements;
use crate::store::endpoints::EndpointStatements;
use crate::store::events::EventStatements;
use crate::store::figures::FigureStatements;
use crate::store::outcomes::OutcomeStatements;
use crate::store::replays::ReplayStatements;
use crate::store::sweep::SweepStatements;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::backend::Backend;
use super::dialect::{Dialect, Query};
use super::records::*;
use super::sql_store::SqlStore;
use super::transactions::{Row, Transactions, TxFuture};
use super::{Sealer, StoreError};
use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;

/// The channel a job creation is announced on.
pub const JOBS_CHANNEL: &str = "deferhook_jobs";
/// Connections per instance for the API, operators' calls and retention.
const MAX_CONNECTIONS: u32 = 16;
/// Connections per instance for the delivery path (claims, outcomes, renewals, the
/// sweep, the next wake-up, replays): each of its steps runs one at a time, so a few
/// suffice. Their sessions plan with `plan_cache_mode = force_generic_plan`.
const WORKER_CONNECTIONS: u32 = 6;
/// The delivery path's session setting, run once when each of its sessions opens:
/// every statement runs its generic plan. With array and JSON parameters PostgreSQL
/// judged a custom plan cheaper on almost every run and planned the claim's
/// statements, the next wake-up and the sweep anew each time (more database CPU than
/// running them, issue #18 step 3 and "where it ends"); their generic plans are pinned
/// on a new database by `tests/store/pg_plans.rs`, and a setting of the session costs
/// no statement per claim (a `SET LOCAL` per claim was one). A `SET`, not the startup
/// parameter `options`: PgBouncer (session mode) refuses unknown startup parameters.
const WORKER_PLANS: &str = "SET plan_cache_mode = force_generic_plan";
/// Group commits of creates running at once, each on its own connection: PostgreSQL
/// flushes concurrent commits together, so a few groups overlap their round trips.
const CREATE_GROUPS_AT_ONCE: usize = 4;
/// How long a call waits for a connection before the store reports itself unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Announces new work to the workers of every instance (delivered at commit).
const NOTIFY: &str = "SELECT pg_notify($1, '')";

/// An open PostgreSQL transaction.
type Tx = sqlx::Transaction<'static, Postgres>;

impl Transactions for PgPool {
    type Tx = Tx;
    const DIALECT: Dialect = Dialect::Postgres;

    async fn transaction<R, F>(&self, body: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(&'a mut Tx) -> TxFuture<'a, R> + Send + 'static,
    {
        let mut tx = self.begin().await?;
        let result = body(&mut tx).await?;
        tx.commit().await?;
        Ok(result)
    }

    async fn snapshot(&self) -> Result<Tx, StoreError> {
        Ok(self
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?)
    }

    async fn commit(tx: Tx) -> Result<(), StoreError> {
        Ok(tx.commit().await?)
    }

    async fn announce(tx: &mut Tx) -> Result<(), StoreError> {
        sqlx::query(NOTIFY)
            .bind(JOBS_CHANNEL)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn execute(tx: &mut Tx, query: Query) -> Result<u64, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_with(sql, arguments)
            .execute(&mut **tx)
            .await?
            .rows_affected())
    }

    async fn fetch_all<T: Row>(tx: &mut Tx, query: Query) -> Result<Vec<T>, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_all(&mut **tx)
            .await?)
    }

    async fn fetch_optional<T: Row>(tx: &mut Tx, query: Query) -> Result<Option<T>, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_optional(&mut **tx)
            .await?)
    }

    async fn fetch_one<T: Row>(tx: &mut Tx, query: Query) -> Result<T, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_one(&mut **tx)
            .await?)
    }

    async fn write_alone(&self, query: Query) -> Result<u64, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_with(sql, arguments)
            .execute(self)
            .await?
            .rows_affected())
    }

    async fn read_all<T: Row>(&self, query: Query) -> Result<Vec<T>, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments).fetch_all(self).await?)
    }

    async fn read_optional<T: Row>(&self, query: Query) -> Result<Option<T>, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments)
            .fetch_optional(self)
            .await?)
    }

    async fn read_one<T: Row>(&self, query: Query) -> Result<T, StoreError> {
        let (sql, arguments) = binds::bound(query)?;
        Ok(sqlx::query_as_with(sql, arguments).fetch_one(self).await?)
    }
}

/// The PostgreSQL store: [`SqlStore`] over a connection pool.
pub type PostgresStore = SqlStore<PgPool>;

/// The connection options `url` gives, without the `extra_float_digits` start-up
/// parameter (PgBouncer refuses it unless told to ignore it; PostgreSQL 12 and later
/// print floats exactly without it). Errors never include the URL.
fn connect_options(url: &str) -> Result<PgConnectOptions, StoreError> {
    let options: PgConnectOptions = url.parse().map_err(|_| {
        StoreError::Config(
            "--database-url is not a PostgreSQL URL (postgres://user@host:port/database)".into(),
        )
    })?;
    Ok(options.extra_float_digits(None))
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and applies the migrations of
    /// `migrations/postgres` not applied yet (sqlx takes an advisory lock, so instances
    /// starting together are safe); subscriber secrets are written and read through
    /// `sealer`, under the default [`DestinationPolicy`]. A URL leading to a pooler in
    /// transaction mode is refused first ([`StoreError::Config`], naming the setting to
    /// use). Errors never include the URL (it may carry a password).
    pub async fn open(url: &str, sealer: Sealer) -> Result<Self, StoreError> {
        Self::open_with(url, sealer, DestinationPolicy::default()).await
    }

    /// [`PostgresStore::open`] under `policy`; subscribers stored before destinations
    /// existed are assigned theirs.
    pub async fn open_with(
        url: &str,
        sealer: Sealer,
        policy: DestinationPolicy,
    ) -> Result<Self, StoreError> {
        let options = connect_options(url)?;
        pooler::refuse_transaction_pooling(&options).await?;
        let db = writable::checked(PgPoolOptions::new(), None)
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        sqlx::migrate!("./migrations/postgres").run(&db).await?;
        let worker = writable::checked(PgPoolOptions::new(), Some(WORKER_PLANS))
            .max_connections(WORKER_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options);
        super::sql_store::assemble(db, worker, sealer, policy).await
    }
}

impl Backend for PgPool {
    const CREATE_GROUPS: usize = CREATE_GROUPS_AT_ONCE;

    async fn ping(&self) -> Result<(), StoreError> {
        if writable::cancelled_recently() {
            return Err(StoreError::Unavailable(writable::CANCELLED_MESSAGE.into()));
        }
        let mut conn = tokio::time::timeout(writable::PING_ACQUIRE_WAIT, self.acquire())
            .await
            .map_err(|_| StoreError::Unavailable(writable::NO_SESSION_MESSAGE.into()))??;
        if writable::can_write(&mut conn).await? {
            Ok(())
        } else {
            Err(StoreError::Unavailable(writable::READ_ONLY_MESSAGE.into()))
        }
    }

    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(Some(clock::now(self).await?))
    }

    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        let mut pause = Duration::from_millis(100);
        while !stop.is_cancelled() {
            let listening = forward_notifications(self, &wake);
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
