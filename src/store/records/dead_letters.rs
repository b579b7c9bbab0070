//! The dead letters grouped by dead reason and subscriber: the slices an operator
//! replays.

use crate::domain::{DeadReason, Timestamp};

/// The dead jobs of one subscriber with one dead reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterGroup {
    /// Why they went dead.
    pub dead_reason: DeadReason,
    /// Whose jobs they are.
    pub subscriber_id: String,
    /// How many.
    pub jobs: u64,
    /// The earliest `dead_at` among them.
    pub first_dead_at: Timestamp,
    /// The latest `dead_at` among them.
    pub last_dead_at: Timestamp,
}
