//! Response bodies: what the API shows of subscribers, destinations, jobs and attempts.

use serde::Serialize;
use url::Url;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::circuit::{CircuitState, ForcedCircuit};
use crate::domain::destination::Destination;
use crate::domain::health::HealthStatus;
use crate::domain::policy::ErrorClass;
use crate::domain::retry_advice::{self, JobFacts, RetryAdvice};
use crate::domain::waiting::{SubscriberLoad, WaitingReason, waiting_reason};
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::{
    self, Attempt, AttemptFailure, Job, JobCounts, LastError, LeaseInfo, PausedReason, Subscriber,
    SubscriberHealth,
};

/// A subscriber. The signing secret appears only in the response that created it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberView {
    /// The subscriber's id.
    pub id: String,
    /// Where its webhooks are POSTed.
    pub url: String,
    /// The destination its URL sends to: `host:port`, normalised (docs/DESIGN.md §15).
    #[schema(example = "hooks.example.com:443")]
    pub destination: String,
    /// Most attempts open at once for it, across all instances.
    pub max_in_flight: u32,
    /// Most attempts started per second for it; `null`: no limit.
    pub rate_limit_per_second: Option<u32>,
    /// False while paused.
    pub enabled: bool,
    /// Why it is paused: `gone` (its receiver answered 410 Gone), `operator` (set
    /// `enabled: false`); `null` while enabled, or paused before deferhook kept it.
    #[schema(value_type = Option<String>, example = "gone")]
    pub paused_reason: Option<&'static str>,
    /// When it was paused; `null` while enabled.
    pub paused_at: Option<Timestamp>,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// The event types it subscribes to: names, or prefixes ending in `*`.
    pub event_types: Vec<String>,
    /// Its own attempt timeout, in milliseconds; `null`: the server's
    /// `--attempt-timeout-ms`.
    pub attempt_timeout_ms: Option<u64>,
    /// Its health at the instant read: healthy, failing or paused, since when, its last
    /// error, its jobs and whether a retry would help (docs/DESIGN.md §5.3).
    pub health: HealthView,
    /// The `whsec_…` signing secret: present only in the response that created the
    /// subscriber. Store it; it is never shown again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl SubscriberView {
    /// The view of `s` with its `health`.
    pub fn new(s: Subscriber, health: HealthView) -> Self {
        // A stored URL always has a host and a port (http or https, checked on PUT).
        let destination = Url::parse(&s.url)
            .ok()
            .as_ref()
            .and_then(Destination::of_url)
            .map(|d| d.to_string())
            .unwrap_or_default();
        SubscriberView {
            id: s.id,
            destination,
            url: s.url,
            max_in_flight: s.max_in_flight,
            rate_limit_per_second: s.rate_limit_per_second,
            enabled: s.enabled,
            paused_reason: s.paused_reason.map(store::PausedReason::as_str),
            paused_at: s.paused_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
            event_types: s.event_types,
            attempt_timeout_ms: s.attempt_timeout_ms,
            health,
            secret: None,
        }
    }
}

/// Where a destination's `max_in_flight` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// The server's `--destination-max-in-flight`.
    Default,
    /// An operator set it (`PUT /v1/destinations/{destination}`).
    Operator,
}

/// A destination: the `host:port` its subscribers' URLs share, with its limit, pause,
/// circuit breaker and figures at the instant read (docs/DESIGN.md §15).
#[derive(Debug, Serialize, ToSchema)]
pub struct DestinationView {
    /// `host:port`, normalised: the host lower-case (IDNA-encoded), an IPv6 address in
    /// brackets, the port always written.
    #[schema(example = "hooks.example.com:443")]
    pub destination: String,
    /// Subscribers whose URL sends here.
    pub subscribers: u64,
    /// Requests open to it now: live leases, across all instances.
    pub in_flight: u64,
    /// Most requests open to it at once, across all instances (the limit in force).
    pub max_in_flight: u32,
    /// Whether `max_in_flight` is the server's default or an operator's.
    pub max_in_flight_source: LimitSource,
    /// True while an operator holds its deliveries (jobs wait within their deadlines).
    pub paused: bool,
    /// Its circuit breaker.
    pub circuit: CircuitView,
    /// The latest attempt that said the host is unwell (connect, timeout, 502/503/504).
    pub last_error: Option<DestinationErrorView>,
    /// When its first subscriber was registered.
    pub created_at: Timestamp,
    /// When an operator or the circuit breaker last changed it.
    pub updated_at: Timestamp,
}

