//! The one implementation of [`Store`]: [`SqlStore`], generic over a [`Backend`]. Each
//! call is written here once, over the shared algorithms of this module's siblings
//! (`subscribers`, `jobs`, `claims`, …), which run a backend's statements through its
//! [`Transactions`](super::transactions::Transactions); what really differs between
//! SQLite and PostgreSQL is the backend's (see [`Backend`]).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::backend::Backend;
use super::creates::Created;
use super::group_commit::GroupCommit;
use super::records::*;
use super::{Sealer, Store, StoreError, Wake, WorkerStore};
use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::replay::{ReplayFilter, ReplayState};
use crate::domain::waiting::SubscriberLoad;

/// A store over backend `B` (SQLite's connections or PostgreSQL's pool): the backend,
/// the sealer of signing secrets, the destinations' default policy, and the group
/// commits of creates, outcomes and long-attempt notes running on it.
#[derive(Debug, Clone)]
pub struct SqlStore<B> {
    /// The backend's connections.
    pub(in crate::store) db: B,
    /// The connections of the delivery path (claims, outcomes, lease renewals, the
    /// sweep, the next wake-up, replays, long-attempt notes): on PostgreSQL a pool of
    /// its own whose sessions use generic plans (docs/DESIGN.md §3.6); on SQLite the
    /// same connections as `db`.
    pub(in crate::store) worker: B,
    sealer: Sealer,
    /// The destinations' default limit and circuit breaker.
    policy: DestinationPolicy,
    /// Creates, group-committed ([`Backend::CREATE_GROUPS`] groups at once).
    creates: GroupCommit<Vec<NewJob>, Created>,
    /// Outcomes recorded one by one, group-committed one group at a time.
    outcomes: GroupCommit<(OutcomeRecord, Timestamp), Fenced>,
    /// Long attempts noted one by one, group-committed one group at a time.
    long_attempts: GroupCommit<(LeaseRef, Timestamp), ()>,
    wake: Arc<Wake>,
}

/// The store over `db` (and `worker` for the delivery path), opened and migrated:
/// assigns destinations to subscribers stored before destinations existed, then starts
/// the group commits.
pub(in crate::store) async fn assemble<B: Backend>(
    db: B,
    worker: B,
    sealer: Sealer,
    policy: DestinationPolicy,
) -> Result<SqlStore<B>, StoreError> {
    super::destinations::backfill(&db, crate::domain::Clock::now(&crate::domain::SystemClock))
        .await?;
    let wake = Wake::new();
    Ok(SqlStore {
        creates: super::creates::spawn(db.clone(), B::CREATE_GROUPS, wake.clone()),
        outcomes: super::outcomes::spawn(worker.clone(), policy),
        long_attempts: super::endpoints::spawn_long_attempts(worker.clone()),
        db,
        worker,
        sealer,
        policy,
        wake,
    })
}

/// Checks the stored signing secrets against `store`'s sealer and seals the plaintext
/// ones when it has a key (see [`crate::store::sealing::Sealer::check_stored`]): fails
/// when sealed secrets do not open. Returns how many subscribers were sealed.
pub(in crate::store) async fn prepare_secrets<B: Backend>(
    store: &SqlStore<B>,
) -> Result<usize, StoreError> {
    super::secrets::prepare(&store.db, &store.sealer).await
}

