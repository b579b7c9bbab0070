//! Why a job is not delivered yet (`waiting_reason`, docs/DESIGN.md §3).

use serde::Serialize;

use super::endpoint::RecentResults;
use super::job::JobState;
use super::names::wire_names;
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
    /// Its subscriber's endpoint circuit is open (its own recent failure rate), or
    /// half-open with its probe out (docs/DESIGN.md §15.1).
    SubscriberCircuitOpen,
    /// Its subscriber's receiver asked to wait (`429`, or `503` with `Retry-After`)
    /// until an instant that has not come (docs/DESIGN.md §15.1).
    SubscriberRetryAfter,
    /// Its destination (`host:port`) has its `max_in_flight` requests open, across all
    /// instances.
    DestinationAtLimit,
    /// Its destination's circuit breaker is open (or half-open with its probe out).
    DestinationCircuitOpen,
    /// An operator paused its destination.
    DestinationPaused,
    /// A worker holds its lease and an attempt is running.
    InFlight,
}

wire_names!(WaitingReason, "Every reason." {
    Scheduled => "scheduled",
    BackingOff => "backing_off",
    SubscriberAtLimit => "subscriber_at_limit",
    SubscriberRateLimited => "subscriber_rate_limited",
    SubscriberPaused => "subscriber_paused",
    SubscriberCircuitOpen => "subscriber_circuit_open",
    SubscriberRetryAfter => "subscriber_retry_after",
    DestinationAtLimit => "destination_at_limit",
    DestinationCircuitOpen => "destination_circuit_open",
    DestinationPaused => "destination_paused",
    InFlight => "in_flight",
});

impl WaitingReason {
    /// The reasons a job listing can filter on (`GET /v1/jobs?waiting_reason=`): those
    /// [`waiting_reason`] derives from the job's row and its subscriber's `enabled`
    /// alone. The others depend on the subscriber's and destination's load at the
    /// instant read (open attempts, recent starts, circuits), which a listing does not
    /// compute per row.
    pub const FILTERABLE: [WaitingReason; 4] = [
        WaitingReason::Scheduled,
        WaitingReason::BackingOff,
        WaitingReason::SubscriberPaused,
        WaitingReason::InFlight,
    ];

    /// True when a job listing can filter on this reason (see [`Self::FILTERABLE`]).
    pub fn filterable(self) -> bool {
        Self::FILTERABLE.contains(&self)
    }

    /// The states (as read, docs/DESIGN.md §2.2) a job with this reason is in.
    pub fn states(self) -> &'static [JobState] {
        match self {
            WaitingReason::Scheduled => &[JobState::Scheduled],
            WaitingReason::BackingOff => &[JobState::Retrying],
            WaitingReason::InFlight => &[JobState::InFlight],
            _ => &[JobState::Scheduled, JobState::Retrying],
        }
    }
}

/// How busy a subscriber is right now, against its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberLoad {
    /// Attempts open for it (live leases), across all instances.
    pub open_attempts: u32,
    /// Its `max_in_flight`.
    pub max_in_flight: u32,
    /// Attempts started for it in the last second; counted only when it has a rate
    /// limit (0 otherwise: nothing compares it).
    pub started_last_second: u32,
    /// Its `rate_limit_per_second`, if any.
    pub rate_limit_per_second: Option<u32>,
    /// When its latest attempt of the last second started; read only when it has a
    /// rate limit.
    pub last_started_at: Option<Timestamp>,
    /// Why its destination holds its jobs back at the instant read (paused, circuit
    /// open, at its limit), if it does.
    pub destination_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known: an open circuit's next probe.
    pub destination_hold_until: Option<Timestamp>,
    /// Why its own endpoint circuit holds its due jobs back at the instant read
    /// ([`WaitingReason::SubscriberCircuitOpen`] or
    /// [`WaitingReason::SubscriberRetryAfter`]), if it does (see
    /// [`super::endpoint::endpoint_hold`]).
    pub endpoint_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known (none while its probe is out).
    pub endpoint_hold_until: Option<Timestamp>,
    /// What its endpoint's recent results say about how long it takes to answer.
    pub recent: RecentResults,
}

impl SubscriberLoad {
    /// Why a due job of this subscriber is held back at `now`, if it is: the same rules
    /// as the claim (for a rate r, bursts of max(1, r/10) at most every max(1, r/10)/r s
    /// and at most r in the last second). A paused destination or an open circuit
    /// comes first, then the subscriber's endpoint circuit or back-pressure, then its
    /// own limits, then the destination's limit.
    pub fn holds_back(&self, now: Timestamp) -> Option<WaitingReason> {
        let destination = self.destination_hold;
        if let Some(
            reason @ (WaitingReason::DestinationPaused | WaitingReason::DestinationCircuitOpen),
        ) = destination
        {
            return Some(reason);
        }
        self.endpoint_hold
            .or_else(|| self.own_limits(now))
            .or(destination)
    }

