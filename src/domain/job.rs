//! The job state machine: the six states, the events that move a job between them and
//! the reasons a job is dead (docs/DESIGN.md §2). Pure: no I/O, `now` is passed in.
//!
//! The store applies what [`transition`] decides with a write that is conditional on
//! the state it read (and, out of `in_flight`, on the lease's fencing token), so two
//! writers can never both move the same job.

use serde::Serialize;

pub use super::names::UnknownName;
use super::names::wire_names;
use super::time::Timestamp;

/// Where a job is in its life. `delivered`, `dead` and `cancelled` are terminal; only a
/// replay leaves `dead`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for `deliver_at`.
    Scheduled,
    /// Claimed by a worker under a lease; an attempt is running.
    InFlight,
    /// An attempt failed (or its outcome is unknown); waiting for `next_attempt_at`.
    Retrying,
    /// A 2xx answer was recorded.
    Delivered,
    /// A dead letter: it cannot be delivered; see `dead_reason`.
    Dead,
    /// Cancelled by an operator before it was delivered.
    Cancelled,
}

wire_names!(JobState, "Every state, in the order of docs/DESIGN.md §2." {
    Scheduled => "scheduled",
    InFlight => "in_flight",
    Retrying => "retrying",
    Delivered => "delivered",
    Dead => "dead",
    Cancelled => "cancelled",
});

impl JobState {
    /// True for `delivered`, `dead` and `cancelled`.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Delivered | JobState::Dead | JobState::Cancelled
        )
    }
}

/// Why a job is dead (docs/DESIGN.md §2).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DeadReason {
    /// The receiver answered 3xx or a 4xx other than 408, 425 and 429.
    NonRetryableResponse,
    /// No attempt could start before the deadline.
    DeadlineExceeded,
    /// The job used all of its `max_attempts`.
    MaxAttempts,
    /// The target was refused before connecting (e.g. by the SSRF policy).
    TargetRejected,
    /// The subscriber was deleted.
    SubscriberDeleted,
}

wire_names!(DeadReason, "Every reason." {
    NonRetryableResponse => "non_retryable_response",
    DeadlineExceeded => "deadline_exceeded",
    MaxAttempts => "max_attempts",
    TargetRejected => "target_rejected",
    SubscriberDeleted => "subscriber_deleted",
});

/// What the state machine needs to know of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobSnapshot {
    /// The current state.
    pub state: JobState,
    /// Attempts started so far (a claim starts one).
    pub attempts: u32,
    /// The most attempts the job may use; `None`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// When the job next needs a worker: `deliver_at` when scheduled, `next_attempt_at`
    /// when retrying, the lease's expiry when in flight; `None` when terminal.
    pub due_at: Option<Timestamp>,
    /// After it no attempt starts.
    pub deadline: Timestamp,
}

/// Something that happens to a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEvent {
    /// A worker claims the due job and starts an attempt; its lease ends at `lease_until`.
    Claim {
        /// When the new lease expires unless renewed.
        lease_until: Timestamp,
    },
    /// The attempt got a 2xx.
    Delivered,
    /// The attempt failed in a way worth retrying; policy proposes `retry_at`
    /// (backoff with jitter, or a longer `Retry-After`).
    RetryableFailure {
        /// The earliest instant the next attempt may start.
        retry_at: Timestamp,
    },
    /// The attempt failed for good (`non_retryable_response`, `target_rejected`, …).
    TerminalFailure {
        /// Why the job cannot be delivered.
        reason: DeadReason,
    },
    /// The lease expired with the attempt's outcome unknown.
    LeaseExpired,
    /// The worker released its lease at shutdown, the outcome unknown.
    Released,
    /// The deadline passed while the job waited for a claim.
    DeadlinePassed,
    /// An operator cancels the job.
    Cancel,
    /// An operator replays the dead job with a fresh deadline.
    Replay {
        /// The new deadline.
        deadline: Timestamp,
    },
    /// An operator makes a retrying job due now instead of at its `next_attempt_at`
    /// (`POST /v1/jobs/{id}/retry`, docs/DESIGN.md §2.3).
    RetryNow,
    /// An operator moves a scheduled job.
    Reschedule {
        /// The new `deliver_at`.
        deliver_at: Timestamp,
        /// The new deadline.
        deadline: Timestamp,
    },
}

impl JobEvent {
    /// A short name for errors and logs.
    pub const fn name(&self) -> &'static str {
        match self {
            JobEvent::Claim { .. } => "claim",
            JobEvent::Delivered => "delivered",
            JobEvent::RetryableFailure { .. } => "retryable_failure",
            JobEvent::TerminalFailure { .. } => "terminal_failure",
            JobEvent::LeaseExpired => "lease_expired",
            JobEvent::Released => "released",
            JobEvent::DeadlinePassed => "deadline_passed",
            JobEvent::Cancel => "cancel",
            JobEvent::Replay { .. } => "replay",
            JobEvent::RetryNow => "retry_now",
            JobEvent::Reschedule { .. } => "reschedule",
        }
    }
}

/// The result of an allowed transition: the new state and what the store must write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The state after the event.
    pub to: JobState,
    /// When the job next needs a worker (see [`JobSnapshot::due_at`]).
    pub due_at: Option<Timestamp>,
    /// Attempts started, after the event.
    pub attempts: u32,
    /// Set when `to` is `dead`.
    pub dead_reason: Option<DeadReason>,
    /// The deadline after the event (only replay and reschedule change it).
    pub deadline: Timestamp,
    /// True when the outcome of the last attempt is unknown, so the receiver may
    /// already have the event: the next attempt is a possible duplicate.
    pub possible_duplicate: bool,
}

