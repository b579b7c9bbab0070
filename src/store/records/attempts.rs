//! A job's attempt history.

use crate::domain::Timestamp;
use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::ErrorClass;

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

/// An attempt of a subscriber's, with the job it was for
/// ([`crate::store::Store::recent_attempts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentAttempt {
    /// Its job.
    pub job_id: uuid::Uuid,
    /// Its job's event id.
    pub event_id: String,
    /// The attempt.
    pub attempt: Attempt,
}
