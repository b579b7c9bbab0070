//! Durable storage of subscribers, jobs and attempts behind one trait, so SQLite (the
//! embedded default) and PostgreSQL serve the same API and workers.
//!
//! The interface is batch-shaped (docs/DESIGN.md §3): claims return batches, outcomes are
//! recorded for many jobs in one write, and creates take a batch in one transaction.
//! Every time-dependent call takes `now`; no implementation reads a clock.
//!
//! Layout: [`records`] holds what the store reads and writes, one subject per file.
//! Each subject (`subscribers`, `secrets`, `jobs`, `creates`, `attempts`, `claims`,
//! `outcomes`, `sweep`, `replays`, `figures`, `maintenance`, `events`) has a file here with what
//! both backends share — the rows it decodes and its algorithm, a plain function over
//! a small statement trait built on `Transactions` — and a file of the same name in
//! [`sqlite`] and [`postgres`] with that backend's SQL, as constants in its own
//! dialect, and its implementation of the trait. [`dialect`] builds the statements
//! written at run time; [`group_commit`] batches creates and outcomes; [`Wake`] wakes
//! this instance's worker when the store creates work.

mod attempts;
mod audit;
mod backend;
mod claims;
mod creates;
mod database_signals;
mod dead_letters;
mod decode;
mod deletions;
mod destinations;
pub mod dialect;
mod endpoints;
mod error;
mod event_types;
mod events;
mod figures;
pub mod group_commit;
mod health;
pub mod instances;
mod jobs;
pub mod key_file;
mod lite_rows;
mod maintenance;
mod outcomes;
pub mod postgres;
pub mod records;
pub mod replays;
mod schedule_periods;
mod schedules;
pub mod sealing;
mod secrets;
mod server_keys;
mod sessions;
pub mod sql_store;
pub mod sqlite;
mod subscribers;
mod sweep;
mod throughput;
mod transactions;
mod wake;

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use deletions::MOVE_BATCH as DELETION_MOVE_BATCH;
pub use error::StoreError;
pub use records::*;
pub use sealing::{Sealer, UnreadableSecret};
pub use wake::Wake;

use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::replay::{ReplayFilter, ReplayState};
use crate::domain::waiting::SubscriberLoad;

/// A shared handle to a store.
pub type SharedStore = Arc<dyn Store>;

/// A shared handle to the calls a delivery worker makes.
pub type SharedWorkerStore = Arc<dyn WorkerStore>;

/// Durable storage: the worker's calls ([`WorkerStore`]) and everything the API, the
/// console, the scheduler and maintenance read and write. All methods are safe to
/// call concurrently. [`sql_store::SqlStore`] is the one implementation.
#[async_trait]
pub trait Store: WorkerStore {
    /// Succeeds when the store answers a trivial query (readiness).
    async fn ping(&self) -> Result<(), StoreError>;

    /// The database server's clock, read as the call runs: the timeline that instances
    /// sharing the database work on (docs/DESIGN.md §12; `crate::clock_sync` measures
    /// this instance's offset to it). `None` for a store without a clock of its own:
    /// SQLite is embedded and reads this machine's clock, as the instance does. A store
    /// that wraps another forwards its store's.
    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError>;

    /// Creates the subscriber, or updates it keeping what `put` leaves out.
    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError>;

    /// One subscriber, or `None`.
    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError>;

    /// Rotates subscriber `rotation.subscriber_id`'s signing secret at `now`, in one
    /// transaction: `rotation.secret` becomes the current secret, and the secret that
    /// was current becomes the previous one, signing alongside until `now +
    /// rotation.grace_ms` (exclusive). Only one previous secret is kept: rotating again
    /// during a grace period drops the older one. With a grace of 0 no previous secret
    /// is kept. Both are written sealed when the store has a key (a sealed current
    /// secret moves as it is). `None` when the subscriber does not exist.
    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError>;

    /// Changes only the fields `patch` gives of subscriber `id` at `now`, in one
    /// transaction (a new URL assigns its destination again; `enabled: false` pauses it
    /// with reason `operator`, `true` clears the reason). `None` when it does not
    /// exist; nothing is written then.
    async fn patch_subscriber(
        &self,
        id: &str,
        patch: SubscriberPatch,
        now: Timestamp,
    ) -> Result<Option<Subscriber>, StoreError>;

