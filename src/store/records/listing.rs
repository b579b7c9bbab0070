//! How a listing asks for jobs: filters and pages.

use uuid::Uuid;

use crate::domain::policy::ErrorClass;
use crate::domain::waiting::WaitingReason;
use crate::domain::{DeadReason, JobState, Timestamp};

/// Filters of a job listing; all given ones must match. Lower bounds (`*_after`) are
/// inclusive, upper bounds (`*_before`) exclusive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this event.
    pub event_id: Option<String>,
    /// Only this subscriber.
    pub subscriber_id: Option<String>,
    /// Only jobs in one of these states, as read at the listing's instant (an
    /// `in_flight` job whose lease has expired reads `retrying`); empty: any state.
    /// Duplicates are harmless.
    pub states: Vec<JobState>,
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
    /// Only jobs whose `waiting_reason` (docs/DESIGN.md §3.2) at the listing's instant
    /// is this one; only the reasons [`WaitingReason::filterable`] names, which follow
    /// from the stored row and the subscriber's `enabled` alone (the others depend on
    /// load at the instant; the store matches nothing for them).
    pub waiting_reason: Option<WaitingReason>,
    /// Only jobs whose last error (`last_error.class`) has this class.
    pub error_class: Option<ErrorClass>,
    /// Only jobs whose last error has this HTTP status (`last_error.status`).
    pub last_status: Option<u16>,
    /// Only jobs of this event type.
    pub event_type: Option<String>,
    /// Only jobs created by this recurring schedule.
    pub schedule_id: Option<String>,
}

impl JobFilter {
    /// True when a filter only dead jobs can match is set (`dead_reason`, `dead_after`,
    /// `dead_before`).
    pub fn implies_dead(&self) -> bool {
        self.dead_reason.is_some() || self.dead_after.is_some() || self.dead_before.is_some()
    }

    /// The states (as read) a job must be in to match, in [`JobState::ALL`] order,
    /// without duplicates, or `None` when any state may: `states`, narrowed to `dead`
    /// by a dead-only filter and to the states of `waiting_reason`
    /// ([`WaitingReason::states`]). Empty when the filters contradict each other.
    pub fn matching_states(&self) -> Option<Vec<JobState>> {
        let mut allowed = self.stored_states();
        if let Some(reason) = self.waiting_reason {
            let to = reason.states();
            allowed = Some(match allowed {
                Some(states) => states.into_iter().filter(|s| to.contains(s)).collect(),
                None => to.to_vec(),
            });
        }
        allowed
    }

    /// `states` narrowed by a dead-only filter only, the states one listing statement
    /// names (see [`Self::matching_states`]).
    pub fn stored_states(&self) -> Option<Vec<JobState>> {
        let allowed: Option<Vec<JobState>> = (!self.states.is_empty()).then(|| {
            JobState::ALL
                .into_iter()
                .filter(|s| self.states.contains(s))
                .collect()
        });
        if self.implies_dead() {
            return Some(match allowed {
                Some(states) => states
                    .into_iter()
                    .filter(|s| *s == JobState::Dead)
                    .collect(),
                None => vec![JobState::Dead],
            });
        }
        allowed
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
