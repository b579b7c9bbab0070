//! C-03: the store fails right after a 2xx. The outcome is retried until it is stored
//! (the lease still held), so the job ends delivered with one request and no dead
//! letter. SQLite cannot be unplugged, so a wrapper makes every store call fail for
//! a while, starting at the first outcome write.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deferhook::domain::Timestamp;
use deferhook::store::*;
use serde_json::json;
use uuid::Uuid;

use crate::app::Db;
use crate::receiver::Receiver;
use crate::setup::instance_on;

/// Delegates to `inner`, but answers `Unavailable` to every call for `outage` from the
/// first outcome write on.
#[derive(Debug)]
struct Outage {
    inner: SharedStore,
    outage: Duration,
    down_since: Mutex<Option<Instant>>,
}

impl Outage {
    fn check(&self) -> Result<(), StoreError> {
        match *self.down_since.lock().unwrap() {
            Some(since) if since.elapsed() < self.outage => {
                Err(StoreError::Unavailable("injected outage".into()))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Store for Outage {
    async fn ping(&self) -> Result<(), StoreError> {
        self.check()?;
        self.inner.ping().await
    }
    async fn database_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        self.check()?;
        self.inner.database_clock().await
    }
    async fn put_subscriber(
        &self,
        put: SubscriberPut,
        now: Timestamp,
    ) -> Result<PutSubscriberOutcome, StoreError> {
        self.check()?;
        self.inner.put_subscriber(put, now).await
    }
    async fn patch_subscriber(
        &self,
        id: &str,
        patch: SubscriberPatch,
        now: Timestamp,
    ) -> Result<Option<Subscriber>, StoreError> {
        self.check()?;
        self.inner.patch_subscriber(id, patch, now).await
    }
    async fn resume_subscribers(
        &self,
        selection: ResumeSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.resume_subscribers(selection, now).await
    }
    async fn pause_subscribers(
        &self,
        selection: PauseSelection,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.pause_subscribers(selection, now).await
    }
    async fn rotate_secret(
        &self,
        rotation: SecretRotation,
        now: Timestamp,
    ) -> Result<Option<SecretRotated>, StoreError> {
        self.check()?;
        self.inner.rotate_secret(rotation, now).await
    }
    async fn get_subscriber(&self, id: &str) -> Result<Option<Subscriber>, StoreError> {
        self.check()?;
        self.inner.get_subscriber(id).await
    }
    async fn list_subscribers(
        &self,
        page: PageRequest<String>,
    ) -> Result<Vec<Subscriber>, StoreError> {
        self.check()?;
        self.inner.list_subscribers(page).await
    }
    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<CreateOutcome>, StoreError> {
        self.check()?;
        self.inner.create_jobs(jobs).await
    }
    async fn get_job(&self, id: Uuid, now: Timestamp) -> Result<Option<Job>, StoreError> {
        self.check()?;
        self.inner.get_job(id, now).await
    }
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest<Uuid>,
        now: Timestamp,
    ) -> Result<Vec<Job>, StoreError> {
        self.check()?;
        self.inner.list_jobs(filter, page, now).await
    }
    async fn transition_waiting(
        &self,
        id: Uuid,
        seen: JobVersion,
        transition: deferhook::domain::Transition,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.check()?;
        self.inner
            .transition_waiting(id, seen, transition, now)
            .await
    }
    async fn list_attempts(
        &self,
        job_id: Uuid,
        now: Timestamp,
    ) -> Result<Vec<Attempt>, StoreError> {
        self.check()?;
        self.inner.list_attempts(job_id, now).await
    }
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        self.check()?;
        self.inner.claim(request).await
    }
    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        self.check()?;
        self.inner.renew_leases(leases, until, now).await
    }
    async fn record_outcomes(
        &self,
        records: &[OutcomeRecord],
        now: Timestamp,
    ) -> Result<Vec<Fenced>, StoreError> {
        self.down_since
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now);
        self.check()?;
        self.inner.record_outcomes(records, now).await
    }
    async fn record_outcome(
        &self,
        record: OutcomeRecord,
        now: Timestamp,
    ) -> Result<Fenced, StoreError> {
        self.down_since
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now);
        self.check()?;
        self.inner.record_outcome(record, now).await
    }
    async fn note_long_attempt(&self, lease: LeaseRef, now: Timestamp) -> Result<(), StoreError> {
        self.check()?;
        self.inner.note_long_attempt(lease, now).await
    }
    fn wake(&self) -> Arc<Wake> {
        self.inner.wake()
    }
    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.check()?;
        self.inner.next_wake_at(now).await
    }
    async fn subscriber_load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<deferhook::domain::waiting::SubscriberLoad>, StoreError> {
        self.check()?;
        self.inner.subscriber_load(id, now).await
    }
    async fn list_destinations(
        &self,
        page: PageRequest<String>,
        now: Timestamp,
    ) -> Result<Vec<DestinationView>, StoreError> {
        self.check()?;
        self.inner.list_destinations(page, now).await
    }
    async fn get_destination(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        self.check()?;
        self.inner.get_destination(key, now).await
    }
    async fn put_destination(
        &self,
        key: &str,
        put: DestinationPut,
        now: Timestamp,
    ) -> Result<Option<DestinationView>, StoreError> {
        self.check()?;
        self.inner.put_destination(key, put, now).await
    }
    async fn gauges(&self, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
        self.check()?;
        self.inner.gauges(now, slo_ms).await
    }
    async fn count_replay_matches(
        &self,
        filter: &deferhook::domain::replay::ReplayFilter,
        max_jobs: u32,
    ) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.count_replay_matches(filter, max_jobs).await
    }
    async fn create_replay(&self, replay: NewReplay) -> Result<Replay, StoreError> {
        self.check()?;
        self.inner.create_replay(replay).await
    }
    async fn get_replay(&self, id: Uuid) -> Result<Option<Replay>, StoreError> {
        self.check()?;
        self.inner.get_replay(id).await
    }
    async fn cancel_replay(&self, id: Uuid, now: Timestamp) -> Result<Option<Replay>, StoreError> {
        self.check()?;
        self.inner.cancel_replay(id, now).await
    }
    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError> {
        self.check()?;
        self.inner.advance_replays(now).await
    }
    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        self.check()?;
        self.inner.expire_deadlines(now, limit).await
    }
    async fn subscriber_stats(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberStats>, StoreError> {
        self.check()?;
        self.inner.subscriber_stats(id, now).await
    }
    async fn purge_finished(
        &self,
        finished_before: Option<Timestamp>,
        dead_before: Option<Timestamp>,
        limit: u32,
    ) -> Result<PurgedJobs, StoreError> {
        self.check()?;
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
        self.check()?;
        self.inner.list_affected_events(since, page, now).await
    }
    async fn event_jobs(
        &self,
        event_id: &str,
        now: Timestamp,
    ) -> Result<Option<EventJobs>, StoreError> {
        self.check()?;
        self.inner.event_jobs(event_id, now).await
    }

    // --- issue #16 part 7: replays of a slice ---

    async fn list_replays(
        &self,
        state: Option<deferhook::domain::replay::ReplayState>,
        page: deferhook::store::PageRequest<Uuid>,
    ) -> Result<Vec<Replay>, StoreError> {
        self.check()?;
        self.inner.list_replays(state, page).await
    }

    // --- subscriber health (issue #16 part 3) ---
    async fn subscriber_health(
        &self,
        ids: &[String],
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, HealthFigures>, StoreError> {
        self.check()?;
        self.inner.subscriber_health(ids, now).await
    }
    async fn list_subscribers_by_health(
        &self,
        status: deferhook::domain::health::HealthStatus,
        page: PageRequest<HealthCursor>,
        now: Timestamp,
    ) -> Result<Vec<SubscriberHealth>, StoreError> {
        self.check()?;
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
        self.check()?;
        self.inner.delete_subscriber(id, now).await
    }
    async fn purge_tombstones(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.purge_tombstones(before, limit).await
    }
    async fn record_audit(&self, entry: NewAuditEntry) -> Result<(), StoreError> {
        self.check()?;
        self.inner.record_audit(entry).await
    }
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest<Uuid>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.check()?;
        self.inner.list_audit(filter, page).await
    }
    async fn purge_audit(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.purge_audit(before, limit).await
    }
    // issue #16 part 8, bounded deletes
    async fn begin_subscriber_deletion(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberDeleted>, StoreError> {
        self.check()?;
        self.inner.begin_subscriber_deletion(id, now).await
    }
    async fn move_deleted_history(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Option<HistoryMoved>, StoreError> {
        self.check()?;
        self.inner.move_deleted_history(id, limit).await
    }
    async fn deletions_in_progress(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        self.check()?;
        self.inner.deletions_in_progress(limit).await
    }
    async fn record_heartbeat(&self, beat: Heartbeat, now: Timestamp) -> Result<(), StoreError> {
        self.check()?;
        self.inner.record_heartbeat(beat, now).await
    }
    async fn forget_instance(&self, id: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.forget_instance(id).await
    }
    async fn live_instances(&self, since: Timestamp) -> Result<Vec<InstanceSeen>, StoreError> {
        self.check()?;
        self.inner.live_instances(since).await
    }
    async fn jobs_per_minute(
        &self,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<MinuteCounts>, StoreError> {
        self.check()?;
        self.inner.jobs_per_minute(since, now).await
    }
    async fn dead_letters(&self, offset: u32, limit: u32) -> Result<DeadLetters, StoreError> {
        self.check()?;
        self.inner.dead_letters(offset, limit).await
    }
    async fn end_console_session(
        &self,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.end_console_session(id, expires_at, now).await
    }
    async fn console_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.console_session_ended(id).await
    }
    async fn recent_attempts(
        &self,
        subscriber_id: &str,
        limit: u32,
    ) -> Result<Vec<RecentAttempt>, StoreError> {
        self.check()?;
        self.inner.recent_attempts(subscriber_id, limit).await
    }
    async fn subscribers_of_event_type(
        &self,
        event_type: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.check()?;
        self.inner
            .subscribers_of_event_type(event_type, limit)
            .await
    }
    async fn put_schedule(&self, put: SchedulePut, now: Timestamp) -> Result<Schedule, StoreError> {
        self.check()?;
        self.inner.put_schedule(put, now).await
    }
    async fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        self.check()?;
        self.inner.get_schedule(id).await
    }
    async fn list_schedules(&self, page: PageRequest<String>) -> Result<Vec<Schedule>, StoreError> {
        self.check()?;
        self.inner.list_schedules(page).await
    }
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.delete_schedule(id).await
    }
    async fn due_schedules(
        &self,
        until: Timestamp,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<Schedule>, StoreError> {
        self.check()?;
        self.inner.due_schedules(until, limit, now).await
    }
    async fn lease_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.lease_schedule(id, seen, until, now).await
    }
    async fn advance_schedule(
        &self,
        id: &str,
        seen: ScheduleSeen,
        advance: ScheduleAdvance,
    ) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.advance_schedule(id, seen, advance).await
    }
    async fn server_key(
        &self,
        name: &str,
        candidate: String,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        self.check()?;
        self.inner.server_key(name, candidate, now).await
    }
    async fn make_schedule_period(
        &self,
        fence: Option<PeriodFence>,
        jobs: Vec<NewJob>,
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError> {
        self.check()?;
        self.inner.make_schedule_period(fence, jobs).await
    }
    async fn schedule_sharing_template(
        &self,
        definition: &ScheduleDefinition,
    ) -> Result<Option<String>, StoreError> {
        self.check()?;
        self.inner.schedule_sharing_template(definition).await
    }
    async fn record_schedule_run(&self, id: &str, run: ScheduleRun) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.record_schedule_run(id, run).await
    }
}

