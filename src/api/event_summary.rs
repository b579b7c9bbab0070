//! What `GET /v1/events` and `GET /v1/events/{event_id}` show (docs/DESIGN.md §5.10):
//! an affected event's counts, and an event's summary drawn from its jobs as read at
//! one instant: counts by state, by `waiting_reason`, by `dead_reason`, by last error
//! class and by retry-advice verdict, and its first failing subscribers.
//!
//! The reasons and the advice are the job view's: [`waiting_reason`] with the
//! subscriber's load, and [`retry_advice::for_job`].

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::subscriber_stats::JobCountsView;
use crate::domain::policy::ErrorClass;
use crate::domain::retry_advice::{self, JobFacts, RetryAdvice};
use crate::domain::waiting::{WaitingReason, waiting_reason};
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::{AffectedEvent, EventJob, EventJobs, JobCounts, SubscriberHold};

/// Most failing subscribers an event summary lists; the rest are counted in `total`
/// (list them with `GET /v1/jobs?event_id=…&state=retrying,dead`).
pub const MAX_FAILING_ITEMS: usize = 100;

/// An event with jobs not delivered.
#[derive(Debug, Serialize, ToSchema)]
pub struct AffectedEventView {
    /// The producer's event id.
    pub event_id: String,
    /// All of its jobs per state, as read now (an expired lease counts as `retrying`).
    pub jobs: JobCountsView,
    /// How many of its jobs are affected: `retrying`, `dead` since `affected_since`, or
    /// due and held back (see `GET /v1/events`).
    pub affected: u64,
    /// When its first job was created.
    pub created_at: Timestamp,
}

impl From<AffectedEvent> for AffectedEventView {
    fn from(e: AffectedEvent) -> Self {
        AffectedEventView {
            event_id: e.event_id,
            jobs: JobCountsView::from(e.jobs),
            affected: e.affected,
            created_at: e.created_at,
        }
    }
}

/// One event's jobs summed up, as read now. Each map holds only non-zero counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventSummaryView {
    /// The producer's event id.
    pub event_id: String,
    /// Its jobs per state (an expired lease counts as `retrying`); every state present.
    pub jobs: JobCountsView,
    /// Its waiting jobs per `waiting_reason` (as `GET /v1/jobs/{id}` computes it; a due
    /// job waiting only for a free worker has none and is not counted).
    #[schema(value_type = BTreeMap<String, u64>, example = json!({"subscriber_paused": 3}))]
    pub waiting_reasons: BTreeMap<&'static str, u64>,
    /// Its dead jobs per `dead_reason`.
    #[schema(value_type = BTreeMap<String, u64>, example = json!({"max_attempts": 2}))]
    pub dead_reasons: BTreeMap<&'static str, u64>,
    /// Its jobs not delivered per last error class (`last_error.class`).
    #[schema(value_type = BTreeMap<String, u64>, example = json!({"http_5xx": 5}))]
    pub error_classes: BTreeMap<&'static str, u64>,
    /// Its jobs per `retry_advice` verdict (jobs with no advice are not counted).
    #[schema(value_type = BTreeMap<String, u64>, example = json!({"yes": 5, "no": 1}))]
    pub retry_advice: BTreeMap<&'static str, u64>,
    /// Its subscribers whose job is failing: `retrying`, `dead`, or due and held back.
    pub failing_subscribers: FailingSubscribers,
}

/// The first failing subscribers of an event, by subscriber id, and how many there are.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailingSubscribers {
    /// At most 100, in subscriber id order.
    pub items: Vec<FailingSubscriberView>,
    /// How many there are in all.
    pub total: u64,
}

/// A subscriber whose job of the event is failing.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailingSubscriberView {
    /// The subscriber.
    pub subscriber_id: String,
    /// Its job of the event.
    pub job_id: Uuid,
    /// The job's state.
    pub state: JobState,
    /// Why the job waits, if it does.
    pub waiting_reason: Option<WaitingReason>,
    /// Why the job is dead, if it is.
    pub dead_reason: Option<DeadReason>,
    /// The job's last failure, if any.
    pub last_error: Option<FailureView>,
    /// Whether a retry now can change the outcome, and why.
    pub retry_advice: Option<RetryAdvice>,
}

