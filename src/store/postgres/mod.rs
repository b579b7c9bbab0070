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
    ("gauges", "bigint, bigint", figures::GAUGES),
    ("expired leases", "bigint", figures::EXPIRED_LEASES_ALL),
    ("deadline sweep", "bigint, bigint", sweep::OVERDUE),
    (
        "affected events",
        "bigint, bigint, text, text, bigint",
        events::AFFECTED,
    ),
];

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
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

/// The channel a job creation is announced on.
pub const JOBS_CHANNEL: &str = "deferhook_jobs";
/// Connections per instance.
const MAX_CONNECTIONS: u32 = 16;
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

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    db: PgPool,
    sealer: Sealer,
    /// The destinations' default limit and circuit breaker.
    policy: DestinationPolicy,
    /// Creates, group-committed over a few connections at once.
    creates: GroupCommit<Vec<NewJob>, Created>,
    /// Outcomes recorded one by one, group-committed one group at a time.
    outcomes: GroupCommit<(OutcomeRecord, Timestamp), Fenced>,
    /// Long attempts noted one by one, group-committed one group at a time.
    long_attempts: GroupCommit<(LeaseRef, Timestamp), ()>,
    wake: Arc<Wake>,
}

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
        let db = writable::checked(PgPoolOptions::new())
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        sqlx::migrate!("./migrations/postgres").run(&db).await?;
        shared::destinations::backfill(&db, crate::domain::Clock::now(&crate::domain::SystemClock))
            .await?;
        let wake = Wake::new();
        Ok(PostgresStore {
            creates: shared::creates::spawn(db.clone(), CREATE_GROUPS_AT_ONCE, wake.clone()),
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

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> Result<(), StoreError> {
        if writable::cancelled_recently() {
            return Err(StoreError::Unavailable(writable::CANCELLED_MESSAGE.into()));
        }
        let mut conn = tokio::time::timeout(writable::PING_ACQUIRE_WAIT, self.db.acquire())
            .await
            .map_err(|_| StoreError::Unavailable(writable::NO_SESSION_MESSAGE.into()))??;
        if writable::can_write(&mut conn).await? {
            Ok(())
        } else {
            Err(StoreError::Unavailable(writable::READ_ONLY_MESSAGE.into()))
        }
    }

    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(Some(clock::now(&self.db).await?))
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

    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        let mut pause = Duration::from_millis(100);
        while !stop.is_cancelled() {
            let listening = forward_notifications(&self.db, &wake);
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
