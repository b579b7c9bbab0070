//! Jobs as the store creates and reads them.

use std::sync::Arc;

use uuid::Uuid;

use crate::domain::policy::ErrorClass;
use crate::domain::waiting::WaitingReason;
use crate::domain::{DeadReason, JobSnapshot, JobState, Timestamp};

/// A job to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    /// A fresh UUIDv7.
    pub id: Uuid,
    /// Its subscriber; must exist.
    pub subscriber_id: String,
    /// The producer's event id; with the subscriber id it identifies the job.
    pub event_id: String,
    /// The payload exactly as the producer sent it (valid JSON text), shared: the jobs
    /// of one fan-out or schedule period hold one copy, in memory and in the store
    /// (docs/DESIGN.md §3, payloads stored once).
    pub payload: Arc<str>,
    /// When it first becomes eligible.
    pub deliver_at: Timestamp,
    /// After it no attempt starts.
    pub deadline: Timestamp,
    /// Most attempts; `None`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// Now, as `created_at`.
    pub created_at: Timestamp,
    /// Its event's type (docs/DESIGN.md §5.13), sent as `webhook-event-type`.
    pub event_type: Option<String>,
    /// The recurring schedule that created it (docs/DESIGN.md §5.14).
    pub schedule_id: Option<String>,
}

/// The result of creating one job.
#[derive(Clone, Debug)]
pub enum CreateOutcome {
    /// A new job was stored.
    Created(Job),
    /// A job with the same (subscriber_id, event_id) and the same payload (as a JSON
    /// value) already existed; nothing was written.
    Existing {
        /// The job that already exists.
        job: Job,
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
    /// Why it had waited when it died at its deadline (the deadline sweep records a
    /// paused subscriber, a paused destination or an open circuit); `None` otherwise.
    pub dead_detail: Option<WaitingReason>,
    /// The last failure, if any.
    pub last_error: Option<LastError>,
    /// The current lease, when in flight.
    pub lease: Option<LeaseInfo>,
    /// Whether its subscriber is enabled (for `waiting_reason`).
    pub subscriber_enabled: bool,
    /// Whether its subscriber was deleted (the job is a tombstone's history,
    /// docs/DESIGN.md §5.3.1): no replay and no retry sends it again.
    pub subscriber_deleted: bool,
    /// Its event's type, if it has one.
    pub event_type: Option<String>,
    /// The recurring schedule that created it, if one did.
    pub schedule_id: Option<String>,
}

impl Job {
    /// The job as an operator's `transition` of it at `now` is stored
    /// ([`crate::store::Store::transition_waiting`]): its state, due time and deadline
    /// as the transition says, its `deliver_at` moved to a rescheduled job's due time,
    /// its lease ended. Equal to what a read of it returns then; used when that read
    /// fails after the write committed.
    #[must_use]
    pub fn transitioned(mut self, transition: &crate::domain::Transition, now: Timestamp) -> Job {
        self.state = transition.to;
        self.due_at = transition.due_at;
        self.deadline = transition.deadline;
        if transition.to == JobState::Scheduled
            && let Some(due) = transition.due_at
        {
            self.deliver_at = due;
        }
        self.updated_at = now;
        self.lease = None;
        self
    }

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
            dead_detail: None,
            last_error: None,
            lease: None,
            subscriber_enabled,
            subscriber_deleted: false,
            event_type: new.event_type.clone(),
            schedule_id: new.schedule_id.clone(),
        }
    }

    /// The job as a reader sees it at `now` (docs/DESIGN.md §2.2): an `in_flight` job
    /// whose lease has expired (its due time, the lease's expiry, is at or before
    /// `now`) is `retrying`, due at that expiry, with no lease, until a claim or the
    /// sweep moves it; any other job is as stored. Every read of the store returns
    /// jobs through this.
    pub fn as_of(mut self, now: Timestamp) -> Job {
        if self.lease_expired(now) {
            self.state = JobState::Retrying;
            self.lease = None;
        }
        self
    }

    /// True when the job is stored `in_flight` and its lease has expired at `now`
    /// (a lease expires at its `expires_at`, the job's due time while in flight).
    pub fn lease_expired(&self, now: Timestamp) -> bool {
        self.state == JobState::InFlight && self.due_at.is_some_and(|due| due <= now)
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
