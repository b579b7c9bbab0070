//! The circuit breaker of one subscriber's endpoint (docs/DESIGN.md §15.1): it judges
//! the endpoint by its own results, so one subscriber's timeouts or 5xx answers hold
//! only that subscriber's jobs, never the others on its `host:port`.
//!
//! - It opens on the endpoint's **failure rate** over a sliding window with a minimum
//!   volume (not on a run of consecutive failures): at least
//!   [`EndpointPolicy::min_results`] results in the last [`EndpointPolicy::window_ms`],
//!   of which at least [`EndpointPolicy::failure_percent`] % failed.
//! - Open, it holds the subscriber's due jobs (no attempt spent) for a cool-down; then
//!   one attempt, the probe, may go out when none of the subscriber's attempts is open.
//!   The probe's answer closes it; its failure opens it again for twice the cool-down.
//! - A `429`, or a `503` with `Retry-After`, is the receiver's back-pressure, not a
//!   failure: the `Retry-After` instant holds the subscriber's due jobs (at most the
//!   longest cool-down ahead), and nothing counts against the endpoint or its host.
//! - It keeps the endpoint's typical attempt duration (a moving average), which the
//!   claim's time-fair share of a destination's places reads
//!   ([`EndpointCircuit::long_running`]).
//!
//! The window is two fixed buckets of `window_ms`: the current one and the previous
//! one, the previous weighted by the part of it still inside the window (the usual
//! sliding-window estimate), so a count never drops all at once at a bucket's edge.
//!
//! Pure: `now` and every instant are parameters. The store keeps one row per
//! subscriber and applies results to it in the transaction that records them.

use super::circuit::{CircuitPolicy, CircuitState};
use super::policy::ErrorClass;
use super::time::Timestamp;
use super::waiting::WaitingReason;

/// The endpoint breakers' settings (flags `--endpoint-window-ms`,
/// `--endpoint-min-results`, `--endpoint-failure-percent`, `--long-attempt-ms`; the
/// cool-downs are the destination breaker's, [`CircuitPolicy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointPolicy {
    /// The sliding window, in milliseconds (at least 1).
    pub window_ms: u64,
    /// Results in the window before the rate may open the circuit (at least 1).
    pub min_results: u32,
    /// The failure rate, in percent (1–100), at or above which it opens.
    pub failure_percent: u32,
    /// An endpoint whose typical attempt takes at least this long, in milliseconds,
    /// is long-running: its requests count against the share of a destination's
    /// places that long-running endpoints may hold (§15.2). The worker marks it so
    /// too once one of its attempts has been open this long without an answer
    /// (`WorkerStore::note_long_attempt`), until its next result.
    pub long_attempt_ms: u64,
}

impl Default for EndpointPolicy {
    /// 60 s, 5 results, 50 %; long-running from 1 s.
    fn default() -> Self {
        EndpointPolicy {
            window_ms: 60_000,
            min_results: 5,
            failure_percent: 50,
            long_attempt_ms: 1_000,
        }
    }
}

/// What an attempt's result says about its subscriber's endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointVerdict {
    /// A 2xx.
    Delivered,
    /// Another answer that is not a failure worth a retry (3xx, 4xx other than 408,
    /// 425, 429): the endpoint answers; the job's fate is its own.
    Answered,
    /// A retryable failure of the endpoint: a timeout, a 5xx (a 503 without
    /// `Retry-After`), 408, 425, a status outside 200–599, or an answer that is not
    /// valid HTTP.
    Failed {
        /// The attempt timed out.
        timeout: bool,
    },
    /// Back-pressure: a 429, or a 503 with `Retry-After`; `Some(instant)` when the
    /// receiver named when to come back.
    BackPressure(Option<Timestamp>),
}

impl EndpointVerdict {
    /// The verdict of an attempt that ended with `error_class` (none when delivered),
    /// HTTP `status` and the `Retry-After` instant it asked for (RFC 9110 §10.2.3);
    /// `None` when the result says nothing about the endpoint: a connection, TLS or
    /// DNS failure (the host's, §15), a refused target, an unreadable secret, an
    /// unknown outcome.
    pub fn of(
        error_class: Option<ErrorClass>,
        status: Option<u16>,
        retry_after: Option<Timestamp>,
    ) -> Option<EndpointVerdict> {
        match (error_class, status) {
            (None, Some(_)) => Some(EndpointVerdict::Delivered),
            (Some(ErrorClass::Timeout), _) => Some(EndpointVerdict::Failed { timeout: true }),
            (Some(ErrorClass::Http429), _) => Some(EndpointVerdict::BackPressure(retry_after)),
            (Some(ErrorClass::Http5xx), Some(503)) if retry_after.is_some() => {
                Some(EndpointVerdict::BackPressure(retry_after))
            }
            (Some(ErrorClass::Http5xx | ErrorClass::Protocol), _) => {
                Some(EndpointVerdict::Failed { timeout: false })
            }
            (Some(ErrorClass::Http4xx), Some(408 | 425)) => {
                Some(EndpointVerdict::Failed { timeout: false })
            }
            (Some(ErrorClass::Http4xx | ErrorClass::Http3xx), Some(_)) => {
                Some(EndpointVerdict::Answered)
            }
            _ => None,
        }
    }
}

