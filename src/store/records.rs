//! What the store reads and writes: subscribers, jobs, leases and attempts.

use uuid::Uuid;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::ErrorClass;
use crate::domain::secret::{SigningSecret, SigningSecrets};
use crate::domain::{DeadReason, JobSnapshot, JobState, Timestamp, Transition};
use crate::store::sealing::UnreadableSecret;

/// A registered receiver. Its secret is not part of it: only the delivery path reads
/// secrets (see [`ClaimedJob::secrets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscriber {
    /// The operator's id for it (see `domain::validate::subscriber_id`).
    pub id: String,
    /// Where its webhooks are POSTed.
    pub url: String,
    /// Most attempts open at once for it across all instances.
    pub max_in_flight: u32,
    /// Most attempts started per second for it; `None`: no limit.
    pub rate_limit_per_second: Option<u32>,
    /// False while paused; its jobs wait (deadlines still run).
    pub enabled: bool,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// Default `max_in_flight` of a subscriber (DESIGN §3).
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 16;

/// A create-or-update of a subscriber. Fields left `None` keep their current value on
/// update and take their default on create.
#[derive(Clone, Debug)]
pub struct SubscriberPut {
    /// Which subscriber.
    pub id: String,
    /// The new URL (always given).
    pub url: String,
    /// A secret chosen by the caller; on create, `generated_secret` is used without it.
    /// On update it replaces the current secret at once and ends a rotation's grace
    /// period (the previous secret is dropped); use
    /// [`crate::store::Store::rotate_secret`] for a grace period.
    pub secret: Option<SigningSecret>,
    /// The secret to use if the subscriber is created and `secret` is `None`.
    pub generated_secret: SigningSecret,
    /// New `max_in_flight`.
    pub max_in_flight: Option<u32>,
    /// `Some(None)` removes the rate limit; `None` keeps it.
    pub rate_limit_per_second: Option<Option<u32>>,
    /// New `enabled`.
    pub enabled: Option<bool>,
}

/// The result of [`crate::store::Store::put_subscriber`].
#[derive(Clone, Debug)]
pub struct PutSubscriberOutcome {
    /// The subscriber as stored.
    pub subscriber: Subscriber,
    /// `Some(secret)` only when this call created it: the one time a secret is shown.
    pub created_secret: Option<SigningSecret>,
}

/// A rotation of a subscriber's signing secret
/// ([`crate::store::Store::rotate_secret`]).
#[derive(Clone, Debug)]
pub struct SecretRotation {
    /// Whose secret.
    pub subscriber_id: String,
    /// The new current secret.
    pub secret: SigningSecret,
    /// How long the secret it replaces keeps signing alongside, in milliseconds; `0`
    /// drops it at once.
    pub grace_ms: u64,
}

/// The result of a rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRotated {
    /// The subscriber after the rotation (`updated_at` is the rotation's `now`).
    pub subscriber: Subscriber,
    /// When the replaced secret stops signing (`now + grace`); `None` with no grace.
    pub previous_secret_expires_at: Option<Timestamp>,
}

/// A job to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    /// A fresh UUIDv7.
    pub id: Uuid,
    /// Its subscriber; must exist.
    pub subscriber_id: String,
    /// The producer's event id; with the subscriber id it identifies the job.
    pub event_id: String,
    /// The payload exactly as the producer sent it (valid JSON text).
    pub payload: String,
    /// When it first becomes eligible.
    pub deliver_at: Timestamp,
    /// After it no attempt starts.
    pub deadline: Timestamp,
    /// Most attempts; `None`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// Now, as `created_at`.
    pub created_at: Timestamp,
}

/// The result of creating one job.
#[derive(Clone, Debug)]
pub enum CreateOutcome {
    /// A new job was stored.
    Created(Job),
    /// A job with the same (subscriber_id, event_id) and the same payload (as a JSON
    /// value) already existed; nothing was written. Its stored payload text is given.
    Existing {
        /// The job that already exists.
        job: Job,
        /// Its payload text.
        payload: String,
    },
}

/// The last failure recorded on a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastError {
    /// What kind of failure.
    pub class: ErrorClass,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// A short human-readable account.
    pub reason: Option<String>,
    /// At most 1 KiB of the response body, secrets redacted.
    pub body_excerpt: Option<String>,
}

