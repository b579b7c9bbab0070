//! Fixtures shared by every case: fixed instants, deterministic UUIDv7 ids, and short
//! helpers that build subscribers, jobs, claims and fenced outcomes. Nothing here reads
//! a clock or sleeps: time is the `now` each call passes.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::secret::SigningSecret;
use deferhook::domain::{JobEvent, Timestamp};
use deferhook::store::{
    AttemptResult, ClaimRequest, ClaimedJob, CreateOutcome, Job, JobFilter, LeaseRef, NewJob,
    OutcomeRecord, PageRequest, SharedStore, SubscriberPut,
};
use deferhook::testing::START;
use uuid::Uuid;

/// The lease length of every claim made through [`claim`].
pub const LEASE_MS: u64 = 30_000;
/// The worker that [`claim`] claims as.
pub const OWNER: &str = "worker-a";
/// A payload for jobs whose payload does not matter.
pub const PAYLOAD: &str = r#"{"n":1}"#;

/// [`START`] + `offset_ms`: the instants every case counts in.
pub fn at(offset_ms: i64) -> Timestamp {
    Timestamp::from_millis(START.as_millis() + offset_ms)
}

/// A store under test, its database's URL, and whatever must outlive it (e.g. the
/// SQLite file's directory). Clones share the guard.
#[derive(Clone)]
pub struct Backend {
    /// The store.
    pub store: SharedStore,
    /// The URL it was opened with.
    pub url: String,
    _guard: Arc<dyn Any + Send + Sync>,
}

impl Backend {
    /// A store on `url` that lives as long as `guard`.
    pub fn with_guard(store: SharedStore, url: String, guard: impl Any + Send + Sync) -> Self {
        Backend {
            store,
            url,
            _guard: Arc::new(guard),
        }
    }
}

/// A case of the suite: `async fn(SharedStore)`, or `async fn(Backend)` for one that
/// needs the database itself. `Arg` only tells the two apart.
pub trait Case<Arg> {
    /// The case's future.
    type Future: Future<Output = ()>;
    /// Starts the case on `backend`.
    fn start(self, backend: &Backend) -> Self::Future;
}

impl<F, Fut> Case<SharedStore> for F
where
    F: FnOnce(SharedStore) -> Fut,
    Fut: Future<Output = ()>,
{
    type Future = Fut;
    fn start(self, backend: &Backend) -> Fut {
        self(backend.store.clone())
    }
}

impl<F, Fut> Case<Backend> for F
where
    F: FnOnce(Backend) -> Fut,
    Fut: Future<Output = ()>,
{
    type Future = Fut;
    fn start(self, backend: &Backend) -> Fut {
        self(backend.clone())
    }
}

/// Starts `case` on `backend` (which the caller keeps alive until it ends).
pub fn run_case<Arg, C: Case<Arg>>(case: C, backend: &Backend) -> C::Future {
    case.start(backend)
}

/// A fresh UUIDv7; later calls give greater ids (the listing order).
pub fn fresh_id() -> Uuid {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let mut random = [0u8; 10];
    random[2..].copy_from_slice(&n.to_be_bytes());
    uuid::Builder::from_unix_timestamp_millis(START.as_millis().unsigned_abs() + n, &random)
        .into_uuid()
}

/// A create of subscriber `id` with every optional field left out.
pub fn subscriber_put(id: &str) -> SubscriberPut {
    SubscriberPut {
        id: id.to_owned(),
        url: format!("https://{id}.example.test/hook"),
        secret: None,
        generated_secret: SigningSecret::generate(),
        max_in_flight: None,
        rate_limit_per_second: None,
        enabled: None,
        event_types: None,
        attempt_timeout_ms: None,
    }
}

/// Creates subscriber `id` at [`START`] with the defaults; returns its secret.
pub async fn add_subscriber(store: &SharedStore, id: &str) -> SigningSecret {
    store
        .put_subscriber(subscriber_put(id), at(0))
        .await
        .expect("put_subscriber")
        .created_secret
        .expect("a created subscriber shows its secret")
}

