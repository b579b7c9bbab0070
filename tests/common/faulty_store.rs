//! A store that forwards every call to a real one after asking the test's fault hook
//! whether that call fails: how tests inject store failures (SQLite cannot be
//! unplugged), e.g. an outage from the first outcome write (C-03) or an audit trail
//! that cannot be written (issue #34 part 1).

use std::sync::Arc;

use async_trait::async_trait;
use deferhook::domain::Timestamp;
use deferhook::store::*;
use uuid::Uuid;

/// Called with the name of each store call before it is forwarded; an error is
/// returned instead of forwarding it.
pub type Fault = Arc<dyn Fn(&'static str) -> Result<(), StoreError> + Send + Sync>;

/// Forwards to `inner` unless `fault` fails the call.
pub struct FaultyStore {
    /// The real store.
    pub inner: SharedStore,
    /// Asked before each call.
    pub fault: Fault,
}

impl FaultyStore {
    /// `inner`, failing the calls `fault` fails.
    pub fn wrap(inner: SharedStore, fault: Fault) -> SharedStore {
        Arc::new(FaultyStore { inner, fault })
    }
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore").finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn ping(&self) -> Result<(), StoreError> {
        (self.fault)("ping")?;
        self.inner.ping().await
    }
    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        (self.fault)("database_clock")?;
        self.inner.database_clock().await
    }
    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        (self.fault)("put_subscriber")?;
        self.inner.put_subscriber(put, now).await
    }
    async fn patch_subscriber(
        &self,
        id: &str,
        patch: SubscriberPatch,
        now: Timestamp,
    ) -> Result<Option<Subscriber>, StoreError> {
        (self.fault)("patch_subscriber")?;
        self.inner.patch_subscriber(id, patch, now).await
    }
    async fn resume_subscribers(
        &self,
        selection: ResumeSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        (self.fault)("resume_subscribers")?;
        self.inner.resume_subscribers(selection, now).await
    }
    async fn pause_subscribers(
        &self,
        selection: PauseSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        (self.fault)("pause_subscribers")?;
        self.inner.pause_subscribers(selection, now).await
    }
    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        (self.fault)("rotate_secret")?;
        self.inner.rotate_secret(rotation, now).await
    }
    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        (self.fault)("get_subscriber")?;
        self.inner.get_subscriber(id).await
    }
    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        (self.fault)("list_subscribers")?;
        self.inner.list_subscribers(page).await
    }
    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        (self.fault)("create_jobs")?;
        self.inner.create_jobs(jobs).await
    }
    async fn get_job(&self, id: Uuid, now: Timestamp) -> Result<Option<Job>, StoreError> {
        (self.fault)("get_job")?;
        self.inner.get_job(id, now).await
    }
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<Job>, StoreError> {
        (self.fault)("list_jobs")?;
        self.inner.list_jobs(filter, page, now).await
    }
    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: deferhook::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        (self.fault)("transition_waiting")?;
        self.inner
            .transition_waiting(id, seen, transition, now)
            .await
    }
    async fn list_attempts(
        &self,
        job_id: Uuid,
        now: Timestamp,
    ) -> Result<Vec<Attempt>, StoreError> {
        (self.fault)("list_attempts")?;
        self.inner.list_attempts(job_id, now).await
    }
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        (self.fault)("claim")?;
        self.inner.claim(request).await
    }
    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        (self.fault)("renew_leases")?;
        self.inner.renew_leases(leases, until, now).await
    }
    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        (self.fault)("record_outcomes")?;
        self.inner.record_outcomes(records, now).await
    }
    async fn record_outcome(
        &self,
        record: OutcomeRecord,
        now: Timestamp,
    ) -> Result<Fenced, StoreError> {
        (self.fault)("record_outcome")?;
        self.inner.record_outcome(record, now).await
    }
    async fn note_long_attempt(&self, lease: LeaseRef, now: Timestamp) -> Result<(), StoreError> {
        (self.fault)("note_long_attempt")?;
        self.inner.note_long_attempt(lease, now).await
    }
    fn wake(&self) -> Arc<Wake> {
        self.inner.wake()
    }
    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        (self.fault)("next_wake_at")?;
        self.inner.next_wake_at(now).await
    }
    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<deferhook::domain::waiting::SubscriberLoad>, StoreError> {
        (self.fault)("subscriber_load")?;
        self.inner.subscriber_load(id, now).await
    }
    async fn list_destinations(
        &self,
        page: PageRequest<String>,
        now: Timestamp,
    ) -> Result<Vec<DestinationView>, StoreError> {
        (self.fault)("list_destinations")?;
        self.inner.list_destinations(page, now).await
    }
    async fn get_destination(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        (self.fault)("get_destination")?;
        self.inner.get_destination(key, now).await
    }
    async fn put_destination(
        &self,
        key: &str,
        put: DestinationPut,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        (self.fault)("put_destination")?;
        self.inner.put_destination(key, put, now).await
    }
    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        (self.fault)("gauges")?;
        self.inner.gauges(now, slo_ms).await
    }
    async fn count_replay_matches(
        &self,
        filter: &deferhook::domain::replay::ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        (self.fault)("count_replay_matches")?;
        self.inner.count_replay_matches(filter, max_jobs).await
    }
    async fn create_replay(&self, replay: NewReplay) -> Result<Replay, StoreError> {
        (self.fault)("create_replay")?;
        self.inner.create_replay(replay).await
    }
    async fn get_replay(&self, id: Uuid) -> Result<Option<Replay>, StoreError> {
        (self.fault)("get_replay")?;
        self.inner.get_replay(id).await
    }
    async fn cancel_replay(&self, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
        (self.fault)("cancel_replay")?;
        self.inner.cancel_replay(id, now).await
    }
    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError> {
        (self.fault)("advance_replays")?;
        self.inner.advance_replays(now).await
    }
    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        (self.fault)("expire_deadlines")?;
        self.inner.expire_deadlines(now, limit).await
    }
    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        (self.fault)("subscriber_stats")?;
        self.inner.subscriber_stats(id, now).await
    }
    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        (self.fault)("purge_finished")?;
        self.inner
            .purge_finished(finished_before, dead_before, limit)
            .await
    }

    // --- events: affected events and an event's summary (issue #16 parts 1 and 2) ---
    async fn list_affected_events(
        &self,
        since: Timestamp,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<AffectedEvent>, StoreError> {
        (self.fault)("list_affected_events")?;
        self.inner.list_affected_events(since, page, now).await
    }
    async fn event_jobs(
        &self,
        event_id: &str,
        now: Timestamp,
    ) -> Result<Option<EventJobs>, StoreError> {
        (self.fault)("event_jobs")?;
        self.inner.event_jobs(event_id, now).await
    }

    // --- issue #16 part 7: replays of a slice ---

    async fn list_replays(
        &self,
        state: Option<deferhook::domain::replay::ReplayState>,
        page: deferhook::store::PageRequest<Uuid>,
    ) -> Result<Vec<Replay>, StoreError> {
        (self.fault)("list_replays")?;
        self.inner.list_replays(state, page).await
    }

    // --- subscriber health (issue #16 part 3) ---
    async fn subscriber_health(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, HealthFigures>, StoreError> {
        (self.fault)("subscriber_health")?;
        self.inner.subscriber_health(ids, now).await
    }
    async fn list_subscribers_by_health(
        &self,
        status: deferhook::domain::health::HealthStatus,
        page: PageRequest<HealthCursor>,
        now: Timestamp,
    ) -> Result<Vec<SubscriberHealth>, StoreError> {
        (self.fault)("list_subscribers_by_health")?;
        self.inner
            .list_subscribers_by_health(status, page, now)
            .await
    }

    // --- issue #16 parts 8 and 9: deleting subscribers, the audit trail ---
    async fn delete_subscriber(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        (self.fault)("delete_subscriber")?;
        self.inner.delete_subscriber(id, now).await
    }
    async fn purge_tombstones(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        (self.fault)("purge_tombstones")?;
        self.inner.purge_tombstones(before, limit).await
    }
    async fn record_audit(&self, entry: NewAuditEntry) -> Result<(), StoreError> {
        (self.fault)("record_audit")?;
        self.inner.record_audit(entry).await
    }
    async fn settle_audit(&self, id: Uuid, settlement: AuditSettlement) -> Result<(), StoreError> {
        (self.fault)("settle_audit")?;
        self.inner.settle_audit(id, settlement).await
    }
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        (self.fault)("list_audit")?;
        self.inner.list_audit(filter, page).await
    }
    async fn purge_audit(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        (self.fault)("purge_audit")?;
        self.inner.purge_audit(before, limit).await
    }
    // issue #16 part 8, bounded deletes
    async fn begin_subscriber_deletion(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        (self.fault)("begin_subscriber_deletion")?;
        self.inner.begin_subscriber_deletion(id, now).await
    }
    async fn move_deleted_history(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Option<HistoryMoved>, StoreError> {
        (self.fault)("move_deleted_history")?;
        self.inner.move_deleted_history(id, limit).await
    }
    async fn deletions_in_progress(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        (self.fault)("deletions_in_progress")?;
        self.inner.deletions_in_progress(limit).await
    }
    async fn record_heartbeat(&self, beat: Heartbeat, now: Timestamp) -> Result<(), StoreError> {
        (self.fault)("record_heartbeat")?;
        self.inner.record_heartbeat(beat, now).await
    }
    async fn forget_instance(&self, id: &str) -> Result<(), StoreError> {
        (self.fault)("forget_instance")?;
        self.inner.forget_instance(id).await
    }
    async fn live_instances(&self, since: Timestamp) -> Result<Vec<InstanceSeen>, StoreError> {
        (self.fault)("live_instances")?;
        self.inner.live_instances(since).await
    }
    async fn jobs_per_minute(
        &self,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<MinuteCounts>, StoreError> {
        (self.fault)("jobs_per_minute")?;
        self.inner.jobs_per_minute(since, now).await
    }
    async fn dead_letters(&self, offset: u32, limit: u32) -> Result<DeadLetters, StoreError> {
        (self.fault)("dead_letters")?;
        self.inner.dead_letters(offset, limit).await
    }
    async fn end_console_session(
        &self,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        (self.fault)("end_console_session")?;
        self.inner.end_console_session(id, expires_at, now).await
    }
    async fn console_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        (self.fault)("console_session_ended")?;
        self.inner.console_session_ended(id).await
    }
    async fn recent_attempts(
        &self,
        subscriber_id: &str,
        limit: u32,
    ) -> Result<Vec<RecentAttempt>, StoreError> {
        (self.fault)("recent_attempts")?;
        self.inner.recent_attempts(subscriber_id, limit).await
    }
    async fn subscribers_of_event_type(
        &self,
        event_type: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        (self.fault)("subscribers_of_event_type")?;
        self.inner
            .subscribers_of_event_type(event_type, limit)
            .await
    }
    async fn put_schedule(&self, put: SchedulePut, now: Timestamp) -> Result<Schedule, StoreError> {
        (self.fault)("put_schedule")?;
        self.inner.put_schedule(put, now).await
    }
    async fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        (self.fault)("get_schedule")?;
        self.inner.get_schedule(id).await
    }
    async fn list_schedules(&self, page: PageRequest<String>) -> Result<Vec<Schedule>, StoreError> {
        (self.fault)("list_schedules")?;
        self.inner.list_schedules(page).await
    }
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        (self.fault)("delete_schedule")?;
        self.inner.delete_schedule(id).await
    }
    async fn due_schedules(
        &self,
        until: Timestamp,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<Schedule>, StoreError> {
        (self.fault)("due_schedules")?;
        self.inner.due_schedules(until, limit, now).await
    }
    async fn lease_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        (self.fault)("lease_schedule")?;
        self.inner.lease_schedule(id, seen, until, now).await
    }
    async fn advance_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        advance: ScheduleAdvance,
    ) -> Result<bool, StoreError> {
        (self.fault)("advance_schedule")?;
        self.inner.advance_schedule(id, seen, advance).await
    }
    async fn server_key(
        &self,
        name: &str,
        candidate: String,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        (self.fault)("server_key")?;
        self.inner.server_key(name, candidate, now).await
    }
    async fn make_schedule_period(
        &self,
        fence: Option<PeriodFence>,
        jobs: Vec<NewJob>,
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError> {
        (self.fault)("make_schedule_period")?;
        self.inner.make_schedule_period(fence, jobs).await
    }
    async fn schedule_sharing_template(
        &self,
        definition: &ScheduleDefinition,
    ) -> Result<Option<String>, StoreError> {
        (self.fault)("schedule_sharing_template")?;
        self.inner.schedule_sharing_template(definition).await
    }
    async fn record_schedule_run(&self, id: &str, run: ScheduleRun) -> Result<bool, StoreError> {
        (self.fault)("record_schedule_run")?;
        self.inner.record_schedule_run(id, run).await
    }
}