/// The lease a worker holds on an in-flight job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The worker that holds it.
    pub owner: String,
    /// The fencing token: increases with every claim of the job.
    pub token: i64,
    /// When it expires unless renewed.
    pub expires_at: Timestamp,
}

/// A job as stored (without its payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// UUIDv7.
    pub id: Uuid,
    /// Its subscriber.
    pub subscriber_id: String,
    /// The producer's event id.
    pub event_id: String,
    /// Its state.
    pub state: JobState,
    /// Attempts started.
    pub attempts: u32,
    /// Most attempts; `None`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// When it first became eligible.
    pub deliver_at: Timestamp,
    /// After it no attempt starts.
    pub deadline: Timestamp,
    /// When it next needs a worker (see [`JobSnapshot::due_at`]).
    pub due_at: Option<Timestamp>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When a 2xx was recorded.
    pub delivered_at: Option<Timestamp>,
    /// When it became dead.
    pub dead_at: Option<Timestamp>,
    /// Why it is dead.
    pub dead_reason: Option<DeadReason>,
    /// The last failure, if any.
    pub last_error: Option<LastError>,
    /// The current lease, when in flight.
    pub lease: Option<LeaseInfo>,
    /// Whether its subscriber is enabled (for `waiting_reason`).
    pub subscriber_enabled: bool,
}

impl Job {
    /// The job as `new` is stored when created: `scheduled`, due at its `deliver_at`,
    /// no attempt yet, updated when created. Equal to what a read of it returns.
    pub fn scheduled(new: &NewJob, subscriber_enabled: bool) -> Job {
        Job {
            id: new.id,
            subscriber_id: new.subscriber_id.clone(),
            event_id: new.event_id.clone(),
            state: JobState::Scheduled,
            attempts: 0,
            max_attempts: new.max_attempts,
            deliver_at: new.deliver_at,
            deadline: new.deadline,
            due_at: Some(new.deliver_at),
            created_at: new.created_at,
            updated_at: new.created_at,
            delivered_at: None,
            dead_at: None,
            dead_reason: None,
            last_error: None,
            lease: None,
            subscriber_enabled,
        }
    }

    /// `next_attempt_at`: the due time of a retrying job.
    pub fn next_attempt_at(&self) -> Option<Timestamp> {
        (self.state == JobState::Retrying)
            .then_some(self.due_at)
            .flatten()
    }

    /// What a conditional write checks (see [`JobVersion`]).
    pub fn version(&self) -> JobVersion {
        JobVersion {
            state: self.state,
            updated_at: self.updated_at,
        }
    }

    /// What the state machine needs of it.
    pub fn snapshot(&self) -> JobSnapshot {
        JobSnapshot {
            state: self.state,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            due_at: self.due_at,
            deadline: self.deadline,
        }
    }
}

/// What an operator's decision about a job was based on: its state and when it last
/// changed. A conditional write applies only if neither moved meanwhile (a job
/// claimed, failed and replayed since the read is scheduled again, but not the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobVersion {
    /// The state read.
    pub state: JobState,
    /// `updated_at` read.
    pub updated_at: Timestamp,
}

/// Filters of a job listing; all given ones must match. Lower bounds (`*_after`) are
/// inclusive, upper bounds (`*_before`) exclusive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this event.
    pub event_id: Option<String>,
    /// Only this subscriber.
    pub subscriber_id: Option<String>,
    /// Only this state.
    pub state: Option<JobState>,
    /// Only dead jobs with this reason (implies state `dead`).
    pub dead_reason: Option<DeadReason>,
    /// Only jobs created at or after this instant, as recorded in their UUIDv7 id (its
    /// 48-bit millisecond timestamp), so the id indexes serve the bound.
    pub created_after: Option<Timestamp>,
    /// Only jobs created before this instant (UUIDv7 id timestamp).
    pub created_before: Option<Timestamp>,
    /// Only dead jobs whose `dead_at` is at or after this instant (implies `dead`).
    pub dead_after: Option<Timestamp>,
    /// Only dead jobs whose `dead_at` is before this instant (implies `dead`).
    pub dead_before: Option<Timestamp>,
}

impl JobFilter {
    /// True when a filter only dead jobs can match is set (`dead_reason`, `dead_after`,
    /// `dead_before`).
    pub fn implies_dead(&self) -> bool {
        self.dead_reason.is_some() || self.dead_after.is_some() || self.dead_before.is_some()
    }
}