/// Pauses or resumes subscriber `id` at `now`.
pub async fn set_enabled(store: &SharedStore, id: &str, enabled: bool, now: Timestamp) {
    let put = SubscriberPut {
        enabled: Some(enabled),
        ..subscriber_put(id)
    };
    store
        .put_subscriber(put, now)
        .await
        .expect("put_subscriber");
}

/// A job with a fresh id and [`PAYLOAD`], created at `min(deliver_at, START)`.
pub fn new_job(
    subscriber: &str,
    event: &str,
    deliver_at: Timestamp,
    deadline: Timestamp,
) -> NewJob {
    NewJob {
        id: fresh_id(),
        subscriber_id: subscriber.to_owned(),
        event_id: event.to_owned(),
        payload: PAYLOAD.into(),
        deliver_at,
        deadline,
        max_attempts: None,
        created_at: deliver_at.min(at(0)),
        event_type: None,
        schedule_id: None,
    }
}

/// Creates `jobs`, all of which must be new; returns them as stored.
pub async fn create(store: &SharedStore, jobs: Vec<NewJob>) -> Vec<Job> {
    store
        .create_jobs(jobs)
        .await
        .expect("create_jobs")
        .into_iter()
        .map(|outcome| match outcome {
            CreateOutcome::Created(job) => job,
            CreateOutcome::Existing { job, .. } => panic!("job {} already existed", job.id),
        })
        .collect()
}

/// Creates one job due at `deliver_at` with a deadline an hour later.
pub async fn create_due(store: &SharedStore, subscriber: &str, deliver_at: Timestamp) -> Job {
    let job = new_job(
        subscriber,
        &format!("event-{}", fresh_id()),
        deliver_at,
        deliver_at.plus_ms(3_600_000),
    );
    create(store, vec![job]).await.remove(0)
}

/// The stored job `id`, which must exist, read at [`START`]: as stored when its
/// claims are at or after [`START`] (their [`LEASE_MS`] leases expire later); a case
/// that claims earlier, or reads after an expiry, reads with [`job_at`].
pub async fn job(store: &SharedStore, id: Uuid) -> Job {
    job_at(store, id, START).await
}

/// Job `id`, which must exist, as read at `now` (a job whose lease has expired is
/// `retrying`).
pub async fn job_at(store: &SharedStore, id: Uuid, now: Timestamp) -> Job {
    store
        .get_job(id, now)
        .await
        .expect("get_job")
        .expect("the job exists")
}

/// Every job matching `filter`, newest first (one page of 1,000), read at [`START`]
/// (see [`job`]).
pub async fn list(store: &SharedStore, filter: JobFilter) -> Vec<Job> {
    list_at(store, filter, START).await
}

/// Every job matching `filter` as read at `now`, newest first (one page of 1,000).
pub async fn list_at(store: &SharedStore, filter: JobFilter, now: Timestamp) -> Vec<Job> {
    let page = PageRequest {
        after: None,
        limit: 1_000,
    };
    store
        .list_jobs(&filter, page, now)
        .await
        .expect("list_jobs")
}

/// Claims up to `limit` jobs at `now` as `owner` under a [`LEASE_MS`] lease.
pub async fn claim_as(
    store: &SharedStore,
    owner: &str,
    now: Timestamp,
    limit: u32,
) -> Vec<ClaimedJob> {
    let request = ClaimRequest {
        now,
        limit,
        owner: owner.to_owned(),
        lease_ms: LEASE_MS,
    };
    store.claim(request).await.expect("claim")
}

/// Claims up to `limit` jobs at `now` as [`OWNER`].
pub async fn claim(store: &SharedStore, now: Timestamp, limit: u32) -> Vec<ClaimedJob> {
    claim_as(store, OWNER, now, limit).await
}

/// Claims at `now` as `owner`; exactly one job must come back.
pub async fn claim_one(store: &SharedStore, owner: &str, now: Timestamp) -> ClaimedJob {
    let mut claimed = claim_as(store, owner, now, 10).await;
    assert_eq!(claimed.len(), 1, "expected exactly one claimed job");
    claimed.remove(0)
}

/// The current signing secret a claim returned (which must be readable).
pub fn current_secret(claimed: &ClaimedJob) -> &SigningSecret {
    &claimed
        .secrets
        .as_ref()
        .expect("the claim read the subscriber's secrets")
        .current
}

