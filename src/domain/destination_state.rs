//! What a destination lets through at an instant (docs/DESIGN.md §15): its operator's
//! settings (a limit override, a pause, a forced circuit), its [`Circuit`], and the
//! requests open to it across all instances decide how many of its due jobs a claim
//! may take, or why they wait.

use super::circuit::{Circuit, CircuitPolicy, ForcedCircuit, Passage};
use super::endpoint::EndpointPolicy;
use super::time::Timestamp;
use super::waiting::WaitingReason;

/// The largest `max_in_flight` a destination (or a subscriber) may be given.
pub const MAX_DESTINATION_IN_FLIGHT: u32 = 10_000;

/// The destinations' settings every instance applies (flags
/// `--destination-max-in-flight` and the circuit breaker's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DestinationPolicy {
    /// Requests open at once to one destination, across all instances, unless an
    /// operator set its own.
    pub default_max_in_flight: u32,
    /// The circuit breakers' settings (the destinations', and the cool-downs of the
    /// endpoints').
    pub circuit: CircuitPolicy,
    /// The endpoint breakers' settings and what makes an endpoint long-running.
    pub endpoint: EndpointPolicy,
}

/// The default `--destination-max-in-flight` (see BENCHMARKS.md, issue #14).
pub const DEFAULT_DESTINATION_MAX_IN_FLIGHT: u32 = 512;

impl Default for DestinationPolicy {
    fn default() -> Self {
        DestinationPolicy {
            default_max_in_flight: DEFAULT_DESTINATION_MAX_IN_FLIGHT,
            circuit: CircuitPolicy::default(),
            endpoint: EndpointPolicy::default(),
        }
    }
}

/// A destination as stored: the operator's settings and the breaker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DestinationState {
    /// The operator's limit; `None` follows the policy's default.
    pub max_in_flight: Option<u32>,
    /// Paused by an operator: nothing goes out, jobs wait within their deadlines.
    pub paused: bool,
    /// The operator's override of the circuit.
    pub forced: Option<ForcedCircuit>,
    /// The breaker.
    pub circuit: Circuit,
}

/// How many due jobs of a destination a claim may take at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Up to this many (at least 1).
    Take(u32),
    /// Exactly one, the circuit's probe.
    Probe,
    /// None, for this reason, until `Some(instant)` at the latest (or `None`: until
    /// an attempt finishes or an operator acts).
    Held(WaitingReason, Option<Timestamp>),
}

impl DestinationState {
    /// The limit in force under `policy`.
    pub fn limit(&self, policy: &DestinationPolicy) -> u32 {
        self.max_in_flight.unwrap_or(policy.default_max_in_flight)
    }

    /// What a claim may take at `now` with `in_flight` requests open to it (live
    /// leases, all instances): a paused destination holds everything, then the
    /// circuit decides, then the limit.
    pub fn admission(
        &self,
        in_flight: u32,
        now: Timestamp,
        policy: &DestinationPolicy,
    ) -> Admission {
        if self.paused {
            return Admission::Held(WaitingReason::DestinationPaused, None);
        }
        let room = self.limit(policy).saturating_sub(in_flight);
        match self.circuit.passage(self.forced, now) {
            Passage::Held(until) => Admission::Held(WaitingReason::DestinationCircuitOpen, until),
            _ if room == 0 => Admission::Held(WaitingReason::DestinationAtLimit, None),
            Passage::Probe => Admission::Probe,
            Passage::Open => Admission::Take(room),
        }
    }
}

/// How many of a destination's places long-running endpoints may still take
/// (docs/DESIGN.md §15.2): while a quick endpoint uses the destination (had a result
/// there within the endpoint window), long-running endpoints together hold at most half
/// of its `limit` (rounded up), so the other half keeps turning over at the quick
/// endpoints' pace; with no quick endpoint there, all of it. `long_in_flight` is what
/// they hold now, across all instances.
pub fn long_running_room(limit: u32, long_in_flight: u32, quick_active: bool) -> u32 {
    let cap = if quick_active {
        limit.div_ceil(2)
    } else {
        limit
    };
    cap.saturating_sub(long_in_flight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::circuit::{AttemptRef, CircuitState, HostVerdict};

    const NOW: Timestamp = Timestamp::from_millis(1_000_000);

    #[test]
    fn the_limit_counts_every_instances_requests() {
        let policy = DestinationPolicy::default();
        let state = DestinationState::default();
        assert_eq!(state.admission(0, NOW, &policy), Admission::Take(512));
        assert_eq!(state.admission(500, NOW, &policy), Admission::Take(12));
        assert_eq!(
            state.admission(512, NOW, &policy),
            Admission::Held(WaitingReason::DestinationAtLimit, None)
        );
        let own = DestinationState {
            max_in_flight: Some(4),
            ..DestinationState::default()
        };
        assert_eq!(own.admission(3, NOW, &policy), Admission::Take(1));
    }

    #[test]
    fn long_running_endpoints_keep_half_the_places_for_quick_ones() {
        assert_eq!(long_running_room(512, 0, true), 256);
        assert_eq!(long_running_room(512, 200, true), 56);
        assert_eq!(long_running_room(512, 300, true), 0);
        assert_eq!(long_running_room(5, 0, true), 3);
        // No quick endpoint uses the destination: all of it.
        assert_eq!(long_running_room(512, 300, false), 212);
        assert_eq!(long_running_room(1, 0, true), 1);
    }

    #[test]
    fn a_pause_and_an_open_circuit_hold_everything() {
        let policy = DestinationPolicy::default();
        let paused = DestinationState {
            paused: true,
            ..DestinationState::default()
        };
        assert_eq!(
            paused.admission(0, NOW, &policy),
            Admission::Held(WaitingReason::DestinationPaused, None)
        );
        let mut state = DestinationState::default();
        for _ in 0..policy.circuit.failure_threshold {
            let attempt = AttemptRef {
                job_id: "j",
                token: 1,
                started_at: NOW,
            };
            let verdict = Some(HostVerdict::Unwell);
            state.circuit.record(verdict, attempt, NOW, &policy.circuit);
        }
        assert_eq!(state.circuit.state, CircuitState::Open);
        let until = NOW.plus_ms(policy.circuit.cooldown_ms);
        assert_eq!(
            state.admission(0, NOW, &policy),
            Admission::Held(WaitingReason::DestinationCircuitOpen, Some(until))
        );
        assert_eq!(state.admission(0, until, &policy), Admission::Probe);
        // A probe still needs room under the limit.
        assert_eq!(
            state.admission(512, until, &policy),
            Admission::Held(WaitingReason::DestinationAtLimit, None)
        );
        let forced = DestinationState {
            forced: Some(ForcedCircuit::Open),
            ..DestinationState::default()
        };
        assert_eq!(
            forced.admission(0, NOW, &policy),
            Admission::Held(WaitingReason::DestinationCircuitOpen, None)
        );
    }
}