/// Results counted in one bucket of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Results that reached the endpoint (delivered, answered, failed).
    pub results: u32,
    /// Of those, failures.
    pub failures: u32,
    /// Of the failures, timeouts.
    pub timeouts: u32,
}

/// One attempt's result as the endpoint breaker reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointResult {
    /// The verdict (see [`EndpointVerdict::of`]).
    pub verdict: EndpointVerdict,
    /// When the attempt started.
    pub started_at: Timestamp,
    /// When it ended.
    pub finished_at: Timestamp,
    /// The attempt timeout that applied, in milliseconds: a timeout's is kept
    /// ([`EndpointCircuit::timeout_ms`]).
    pub timeout_ms: u64,
}

/// What a claim may send to the endpoint at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointPassage {
    /// Within the subscriber's own limits.
    Open,
    /// One attempt, the probe, when none of the subscriber's attempts is open.
    Probe,
    /// Nothing until the instant, for the reason
    /// ([`WaitingReason::SubscriberCircuitOpen`] or
    /// [`WaitingReason::SubscriberRetryAfter`]).
    Held(WaitingReason, Timestamp),
}

/// How a result changed the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointChange {
    /// Nothing the claims read changed (the counts and averages may have).
    None,
    /// It opened from closed: its failure rate crossed the line (the store then asks
    /// whether its host's failures are spread over most of its subscribers, §15).
    Opened,
    /// A failed probe opened it again for a longer cool-down: no new evidence about
    /// the host (the endpoint was failing already).
    Reopened,
    /// A probe's answer closed it.
    Closed,
}

/// One endpoint's breaker, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointCircuit {
    /// `Closed` or `Open`; an open circuit whose cool-down has ended is half-open
    /// ([`Self::shown`]).
    pub state: CircuitState,
    /// When the current bucket began.
    pub window_start: Timestamp,
    /// The current bucket.
    pub current: Counts,
    /// The bucket before it.
    pub previous: Counts,
    /// When it last opened.
    pub opened_at: Option<Timestamp>,
    /// Open: when the cool-down ends (a probe may go from then on).
    pub retry_at: Option<Timestamp>,
    /// The current cool-down in milliseconds (0 while closed).
    pub cooldown_ms: u64,
    /// When it last opened or closed: results of attempts started before count for
    /// nothing towards the rate.
    pub changed_at: Option<Timestamp>,
    /// Back-pressure: no attempt starts before this instant.
    pub hold_until: Option<Timestamp>,
    /// The typical attempt duration, in milliseconds (an exponential moving average
    /// over results that reached the endpoint, a timeout counting its full length);
    /// `None` before the first.
    pub duration_ms: Option<u64>,
    /// The attempt timeout its last timed-out attempt hit, in milliseconds (the retry
    /// advice names it, [`RecentResults`]).
    pub timeout_ms: Option<u64>,
    /// Its results in a row that timed out, whatever its state (a probe's included);
    /// any other result that reached the endpoint resets it. Back-pressure neither
    /// counts nor resets.
    pub consecutive_timeouts: u32,
    /// When the last result was recorded.
    pub last_result_at: Timestamp,
}

impl EndpointCircuit {
    /// A closed breaker with an empty window starting at `now`.
    pub fn new(now: Timestamp) -> EndpointCircuit {
        EndpointCircuit {
            state: CircuitState::Closed,
            window_start: now,
            current: Counts::default(),
            previous: Counts::default(),
            opened_at: None,
            retry_at: None,
            cooldown_ms: 0,
            changed_at: None,
            hold_until: None,
            duration_ms: None,
            timeout_ms: None,
            consecutive_timeouts: 0,
            last_result_at: now,
        }
    }

    /// What a claim may send at `now`: back-pressure first, then the breaker.
    pub fn passage(&self, now: Timestamp) -> EndpointPassage {
        if let Some(until) = self.hold_until.filter(|&at| at > now) {
            return EndpointPassage::Held(WaitingReason::SubscriberRetryAfter, until);
        }
        match (self.state, self.retry_at) {
            (CircuitState::Closed, _) => EndpointPassage::Open,
            (_, Some(at)) if at > now => {
                EndpointPassage::Held(WaitingReason::SubscriberCircuitOpen, at)
            }
            _ => EndpointPassage::Probe,
        }
    }