/// The ids of claimed jobs, in order.
pub fn claimed_ids(claimed: &[ClaimedJob]) -> Vec<Uuid> {
    claimed.iter().map(|c| c.job_id).collect()
}

/// The ids of jobs, in order.
pub fn ids(jobs: &[Job]) -> Vec<Uuid> {
    jobs.iter().map(|j| j.id).collect()
}

/// The lease a claim handed out.
pub fn lease(claimed: &ClaimedJob) -> LeaseRef {
    LeaseRef {
        job_id: claimed.job_id,
        token: claimed.lease_token,
    }
}

/// The fenced write a worker makes when `claimed`'s attempt ends at `finished_at` with
/// `result`, the transition decided by the state machine as the worker does.
pub fn outcome(
    claimed: &ClaimedJob,
    event: JobEvent,
    result: AttemptResult,
    finished_at: Timestamp,
) -> OutcomeRecord {
    OutcomeRecord {
        lease: lease(claimed),
        subscriber_id: claimed.subscriber_id.clone(),
        attempt: claimed.attempt,
        started_at: claimed.lease_expires_at.minus_ms(LEASE_MS),
        finished_at,
        attempt_timeout_ms: 10_000,
        result,
        retry_after: None,
        transition: transition(&claimed.snapshot, event, finished_at)
            .expect("the state machine allows the event"),
        pause_subscriber: false,
    }
}

/// A 2xx answer.
pub fn delivered(status: u16) -> AttemptResult {
    AttemptResult {
        outcome: AttemptOutcome::Delivered,
        status: Some(status),
        error_class: None,
        reason: None,
        body_excerpt: None,
        resent: false,
    }
}

/// A failed attempt.
pub fn failed(
    outcome: AttemptOutcome,
    class: ErrorClass,
    status: Option<u16>,
    reason: &str,
    body: Option<&str>,
) -> AttemptResult {
    AttemptResult {
        outcome,
        status,
        error_class: Some(class),
        reason: Some(reason.to_owned()),
        body_excerpt: body.map(str::to_owned),
        resent: false,
    }
}

/// An attempt whose outcome is unknown (released at shutdown).
pub fn unknown(reason: &str) -> AttemptResult {
    AttemptResult {
        outcome: AttemptOutcome::Unknown,
        status: None,
        error_class: None,
        reason: Some(reason.to_owned()),
        body_excerpt: None,
        resent: false,
    }
}

/// The number `sql` (a `SELECT COUNT(*)`, no parameters) reads straight from the
/// database, as another program would.
pub async fn read_count(backend: &Backend, sql: &'static str) -> i64 {
    use sqlx::Connection;
    if backend.url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(&backend.url).await.unwrap();
        sqlx::query_scalar(sql)
            .fetch_one(&mut connection)
            .await
            .unwrap()
    } else {
        let mut connection = sqlx::PgConnection::connect(&backend.url).await.unwrap();
        sqlx::query_scalar(sql)
            .fetch_one(&mut connection)
            .await
            .unwrap()
    }
}

/// One job per subscriber of `subscribers`, event `event`, all carrying one shared
/// `payload` (as a fan-out's jobs do), due at 0 with an hour to go.
pub fn fan_out(subscribers: &[&str], event: &str, payload: &std::sync::Arc<str>) -> Vec<NewJob> {
    subscribers
        .iter()
        .map(|s| NewJob {
            payload: payload.clone(),
            ..new_job(s, event, at(0), at(3_600_000))
        })
        .collect()
}

/// Adds each subscriber of `ids`.
pub async fn add_subscribers(store: &SharedStore, ids: &[&str]) {
    for id in ids {
        add_subscriber(store, id).await;
    }
}

/// Sends `requests` to `store` at once (so the store groups them as they arrive);
/// each one's result, in order.
pub async fn create_at_once(
    store: &SharedStore,
    requests: Vec<Vec<NewJob>>,
) -> Vec<Result<Vec<CreateOutcome>, deferhook::store::StoreError>> {
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let store = store.clone();
            tokio::spawn(async move { store.create_jobs(request).await })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("task"));
    }
    results
}