/// The smallest UUIDv7 whose timestamp is `at` (milliseconds, clamped to the 48 bits
/// a UUIDv7 holds): every job id created at or after `at` is `>=` it, every one
/// created before is `<` it, as values and as lowercase text alike.
pub fn uuid_v7_floor(at: Timestamp) -> Uuid {
    let ms = at.as_millis().clamp(0, (1_i64 << 48) - 1);
    Uuid::from_u128((ms as u128) << 80)
}

/// One page request: items strictly after `after` in the listing's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest<K> {
    /// The last key of the previous page.
    pub after: Option<K>,
    /// Most items.
    pub limit: u32,
}

/// A claim: take up to `limit` due jobs under a lease of `lease_ms` for `owner`.
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    /// The instant of the claim.
    pub now: Timestamp,
    /// Most jobs to return.
    pub limit: u32,
    /// The worker's identity, stored as the lease owner.
    pub owner: String,
    /// The lease's length in milliseconds.
    pub lease_ms: u64,
}

/// A job claimed for one attempt: everything the worker needs to send it.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    /// The job.
    pub job_id: Uuid,
    /// Its subscriber.
    pub subscriber_id: String,
    /// Sent as `webhook-id`.
    pub event_id: String,
    /// The exact bytes to send.
    pub payload: String,
    /// Where to send it.
    pub url: String,
    /// The secrets to sign with, read (and decrypted) at the claim: the current one
    /// and, during a rotation's grace period, the previous one with its expiry (the
    /// attempt decides with its own `now` whether it still signs). An error when the
    /// stored secret cannot be read (e.g. sealed with another `--secret-key`): the
    /// attempt then fails without sending anything.
    pub secrets: Result<SigningSecrets, UnreadableSecret>,
    /// The fencing token of this lease.
    pub lease_token: i64,
    /// When the lease expires unless renewed.
    pub lease_expires_at: Timestamp,
    /// This attempt's number (1-based).
    pub attempt: u32,
    /// True when the previous attempt's outcome is unknown (lease expired or released
    /// at shutdown), so the receiver may already have the event.
    pub possible_duplicate: bool,
    /// True when the claim took over an expired lease.
    pub reclaimed_expired_lease: bool,
    /// When the job became due (for the claim delay).
    pub due_since: Timestamp,
    /// The job after the claim, for the state machine.
    pub snapshot: JobSnapshot,
}

/// Names a lease: the job and the fencing token the writer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseRef {
    /// The job.
    pub job_id: Uuid,
    /// The token from the claim.
    pub token: i64,
}

/// What an attempt came to, for its attempt row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptResult {
    /// The outcome.
    pub outcome: AttemptOutcome,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The failure class, when it failed.
    pub error_class: Option<ErrorClass>,
    /// A short account.
    pub reason: Option<String>,
    /// At most 1 KiB of the response body, secrets redacted.
    pub body_excerpt: Option<String>,
}

/// A fenced write of an attempt's result and the transition it causes.
#[derive(Clone, Debug)]
pub struct OutcomeRecord {
    /// The lease the writer holds.
    pub lease: LeaseRef,
    /// The attempt's number.
    pub attempt: u32,
    /// When the attempt ended.
    pub finished_at: Timestamp,
    /// What it came to.
    pub result: AttemptResult,
    /// What the state machine decided (out of `in_flight`).
    pub transition: Transition,
    /// The receiver answered `410 Gone`: pause its subscriber (`enabled = false`) until
    /// an operator resumes it (DESIGN §3). Applies even to a late result: the answer
    /// is a fact about the receiver, whoever holds the lease.
    pub pause_subscriber: bool,
}

/// Whether a fenced write took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fenced {
    /// The lease was current: the job moved.
    Applied,
    /// The lease was no longer current: the attempt row was updated, the job was not.
    Late,
}

/// One row of a job's attempt history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// When it was persisted (before the request left).
    pub started_at: Timestamp,
    /// When its result was recorded.
    pub finished_at: Option<Timestamp>,
    /// What it came to.
    pub outcome: AttemptOutcome,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The failure class.
    pub error_class: Option<ErrorClass>,
    /// A short account.
    pub reason: Option<String>,
    /// At most 1 KiB of the response body, secrets redacted.
    pub body_excerpt: Option<String>,
    /// The worker that made it.
    pub lease_owner: String,
    /// Its lease's fencing token.
    pub lease_token: i64,
    /// True when the previous attempt's outcome was unknown, so the receiver may
    /// already have had the event.
    pub possible_duplicate: bool,
}