#[async_trait]
impl<B: Backend> Store for SqlStore<B> {
    async fn ping(&self) -> Result<(), StoreError> {
        self.db.ping().await
    }

    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        self.db.database_clock().await
    }

    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        self.db.put_subscriber(&self.sealer, put, now).await
    }

    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        super::subscribers::rotate_secret(&self.db, &self.sealer, rotation, now).await
    }

    async fn patch_subscriber(
        &self,
        id: &str,
        patch: SubscriberPatch,
        now: Timestamp,
    ) -> Result<Option<Subscriber>, StoreError> {
        super::subscribers::patch(&self.db, id, patch, now).await
    }

    async fn resume_subscribers(
        &self,
        selection: ResumeSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        super::subscribers::resume(&self.db, selection, now).await
    }

    async fn pause_subscribers(
        &self,
        selection: PauseSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        super::subscribers::pause(&self.db, selection, now).await
    }

    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        super::subscribers::get(&self.db, id).await
    }

    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        super::subscribers::list(&self.db, page).await
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        self.creates.submit(jobs).await
    }

    async fn get_job(&self, id: Uuid, now: Timestamp) -> Result<Option<Job>, StoreError> {
        super::jobs::get(&self.db, id, now).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<Job>, StoreError> {
        super::jobs::list(&self.db, filter, page, now).await
    }

    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: crate::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        super::jobs::transition_waiting(&self.db, id, seen, transition, now).await
    }

    async fn list_attempts(
        &self,
        job_id: Uuid,
        now: Timestamp,
    ) -> Result<Vec<Attempt>, StoreError> {
        super::attempts::list(&self.db, job_id, now).await
    }

    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        super::outcomes::record(&self.db, records, now, &self.policy).await
    }

    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberLoad>, StoreError> {
        let mut loads = self.subscriber_loads(&[id.to_owned()], now).await?;
        Ok(loads.remove(id))
    }

    async fn subscriber_loads(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, SubscriberLoad>, StoreError> {
        super::figures::subscriber_loads(&self.db, ids, now, &self.policy).await
    }

    async fn list_destinations(
        &self,
        page: PageRequest<String>,
        now: Timestamp,
    ) -> Result<Vec<DestinationView>, StoreError> {
        super::destinations::list(&self.db, page, now, &self.policy).await
    }

    async fn get_destination(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        super::destinations::get(&self.db, key, now, &self.policy).await
    }

    async fn put_destination(
        &self,
        key: &str,
        put: DestinationPut,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        super::destinations::put(&self.db, key, put, now, &self.policy).await
    }

    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        super::figures::gauges(&self.db, now, slo_ms, &self.policy).await
    }

    async fn count_replay_matches(
        &self,
        filter: &ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        super::replays::count_matches(&self.db, filter, max_jobs).await
    }

    async fn create_replay(&self, replay: NewReplay) -> Result<Replay, StoreError> {
        super::replays::create(&self.db, &self.wake, replay).await
    }

    async fn get_replay(&self, id: Uuid) -> Result<Option<Replay>, StoreError> {
        super::replays::get(&self.db, id).await
    }

    async fn cancel_replay(&self, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
        super::replays::cancel(&self.db, id, now).await
    }

    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        super::figures::subscriber_stats(&self.db, id, now).await
    }

    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        super::maintenance::purge_finished(&self.db, finished_before, dead_before, limit).await
    }

    // --- events: affected events and an event's summary (issue #16 parts 1 and 2) ---

    async fn list_affected_events(
        &self,
        since: Timestamp,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<AffectedEvent>, StoreError> {
        super::events::list_affected(&self.db, since, page, now, &self.policy).await
    }

    async fn event_jobs(
        &self,
        event_id: &str,
        now: Timestamp,
    ) -> Result<Option<EventJobs>, StoreError> {
        super::events::event_jobs(&self.db, event_id, now, &self.policy).await
    }

    // --- issue #16 part 7: replays of a slice ---

    async fn list_replays(
        &self,
        state: Option<ReplayState>,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<Replay>, StoreError> {
        super::replays::list(&self.db, state, page).await
    }

    // --- subscriber health (issue #16 part 3) ---

    async fn subscriber_health(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, HealthFigures>, StoreError> {
        super::health::figures(&self.db, ids, now, &self.policy).await
    }

    async fn list_subscribers_by_health(
        &self,
        status: crate::domain::health::HealthStatus,
        page: PageRequest<HealthCursor>,
        now: Timestamp,
    ) -> Result<Vec<SubscriberHealth>, StoreError> {
        super::health::list_by_health(&self.db, status, page, now, &self.policy).await
    }

    // --- issue #16 parts 8 and 9: deleting subscribers, the audit trail ---

    async fn delete_subscriber(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        super::deletions::delete(&self.db, id, now).await
    }

    async fn purge_tombstones(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        super::deletions::purge_tombstones(&self.db, before, limit).await
    }

    async fn record_audit(&self, entry: NewAuditEntry) -> Result<(), StoreError> {
        super::audit::insert(&self.db, entry).await
    }

    async fn settle_audit(&self, id: Uuid, settlement: AuditSettlement) -> Result<(), StoreError> {
        super::audit::settle(&self.db, id, settlement).await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        super::audit::list(&self.db, filter, page).await
    }

    async fn purge_audit(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        super::audit::purge(&self.db, before, limit).await
    }

    // --- issue #16 part 8, bounded deletes: a deletion's two steps (§5.3.1) ---

    async fn begin_subscriber_deletion(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        super::deletions::begin(&self.db, id, now).await
    }

    async fn move_deleted_history(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Option<HistoryMoved>, StoreError> {
        super::deletions::move_batch(&self.db, id, limit).await
    }

    async fn deletions_in_progress(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        super::deletions::in_progress(&self.db, limit).await
    }

    // --- issue #19: the operator console's reads, heartbeats and sessions ---

    async fn record_heartbeat(&self, beat: Heartbeat, now: Timestamp) -> Result<(), StoreError> {
        super::instances::record(&self.db, beat, now).await
    }

    async fn forget_instance(&self, id: &str) -> Result<(), StoreError> {
        super::instances::forget(&self.db, id).await
    }

    async fn live_instances(&self, since: Timestamp) -> Result<Vec<InstanceSeen>, StoreError> {
        super::instances::live(&self.db, since).await
    }

    async fn jobs_per_minute(
        &self,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<MinuteCounts>, StoreError> {
        super::throughput::per_minute(&self.db, since, now).await
    }

    async fn dead_letters(&self, offset: u32, limit: u32) -> Result<DeadLetters, StoreError> {
        super::dead_letters::read(&self.db, offset, limit).await
    }

    async fn end_console_session(
        &self,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        super::sessions::end(&self.db, id, expires_at, now).await
    }

    async fn server_key(
        &self,
        name: &str,
        candidate: String,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        super::server_keys::get_or_make(&self.db, name, candidate, now).await
    }

    async fn console_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        super::sessions::ended(&self.db, id).await
    }

    async fn recent_attempts(
        &self,
        subscriber_id: &str,
        limit: u32,
    ) -> Result<Vec<RecentAttempt>, StoreError> {
        super::attempts::recent(&self.db, subscriber_id, limit).await
    }

    async fn subscribers_of_event_type(
        &self,
        event_type: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        super::event_types::subscribers_of(&self.db, event_type, limit).await
    }

    async fn put_schedule(&self, put: SchedulePut, now: Timestamp) -> Result<Schedule, StoreError> {
        super::schedules::put(&self.db, put, now).await
    }

    async fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        super::schedules::get(&self.db, id).await
    }

    async fn list_schedules(&self, page: PageRequest<String>) -> Result<Vec<Schedule>, StoreError> {
        super::schedules::list(&self.db, page).await
    }

    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        super::schedules::delete(&self.db, id).await
    }

    async fn due_schedules(
        &self,
        until: Timestamp,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<Schedule>, StoreError> {
        super::schedules::due(&self.db, until, limit, now).await
    }

    async fn lease_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        super::schedules::lease(&self.db, id, seen, until, now).await
    }

    async fn advance_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        advance: ScheduleAdvance,
    ) -> Result<bool, StoreError> {
        super::schedules::advance(&self.db, id, seen, advance).await
    }

    async fn make_schedule_period(
        &self,
        fence: Option<PeriodFence>,
        jobs: Vec<NewJob>,
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError> {
        super::schedule_periods::make(&self.db, &self.wake, fence, jobs).await
    }

    async fn schedule_sharing_template(
        &self,
        definition: &ScheduleDefinition,
    ) -> Result<Option<String>, StoreError> {
        super::schedules::sharing_template(&self.db, definition).await
    }

    async fn record_schedule_run(&self, id: &str, run: ScheduleRun) -> Result<bool, StoreError> {
        super::schedules::record_run(&self.db, id, run).await
    }
}

#[async_trait]
impl<B: Backend> WorkerStore for SqlStore<B> {
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        self.worker.claim(&self.sealer, &self.policy, request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        self.worker.renew_leases(leases, until, now).await
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

    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        self.db.listen_for_jobs(wake, stop).await;
    }

    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        super::figures::next_wake_at(&self.worker, now, &self.policy).await
    }

    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError> {
        super::replays::advance(&self.worker, now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        self.worker.expire_deadlines(now, limit).await
    }
}