    /// The state to show at `now`: an open circuit whose cool-down has ended is
    /// half-open.
    pub fn shown(&self, now: Timestamp) -> CircuitState {
        match self.state {
            CircuitState::Open if self.retry_at.is_none_or(|at| at <= now) => {
                CircuitState::HalfOpen
            }
            state => state,
        }
    }

    /// True when its typical attempt takes at least `policy.long_attempt_ms`.
    pub fn long_running(&self, policy: &EndpointPolicy) -> bool {
        self.duration_ms
            .is_some_and(|ms| ms >= policy.long_attempt_ms)
    }

    /// The window's estimated counts at `now`: the current bucket, plus the previous
    /// one weighted by the part of it still inside the window (rounded down).
    pub fn window(&self, now: Timestamp, policy: &EndpointPolicy) -> Counts {
        let mut at_now = self.clone();
        at_now.roll(now, policy);
        let window = policy.window_ms.max(1);
        let elapsed = u64::try_from(now.millis_since(at_now.window_start))
            .unwrap_or(0)
            .min(window);
        let weigh = |n: u32| {
            let kept = u64::from(n) * (window - elapsed) / window;
            u32::try_from(kept).unwrap_or(u32::MAX)
        };
        Counts {
            results: at_now.current.results + weigh(at_now.previous.results),
            failures: at_now.current.failures + weigh(at_now.previous.failures),
            timeouts: at_now.current.timeouts + weigh(at_now.previous.timeouts),
        }
    }

    /// True when the window at `now` has the volume and the failure rate to open it.
    pub fn failing(&self, now: Timestamp, policy: &EndpointPolicy) -> bool {
        let counts = self.window(now, policy);
        counts.results >= policy.min_results.max(1)
            && u64::from(counts.failures) * 100
                >= u64::from(counts.results) * u64::from(policy.failure_percent.clamp(1, 100))
    }

    /// Applies `result` at `now`:
    ///
    /// - Back-pressure with an instant holds the subscriber until then (at most
    ///   `circuit.max_cooldown_ms` ahead); it counts for nothing else.
    /// - Closed: a result of an attempt started since it last changed counts in the
    ///   window; when the window is [`Self::failing`], it opens for `cooldown_ms`.
    /// - Open: only the probe's result counts (an attempt started once the cool-down
    ///   had ended): a failure opens it again for twice the cool-down (at most
    ///   `max_cooldown_ms`), any other answer closes it with an empty window.
    ///
    /// Every result that reached the endpoint updates the typical duration.
    pub fn record(
        &mut self,
        result: EndpointResult,
        now: Timestamp,
        policy: &EndpointPolicy,
        circuit: &CircuitPolicy,
    ) -> EndpointChange {
        self.last_result_at = now;
        self.roll(now, policy);
        if let EndpointVerdict::BackPressure(asked) = result.verdict {
            if let Some(asked) = asked {
                let until = asked.min(now.plus_ms(circuit.max_cooldown_ms));
                self.hold_until = self.hold_until.max(Some(until));
            }
            return EndpointChange::None;
        }
        let took = u64::try_from(result.finished_at.millis_since(result.started_at)).unwrap_or(0);
        self.duration_ms = Some(match self.duration_ms {
            None => took,
            // Weight 1/4 for the newest: a few results move it, one outlier does not.
            Some(before) => (before.saturating_mul(3).saturating_add(took)) / 4,
        });
        if result.verdict == (EndpointVerdict::Failed { timeout: true }) {
            self.timeout_ms = Some(result.timeout_ms);
            self.consecutive_timeouts = self.consecutive_timeouts.saturating_add(1);
        } else {
            self.consecutive_timeouts = 0;
        }
        let failed = matches!(result.verdict, EndpointVerdict::Failed { .. });
        match self.state {
            CircuitState::Closed | CircuitState::HalfOpen => {
                if self.changed_at.is_some_and(|at| result.started_at < at) {
                    return EndpointChange::None;
                }
                self.current.results += 1;
                if let EndpointVerdict::Failed { timeout } = result.verdict {
                    self.current.failures += 1;
                    self.current.timeouts += u32::from(timeout);
                }
                if failed && self.failing(now, policy) {
                    self.open(circuit.cooldown_ms, now);
                    return EndpointChange::Opened;
                }
                EndpointChange::None
            }
            CircuitState::Open => {
                let probe = self.retry_at.is_some_and(|at| result.started_at >= at);
                if !probe {
                    return EndpointChange::None;
                }
                if failed {
                    let longer = self.cooldown_ms.saturating_mul(2);
                    self.open(longer.min(circuit.max_cooldown_ms), now);
                    return EndpointChange::Reopened;
                }
                self.close(now);
                EndpointChange::Closed
            }
        }
    }

