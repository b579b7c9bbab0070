//! What a sweep of deadlines and expired leases moved.

/// Jobs moved by a sweep of [`crate::store::WorkerStore::expire_deadlines`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpiredJobs {
    /// Jobs that went `dead` with `deadline_exceeded`.
    pub dead: u64,
    /// Jobs whose lease expired on their last allowed attempt: `dead` with
    /// `max_attempts` (the unknown attempt counts, docs/DESIGN.md §2).
    pub max_attempts: u64,
    /// Jobs of paused subscribers whose lease expired: back to `retrying`, due now
    /// (they wait as `subscriber_paused`).
    pub released: u64,
    /// Of all those, the ones whose in-flight attempt had an unknown outcome.
    pub lease_expired: u64,
}
