//! What a subscriber's deletion did (docs/DESIGN.md §5.3).

use crate::domain::Timestamp;

/// The answer of [`crate::store::Store::delete_subscriber`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberDeleted {
    /// The id the subscriber had (free again for a new subscriber).
    pub subscriber_id: String,
    /// Its waiting jobs (`scheduled`, `retrying`, `in_flight`) that the deletion moved
    /// to `dead` with reason `subscriber_deleted`.
    pub jobs_dead: u64,
    /// When it was deleted.
    pub deleted_at: Timestamp,
}

/// The answer of [`crate::store::Store::move_deleted_history`]: what one batch of a
/// deletion's second step moved to the tombstone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistoryMoved {
    /// Jobs moved.
    pub jobs: u64,
    /// Attempts moved.
    pub attempts: u64,
    /// True when nothing was left to move and the subscriber's row is gone: the id
    /// is free again.
    pub finished: bool,
}