/// Jobs moved by a sweep of [`crate::store::Store::expire_deadlines`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpiredJobs {
    /// Jobs that went `dead` with `deadline_exceeded`.
    pub dead: u64,
    /// Jobs whose lease expired on their last allowed attempt: `dead` with
    /// `max_attempts` (the unknown attempt counts, DESIGN §2).
    pub max_attempts: u64,
    /// Jobs of paused subscribers whose lease expired: back to `retrying`, due now
    /// (they wait as `subscriber_paused`).
    pub released: u64,
    /// Of all those, the ones whose in-flight attempt had an unknown outcome.
    pub lease_expired: u64,
}

/// Figures for the gauges an on-call engineer alerts on (DESIGN §7), read at one `now`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// Jobs per state; states with no job are absent.
    pub jobs_by_state: Vec<(crate::domain::JobState, u64)>,
    /// The earliest due time among due, unclaimed jobs of enabled subscribers.
    pub oldest_eligible_since: Option<Timestamp>,
    /// The earliest `deliver_at` among `retrying` jobs (retry age counts from it).
    pub oldest_retrying_since: Option<Timestamp>,
    /// Non-terminal jobs eligible for longer than the delivery objective.
    pub past_slo: u64,
    /// Non-terminal jobs within 10 % of their time to deadline.
    pub near_deadline: u64,
}

/// Jobs per state, each state counted (0 when it has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// `scheduled` jobs.
    pub scheduled: u64,
    /// `in_flight` jobs.
    pub in_flight: u64,
    /// `retrying` jobs.
    pub retrying: u64,
    /// `delivered` jobs.
    pub delivered: u64,
    /// `dead` jobs.
    pub dead: u64,
    /// `cancelled` jobs.
    pub cancelled: u64,
}

impl JobCounts {
    /// Adds `n` jobs in `state`.
    pub fn add(&mut self, state: JobState, n: u64) {
        let slot = match state {
            JobState::Scheduled => &mut self.scheduled,
            JobState::InFlight => &mut self.in_flight,
            JobState::Retrying => &mut self.retrying,
            JobState::Delivered => &mut self.delivered,
            JobState::Dead => &mut self.dead,
            JobState::Cancelled => &mut self.cancelled,
        };
        *slot += n;
    }
}

/// A failed attempt, as [`SubscriberStats::last_failure`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptFailure {
    /// When its result was recorded (`finished_at`).
    pub at: Timestamp,
    /// `retryable`, `terminal` or `blocked`.
    pub outcome: AttemptOutcome,
    /// The failure class, as recorded.
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account.
    pub reason: Option<String>,
}

/// What an operator on call wants to know of one subscriber, read at one `now`
/// ([`crate::store::Store::subscriber_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriberStats {
    /// Its jobs per state.
    pub jobs: JobCounts,
    /// The earliest due time among its `scheduled`/`retrying` jobs whose due time has
    /// come (`due_at <= now`); `None` when none is due.
    pub oldest_eligible_since: Option<Timestamp>,
    /// `finished_at` of its latest `delivered` attempt.
    pub last_success_at: Option<Timestamp>,
    /// Its latest finished attempt with outcome `retryable`, `terminal` or `blocked`.
    pub last_failure: Option<AttemptFailure>,
}

/// Jobs deleted (with their attempts) by [`crate::store::Store::purge_finished`], per
/// state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgedJobs {
    /// `delivered` jobs.
    pub delivered: u64,
    /// `cancelled` jobs.
    pub cancelled: u64,
    /// `dead` jobs.
    pub dead: u64,
}

impl PurgedJobs {
    /// `delivered` and `cancelled` together.
    pub fn finished(&self) -> u64 {
        self.delivered + self.cancelled
    }

    /// Every purged job.
    pub fn total(&self) -> u64 {
        self.finished() + self.dead
    }

    /// Counts one purged job in `state`; other states are not purgeable and ignored.
    pub fn add(&mut self, state: JobState) {
        match state {
            JobState::Delivered => self.delivered += 1,
            JobState::Cancelled => self.cancelled += 1,
            JobState::Dead => self.dead += 1,
            _ => {}
        }
    }
}
