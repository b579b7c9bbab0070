//! The circuit breaker of a destination, a `host:port` (docs/DESIGN.md §15): it opens
//! only on evidence about the host itself — `--circuit-failure-threshold` consecutive
//! connection, TLS or DNS failures, or failures spread over most of the distinct
//! subscribers it served lately (the store decides that from the endpoint breakers,
//! [`super::endpoint`], and calls [`Circuit::trip`]). While open, the destination's jobs
//! wait (no attempt spent) for a cool-down; then one probe goes out, one across the
//! whole cluster, and its result closes the circuit or opens it again for a longer
//! cool-down. One subscriber's timeouts, 5xx answers or back-pressure are that
//! subscriber's (its endpoint breaker's), never the host's.
//!
//! This module holds the rules as a pure state machine; the store keeps one
//! [`Circuit`] per destination and applies results to it in the transaction that
//! records them.

use serde::{Deserialize, Serialize};

use super::policy::ErrorClass;
use super::time::Timestamp;

/// A circuit's state, as stored and as shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    /// Requests go out, within the destination's limit.
    Closed,
    /// Requests wait until the cool-down ends.
    Open,
    /// The cool-down ended: one probe may go out (or is out); the others wait for its
    /// result.
    HalfOpen,
}

super::names::wire_names!(CircuitState, "Every state." {
    Closed => "closed",
    Open => "open",
    HalfOpen => "half_open",
});

/// An operator's override of the circuit: held open (nothing goes out) or closed
/// (failures never open it) until the operator returns it to automatic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ForcedCircuit {
    /// Held open.
    Open,
    /// Held closed.
    Closed,
}

super::names::wire_names!(ForcedCircuit, "Every override." {
    Open => "open",
    Closed => "closed",
});

/// What an attempt's result says about its destination's host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostVerdict {
    /// The host could not be reached: the connection, TLS or DNS failed.
    Unwell,
    /// The host took the request but no answer came within the attempt timeout: the
    /// endpoint's failure (its breaker counts it), no evidence against the host while
    /// the circuit is closed; a probe that times out failed.
    Slow,
    /// The host answered with a failure worth a retry (a 5xx, 408 or 425, or an answer
    /// that is not valid HTTP): the endpoint's failure while the circuit is closed (the
    /// host is reachable: it resets the count of connection failures), but a probe that
    /// gets it failed: the host does not serve yet.
    Erring,
    /// The host answered something else (a 2xx, 3xx or another 4xx), whatever it means
    /// for the subscriber.
    Well,
}

impl HostVerdict {
    /// The verdict of an attempt that ended with `error_class` (none when delivered)
    /// and HTTP `status`; `None` when nothing reached the host (blocked by the target
    /// policy, the signing secret unreadable) or the outcome is unknown.
    pub fn of(error_class: Option<ErrorClass>, status: Option<u16>) -> Option<HostVerdict> {
        match (error_class, status) {
            (Some(ErrorClass::Connect), _) => Some(HostVerdict::Unwell),
            (Some(ErrorClass::Timeout), _) => Some(HostVerdict::Slow),
            (Some(ErrorClass::Protocol), _) => Some(HostVerdict::Erring),
            (Some(ErrorClass::Blocked | ErrorClass::SecretUnreadable), _) => None,
            (_, Some(500..=599 | 408 | 425)) => Some(HostVerdict::Erring),
            (_, Some(_)) => Some(HostVerdict::Well),
            (_, None) => None,
        }
    }
}

/// The breakers' settings (flags `--circuit-failure-threshold`, `--circuit-cooldown-ms`,
/// `--circuit-max-cooldown-ms`); the cool-downs serve the endpoint breakers too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitPolicy {
    /// Consecutive connection failures that open a closed circuit (at least 1).
    pub failure_threshold: u32,
    /// The first cool-down, in milliseconds; it doubles after each failed probe.
    pub cooldown_ms: u64,
    /// The longest cool-down, in milliseconds.
    pub max_cooldown_ms: u64,
}

impl Default for CircuitPolicy {
    /// 5 failures; 5 s, doubling up to 5 min.
    fn default() -> Self {
        CircuitPolicy {
            failure_threshold: 5,
            cooldown_ms: 5_000,
            max_cooldown_ms: 300_000,
        }
    }
}

