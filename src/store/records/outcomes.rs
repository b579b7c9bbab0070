//! Attempt outcomes as workers record them, fenced by their lease.

use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::ErrorClass;
use crate::domain::{Timestamp, Transition};
use crate::store::records::LeaseRef;

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
    /// True when the request was sent twice within the attempt (a resend after the
    /// connection closed before any answer, docs/DESIGN.md §3): the receiver may have
    /// had the first, so the attempt row is marked a possible duplicate.
    pub resent: bool,
}

/// A fenced write of an attempt's result and the transition it causes.
#[derive(Clone, Debug)]
pub struct OutcomeRecord {
    /// The lease the writer holds.
    pub lease: LeaseRef,
    /// The job's subscriber, whose endpoint breaker the result feeds
    /// (docs/DESIGN.md §15.1).
    pub subscriber_id: String,
    /// The attempt's number.
    pub attempt: u32,
    /// When the attempt started (its request was about to be sent): a destination's
    /// circuit breaker ignores results of attempts started before it last closed.
    pub started_at: Timestamp,
    /// When the attempt ended.
    pub finished_at: Timestamp,
    /// The attempt timeout that applied, in milliseconds (its subscriber's own or the
    /// worker's, before the deadline's cap): a timed-out attempt's is what the endpoint
    /// breaker keeps for the retry advice (docs/DESIGN.md §15.1).
    pub attempt_timeout_ms: u64,
    /// What it came to.
    pub result: AttemptResult,
    /// The instant the receiver's `Retry-After` asked for (RFC 9110 §10.2.3), if it
    /// sent a readable one: a `429` or `503` with it holds the subscriber until then.
    pub retry_after: Option<Timestamp>,
    /// What the state machine decided (out of `in_flight`).
    pub transition: Transition,
    /// The receiver answered `410 Gone`: pause its subscriber (`enabled = false`) until
    /// an operator resumes it (docs/DESIGN.md §3). Applies even to a late result: the answer
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