async fn c03_an_outcome_is_stored_once_the_store_is_back(db: Db) {
    let receiver = Receiver::ok().await;
    let database = db.database().await;
    let url = database.url.clone();
    let inner = deferhook::store::open(&url).await.unwrap();
    let outage = Duration::from_secs(2);
    let store: SharedStore = Arc::new(Outage {
        inner: inner.clone(),
        outage,
        down_since: Mutex::new(None),
    });
    let app = instance_on(&url)
        .flags(&["--lease-ms", "3000", "--attempt-timeout-ms", "2000"])
        .store(store)
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-c03", json!({})).await;
    let id: Uuid = job["id"].as_str().unwrap().parse().unwrap();

    // The store goes down as the outcome is first written, right after the 200; the
    // attempt ends only once the outcome is stored.
    let ran = app.run_pending().await;
    let answered = receiver.requests()[0].at;
    let stored_after = answered.elapsed();
    assert_eq!(ran.attempted(), 1);
    assert_eq!(ran.completed[0].stored, Some(Fenced::Applied));
    let job = inner.get_job(id, app.now()).await.unwrap().unwrap();
    assert_eq!(job.state, deferhook::domain::JobState::Delivered);
    assert!(
        stored_after >= outage - Duration::from_millis(200),
        "stored during the outage?"
    );
    assert!(
        stored_after < outage + Duration::from_secs(3),
        "stored {stored_after:?} after"
    );
    assert_eq!(job.attempts, 1);
    assert_eq!(job.dead_reason, None);
    app.advance(3_600_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(receiver.requests().len(), 1, "the job was sent again");
    let attempts = inner.list_attempts(id, app.now()).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].outcome,
        deferhook::domain::attempt::AttemptOutcome::Delivered
    );
    app.stop().await;
    drop(database);
}

crate::on_both_backends!(c03_an_outcome_is_stored_once_the_store_is_back);