/// A job's last failure.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailureView {
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `blocked` or
    /// `secret_unreadable`.
    pub class: ErrorClass,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
    /// When the attempt that failed ended; `null` when its attempt was purged.
    pub at: Option<Timestamp>,
}

/// The summary of event `event_id`'s jobs at `now`.
pub fn summarize(event_id: String, read: EventJobs, now: Timestamp) -> EventSummaryView {
    let mut counts = JobCounts::default();
    let mut waiting_reasons = BTreeMap::new();
    let mut dead_reasons = BTreeMap::new();
    let mut error_classes = BTreeMap::new();
    let mut advice = BTreeMap::new();
    let mut items = Vec::new();
    let mut total = 0;
    for entry in read.jobs {
        let job = &entry.job;
        let hold = read.holds.get(&job.subscriber_id);
        let reason = waiting_reason(
            job.state,
            job.due_at,
            job.subscriber_enabled,
            hold.map(|h| &h.load),
            now,
        );
        let facts = job_facts(&entry, reason, hold);
        let job_advice = retry_advice::for_job(&facts);
        counts.add(job.state, 1);
        add(&mut waiting_reasons, reason.map(WaitingReason::as_str));
        add(&mut dead_reasons, job.dead_reason.map(DeadReason::as_str));
        if job.state != JobState::Delivered {
            add(
                &mut error_classes,
                facts.last_error_class.map(|c| c.as_str()),
            );
        }
        add(&mut advice, job_advice.as_ref().map(|a| a.verdict.as_str()));
        if failing(job.state, reason) {
            total += 1;
            if items.len() < MAX_FAILING_ITEMS {
                items.push(failing_view(entry, reason, job_advice));
            }
        }
    }
    EventSummaryView {
        event_id,
        jobs: JobCountsView::from(counts),
        waiting_reasons,
        dead_reasons,
        error_classes,
        retry_advice: advice,
        failing_subscribers: FailingSubscribers { items, total },
    }
}

/// What the advice on `entry`'s job is drawn from. `dead_detail` is not read here yet.
fn job_facts(
    entry: &EventJob,
    waiting_reason: Option<WaitingReason>,
    hold: Option<&SubscriberHold>,
) -> JobFacts {
    let job = &entry.job;
    JobFacts {
        state: job.state,
        waiting_reason,
        dead_reason: job.dead_reason,
        dead_detail: None,
        last_error_class: job.last_error.as_ref().map(|e| e.class),
        last_status: job.last_error.as_ref().and_then(|e| e.status),
        due_at: job.next_attempt_at(),
        circuit_retry_at: hold.and_then(|h| h.circuit_retry_at),
    }
}

/// True when a job in `state` waiting for `reason` is failing: `retrying`, `dead`, or
/// due and held back (its subscriber paused or at a limit, its destination paused,
/// its circuit open or at its limit).
fn failing(state: JobState, reason: Option<WaitingReason>) -> bool {
    match state {
        JobState::Retrying | JobState::Dead => true,
        JobState::Scheduled => reason.is_some_and(|r| {
            !matches!(
                r,
                WaitingReason::Scheduled | WaitingReason::BackingOff | WaitingReason::InFlight
            )
        }),
        JobState::InFlight | JobState::Delivered | JobState::Cancelled => false,
    }
}

fn failing_view(
    entry: EventJob,
    waiting_reason: Option<WaitingReason>,
    retry_advice: Option<RetryAdvice>,
) -> FailingSubscriberView {
    let job = entry.job;
    FailingSubscriberView {
        subscriber_id: job.subscriber_id,
        job_id: job.id,
        state: job.state,
        waiting_reason,
        dead_reason: job.dead_reason,
        last_error: job.last_error.map(|e| FailureView {
            class: e.class,
            status: e.status,
            reason: e.reason,
            at: entry.last_error_at,
        }),
        retry_advice,
    }
}

fn add(counts: &mut BTreeMap<&'static str, u64>, key: Option<&'static str>) {
    if let Some(key) = key {
        *counts.entry(key).or_default() += 1;
    }
}