/// The attempt sent as the probe of a half-open circuit: its job and lease token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The job's id.
    pub job_id: String,
    /// The probe attempt's fencing token.
    pub token: i64,
}

/// One attempt as the breaker sees its result: its job, lease token and start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptRef<'a> {
    /// The job's id.
    pub job_id: &'a str,
    /// The attempt's fencing token.
    pub token: i64,
    /// When the attempt started.
    pub started_at: Timestamp,
}

/// One destination's breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Circuit {
    /// Closed, open or half-open (as stored; see [`Circuit::shown`]).
    pub state: CircuitState,
    /// Consecutive host failures while closed (the count that opens it); the failed
    /// probes are counted on top while it stays open.
    pub failures: u32,
    /// The current cool-down in milliseconds (0 while closed).
    pub cooldown_ms: u64,
    /// When it last opened.
    pub opened_at: Option<Timestamp>,
    /// Open: when the cool-down ends and a probe may go. Half-open: when the probe's
    /// lease expires (a lost probe is replaced then).
    pub retry_at: Option<Timestamp>,
    /// The probe out while half-open.
    pub probe: Option<Probe>,
    /// When it last opened or closed (or an operator reset it); `None` if never.
    /// Results of attempts started before then say nothing about the host as it is.
    pub changed_at: Option<Timestamp>,
}

/// What a claim may send to a destination at an instant, as far as its circuit goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passage {
    /// As many as the destination's limit allows.
    Open,
    /// One attempt, the probe.
    Probe,
    /// Nothing until `Some(instant)` (or until an operator acts, `None`).
    Held(Option<Timestamp>),
}

impl Default for Circuit {
    fn default() -> Self {
        Circuit::closed()
    }
}

impl Circuit {
    /// A closed circuit with no failures.
    pub const fn closed() -> Circuit {
        Circuit {
            state: CircuitState::Closed,
            failures: 0,
            cooldown_ms: 0,
            opened_at: None,
            retry_at: None,
            probe: None,
            changed_at: None,
        }
    }

    /// A closed circuit with no failures, as of `now` (a probe closed it, or an
    /// operator reset it): results of attempts started before `now` do not count.
    pub fn closed_at(now: Timestamp) -> Circuit {
        Circuit {
            changed_at: Some(now),
            ..Circuit::closed()
        }
    }

    /// What a claim may send at `now`, with the operator's override `forced`.
    pub fn passage(&self, forced: Option<ForcedCircuit>, now: Timestamp) -> Passage {
        match (forced, self.state) {
            (Some(ForcedCircuit::Open), _) => Passage::Held(None),
            (Some(ForcedCircuit::Closed), _) | (None, CircuitState::Closed) => Passage::Open,
            (None, CircuitState::Open | CircuitState::HalfOpen) => match self.retry_at {
                Some(at) if at > now => Passage::Held(Some(at)),
                _ => Passage::Probe,
            },
        }
    }

    /// The state to show at `now`: the override when there is one; an open circuit
    /// whose cool-down has ended shows half-open (its next claim sends the probe).
    pub fn shown(&self, forced: Option<ForcedCircuit>, now: Timestamp) -> CircuitState {
        match forced {
            Some(ForcedCircuit::Open) => CircuitState::Open,
            Some(ForcedCircuit::Closed) => CircuitState::Closed,
            None if self.state == CircuitState::Open
                && self.retry_at.is_none_or(|at| at <= now) =>
            {
                CircuitState::HalfOpen
            }
            None => self.state,
        }
    }

    /// A claim sent `probe`, whose lease runs until `lease_until`: the circuit is
    /// half-open until its result (or, if that never comes, until the lease expires).
    pub fn probing(&mut self, probe: Probe, lease_until: Timestamp) {
        self.state = CircuitState::HalfOpen;
        self.retry_at = Some(lease_until);
        self.probe = Some(probe);
    }

