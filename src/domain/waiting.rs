//! Why a job is not delivered yet (`waiting_reason`, DESIGN §3).

use serde::Serialize;

use super::job::JobState;
use super::time::Timestamp;

/// Why a non-terminal job is waiting. `None` (JSON `null`) means it is due and waits
/// only for a free worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitingReason {
    /// Until `deliver_at`.
    Scheduled,
    /// Until `next_attempt_at`, after a failed attempt.
    BackingOff,
    /// Its subscriber has `max_in_flight` requests open.
    SubscriberAtLimit,
    /// Its subscriber used its `rate_limit_per_second`.
    SubscriberRateLimited,
    /// Its subscriber is paused (`enabled = false`).
    SubscriberPaused,
    /// A worker holds its lease and an attempt is running.
    InFlight,
}

/// The waiting reason of a job in `state`, due at `due_at`, at `now`. Terminal jobs
/// wait for nothing. A paused subscriber explains a due job before anything else.
pub fn waiting_reason(
    state: JobState,
    due_at: Option<Timestamp>,
    subscriber_enabled: bool,
    now: Timestamp,
) -> Option<WaitingReason> {
    let due = due_at.is_some_and(|at| at <= now);
    match state {
        JobState::Delivered | JobState::Dead | JobState::Cancelled => None,
        JobState::InFlight => Some(WaitingReason::InFlight),
        JobState::Scheduled if !due => Some(WaitingReason::Scheduled),
        JobState::Retrying if !due => Some(WaitingReason::BackingOff),
        JobState::Scheduled | JobState::Retrying if !subscriber_enabled => {
            Some(WaitingReason::SubscriberPaused)
        }
        JobState::Scheduled | JobState::Retrying => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_millis(10_000);

    #[test]
    fn each_state_explains_itself() {
        let later = Some(Timestamp::from_millis(20_000));
        let past = Some(Timestamp::from_millis(5_000));
        let w = |state, due, enabled| waiting_reason(state, due, enabled, NOW);
        assert_eq!(
            w(JobState::Scheduled, later, true),
            Some(WaitingReason::Scheduled)
        );
        assert_eq!(
            w(JobState::Retrying, later, true),
            Some(WaitingReason::BackingOff)
        );
        assert_eq!(
            w(JobState::InFlight, later, true),
            Some(WaitingReason::InFlight)
        );
        assert_eq!(w(JobState::Scheduled, past, true), None);
        assert_eq!(
            w(JobState::Retrying, past, false),
            Some(WaitingReason::SubscriberPaused)
        );
        for terminal in [JobState::Delivered, JobState::Dead, JobState::Cancelled] {
            assert_eq!(w(terminal, None, false), None);
        }
    }
}
