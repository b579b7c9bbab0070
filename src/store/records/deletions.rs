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