    /// Applies the result of `attempt` at `now` (`verdict` `None`: the attempt reached
    /// no host); returns whether the circuit changed.
    ///
    /// - Closed: a connection failure counts; the `failure_threshold`-th in a row opens
    ///   the circuit for `cooldown_ms`. An answer resets the count; a timeout neither
    ///   counts nor resets. Attempts started before the circuit last closed count for
    ///   nothing: their answers describe the host as it was.
    /// - Open: results of attempts sent before it opened change nothing.
    /// - Half-open: only the probe's result counts. A [`HostVerdict::Well`] answer
    ///   closes the circuit; a connection failure, a timeout or an erring answer (5xx,
    ///   408, 425) opens it again for twice the cool-down (at most `max_cooldown_ms`);
    ///   a probe that reached no host is replaced at once.
    pub fn record(
        &mut self,
        verdict: Option<HostVerdict>,
        attempt: AttemptRef<'_>,
        now: Timestamp,
        policy: &CircuitPolicy,
    ) -> bool {
        let before = self.clone();
        match (self.state, verdict) {
            (CircuitState::Closed, _)
                if self.changed_at.is_some_and(|at| attempt.started_at < at) => {}
            (CircuitState::Closed, Some(HostVerdict::Well | HostVerdict::Erring)) => {
                self.failures = 0;
            }
            (CircuitState::Closed, Some(HostVerdict::Unwell)) => {
                self.failures = self.failures.saturating_add(1);
                if self.failures >= policy.failure_threshold.max(1) {
                    self.open(policy.cooldown_ms, now);
                }
            }
            (CircuitState::Closed | CircuitState::Open, _) => {}
            (CircuitState::HalfOpen, _) if !self.is_probe(attempt) => {}
            (CircuitState::HalfOpen, Some(HostVerdict::Well)) => *self = Circuit::closed_at(now),
            (
                CircuitState::HalfOpen,
                Some(HostVerdict::Unwell | HostVerdict::Slow | HostVerdict::Erring),
            ) => {
                self.failures = self.failures.saturating_add(1);
                let longer = self.cooldown_ms.saturating_mul(2);
                self.open(longer.min(policy.max_cooldown_ms), now);
            }
            (CircuitState::HalfOpen, None) => {
                self.probe = None;
                self.retry_at = Some(now);
            }
        }
        *self != before
    }

    /// Opens a closed circuit at `now` for `cooldown_ms` on evidence gathered
    /// elsewhere (failures spread over most of the destination's subscribers, §15);
    /// returns whether it changed. An open or half-open circuit is left as it is.
    pub fn trip(&mut self, now: Timestamp, policy: &CircuitPolicy) -> bool {
        if self.state != CircuitState::Closed {
            return false;
        }
        self.open(policy.cooldown_ms, now);
        true
    }

    fn is_probe(&self, attempt: AttemptRef<'_>) -> bool {
        self.probe
            .as_ref()
            .is_some_and(|p| p.job_id == attempt.job_id && p.token == attempt.token)
    }

    fn open(&mut self, cooldown_ms: u64, now: Timestamp) {
        self.state = CircuitState::Open;
        self.cooldown_ms = cooldown_ms.max(1);
        self.opened_at = Some(now);
        self.retry_at = Some(now.plus_ms(self.cooldown_ms));
        self.probe = None;
        self.changed_at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_millis(1_000_000);
    const POLICY: CircuitPolicy = CircuitPolicy {
        failure_threshold: 3,
        cooldown_ms: 1_000,
        max_cooldown_ms: 3_000,
    };

    fn attempt(job_id: &str, token: i64) -> AttemptRef<'_> {
        AttemptRef {
            job_id,
            token,
            started_at: NOW,
        }
    }

    fn fail(circuit: &mut Circuit, at: Timestamp) -> bool {
        circuit.record(Some(HostVerdict::Unwell), attempt("j", 1), at, &POLICY)
    }

    /// A circuit opened at [`NOW`] (cool-down 1 s) whose probe, job `p` under token
    /// 1, went out at `NOW + 1 s` with a lease of `lease_ms`.
    fn probing(lease_ms: u64) -> Circuit {
        let mut circuit = Circuit::closed();
        for _ in 0..3 {
            fail(&mut circuit, NOW);
        }
        let probe = Probe {
            job_id: "p".into(),
            token: 1,
        };
        circuit.probing(probe, NOW.plus_ms(1_000 + lease_ms));
        circuit
    }

