//! How a listing asks for jobs: filters and pages.

use uuid::Uuid;

use crate::domain::{DeadReason, JobState, Timestamp};

/// Filters of a job listing; all given ones must match. Lower bounds (`*_after`) are
/// inclusive, upper bounds (`*_before`) exclusive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this event.
    pub event_id: Option<String>,
    /// Only this subscriber.
    pub subscriber_id: Option<String>,
    /// Only this state.
    pub state: Option<JobState>,
    /// Only dead jobs with this reason (implies state `dead`).
    pub dead_reason: Option<DeadReason>,
    /// Only jobs created at or after this instant, as recorded in their UUIDv7 id (its
    /// 48-bit millisecond timestamp), so the id indexes serve the bound.
    pub created_after: Option<Timestamp>,
    /// Only jobs created before this instant (UUIDv7 id timestamp).
    pub created_before: Option<Timestamp>,
    /// Only dead jobs whose `dead_at` is at or after this instant (implies `dead`).
    pub dead_after: Option<Timestamp>,
    /// Only dead jobs whose `dead_at` is before this instant (implies `dead`).
    pub dead_before: Option<Timestamp>,
}

impl JobFilter {
    /// True when a filter only dead jobs can match is set (`dead_reason`, `dead_after`,
    /// `dead_before`).
    pub fn implies_dead(&self) -> bool {
        self.dead_reason.is_some() || self.dead_after.is_some() || self.dead_before.is_some()
    }
}

/// The smallest UUIDv7 whose timestamp is `at` (milliseconds, clamped to the 48 bits
/// a UUIDv7 holds): every job id created at or after `at` is `>=` it, every one
/// created before is `<` it, as values and as lowercase text alike.
pub fn uuid_v7_floor(at: Timestamp) -> Uuid {
    let ms = at.as_millis().clamp(0, (1_i64 << 48) - 1);
    Uuid::from_u128((ms as u128) << 80)
}

/// One page request: items strictly after `after` in the listing's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest<K> {
    /// The last key of the previous page.
    pub after: Option<K>,
    /// Most items.
    pub limit: u32,
}
