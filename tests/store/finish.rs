//! Fixtures of the operator-tool cases (listing filters, subscriber stats, retention):
//! jobs with a chosen creation instant (the timestamp of their UUIDv7 id), brought to a
//! chosen state at a chosen instant through the store's own calls, as a worker or an
//! operator would. Nothing reads a clock.

use std::sync::atomic::{AtomicU64, Ordering};

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent, Timestamp};
use deferhook::store::{ClaimedJob, Job, NewJob, SharedStore};
use uuid::Uuid;

use crate::support::{OWNER, claim_one, create, delivered, failed, job, new_job, outcome, unknown};

/// A UUIDv7 whose timestamp is `ms` (epoch milliseconds); unique per call.
pub fn id_at(ms: i64) -> Uuid {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut random = [0xA5u8; 10];
    random[2..].copy_from_slice(&NEXT.fetch_add(1, Ordering::SeqCst).to_be_bytes());
    uuid::Builder::from_unix_timestamp_millis(u64::try_from(ms).expect("after 1970"), &random)
        .into_uuid()
}

/// How [`finish`] leaves a job.
#[derive(Clone, Copy, Debug)]
pub enum Fate {
    /// A 2xx at the instant.
    Delivered,
    /// A terminal failure (HTTP 400) with this reason.
    Dead(DeadReason),
    /// Cancelled while scheduled.
    Cancelled,
    /// A 503, the next attempt due at the given instant.
    Retrying(Timestamp),
    /// Claimed, its attempt running.
    InFlight,
}

/// A job of `subscriber` for `event` whose id says it was created at `created`.
pub fn job_created_at(subscriber: &str, event: &str, created: Timestamp) -> NewJob {
    let mut job = new_job(subscriber, event, created, created.plus_ms(3_600_000));
    job.id = id_at(created.as_millis());
    job.created_at = created;
    job
}

/// Creates `new` due at `at` (its deadline at least an hour later) and brings it to `fate` at `at`;
/// the claim it may need must be the only one due then. Returns the stored job.
pub async fn finish(store: &SharedStore, mut new: NewJob, at: Timestamp, fate: Fate) -> Job {
    new.deliver_at = at;
    new.deadline = new.deadline.max(at.plus_ms(3_600_000));
    let id = new.id;
    let created = create(store, vec![new]).await.remove(0);
    if let Fate::Cancelled = fate {
        let cancel = transition(&created.snapshot(), JobEvent::Cancel, at).unwrap();
        let applied = store
            .transition_waiting(id, created.version(), cancel, at)
            .await
            .unwrap();
        assert!(applied, "cancel {id}");
        return job(store, id).await;
    }
    let claimed = claim_one(store, OWNER, at).await;
    assert_eq!(claimed.job_id, id, "another job was due at {at:?}");
    let (event, result) = match fate {
        Fate::Delivered => (JobEvent::Delivered, delivered(200)),
        Fate::Dead(reason) => (
            JobEvent::TerminalFailure { reason },
            failed(
                AttemptOutcome::Terminal,
                ErrorClass::Http4xx,
                Some(400),
                "400 Bad Request",
                None,
            ),
        ),
        Fate::Retrying(retry_at) => (
            JobEvent::RetryableFailure { retry_at },
            failed(
                AttemptOutcome::Retryable,
                ErrorClass::Http5xx,
                Some(503),
                "503 Service Unavailable",
                None,
            ),
        ),
        Fate::InFlight | Fate::Cancelled => return job(store, id).await,
    };
    record(store, &claimed, event, result, at).await;
    job(store, id).await
}

/// Records `claimed`'s attempt as ending at `at` with `result` and `event`.
pub async fn record(
    store: &SharedStore,
    claimed: &ClaimedJob,
    event: JobEvent,
    result: deferhook::store::AttemptResult,
    at: Timestamp,
) {
    let fenced = store
        .record_outcomes(&[outcome(claimed, event, result, at)], at)
        .await
        .unwrap();
    assert_eq!(fenced, [deferhook::store::Fenced::Applied]);
}

/// An attempt released at shutdown, its outcome unknown.
pub fn released() -> deferhook::store::AttemptResult {
    unknown("released at shutdown")
}