    #[test]
    fn host_failures_are_told_from_the_subscribers_own() {
        use ErrorClass::*;
        assert_eq!(
            HostVerdict::of(Some(Connect), None),
            Some(HostVerdict::Unwell)
        );
        assert_eq!(
            HostVerdict::of(Some(Timeout), None),
            Some(HostVerdict::Slow)
        );
        // An answer that is not valid HTTP came from a reachable host that errs.
        assert_eq!(
            HostVerdict::of(Some(Protocol), None),
            Some(HostVerdict::Erring)
        );
        // A gateway's 502–504 is an answer that errs: the endpoint breaker judges it;
        // only a probe is failed by it.
        for (class, status) in [
            (Http5xx, 502),
            (Http5xx, 503),
            (Http5xx, 504),
            (Http5xx, 500),
            (Http5xx, 501),
            (Http4xx, 408),
            (Http4xx, 425),
        ] {
            let verdict = HostVerdict::of(Some(class), Some(status));
            assert_eq!(verdict, Some(HostVerdict::Erring), "{status}");
        }
        for (class, status) in [
            (Http4xx, 404),
            (Http4xx, 410),
            (Http429, 429),
            (Http3xx, 301),
        ] {
            let verdict = HostVerdict::of(Some(class), Some(status));
            assert_eq!(verdict, Some(HostVerdict::Well), "{status}");
        }
        assert_eq!(HostVerdict::of(None, Some(200)), Some(HostVerdict::Well));
        assert_eq!(HostVerdict::of(Some(Blocked), None), None);
        assert_eq!(HostVerdict::of(Some(SecretUnreadable), None), None);
        assert_eq!(HostVerdict::of(None, None), None);
    }

    #[test]
    fn timeouts_neither_open_nor_reset_a_closed_circuit_but_fail_a_probe() {
        let mut circuit = Circuit::closed();
        fail(&mut circuit, NOW);
        fail(&mut circuit, NOW);
        for _ in 0..10 {
            let slow = Some(HostVerdict::Slow);
            assert!(!circuit.record(slow, attempt("j", 1), NOW, &POLICY));
        }
        assert_eq!((circuit.state, circuit.failures), (CircuitState::Closed, 2));
        fail(&mut circuit, NOW);
        assert_eq!(circuit.state, CircuitState::Open);
        let later = NOW.plus_ms(1_000);
        let probe = Probe {
            job_id: "p".into(),
            token: 1,
        };
        circuit.probing(probe, later.plus_ms(30_000));
        assert!(circuit.record(Some(HostVerdict::Slow), attempt("p", 1), later, &POLICY));
        assert_eq!(
            (circuit.state, circuit.cooldown_ms),
            (CircuitState::Open, 2_000)
        );
    }

    #[test]
    fn an_erring_answer_resets_a_closed_count_but_fails_a_probe() {
        let mut circuit = Circuit::closed();
        fail(&mut circuit, NOW);
        fail(&mut circuit, NOW);
        let erring = Some(HostVerdict::Erring);
        assert!(circuit.record(erring, attempt("j", 1), NOW, &POLICY));
        assert_eq!((circuit.state, circuit.failures), (CircuitState::Closed, 0));
        for _ in 0..3 {
            fail(&mut circuit, NOW);
        }
        let later = NOW.plus_ms(1_000);
        let probe = Probe {
            job_id: "p".into(),
            token: 1,
        };
        circuit.probing(probe, later.plus_ms(30_000));
        assert!(circuit.record(erring, attempt("p", 1), later, &POLICY));
        assert_eq!(
            (circuit.state, circuit.cooldown_ms),
            (CircuitState::Open, 2_000)
        );
    }

    #[test]
    fn a_trip_opens_only_a_closed_circuit() {
        let mut circuit = Circuit::closed();
        assert!(circuit.trip(NOW, &POLICY));
        assert_eq!(circuit.state, CircuitState::Open);
        assert_eq!(circuit.retry_at, Some(NOW.plus_ms(1_000)));
        assert!(!circuit.trip(NOW.plus_ms(5), &POLICY));
        assert_eq!(circuit.opened_at, Some(NOW));
    }

    #[test]
    fn the_threshold_th_consecutive_failure_opens_it() {
        let mut circuit = Circuit::closed();
        assert!(fail(&mut circuit, NOW));
        assert!(fail(&mut circuit, NOW));
        // An answer in between resets the count.
        assert!(circuit.record(Some(HostVerdict::Well), attempt("j", 1), NOW, &POLICY));
        assert_eq!(circuit.failures, 0);
        fail(&mut circuit, NOW);
        fail(&mut circuit, NOW);
        assert_eq!(circuit.state, CircuitState::Closed);
        fail(&mut circuit, NOW);
        assert_eq!(circuit.state, CircuitState::Open);
        assert_eq!(circuit.retry_at, Some(NOW.plus_ms(1_000)));
        assert_eq!(
            circuit.passage(None, NOW),
            Passage::Held(Some(NOW.plus_ms(1_000)))
        );
        // Results of attempts sent before it opened change nothing.
        assert!(!circuit.record(Some(HostVerdict::Well), attempt("k", 1), NOW, &POLICY));
        assert!(!fail(&mut circuit, NOW));
    }

