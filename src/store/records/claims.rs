//! Claims of due jobs and the leases they take.

use uuid::Uuid;

use crate::domain::secret::SigningSecrets;
use crate::domain::{JobSnapshot, Timestamp};
use crate::store::sealing::UnreadableSecret;

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
    /// The exact bytes to send, shared by the jobs of one claim that carry the same
    /// stored payload.
    pub payload: std::sync::Arc<str>,
    /// Sent as `webhook-event-type` when the job has one.
    pub event_type: Option<String>,
    /// Where to send it.
    pub url: String,
    /// The secrets to sign with, read (and decrypted) at the claim: the current one
    /// and, during a rotation's grace period, the previous one with its expiry (the
    /// attempt decides with its own `now` whether it still signs). An error when the
    /// stored secret cannot be read (e.g. sealed with another `--secret-key`): the
    /// attempt then fails without sending anything.
    pub secrets: Result<SigningSecrets, UnreadableSecret>,
    /// Its subscriber's own attempt timeout; `None`: the worker's.
    pub attempt_timeout: Option<std::time::Duration>,
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
