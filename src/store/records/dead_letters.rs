//! The dead letters grouped by cause (dead reason, last error class and status), then
//! by subscriber: the slices an operator replays.

use crate::domain::policy::ErrorClass;
use crate::domain::{DeadReason, Timestamp};

/// The dead jobs of one subscriber with one cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterGroup {
    /// Why they went dead.
    pub dead_reason: DeadReason,
    /// Their last error's class, when recorded.
    pub error_class: Option<ErrorClass>,
    /// Their last error's HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// Whose jobs they are.
    pub subscriber_id: String,
    /// How many.
    pub jobs: u64,
    /// The earliest `dead_at` among them.
    pub first_dead_at: Timestamp,
    /// The latest `dead_at` among them.
    pub last_dead_at: Timestamp,
}

/// The dead jobs of one cause, every subscriber's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterCause {
    /// Why they went dead.
    pub dead_reason: DeadReason,
    /// Their last error's class, when recorded.
    pub error_class: Option<ErrorClass>,
    /// Their last error's HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// How many.
    pub jobs: u64,
    /// Of how many subscribers.
    pub subscribers: u64,
}

/// Every cause of the dead letters, and one page of their groups
/// ([`crate::store::Store::dead_letters`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeadLetters {
    /// Every cause, most jobs first (then by reason, class and status).
    pub causes: Vec<DeadLetterCause>,
    /// The page of groups asked for: by cause (the cause with most jobs first), then
    /// most jobs first, then by subscriber.
    pub groups: Vec<DeadLetterGroup>,
    /// How many groups there are in all.
    pub total_groups: u64,
}