/// Why an event cannot apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The event has no meaning in this state (e.g. cancelling a delivered job).
    #[error("`{event}` is not allowed when the job is {from}")]
    NotAllowed {
        /// The state the job is in.
        from: JobState,
        /// The event's name.
        event: &'static str,
    },
    /// A claim before the job is due.
    #[error("the job is not due until {due_at:?}")]
    NotDue {
        /// When it becomes due.
        due_at: Option<Timestamp>,
    },
    /// A claim at or after the deadline; the job must go dead instead.
    #[error("the deadline has passed")]
    DeadlinePassed,
    /// The deadline has not passed, so `DeadlinePassed` does not apply.
    #[error("the deadline has not passed")]
    DeadlineNotPassed,
    /// A reschedule or replay whose deadline is not after its delivery time.
    #[error("the deadline must be after deliver_at")]
    DeadlineNotAfterDelivery,
    /// A retry now of a job that has started all of its `max_attempts` (read as
    /// `retrying` because its last attempt's lease expired): it can only go dead.
    #[error("the job has used all of its attempts")]
    NoAttemptLeft,
}

/// Applies `event` to `job` at `now` (docs/DESIGN.md §2). Never panics: an event that does not
/// apply returns a [`TransitionError`].
pub fn transition(
    job: &JobSnapshot,
    event: JobEvent,
    now: Timestamp,
) -> Result<Transition, TransitionError> {
    use JobState::*;
    let not_allowed = || TransitionError::NotAllowed {
        from: job.state,
        event: event.name(),
    };
    let stay = Transition {
        to: job.state,
        due_at: job.due_at,
        attempts: job.attempts,
        dead_reason: None,
        deadline: job.deadline,
        possible_duplicate: false,
    };
    let dead = |reason| Transition {
        to: Dead,
        due_at: None,
        dead_reason: Some(reason),
        ..stay
    };
    match (job.state, event) {
        (Scheduled | Retrying, JobEvent::Claim { lease_until }) => {
            if now >= job.deadline {
                return Err(TransitionError::DeadlinePassed);
            }
            if job.due_at.is_none_or(|due| due > now) {
                return Err(TransitionError::NotDue { due_at: job.due_at });
            }
            Ok(Transition {
                to: InFlight,
                due_at: Some(lease_until),
                attempts: job.attempts.saturating_add(1),
                ..stay
            })
        }
        (InFlight, JobEvent::Delivered) => Ok(Transition {
            to: Delivered,
            due_at: None,
            ..stay
        }),
        (InFlight, JobEvent::RetryableFailure { retry_at }) => {
            // The next attempt cannot start before `now`, so a stale `retry_at` must not
            // let a job that is already past its deadline go back to `retrying`.
            let next = retry_at.max(now);
            if max_attempts_used(job) {
                Ok(dead(DeadReason::MaxAttempts))
            } else if next >= job.deadline {
                Ok(dead(DeadReason::DeadlineExceeded))
            } else {
                Ok(Transition {
                    to: Retrying,
                    due_at: Some(next),
                    ..stay
                })
            }
        }
        (InFlight, JobEvent::TerminalFailure { reason }) => Ok(dead(reason)),
        (InFlight, JobEvent::LeaseExpired | JobEvent::Released) => {
            // The unknown attempt is counted (docs/DESIGN.md §2), so it may have been the last one.
            if max_attempts_used(job) {
                Ok(Transition {
                    possible_duplicate: true,
                    ..dead(DeadReason::MaxAttempts)
                })
            } else if now >= job.deadline {
                Ok(Transition {
                    possible_duplicate: true,
                    ..dead(DeadReason::DeadlineExceeded)
                })
            } else {
                Ok(Transition {
                    to: Retrying,
                    due_at: Some(now),
                    possible_duplicate: true,
                    ..stay
                })
            }
        }
        (Scheduled | Retrying, JobEvent::DeadlinePassed) => {
            if now >= job.deadline {
                Ok(dead(DeadReason::DeadlineExceeded))
            } else {
                Err(TransitionError::DeadlineNotPassed)
            }
        }
        (Scheduled | Retrying, JobEvent::Cancel) => Ok(Transition {
            to: Cancelled,
            due_at: None,
            ..stay
        }),
        (Retrying, JobEvent::RetryNow) => {
            // Like a claim, it must leave the job something to start: an attempt before
            // the deadline, within max_attempts. Otherwise the sweep makes it dead.
            if now >= job.deadline {
                return Err(TransitionError::DeadlinePassed);
            }
            if max_attempts_used(job) {
                return Err(TransitionError::NoAttemptLeft);
            }
            Ok(Transition {
                due_at: Some(now),
                ..stay
            })
        }
        (Dead, JobEvent::Replay { deadline }) => {
            if deadline <= now {
                return Err(TransitionError::DeadlineNotAfterDelivery);
            }
            Ok(Transition {
                to: Scheduled,
                due_at: Some(now),
                deadline,
                ..stay
            })
        }
        (
            Scheduled,
            JobEvent::Reschedule {
                deliver_at,
                deadline,
            },
        ) => {
            let deliver_at = deliver_at.max(now);
            if deadline <= deliver_at {
                return Err(TransitionError::DeadlineNotAfterDelivery);
            }
            Ok(Transition {
                due_at: Some(deliver_at),
                deadline,
                ..stay
            })
        }
        _ => Err(not_allowed()),
    }
}

/// True when the job has started all of its `max_attempts`.
fn max_attempts_used(job: &JobSnapshot) -> bool {
    job.max_attempts.is_some_and(|max| job.attempts >= max)
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "job_table_tests.rs"]
mod table_tests;