impl From<store::DestinationView> for DestinationView {
    fn from(d: store::DestinationView) -> Self {
        DestinationView {
            destination: d.key,
            subscribers: d.subscribers,
            in_flight: d.in_flight,
            max_in_flight: d.max_in_flight,
            max_in_flight_source: if d.max_in_flight_set {
                LimitSource::Operator
            } else {
                LimitSource::Default
            },
            paused: d.paused,
            circuit: CircuitView::from(d.circuit),
            last_error: d.last_error.map(DestinationErrorView::from),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// A destination's circuit breaker, as it stands at the instant read.
#[derive(Debug, Serialize, ToSchema)]
pub struct CircuitView {
    /// `closed`: requests go out; `open`: they wait; `half_open`: the cool-down ended and
    /// one probe goes (or is out). An override shows as what it forces.
    pub state: CircuitState,
    /// The operator's override (`open` or `closed`); `null`: the breaker decides.
    pub forced: Option<ForcedCircuit>,
    /// Consecutive attempts that said the host is unwell.
    pub consecutive_failures: u32,
    /// When it last opened.
    pub opened_at: Option<Timestamp>,
    /// While open: when the probe may go; half-open with a probe out: when the probe's
    /// lease ends.
    pub retry_at: Option<Timestamp>,
    /// The current cool-down, in milliseconds (0 while closed); it doubles after each
    /// failed probe, up to `--circuit-max-cooldown-ms`.
    pub cooldown_ms: u64,
}

impl From<store::CircuitView> for CircuitView {
    fn from(c: store::CircuitView) -> Self {
        CircuitView {
            state: c.state,
            forced: c.forced,
            consecutive_failures: c.consecutive_failures,
            opened_at: c.opened_at,
            retry_at: c.retry_at,
            cooldown_ms: c.cooldown_ms,
        }
    }
}

/// The latest host failure at a destination.
#[derive(Debug, Serialize, ToSchema)]
pub struct DestinationErrorView {
    /// When the attempt ended.
    pub at: Timestamp,
    /// `connect`, `timeout` or `http_5xx` (502, 503 or 504).
    pub class: ErrorClass,
    /// The HTTP status, when the host answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
}

impl From<store::DestinationError> for DestinationErrorView {
    fn from(e: store::DestinationError) -> Self {
        DestinationErrorView {
            at: e.at,
            class: e.class,
            status: e.status,
            reason: e.reason,
        }
    }
}

/// The last failure of a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastErrorView {
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `protocol`,
    /// `blocked` or `secret_unreadable`.
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
    /// Its event's type, sent as `webhook-event-type`; `null`: none.
    pub event_type: Option<String>,
    /// The recurring schedule that created it; `null`: posted.
    pub schedule_id: Option<String>,
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
    /// Why it had waited when it died at its deadline: `subscriber_paused`,
    /// `destination_paused` or `destination_circuit_open` (a waiting reason, not an
    /// error class); `null` otherwise.
    pub dead_detail: Option<WaitingReason>,
    /// Why it is not delivered yet; `null` when terminal or due and waiting only for a
    /// free worker.
    pub waiting_reason: Option<WaitingReason>,
    /// Whether a retry now can change its outcome, and why (docs/DESIGN.md §5.9);
    /// `null` when nothing failed and nothing holds it back, or an attempt is running.
    pub retry_advice: Option<RetryAdvice>,
    /// The worker's lease, while `in_flight`.
    pub lease: Option<LeaseView>,
    /// The last failure, if any.
    pub last_error: Option<LastErrorView>,
}

/// What the retry advice on `job` is drawn from: its row, its waiting reason as read,
/// and its subscriber's load (its destination's hold and when that ends), when read.
pub(crate) fn job_facts(
    job: &Job,
    waiting_reason: Option<WaitingReason>,
    load: Option<&SubscriberLoad>,
    now: Timestamp,
) -> JobFacts {
    JobFacts {
        deadline_passed: job.deadline <= now,
        attempts_spent: job.max_attempts.is_some_and(|max| job.attempts >= max),
        subscriber_deleted: job.subscriber_deleted,
        subscriber_paused: !job.subscriber_enabled,
        destination_hold: load.and_then(|l| l.destination_hold),
        state: job.state,
        waiting_reason,
        dead_reason: job.dead_reason,
        dead_detail: job.dead_detail,
        last_error_class: job.last_error.as_ref().map(|e| e.class),
        last_status: job.last_error.as_ref().and_then(|e| e.status),
        due_at: job.next_attempt_at(),
        circuit_retry_at: load.and_then(|l| l.destination_hold_until),
        endpoint_hold: load.and_then(|l| l.endpoint_hold),
        endpoint_hold_until: load.and_then(|l| l.endpoint_hold_until),
        timeout_bound: load.and_then(|l| l.recent.timeout_bound()),
    }
}

impl JobView {
    /// The view of `job` at `now`; `load`, its subscriber's load, explains a due job
    /// held back by the subscriber's limits.
    pub fn new(job: Job, load: Option<&SubscriberLoad>, now: Timestamp) -> Self {
        let waiting = waiting_reason(job.state, job.due_at, job.subscriber_enabled, load, now);
        let retry_advice = retry_advice::for_job(&job_facts(&job, waiting, load, now));
        JobView {
            waiting_reason: waiting,
            retry_advice,
            dead_detail: job.dead_detail,
            next_attempt_at: job.next_attempt_at(),
            id: job.id,
            event_id: job.event_id,
            event_type: job.event_type,
            schedule_id: job.schedule_id,
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

/// A subscriber's jobs per state; every state is present.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobCountsView {
    /// Waiting for `deliver_at`.
    pub scheduled: u64,
    /// An attempt is running.
    pub in_flight: u64,
    /// Waiting for `next_attempt_at`.
    pub retrying: u64,
    /// Delivered (until purged by retention).
    pub delivered: u64,
    /// Dead letters (until purged by retention).
    pub dead: u64,
    /// Cancelled (until purged by retention).
    pub cancelled: u64,
}

impl From<JobCounts> for JobCountsView {
    fn from(c: JobCounts) -> Self {
        JobCountsView {
            scheduled: c.scheduled,
            in_flight: c.in_flight,
            retrying: c.retrying,
            delivered: c.delivered,
            dead: c.dead,
            cancelled: c.cancelled,
        }
    }
}

/// A subscriber's health at the instant read.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// `paused`: not enabled; `failing`: its last attempt failed (an `unknown` outcome
    /// after a crash does not count) or some of its jobs are `retrying`; `healthy`
    /// otherwise.
    pub status: HealthStatus,
    /// When it entered that status: paused, its `paused_at`; failing, its first failed
    /// attempt after its latest success (its latest failure when its last attempt
    /// succeeded but jobs still retry); healthy, its latest success. `null` when
    /// unknown (no attempt yet).
    pub since: Option<Timestamp>,
    /// Its latest failed attempt (outcome `retryable`, `terminal` or `blocked`),
    /// whatever its status; `null` when none failed.
    pub last_error: Option<HealthErrorView>,
    /// Its non-terminal jobs, as read (an expired lease counts as `retrying`).
    pub jobs: HealthJobsView,
    /// Its jobs that became `dead` in the last hour: (now − 1 h, now].
    pub dead_last_hour: u64,
    /// `jobs.retrying + dead_last_hour`: the order of `GET /v1/subscribers?health=`.
    pub failing_jobs: u64,
    /// Why it is paused: `gone` (its receiver answered 410), `operator`; `null` while
    /// enabled.
    #[schema(value_type = Option<String>, example = "gone")]
    pub paused_reason: Option<&'static str>,
    /// When it was paused; `null` while enabled.
    pub paused_at: Option<Timestamp>,
    /// Whether a retry now can change the outcome, and why (docs/DESIGN.md §5.9);
    /// `null` while healthy.
    pub retry_advice: Option<RetryAdvice>,
}

/// A subscriber's latest failed attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthErrorView {
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `protocol`,
    /// `blocked` or `secret_unreadable`.
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
    /// When its result was recorded.
    pub at: Timestamp,
}

impl From<AttemptFailure> for HealthErrorView {
    fn from(f: AttemptFailure) -> Self {
        HealthErrorView {
            class: f.class,
            status: f.status,
            reason: f.reason,
            at: f.at,
        }
    }
}

/// A subscriber's non-terminal jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthJobsView {
    /// Waiting for `deliver_at` (or due, waiting for a worker).
    pub scheduled: u64,
    /// An attempt is running (its lease holds).
    pub in_flight: u64,
    /// Waiting for `next_attempt_at` after a failure, or an expired lease.
    pub retrying: u64,
}

impl From<&SubscriberHealth> for HealthView {
    fn from(entry: &SubscriberHealth) -> Self {
        let health = entry.health();
        let figures = &entry.figures;
        let retry_advice = match health.status {
            HealthStatus::Healthy => None,
            HealthStatus::Failing | HealthStatus::Paused => {
                retry_advice::for_subscriber(&entry.advice_facts())
            }
        };
        HealthView {
            status: health.status,
            since: health.since,
            last_error: figures.last_failure.clone().map(HealthErrorView::from),
            jobs: HealthJobsView {
                scheduled: figures.scheduled,
                in_flight: figures.in_flight,
                retrying: figures.retrying,
            },
            dead_last_hour: figures.dead_last_hour,
            failing_jobs: figures.failing_jobs(),
            paused_reason: entry.subscriber.paused_reason.map(PausedReason::as_str),
            paused_at: entry.subscriber.paused_at,
            retry_advice,
        }
    }
}