    /// Enables the paused subscribers `selection` names at `now`, in one transaction;
    /// returns how many it enabled (those already enabled are not counted).
    /// [`StoreError::UnknownSubscriber`] names the first id that does not exist, and
    /// nothing is written then.
    async fn resume_subscribers(
        &self,
        selection: ResumeSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Pauses the enabled subscribers `selection` names at `now` (reason `operator`),
    /// in one transaction; returns how many it paused (those already paused are not
    /// counted). For [`PauseSelection::Ids`], [`StoreError::UnknownSubscriber`] names
    /// the first id that does not exist, and nothing is written then.
    async fn pause_subscribers(
        &self,
        selection: PauseSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Subscribers in id order, strictly after `page.after`.
    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError>;

    /// Creates the jobs in one transaction: all or nothing. A job whose (subscriber_id,
    /// event_id) exists with the same payload (as a JSON value) is not written and comes
    /// back as [`CreateOutcome::Existing`]; with a different payload the whole call fails
    /// with [`StoreError::PayloadConflict`]. Fails with
    /// [`StoreError::UnknownSubscriber`] when a subscriber does not exist. Either failure
    /// writes nothing. Outcomes are in the order of `jobs`.
    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError>;

    /// One job as read at `now` (see [`Job::as_of`]: a job whose lease has expired is
    /// `retrying`), or `None`.
    async fn get_job(&self, id: Uuid, now: Timestamp) -> Result<Option<Job>, StoreError>;

    /// Jobs matching `filter` as read at `now` (see [`Job::as_of`]: `state = retrying`
    /// includes the jobs whose lease has expired, `in_flight` excludes them), newest
    /// first (descending id), strictly older than `page.after`.
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<Job>, StoreError>;

    /// Applies an operator's `transition` (cancel, reschedule, retry now) to a waiting job, only if
    /// it is still as it was read (`seen`: same state, `scheduled` or `retrying`, and
    /// unchanged since): a job claimed meanwhile is left alone. A job read as
    /// `retrying` because its lease had expired must still have that expired lease at
    /// `now`; the write ends it (the worker's late result is then fenced out) and
    /// records its attempt as `unknown`. Returns whether it applied.
    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: crate::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// The attempt history of a job as read at `now`, oldest first: the attempt of a
    /// lease that has expired reads as `unknown` (docs/DESIGN.md §2.2).
    async fn list_attempts(&self, job_id: Uuid, now: Timestamp)
    -> Result<Vec<Attempt>, StoreError>;

    /// Records attempt results and the transitions they cause, in one write, each
    /// conditional on its lease: a stale token updates only the attempt row and
    /// yields [`Fenced::Late`]. Results are in the order of `records`.
    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError>;

    /// How busy subscriber `id` is at `now` (open attempts, attempts started in the
    /// last second) against its limits; `None` when it does not exist.
    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberLoad>, StoreError>;

    /// [`Store::subscriber_load`] of each subscriber of `ids` at `now`, in one read
    /// (the views of a group of creates); a subscriber that does not exist has no
    /// entry.
    async fn subscriber_loads(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, SubscriberLoad>, StoreError>;

    /// Destinations in key order, strictly after `page.after`, with their figures at
    /// `now`.
    async fn list_destinations(
        &self,
        page: PageRequest<String>,
        now: Timestamp,
    ) -> Result<Vec<DestinationView>, StoreError>;

    /// Destination `key` (normalised `host:port`) with its figures at `now`; `None`
    /// when no subscriber ever sent there.
    async fn get_destination(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError>;

    /// Applies an operator's change to destination `key` at `now` in one transaction
    /// and returns it as it then stands; `None` when it does not exist (nothing is
    /// written).
    async fn put_destination(
        &self,
        key: &str,
        put: DestinationPut,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError>;

    /// The gauges of docs/DESIGN.md §7 at `now`; `slo_ms` is the eligible → delivered objective.
    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError>;

    /// How many dead jobs `filter` matches, at most `max_jobs` (a replay's dry run;
    /// nothing changes).
    async fn count_replay_matches(
        &self,
        filter: &ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError>;

    /// Creates a replay in one transaction: snapshots up to `max_jobs` dead jobs that
    /// its filter matches, oldest dead first (`matched`). A replay that matches nothing
    /// is created `done`; otherwise it is `running` and workers advance it.
    async fn create_replay(&self, replay: NewReplay) -> Result<Replay, StoreError>;

    /// One replay with its progress, or `None`.
    async fn get_replay(&self, id: Uuid) -> Result<Option<Replay>, StoreError>;

    /// Stops a running replay (jobs already requeued stay requeued); one that has
    /// ended is left as it is. `None` when it does not exist.
    async fn cancel_replay(&self, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError>;

    // --- operator queries and retention (ops) ---

    /// Subscriber `id`'s figures at `now` (see [`SubscriberStats`]): its jobs per
    /// state (a job whose lease has expired counts as `retrying`), the earliest due
    /// time of its `scheduled`/`retrying` jobs due at `now`, its
    /// latest delivered attempt and its latest failed one (`retryable`, `terminal`,
    /// `blocked`), read in one snapshot; `None` when it does not exist.
    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError>;

    /// Deletes, with their attempts (and replay entries, by cascade), up to `limit` jobs
    /// in all: `delivered` and `cancelled` ones last updated before `finished_before`,
    /// then `dead` ones last updated before `dead_before` (each bound exclusive; `None`
    /// purges none of that kind), oldest first. A job in any other state is never
    /// deleted: the statement itself checks the state. Callers repeat while a call
    /// returns `limit` jobs.
    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError>;

    // --- events: affected events and an event's summary (issue #16 parts 1 and 2) ---

    /// The events with affected jobs as read at `now`, newest first (by their newest
    /// job's id, descending), strictly older than `page.after` (a newest job id), at
    /// most `page.limit`. A job is affected when it is `retrying` (an expired lease
    /// included), `dead` with `dead_at >= since` (but not for `subscriber_deleted`: an
    /// operator's deletion is not an incident), or `scheduled`, due and held back: its
    /// subscriber paused or at its `max_in_flight`, or its destination paused, its
    /// circuit open or at its limit (a subscriber's rate limit, a sub-second hold, is
    /// not counted). Each event comes with the counts of all its jobs per state; read in
    /// one snapshot.
    async fn list_affected_events(
        &self,
        since: Timestamp,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<AffectedEvent>, StoreError>;

    /// Every job of event `event_id` as read at `now`, in subscriber id order, with
    /// what holds back the due or `retrying` ones of enabled subscribers (their
    /// subscriber's load and destination; a `retrying` job's advice reads its
    /// destination even before it is due), read in one snapshot in a few grouped
    /// statements; `None` when no job has that event id.
    async fn event_jobs(
        &self,
        event_id: &str,
        now: Timestamp,
    ) -> Result<Option<EventJobs>, StoreError>;

    // --- issue #16 part 7: replays of a slice ---

    /// The replays in `state` (every state when `None`), newest first (descending
    /// UUIDv7 id), strictly older than `page.after`, at most `page.limit`.
    async fn list_replays(
        &self,
        state: Option<ReplayState>,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<Replay>, StoreError>;

    // --- subscriber health (issue #16 part 3) ---

    /// The health figures at `now` of the subscribers `ids` (see [`HealthFigures`]),
    /// by id, read in one snapshot; an id that does not exist is absent.
    async fn subscriber_health(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, HealthFigures>, StoreError>;

    /// The subscribers whose health at `now` is `status`, most `failing_jobs` (retrying
    /// plus dead in the last hour) first then by id, strictly after `page.after` (the
    /// count as read on the previous page and the id), at most `page.limit`.
    async fn list_subscribers_by_health(
        &self,
        status: crate::domain::health::HealthStatus,
        page: PageRequest<HealthCursor>,
        now: Timestamp,
    ) -> Result<Vec<SubscriberHealth>, StoreError>;

    // --- issue #16 parts 8 and 9: deleting subscribers, the audit trail ---

    /// Deletes subscriber `id` at `now`, both steps of docs/DESIGN.md §5.3.1: first
    /// ([`Store::begin_subscriber_deletion`]) its waiting jobs (`scheduled`,
    /// `retrying`, `in_flight`) end `dead` with reason `subscriber_deleted` (an attempt
    /// in flight is recorded `unknown`, and its worker's late result is fenced out),
    /// then its jobs and attempts move to a tombstone ([`crate::domain::tombstone`]) in
    /// batches of [`DELETION_MOVE_BATCH`], each its own transaction, and its row
    /// goes: its jobs stay readable by job and event id, and `id` may be created again
    /// as a new subscriber that inherits none of them. `None` when it does not exist
    /// (or is already being deleted); nothing is written then.
    async fn delete_subscriber(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError>;

    /// Deletes up to `limit` tombstones of subscribers deleted before `before` whose
    /// jobs retention has all purged; returns how many.
    async fn purge_tombstones(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError>;

    /// Records an operator action in the audit trail (docs/DESIGN.md §5.11), in its
    /// own write: begun (`status` `None`) before the action runs, or whole.
    async fn record_audit(&self, entry: NewAuditEntry) -> Result<(), StoreError>;

    /// Settles the begun audit entry `id` with its action's answer, or withdraws it
    /// when the request was refused; an entry already settled is left alone.
    async fn settle_audit(&self, id: Uuid, settlement: AuditSettlement) -> Result<(), StoreError>;

    /// Audit entries `filter` matches, newest first (descending id), strictly older
    /// than `page.after`.
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// Deletes up to `limit` audit entries recorded before `before`, oldest first;
    /// returns how many. Callers repeat while a call returns `limit`.
    async fn purge_audit(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError>;

    // --- issue #16 part 8, bounded deletes: a deletion's two steps (§5.3.1) ---

    /// Step 1 of deleting subscriber `id` at `now`, one short write transaction: its
    /// tombstone is inserted, its waiting jobs end `dead` (`subscriber_deleted`, an
    /// attempt in flight `unknown`, fenced as in [`Store::delete_subscriber`]), and
    /// its row is marked as being deleted: from then on it is not found (get, patch,
    /// stats, listings, new jobs, claims), and a `PUT` of `id` fails with
    /// [`StoreError::SubscriberBeingDeleted`] until step 2 ends. `None` when it does
    /// not exist (or is already being deleted); nothing is written then.
    async fn begin_subscriber_deletion(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError>;

    /// Step 2 of a deletion, one batch in one write transaction: moves at most `limit`
    /// (at least 1) of subscriber `id`'s jobs, then of its attempts, to its tombstone;
    /// when fewer than `limit` were left, deletes its row (`finished`). Callers repeat
    /// until `finished`. `None` when `id` is not being deleted (never was, or another
    /// caller finished it).
    async fn move_deleted_history(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Option<HistoryMoved>, StoreError>;

    /// Up to `limit` ids of subscribers being deleted (step 1 committed, step 2 not
    /// finished, e.g. after a crash), in id order.
    async fn deletions_in_progress(&self, limit: u32) -> Result<Vec<String>, StoreError>;

    // --- issue #19: the operator console's reads, heartbeats and sessions ---

    /// Records `beat` as this instance's heartbeat at `now` (inserting or replacing its
    /// row), and deletes the rows of instances not seen for
    /// [`instances::FORGET_AFTER_MS`], in one write.
    async fn record_heartbeat(&self, beat: Heartbeat, now: Timestamp) -> Result<(), StoreError>;

    /// Deletes instance `id`'s heartbeat row (it is stopping); nothing when absent.
    async fn forget_instance(&self, id: &str) -> Result<(), StoreError>;

    /// The instances whose latest heartbeat is at or after `since`, in id order.
    async fn live_instances(&self, since: Timestamp) -> Result<Vec<InstanceSeen>, StoreError>;

    /// Jobs accepted, delivered and dead per minute, for every minute from the one
    /// holding `since` to the one holding `now`, oldest first (0 counts included), read
    /// in one snapshot. `dead` counts the jobs dead now (a replayed job has left it).
    async fn jobs_per_minute(
        &self,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<MinuteCounts>, StoreError>;

    /// The dead jobs grouped by cause (dead reason, last error class and status): every
    /// cause, and the page of `limit` groups by cause and subscriber after the first
    /// `offset` (see [`DeadLetters`]), never silently capped: `total_groups` says how
    /// many there are.
    async fn dead_letters(&self, offset: u32, limit: u32) -> Result<DeadLetters, StoreError>;

    /// Records console session `id` as ended (logout) until `expires_at`, when it would
    /// have expired anyway; forgets the entries expired by `now`. A repeat changes
    /// nothing.
    async fn end_console_session(
        &self,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// True when console session `id` has been ended by [`Store::end_console_session`].
    async fn console_session_ended(&self, id: &str) -> Result<bool, StoreError>;

    /// Subscriber `subscriber_id`'s latest `limit` attempts, latest started first, each
    /// with its job's id and event id, as stored (an attempt whose lease has expired
    /// still reads `in_progress`: [`Store::list_attempts`] reads it as of a `now`).
    async fn recent_attempts(
        &self,
        subscriber_id: &str,
        limit: u32,
    ) -> Result<Vec<RecentAttempt>, StoreError>;

    // --- issue #20: event types and recurring schedules ---

    /// The ids of the subscribers (enabled or paused, not being deleted) subscribed to
    /// a pattern that matches event type `event_type` (docs/DESIGN.md §5.13), in id
    /// order, at most `limit`.
    async fn subscribers_of_event_type(
        &self,
        event_type: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// Creates schedule `put.definition.id` at `now` with cursor `put.next_period`, or
    /// replaces its definition in one statement, keeping its `created_at`, its last run
    /// and, unless `put.enabled_given`, its `enabled` (its last error is cleared). The
    /// cursor of an existing schedule restarts at `put.next_period` only when the put
    /// changes its cron, zone, interval or anchor, or enables it; otherwise it stays as
    /// stored (however a scheduler moved it meanwhile). Returns it as stored.
    ///
    /// # Errors
    /// [`StoreError::TooManySchedules`] when the put would create a schedule while
    /// `put.max_schedules` exist (counted in the put's transaction; nothing written).
    async fn put_schedule(&self, put: SchedulePut, now: Timestamp) -> Result<Schedule, StoreError>;

    /// One schedule, or `None`.
    async fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError>;

    /// Schedules in id order, strictly after `page.after`.
    async fn list_schedules(&self, page: PageRequest<String>) -> Result<Vec<Schedule>, StoreError>;

    /// Deletes schedule `id` (the jobs it created stay); whether it existed.
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError>;

    /// The enabled schedules whose cursor (`next_period`) is at or before `until` and
    /// that no scheduler holds at `now` ([`Store::lease_schedule`]), earliest first, at
    /// most `limit`.
    async fn due_schedules(
        &self,
        until: Timestamp,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<Schedule>, StoreError>;

    /// Holds schedule `id` for this scheduler until `until`, if its cursor is still as
    /// `seen` and no scheduler holds it at `now`; whether it is held. Other instances
    /// pass a held schedule by; [`Store::advance_schedule`] ends the hold, and a hold
    /// whose scheduler died ends at `until`.
    async fn lease_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Applies a pass of the scheduler to schedule `id` and ends its hold, only if its
    /// cursor is still as `seen` (its version and position: a put that restarted it,
    /// or another instance's pass, meanwhile leaves it alone); whether it applied.
    async fn advance_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        advance: ScheduleAdvance,
    ) -> Result<bool, StoreError>;

    /// Writes `jobs`, the jobs of one period of a schedule (one per target, as one
    /// create request: all or nothing, in key order), and with `fence` moves the
    /// schedule's cursor past the period, in one transaction: only if the schedule's
    /// cursor and version are still `fence.seen` and its hold still ends at
    /// `fence.held_until` (no other scheduler took it over, no put restarted it).
    /// Otherwise nothing is written and `None` is returned, so a period is never both
    /// made by one scheduler and passed by (skipped) by another (docs/DESIGN.md
    /// §5.14). Without a fence (a manual run), the jobs alone. A job whose key exists
    /// counts as the period's whatever its payload (made before the schedule's payload
    /// changed); a subscriber that no longer exists gets no job (no outcome).
    async fn make_schedule_period(
        &self,
        fence: Option<PeriodFence>,
        jobs: Vec<NewJob>,
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError>;

    /// The server's key named `name` (standard base64): the one stored, or `candidate`
    /// stored at `now` when none is, the first offer to commit winning; the same for
    /// every instance on the database, across restarts (the page cursors' key,
    /// docs/DESIGN.md §5.1).
    async fn server_key(
        &self,
        name: &str,
        candidate: String,
        now: Timestamp,
    ) -> Result<String, StoreError>;

    /// Another schedule whose periods could take the jobs' keys of `definition`'s (the
    /// same event id template, and the same subscriber or an event type on either
    /// side), if one exists: the first in id order.
    async fn schedule_sharing_template(
        &self,
        definition: &ScheduleDefinition,
    ) -> Result<Option<String>, StoreError>;

    /// Records a manual run of schedule `id` as its last run, unless a later period's
    /// is recorded; whether it was recorded.
    async fn record_schedule_run(&self, id: &str, run: ScheduleRun) -> Result<bool, StoreError>;
}

/// The calls a delivery worker makes, and nothing else (docs/DESIGN.md §8): claim
/// due jobs under leases, renew the leases, record each attempt's outcome fenced by
/// its lease, note long attempts, sweep deadlines, pace the replays, and learn when
/// there is work ([`WorkerStore::wake`], [`WorkerStore::next_wake_at`],
/// [`WorkerStore::listen_for_jobs`]). The worker and the tests' fault-injecting
/// wrapper depend on this alone. All methods are safe to call concurrently.
#[async_trait]
pub trait WorkerStore: Send + Sync + std::fmt::Debug + 'static {
    /// Atomically selects up to `limit` due jobs (`scheduled`/`retrying` whose due time
    /// has come, and `in_flight` whose lease expired) of enabled subscribers, before
    /// their deadline, oldest due first; marks them `in_flight` under a new lease (the
    /// fencing token increases); persists an `in_progress` attempt row for each; and
    /// returns them. The attempt of an expired lease is recorded as `unknown`; a job
    /// whose expired lease was on its last allowed attempt is left to
    /// [`WorkerStore::expire_deadlines`] instead.
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError>;

    /// Extends the leases to `until`. The result says, per lease in order, whether it
    /// was still held (the job in flight under that token).
    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError>;

    /// Records one attempt's result as [`Store::record_outcomes`] does, group-committed
    /// with the outcomes recorded meanwhile: at most 256 in one write, one write at a
    /// time; a group is written at the latest `now` among its records. Returns this
    /// record's own result.
    async fn record_outcome(
        &self,
        record: OutcomeRecord,
        now: Timestamp,
    ) -> Result<Fenced, StoreError>;

    /// Notes that the attempt under `lease` has been open for `--long-attempt-ms`
    /// without an answer, at `now`: its subscriber's endpoint counts as long-running
    /// from then on (docs/DESIGN.md §15.2), until its next result sets that from its
    /// typical duration again. Group-committed with the notes made meanwhile (at most
    /// 512 in one write, one write at a time). Fenced by the lease: once the attempt's
    /// outcome is recorded, its lease taken over, or its subscriber deleted (the id
    /// registered again is a new endpoint), the note marks nothing and is no error.
    async fn note_long_attempt(&self, lease: LeaseRef, now: Timestamp) -> Result<(), StoreError>;

    /// The wake-ups of this instance's worker: the store wakes it when a job it
    /// creates is due before the worker would wake, and when a replay is created; the
    /// API uses it too (a job made due, a subscriber resumed, a destination changed;
    /// docs/DESIGN.md §3.3). A store that wraps another forwards its store's.
    fn wake(&self) -> Arc<Wake>;

    /// When a worker next has something to do, as of `now`: a running replay's next
    /// burst, a job coming due, a
    /// subscriber's limits letting a claim take its due work (never while it is at
    /// `max_in_flight`: a finished attempt frees it), a lease expiring, or a waiting
    /// job's deadline; `None` when idle.
    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError>;

    /// Wakes `wake` whenever another instance creates a job, until `stop`. A backend
    /// without such notifications returns at once (workers then rely on their poll).
    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        let _ = (wake, stop);
    }

    /// Advances the running replays whose next burst is due at `now`: each requeues up
    /// to its token bucket's allowance (see [`crate::domain::replay::Pacing`]) of its
    /// next snapshotted jobs that are still `dead` — back to `scheduled`, due now, with
    /// a deadline of now + its `ttl_ms` and a fresh attempt budget — skips the others,
    /// and ends (`done`) when none is left. The bucket and the progress are stored in
    /// the same transaction, so instances sharing the store keep one pace and a restart
    /// resumes where it stopped.
    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError>;

    /// Moves up to `limit` jobs to `dead`: those whose deadline has passed
    /// (`scheduled`, `retrying`, and `in_flight` with an expired lease) with
    /// `deadline_exceeded`, and those whose lease expired on their last allowed attempt
    /// with `max_attempts`; the expired leases of jobs whose subscriber or destination
    /// is paused, or whose destination's circuit is not closed (open, half-open, or
    /// held open), go back to `retrying`, due now. An expired lease's attempt is recorded as `unknown`.
    async fn expire_deadlines(&self, now: Timestamp, limit: u32)
    -> Result<ExpiredJobs, StoreError>;
}

/// Opens the store that `database_url` names and brings its schema up to date;
/// subscriber secrets are written as plaintext (see [`open_with_sealer`]).
///
/// `sqlite://path` (created when missing) selects SQLite, `postgres://…` PostgreSQL.
/// Errors never include the URL's credentials.
pub async fn open(database_url: &str) -> Result<SharedStore, StoreError> {
    connect(
        database_url,
        Sealer::plaintext(),
        DestinationPolicy::default(),
        false,
    )
    .await
}

fn log_sealed(count: usize) {
    if count > 0 {
        tracing::info!(
            subscribers = count,
            "sealed the plaintext signing secrets with the secret key"
        );
    }
}

/// [`open`], with subscriber secrets written and read through `sealer`: with a key,
/// secrets stored in plaintext are sealed at once; a database whose sealed secrets this
/// sealer cannot open is refused ([`StoreError::Config`]), so a server with a missing or
/// wrong key never starts on it.
pub async fn open_with_sealer(
    database_url: &str,
    sealer: Sealer,
) -> Result<SharedStore, StoreError> {
    connect(database_url, sealer, DestinationPolicy::default(), true).await
}

/// [`open_with_sealer`] under `policy` (the destinations' default limit and circuit
/// breaker, docs/DESIGN.md §15): what a server opens.
pub async fn open_configured(
    database_url: &str,
    sealer: Sealer,
    policy: DestinationPolicy,
) -> Result<SharedStore, StoreError> {
    connect(database_url, sealer, policy, true).await
}

/// [`open_with_sealer`] without its start-up check of the stored secrets: for tests
/// and tools that open a database they know holds other keys' secrets.
pub async fn open_with_sealer_unchecked(
    database_url: &str,
    sealer: Sealer,
) -> Result<SharedStore, StoreError> {
    connect(database_url, sealer, DestinationPolicy::default(), false).await
}

/// Opens and migrates; with `check_secrets`, checks (and seals) the stored secrets.
async fn connect(
    database_url: &str,
    sealer: Sealer,
    policy: DestinationPolicy,
    check_secrets: bool,
) -> Result<SharedStore, StoreError> {
    if database_url.starts_with("sqlite:") {
        let store = sqlite::SqliteStore::open_with(database_url, sealer, policy).await?;
        if check_secrets {
            log_sealed(sql_store::prepare_secrets(&store).await?);
        }
        return Ok(Arc::new(store));
    }
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        let store = postgres::PostgresStore::open_with(database_url, sealer, policy).await?;
        if check_secrets {
            log_sealed(sql_store::prepare_secrets(&store).await?);
        }
        return Ok(Arc::new(store));
    }
    Err(StoreError::Config(
        "--database-url must start with sqlite:// (e.g. sqlite://deferhook.db) or \
         postgres:// (e.g. postgres://user@127.0.0.1:5432/deferhook)"
            .into(),
    ))
}