    fn own_limits(&self, now: Timestamp) -> Option<WaitingReason> {
        if self.open_attempts >= self.max_in_flight {
            return Some(WaitingReason::SubscriberAtLimit);
        }
        let rate = self.rate_limit_per_second?;
        let burst = (rate / 10).max(1);
        let spacing_ms = i64::from(1000 * burst / rate.max(1));
        let too_soon = self
            .last_started_at
            .is_some_and(|last| now.millis_since(last) < spacing_ms);
        (self.started_last_second >= rate || too_soon)
            .then_some(WaitingReason::SubscriberRateLimited)
    }
}

/// The waiting reason of a job in `state`, due at `due_at`, at `now`. Terminal jobs
/// wait for nothing. A due job waits for its paused subscriber first, then for its
/// subscriber's limits (`load`, when known); otherwise only for a free worker (`None`).
pub fn waiting_reason(
    state: JobState,
    due_at: Option<Timestamp>,
    subscriber_enabled: bool,
    load: Option<&SubscriberLoad>,
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
        JobState::Scheduled | JobState::Retrying => load.and_then(|l| l.holds_back(now)),
    }
}

/// True when the job's waiting reason depends on its subscriber's load: due, waiting
/// for a claim, subscriber enabled.
pub fn needs_load(
    state: JobState,
    due_at: Option<Timestamp>,
    subscriber_enabled: bool,
    now: Timestamp,
) -> bool {
    matches!(state, JobState::Scheduled | JobState::Retrying)
        && subscriber_enabled
        && due_at.is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_millis(10_000);

    #[test]
    fn each_state_explains_itself() {
        let later = Some(Timestamp::from_millis(20_000));
        let past = Some(Timestamp::from_millis(5_000));
        let w = |state, due, enabled| waiting_reason(state, due, enabled, None, NOW);
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

    #[test]
    fn a_due_job_explains_its_subscribers_limits() {
        let past = Some(Timestamp::from_millis(5_000));
        let load = |open, started| SubscriberLoad {
            open_attempts: open,
            max_in_flight: 2,
            started_last_second: started,
            rate_limit_per_second: Some(5),
            last_started_at: None,
            destination_hold: None,
            destination_hold_until: None,
            endpoint_hold: None,
            endpoint_hold_until: None,
            recent: Default::default(),
        };
        let w =
            |load: SubscriberLoad| waiting_reason(JobState::Retrying, past, true, Some(&load), NOW);
        assert_eq!(w(load(2, 0)), Some(WaitingReason::SubscriberAtLimit));
        assert_eq!(w(load(1, 5)), Some(WaitingReason::SubscriberRateLimited));
        assert_eq!(w(load(1, 4)), None);
        // 5/s: one every 200 ms.
        let recent = |ms_ago| SubscriberLoad {
            last_started_at: Some(Timestamp::from_millis(NOW.as_millis() - ms_ago)),
            ..load(1, 1)
        };
        assert_eq!(w(recent(150)), Some(WaitingReason::SubscriberRateLimited));
        assert_eq!(w(recent(200)), None);
        // Paused wins; not yet due wins.
        assert_eq!(
            waiting_reason(JobState::Scheduled, past, false, Some(&load(2, 9)), NOW),
            Some(WaitingReason::SubscriberPaused)
        );
        let later = Some(Timestamp::from_millis(20_000));
        assert_eq!(
            waiting_reason(JobState::Scheduled, later, true, Some(&load(2, 9)), NOW),
            Some(WaitingReason::Scheduled)
        );
        // The destination: a pause or an open circuit first, its limit last.
        let held = |reason| SubscriberLoad {
            destination_hold: Some(reason),
            destination_hold_until: None,
            ..load(2, 0)
        };
        assert_eq!(
            w(held(WaitingReason::DestinationCircuitOpen)),
            Some(WaitingReason::DestinationCircuitOpen)
        );
        assert_eq!(
            w(held(WaitingReason::DestinationPaused)),
            Some(WaitingReason::DestinationPaused)
        );
        assert_eq!(
            w(held(WaitingReason::DestinationAtLimit)),
            Some(WaitingReason::SubscriberAtLimit)
        );
        // The subscriber's own endpoint circuit comes after the destination's hold,
        // before its limits.
        let endpoint = SubscriberLoad {
            endpoint_hold: Some(WaitingReason::SubscriberCircuitOpen),
            ..load(2, 0)
        };
        assert_eq!(w(endpoint), Some(WaitingReason::SubscriberCircuitOpen));
        let both = SubscriberLoad {
            destination_hold: Some(WaitingReason::DestinationCircuitOpen),
            endpoint_hold: Some(WaitingReason::SubscriberRetryAfter),
            ..load(0, 0)
        };
        assert_eq!(w(both), Some(WaitingReason::DestinationCircuitOpen));
        let at_limit = SubscriberLoad {
            destination_hold: Some(WaitingReason::DestinationAtLimit),
            destination_hold_until: None,
            ..load(0, 0)
        };
        assert_eq!(w(at_limit), Some(WaitingReason::DestinationAtLimit));
        assert!(needs_load(JobState::Scheduled, past, true, NOW));
        assert!(!needs_load(JobState::Scheduled, later, true, NOW));
        assert!(!needs_load(JobState::InFlight, past, true, NOW));
    }
}