    #[test]
    fn after_the_cool_down_one_probe_decides() {
        let mut circuit = Circuit::closed();
        for _ in 0..3 {
            fail(&mut circuit, NOW);
        }
        let later = NOW.plus_ms(1_000);
        assert_eq!(circuit.shown(None, later), CircuitState::HalfOpen);
        assert_eq!(circuit.passage(None, later), Passage::Probe);
        let probe = Probe {
            job_id: "p".into(),
            token: 7,
        };
        circuit.probing(probe, later.plus_ms(30_000));
        assert_eq!(
            circuit.passage(None, later),
            Passage::Held(Some(later.plus_ms(30_000)))
        );
        // Another attempt's result is not the probe's.
        assert!(!circuit.record(Some(HostVerdict::Well), attempt("p", 6), later, &POLICY));
        // A failed probe doubles the cool-down.
        assert!(circuit.record(Some(HostVerdict::Unwell), attempt("p", 7), later, &POLICY));
        assert_eq!(circuit.state, CircuitState::Open);
        assert_eq!(circuit.cooldown_ms, 2_000);
        assert_eq!(circuit.retry_at, Some(later.plus_ms(2_000)));
        // ... up to the cap.
        let again = later.plus_ms(2_000);
        circuit.probing(
            Probe {
                job_id: "p".into(),
                token: 8,
            },
            again.plus_ms(30_000),
        );
        circuit.record(Some(HostVerdict::Unwell), attempt("p", 8), again, &POLICY);
        assert_eq!(circuit.cooldown_ms, 3_000);
        // A good probe closes it and resets everything.
        let last = again.plus_ms(3_000);
        circuit.probing(
            Probe {
                job_id: "q".into(),
                token: 1,
            },
            last.plus_ms(30_000),
        );
        assert!(circuit.record(Some(HostVerdict::Well), attempt("q", 1), last, &POLICY));
        assert_eq!(circuit, Circuit::closed_at(last));
        // Answers of attempts sent before it closed count for nothing...
        for _ in 0..3 {
            assert!(!fail(&mut circuit, last));
        }
        assert_eq!(circuit.state, CircuitState::Closed);
        // ... those sent since do.
        let fresh = AttemptRef {
            started_at: last,
            ..attempt("r", 1)
        };
        for _ in 0..3 {
            circuit.record(Some(HostVerdict::Unwell), fresh, last.plus_ms(5), &POLICY);
        }
        assert_eq!(circuit.state, CircuitState::Open);
    }

    #[test]
    fn a_probe_that_reached_no_host_is_replaced_at_once() {
        let mut circuit = probing(30_000);
        let later = NOW.plus_ms(1_010);
        assert!(circuit.record(None, attempt("p", 1), later, &POLICY));
        assert_eq!(circuit.passage(None, later), Passage::Probe);
        // Another attempt that reached no host changes nothing.
        assert!(!circuit.record(None, attempt("x", 1), later, &POLICY));
    }

    #[test]
    fn a_lost_probe_is_replaced_when_its_lease_expires() {
        let circuit = probing(500);
        let later = NOW.plus_ms(1_000);
        assert!(matches!(circuit.passage(None, later), Passage::Held(_)));
        assert_eq!(circuit.passage(None, later.plus_ms(500)), Passage::Probe);
    }

    #[test]
    fn an_operator_override_wins() {
        let mut circuit = Circuit::closed();
        for _ in 0..3 {
            fail(&mut circuit, NOW);
        }
        let forced = Some(ForcedCircuit::Closed);
        assert_eq!(circuit.passage(forced, NOW), Passage::Open);
        assert_eq!(circuit.shown(forced, NOW), CircuitState::Closed);
        let closed = Circuit::closed();
        assert_eq!(
            closed.passage(Some(ForcedCircuit::Open), NOW),
            Passage::Held(None)
        );
        assert_eq!(
            closed.shown(Some(ForcedCircuit::Open), NOW),
            CircuitState::Open
        );
    }
}