    /// Closes it at `now` with an empty window (a probe succeeded, or an operator
    /// reset it): results of attempts started before count for nothing.
    pub fn close(&mut self, now: Timestamp) {
        self.state = CircuitState::Closed;
        self.retry_at = None;
        self.cooldown_ms = 0;
        self.changed_at = Some(now);
        self.window_start = now;
        self.current = Counts::default();
        self.previous = Counts::default();
    }

    fn open(&mut self, cooldown_ms: u64, now: Timestamp) {
        self.state = CircuitState::Open;
        self.cooldown_ms = cooldown_ms.max(1);
        self.opened_at = Some(now);
        self.retry_at = Some(now.plus_ms(self.cooldown_ms));
        self.changed_at = Some(now);
    }

    /// Moves the buckets on to the one holding `now`.
    fn roll(&mut self, now: Timestamp, policy: &EndpointPolicy) {
        let window = i64::try_from(policy.window_ms.max(1)).unwrap_or(i64::MAX);
        let elapsed = now.millis_since(self.window_start);
        if elapsed < window {
            return;
        }
        if elapsed < window.saturating_mul(2) {
            self.previous = self.current;
            self.window_start = Timestamp::from_millis(self.window_start.as_millis() + window);
        } else {
            self.previous = Counts::default();
            self.window_start = now;
        }
        self.current = Counts::default();
    }
}

/// What a subscriber endpoint's recent results say about how long it takes to answer
/// (the retry advice, docs/DESIGN.md §5.9): its results in a row that timed out (a
/// probe's included, so an open circuit keeps its evidence fresh), the timeout the
/// last of them hit, and the subscriber's own `attempt_timeout_ms` now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecentResults {
    /// Timeouts in a row, up to its latest result.
    pub consecutive_timeouts: u32,
    /// The attempt timeout the last of them hit, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// The subscriber's own attempt timeout now, when it has one.
    pub own_timeout_ms: Option<u64>,
}

/// An endpoint whose recent attempts all timed out: it answers slower than its attempt
/// timeout, so a retry with the same timeout gets the same timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeoutBound {
    /// How many attempts in a row timed out.
    pub attempts: u32,
    /// The attempt timeout they hit, in milliseconds.
    pub timeout_ms: u64,
}

impl RecentResults {
    /// The fewest timeouts in a row that make an endpoint timeout-bound: one or two may
    /// be a blip; three in a row, and no answer in between, are how it answers now.
    pub const MIN_TIMEOUTS: u32 = 3;

    /// Its figures as stored, with the subscriber's own timeout `own_timeout_ms`.
    pub fn of(circuit: &EndpointCircuit, own_timeout_ms: Option<u64>) -> RecentResults {
        RecentResults {
            consecutive_timeouts: circuit.consecutive_timeouts,
            timeout_ms: circuit.timeout_ms,
            own_timeout_ms,
        }
    }

    /// `Some` after at least [`Self::MIN_TIMEOUTS`] timeouts in a row (its p50, every
    /// percentile, is at least the timeout they hit), unless the subscriber's own
    /// timeout has since been raised above it (the fix the advice names: the next
    /// attempt will tell).
    pub fn timeout_bound(&self) -> Option<TimeoutBound> {
        let timeout_ms = self.timeout_ms?;
        if self.own_timeout_ms.is_some_and(|own| own > timeout_ms) {
            return None;
        }
        (self.consecutive_timeouts >= Self::MIN_TIMEOUTS).then_some(TimeoutBound {
            attempts: self.consecutive_timeouts,
            timeout_ms,
        })
    }
}

/// Why a subscriber's endpoint circuit holds its due jobs at `now`, and until when if
/// that is known, as the claim judges it: the receiver's `Retry-After` (`hold_until`)
/// first, then an open circuit before its cool-down ends (`retry_at`), then a half-open
/// one with an attempt open (its probe, or one sent before it opened; none until it
/// ends). `circuit_open` is the stored state; `open_attempts` the subscriber's live
/// leases.
pub fn endpoint_hold(
    circuit_open: bool,
    retry_at: Option<Timestamp>,
    hold_until: Option<Timestamp>,
    open_attempts: u32,
    now: Timestamp,
) -> Option<(WaitingReason, Option<Timestamp>)> {
    if let Some(until) = hold_until.filter(|&at| at > now) {
        return Some((WaitingReason::SubscriberRetryAfter, Some(until)));
    }
    if !circuit_open {
        return None;
    }
    match retry_at {
        Some(at) if at > now => Some((WaitingReason::SubscriberCircuitOpen, Some(at))),
        _ if open_attempts > 0 => Some((WaitingReason::SubscriberCircuitOpen, None)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
