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

use super::views::JobCountsView;
use crate::domain::policy::ErrorClass;
use crate::domain::retry_advice::{self, RetryAdvice};
use crate::domain::waiting::{WaitingReason, waiting_reason};
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::{AffectedEvent, EventJob, EventJobs, JobCounts};

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
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `protocol`,
    /// `blocked` or `secret_unreadable`.
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
        let reason = waiting_reason(job.state, job.due_at, job.subscriber_enabled, hold, now);
        let facts = super::views::job_facts(&entry.job, reason, hold, now);
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::domain::retry_advice::RetryVerdict;
    use crate::domain::waiting::SubscriberLoad;
    use crate::store::{Job, LastError, NewJob};

    const NOW: Timestamp = Timestamp::from_millis(1_000_000);

    fn job(subscriber: &str, state: JobState, due_ms: Option<i64>) -> Job {
        let new = NewJob {
            id: Uuid::now_v7(),
            subscriber_id: subscriber.to_owned(),
            event_id: "e".to_owned(),
            payload: std::sync::Arc::from("{}"),
            deliver_at: Timestamp::from_millis(0),
            deadline: Timestamp::from_millis(10_000_000),
            max_attempts: None,
            created_at: Timestamp::from_millis(0),
            event_type: None,
            schedule_id: None,
        };
        Job {
            state,
            due_at: due_ms.map(Timestamp::from_millis),
            ..Job::scheduled(&new, true)
        }
    }

    fn failed(mut job: Job, class: ErrorClass, status: u16) -> Job {
        job.last_error = Some(LastError {
            class,
            status: Some(status),
            reason: Some(format!("HTTP {status}")),
            body_excerpt: None,
        });
        job
    }

    fn entry(job: Job) -> EventJob {
        EventJob {
            job,
            last_error_at: None,
        }
    }

    fn hold(open: u32, destination: Option<WaitingReason>, retry: Option<i64>) -> SubscriberLoad {
        SubscriberLoad {
            open_attempts: open,
            max_in_flight: 2,
            started_last_second: 0,
            rate_limit_per_second: None,
            last_started_at: None,
            destination_hold: destination,
            destination_hold_until: retry.map(Timestamp::from_millis),
            endpoint_hold: None,
            endpoint_hold_until: None,
            recent: Default::default(),
        }
    }

    #[test]
    fn the_summary_counts_reasons_and_lists_the_failing() {
        let jobs = vec![
            failed(
                job("a", JobState::Retrying, Some(2_000_000)),
                ErrorClass::Http5xx,
                503,
            ),
            job("b", JobState::Scheduled, Some(0)),
            job("c", JobState::Scheduled, Some(0)),
            job("d", JobState::Scheduled, Some(5_000_000)),
            failed(job("e", JobState::Delivered, None), ErrorClass::Timeout, 0),
            job("f", JobState::InFlight, Some(1_030_000)),
            job("g", JobState::Scheduled, Some(0)),
        ];
        let circuit = Some(WaitingReason::DestinationCircuitOpen);
        let holds = HashMap::from([
            ("b".to_owned(), hold(2, None, None)),
            ("c".to_owned(), hold(0, None, None)),
            ("g".to_owned(), hold(0, circuit, Some(1_200_000))),
        ]);
        let read = EventJobs {
            jobs: jobs.into_iter().map(entry).collect(),
            holds,
        };
        let s = summarize("e".to_owned(), read, NOW);
        assert_eq!(
            (
                s.jobs.scheduled,
                s.jobs.retrying,
                s.jobs.delivered,
                s.jobs.in_flight
            ),
            (4, 1, 1, 1)
        );
        assert_eq!(
            s.waiting_reasons,
            BTreeMap::from([
                ("backing_off", 1),
                ("destination_circuit_open", 1),
                ("in_flight", 1),
                ("scheduled", 1),
                ("subscriber_at_limit", 1),
            ]),
            "c waits only for a worker: no reason"
        );
        assert_eq!(
            s.error_classes,
            BTreeMap::from([("http_5xx", 1)]),
            "not the delivered job's"
        );
        assert_eq!(
            s.retry_advice,
            BTreeMap::from([("not_before", 2), ("yes", 1)])
        );
        let failing: Vec<&str> = s
            .failing_subscribers
            .items
            .iter()
            .map(|f| f.subscriber_id.as_str())
            .collect();
        assert_eq!(failing, ["a", "b", "g"]);
        assert_eq!(s.failing_subscribers.total, 3);
        let g = &s.failing_subscribers.items[2];
        let advice = g.retry_advice.as_ref().unwrap();
        assert_eq!(advice.verdict, RetryVerdict::NotBefore);
        assert_eq!(advice.at, Some(Timestamp::from_millis(1_200_000)));
        let a = &s.failing_subscribers.items[0];
        assert_eq!(a.last_error.as_ref().map(|e| e.status), Some(Some(503)));
        assert_eq!(
            a.retry_advice.as_ref().map(|r| r.at),
            Some(Some(Timestamp::from_millis(2_000_000)))
        );
    }

    #[test]
    fn at_most_a_hundred_failing_are_listed() {
        let jobs = (0..150)
            .map(|n| {
                let mut dead = job(&format!("s-{n:03}"), JobState::Dead, None);
                dead.dead_reason = Some(DeadReason::MaxAttempts);
                entry(dead)
            })
            .collect();
        let read = EventJobs {
            jobs,
            holds: HashMap::new(),
        };
        let s = summarize("e".to_owned(), read, NOW);
        assert_eq!(s.failing_subscribers.total, 150);
        assert_eq!(s.failing_subscribers.items.len(), MAX_FAILING_ITEMS);
        assert_eq!(s.dead_reasons, BTreeMap::from([("max_attempts", 150)]));
        assert_eq!(s.retry_advice, BTreeMap::from([("replay", 150)]));
    }
}
