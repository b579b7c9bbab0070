//! Response bodies: what the API shows of subscribers, jobs and attempts.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::{SubscriberLoad, WaitingReason, waiting_reason};
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::{Attempt, Job, LastError, LeaseInfo, Subscriber};

/// A subscriber. The signing secret appears only in the response that created it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberView {
    /// The subscriber's id.
    pub id: String,
    /// Where its webhooks are POSTed.
    pub url: String,
    /// Most attempts open at once for it, across all instances.
    pub max_in_flight: u32,
    /// Most attempts started per second for it; `null`: no limit.
    pub rate_limit_per_second: Option<u32>,
    /// False while paused.
    pub enabled: bool,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// The `whsec_…` signing secret: present only in the response that created the
    /// subscriber. Store it; it is never shown again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<Subscriber> for SubscriberView {
    fn from(s: Subscriber) -> Self {
        SubscriberView {
            id: s.id,
            url: s.url,
            max_in_flight: s.max_in_flight,
            rate_limit_per_second: s.rate_limit_per_second,
            enabled: s.enabled,
            created_at: s.created_at,
            updated_at: s.updated_at,
            secret: None,
        }
    }
}

/// The last failure of a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastErrorView {
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `blocked` or
    /// `secret_unreadable`.
    pub class: ErrorClass,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
    /// At most 1 KiB of the response body, with anything like a secret redacted.
    pub body_excerpt: Option<String>,
}

impl From<LastError> for LastErrorView {
    fn from(e: LastError) -> Self {
        LastErrorView {
            class: e.class,
            status: e.status,
            reason: e.reason,
            body_excerpt: e.body_excerpt,
        }
    }
}

/// The lease of an in-flight job.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaseView {
    /// The worker holding it.
    pub owner: String,
    /// When it expires unless renewed.
    pub expires_at: Timestamp,
}

impl From<LeaseInfo> for LeaseView {
    fn from(l: LeaseInfo) -> Self {
        LeaseView {
            owner: l.owner,
            expires_at: l.expires_at,
        }
    }
}

/// A job: one delivery of one event's payload to one subscriber.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    /// UUIDv7.
    pub id: Uuid,
    /// The producer's event id, sent as `webhook-id`.
    pub event_id: String,
    /// The subscriber it is delivered to.
    pub subscriber_id: String,
    /// Where it is in its life.
    pub state: JobState,
    /// Attempts started so far.
    pub attempts: u32,
    /// Most attempts; `null`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// When it first becomes eligible.
    pub deliver_at: Timestamp,
    /// When the next attempt may start, while `retrying`.
    pub next_attempt_at: Option<Timestamp>,
    /// After it no attempt starts.
    pub deadline: Timestamp,
    /// When it was accepted.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When a 2xx was recorded.
    pub delivered_at: Option<Timestamp>,
    /// When it became a dead letter.
    pub dead_at: Option<Timestamp>,
    /// Why it is dead.
    pub dead_reason: Option<DeadReason>,
    /// Why it is not delivered yet; `null` when terminal or due and waiting only for a
    /// free worker.
    pub waiting_reason: Option<WaitingReason>,
    /// The worker's lease, while `in_flight`.
    pub lease: Option<LeaseView>,
    /// The last failure, if any.
    pub last_error: Option<LastErrorView>,
}

impl JobView {
    /// The view of `job` at `now`; `load`, its subscriber's load, explains a due job
    /// held back by the subscriber's limits.
    pub fn new(job: Job, load: Option<&SubscriberLoad>, now: Timestamp) -> Self {
        JobView {
            waiting_reason: waiting_reason(
                job.state,
                job.due_at,
                job.subscriber_enabled,
                load,
                now,
            ),
            next_attempt_at: job.next_attempt_at(),
            id: job.id,
            event_id: job.event_id,
            subscriber_id: job.subscriber_id,
            state: job.state,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            deliver_at: job.deliver_at,
            deadline: job.deadline,
            created_at: job.created_at,
            updated_at: job.updated_at,
            delivered_at: job.delivered_at,
            dead_at: job.dead_at,
            dead_reason: job.dead_reason,
            lease: job
                .lease
                .filter(|_| job.state == JobState::InFlight)
                .map(LeaseView::from),
            last_error: job.last_error.map(LastErrorView::from),
        }
    }
}

/// One attempt of a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    /// 1-based.
    pub number: u32,
    /// When it was persisted, before the request left.
    pub started_at: Timestamp,
    /// When its result was recorded.
    pub finished_at: Option<Timestamp>,
    /// What it came to.
    pub outcome: AttemptOutcome,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// The failure class.
    pub error_class: Option<ErrorClass>,
    /// A short account.
    pub reason: Option<String>,
    /// At most 1 KiB of the response body, secrets redacted.
    pub body_excerpt: Option<String>,
    /// The worker that made it.
    pub lease_owner: String,
    /// finished_at − started_at, in milliseconds.
    pub duration_ms: Option<i64>,
    /// True when an earlier attempt's outcome was unknown, so the receiver may have
    /// seen this event before.
    pub possible_duplicate: bool,
}

impl From<Attempt> for AttemptView {
    fn from(a: Attempt) -> Self {
        AttemptView {
            number: a.number,
            started_at: a.started_at,
            duration_ms: a.finished_at.map(|f| f.millis_since(a.started_at)),
            finished_at: a.finished_at,
            outcome: a.outcome,
            status: a.status,
            error_class: a.error_class,
            reason: a.reason,
            body_excerpt: a.body_excerpt,
            lease_owner: a.lease_owner,
            possible_duplicate: a.possible_duplicate,
        }
    }
}
