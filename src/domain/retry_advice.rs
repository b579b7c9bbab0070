//! Would a retry help (docs/DESIGN.md §5.9): for a job, and for a failing subscriber,
//! whether sending again now can change the outcome, and why. Pure: derived from what
//! the store read and the injected `now`; nothing is stored.
//!
//! The rules, in order:
//! - nothing failed and nothing holds the job back: no advice (`None`);
//! - its subscriber is timeout-bound (its recent attempts, at least three, all timed
//!   out: [`TimeoutBound`]) and the job's last error is a timeout or it has none:
//!   [`RetryVerdict::No`], the same for every such job whatever holds it or whether it
//!   is dead, naming the timeout and the two fixes (its own `attempt_timeout_ms`, a
//!   receiver that answers sooner); a subscriber gets the same;
//! - its subscriber was deleted: [`RetryVerdict::No`] (nothing sends it again);
//! - waiting past its deadline, or `retrying` with every attempt spent (a lost lease
//!   on its last attempt): [`RetryVerdict::Replay`], since the retry route refuses it
//!   and the sweep makes it a dead letter;
//! - its subscriber is paused (whether or not the job is due yet):
//!   [`RetryVerdict::AfterResume`];
//! - its destination (paused, circuit open, at its limit) or its subscriber (at its
//!   `max_in_flight`, rate limited) holds it back: [`RetryVerdict::NotBefore`], with
//!   the instant the hold clears when it is known (an open circuit's next probe); a
//!   `retrying` job not yet due whose destination is paused or whose circuit is open
//!   gets the same, since brought forward it would wait for them;
//! - `retrying` after a transient failure (a timeout, a connect error, an answer that
//!   is not valid HTTP, a 5xx, 429, 408 or 425): [`RetryVerdict::Yes`]; it is retried
//!   at `next_attempt_at` anyway and `POST /v1/jobs/{id}/retry` brings that forward;
//! - `dead` after a 3xx or another 4xx, a target the SSRF policy refuses, or its
//!   subscriber's deletion: [`RetryVerdict::No`]: the same request gets the same
//!   answer until the receiver or the subscriber's URL is fixed;
//! - `dead` after transient failures (its attempts or its deadline ran out):
//!   [`RetryVerdict::Replay`]: a replay can deliver it once the receiver recovers;
//!   dead while it waited on a paused subscriber: [`RetryVerdict::AfterResume`].

use serde::Serialize;
use utoipa::ToSchema;

use super::endpoint::TimeoutBound;
use super::job::{DeadReason, JobState};
use super::names::wire_names;
use super::policy::ErrorClass;
use super::time::Timestamp;
use super::waiting::WaitingReason;

/// Whether a retry now can change the outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryVerdict {
    /// Yes: the failure was transient. The job is retried at `at` anyway; `POST
    /// /v1/jobs/{id}/retry` (or a replay selecting `retrying` jobs) sends it now.
    Yes,
    /// No: the receiver refused the request (3xx, 4xx), the target is refused, the
    /// subscriber was deleted, or the secret cannot be read here. Sending the same
    /// request again gets the same result; fix the receiver or the subscriber first.
    No,
    /// Not while the subscriber is paused: resume it (`POST /v1/subscribers/resume`).
    AfterResume,
    /// Not before a hold clears: the destination is paused, its circuit is open or it
    /// is at its limit, or the subscriber is at its limit. `at` says when, if known.
    NotBefore,
    /// The job is dead after transient failures: a replay (`POST /v1/replays`) can
    /// deliver it once the receiver recovers.
    Replay,
}

wire_names!(RetryVerdict, "Every verdict." {
    Yes => "yes",
    No => "no",
    AfterResume => "after_resume",
    NotBefore => "not_before",
    Replay => "replay",
});

/// Whether a retry now can change the outcome, why, and from when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct RetryAdvice {
    /// The verdict.
    pub verdict: RetryVerdict,
    /// Why, in one sentence an operator can act on.
    pub reason: String,
    /// `yes`: when the next attempt is due anyway; `not_before`: when the hold clears,
    /// if known (an open circuit's next probe); otherwise `null`.
    pub at: Option<Timestamp>,
}

impl RetryAdvice {
    fn new(verdict: RetryVerdict, reason: impl Into<String>, at: Option<Timestamp>) -> Self {
        RetryAdvice {
            verdict,
            reason: reason.into(),
            at,
        }
    }
}

/// What the advice on one job is drawn from, as read at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobFacts {
    /// Its state as read (an expired lease reads as `retrying`).
    pub state: JobState,
    /// Why it waits, as the API shows it.
    pub waiting_reason: Option<WaitingReason>,
    /// Why it is dead, when it is.
    pub dead_reason: Option<DeadReason>,
    /// Why it waited when it died at its deadline (`dead_detail`), when recorded.
    pub dead_detail: Option<WaitingReason>,
    /// Its last attempt's error class.
    pub last_error_class: Option<ErrorClass>,
    /// Its last attempt's HTTP status.
    pub last_status: Option<u16>,
    /// When it is due next (`next_attempt_at` of a `retrying` job).
    pub due_at: Option<Timestamp>,
    /// When its destination's circuit lets the next probe out, when it is open.
    pub circuit_retry_at: Option<Timestamp>,
    /// Why its subscriber's endpoint circuit holds its due jobs back at the instant
    /// read (open, or the receiver's `Retry-After`), whether or not the job is due.
    pub endpoint_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known.
    pub endpoint_hold_until: Option<Timestamp>,
    /// Its subscriber is paused (read whether or not the job is due).
    pub subscriber_paused: bool,
    /// Why its destination holds all its work back at the instant read (paused, its
    /// circuit open), whether or not the job is due: a `retrying` job brought forward
    /// would still wait for it.
    pub destination_hold: Option<WaitingReason>,
    /// Its deadline is at or before the instant read: no attempt starts any more, the
    /// deadline sweep is about to make it a dead letter.
    pub deadline_passed: bool,
    /// It has used all of its `max_attempts`.
    pub attempts_spent: bool,
    /// Its subscriber was deleted: nothing sends it again.
    pub subscriber_deleted: bool,
    /// Its subscriber's recent attempts all timed out
    /// ([`RecentResults::timeout_bound`](super::endpoint::RecentResults::timeout_bound)).
    pub timeout_bound: Option<TimeoutBound>,
}

/// The advice on one job (see the module's rules); `None` when nothing failed and
/// nothing holds it back, or when an attempt is running.
pub fn for_job(facts: &JobFacts) -> Option<RetryAdvice> {
    let advice = job_advice(facts)?;
    match facts.timeout_bound {
        Some(bound)
            if !facts.subscriber_deleted && timed_out_or_untried(facts.last_error_class) =>
        {
            Some(too_slow(bound))
        }
        _ => Some(advice),
    }
}

/// True when a job's last error (or its subscriber's) is a timeout, or there is none:
/// the advice of a timeout-bound subscriber speaks for it. Another failure (a 410, a
/// refused target) keeps its own advice.
fn timed_out_or_untried(class: Option<ErrorClass>) -> bool {
    matches!(class, None | Some(ErrorClass::Timeout))
}

/// The advice for a subscriber whose recent attempts all time out: the same for each
/// of its jobs whatever holds them (backing off, its circuit open, dead), since a
/// retry, a probe or a replay with the same timeout gets the same timeout.
fn too_slow(bound: TimeoutBound) -> RetryAdvice {
    let timeout = seconds(bound.timeout_ms);
    RetryAdvice::new(
        RetryVerdict::No,
        format!(
            "answers slower than the {timeout} attempt timeout: its last {} attempts all \
             timed out (p50 of recent attempts ≥ {timeout}), and a retry gets the same \
             timeout; raise its attempt_timeout_ms (PATCH /v1/subscribers/{{id}}, up to \
             the server's maximum) or make the receiver answer sooner (acknowledge at \
             once, work after), then retry its waiting jobs or replay its dead ones",
            bound.attempts
        ),
        None,
    )
}

/// `ms` as people read a timeout: `5 s`, `2.5 s`, `300 ms`.
fn seconds(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        _ if ms.is_multiple_of(1_000) => format!("{} s", ms / 1_000),
        _ => format!("{:.1} s", ms as f64 / 1_000.0),
    }
}

fn job_advice(facts: &JobFacts) -> Option<RetryAdvice> {
    match facts.state {
        JobState::Delivered | JobState::Cancelled | JobState::InFlight => None,
        JobState::Dead => Some(for_dead(facts)),
        JobState::Scheduled | JobState::Retrying if facts.subscriber_deleted => Some(deleted()),
        JobState::Scheduled | JobState::Retrying if facts.deadline_passed => {
            Some(RetryAdvice::new(
                RetryVerdict::Replay,
                "its deadline has passed: no attempt starts any more and the deadline sweep \
                 makes it a dead letter (deadline_exceeded); a replay sends it again with a \
                 new deadline",
                None,
            ))
        }
        JobState::Retrying if facts.attempts_spent => Some(RetryAdvice::new(
            RetryVerdict::Replay,
            "it has used all of its max_attempts (its last attempt's outcome is unknown): \
             it becomes a dead letter; a replay sends it again with a fresh attempt budget",
            None,
        )),
        JobState::Scheduled | JobState::Retrying => {
            if let Some(held) = facts
                .waiting_reason
                .and_then(|reason| for_hold(reason, facts.hold_until(reason)))
            {
                return Some(held);
            }
            if facts.state != JobState::Retrying {
                return None;
            }
            // Backing off: brought forward now, it would still wait for these.
            let lasting = if facts.subscriber_paused {
                Some(WaitingReason::SubscriberPaused)
            } else {
                facts
                    .destination_hold
                    .filter(|reason| {
                        matches!(
                            reason,
                            WaitingReason::DestinationPaused
                                | WaitingReason::DestinationCircuitOpen
                        )
                    })
                    .or(facts.endpoint_hold)
            };
            if let Some(held) =
                lasting.and_then(|reason| for_hold(reason, facts.hold_until(reason)))
            {
                return Some(held);
            }
            Some(RetryAdvice::new(
                RetryVerdict::Yes,
                format!(
                    "the last attempt failed with {}, which is transient; it is retried \
                     at `at`, and POST /v1/jobs/{{id}}/retry sends it now",
                    describe(facts.last_error_class, facts.last_status)
                ),
                facts.due_at,
            ))
        }
    }
}

impl JobFacts {
    /// When the hold `reason` ends by itself, when known: the destination circuit's
    /// next probe, or the end of the endpoint's cool-down or `Retry-After`.
    fn hold_until(&self, reason: WaitingReason) -> Option<Timestamp> {
        match reason {
            WaitingReason::SubscriberCircuitOpen | WaitingReason::SubscriberRetryAfter => {
                self.endpoint_hold_until
            }
            _ => self.circuit_retry_at,
        }
    }
}

/// What the advice on a failing or paused subscriber is drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberFacts {
    /// The subscriber is paused (by an operator, or after a 410).
    pub paused: bool,
    /// Why its destination holds its jobs back, if it does.
    pub destination_hold: Option<WaitingReason>,
    /// When its destination's circuit lets the next probe out, when it is open.
    pub circuit_retry_at: Option<Timestamp>,
    /// Why its endpoint circuit holds its jobs back (open, or its receiver's
    /// `Retry-After`), if it does.
    pub endpoint_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known.
    pub endpoint_hold_until: Option<Timestamp>,
    /// Its last attempt's error class, when that attempt failed.
    pub last_error_class: Option<ErrorClass>,
    /// Its last attempt's HTTP status, when that attempt failed with one.
    pub last_status: Option<u16>,
    /// How many of its jobs are `retrying`.
    pub retrying_jobs: u64,
    /// The earliest `next_attempt_at` of those jobs.
    pub next_attempt_at: Option<Timestamp>,
    /// Its recent attempts all timed out.
    pub timeout_bound: Option<TimeoutBound>,
}

/// The advice on a subscriber: `None` when it is healthy (its last attempt did not
/// fail, nothing is retrying, it is not paused).
pub fn for_subscriber(facts: &SubscriberFacts) -> Option<RetryAdvice> {
    let advice = subscriber_advice(facts)?;
    match facts.timeout_bound {
        Some(bound) if timed_out_or_untried(facts.last_error_class) => Some(too_slow(bound)),
        _ => Some(advice),
    }
}

fn subscriber_advice(facts: &SubscriberFacts) -> Option<RetryAdvice> {
    if facts.paused {
        return for_hold(WaitingReason::SubscriberPaused, None);
    }
    if facts.last_error_class.is_none() && facts.retrying_jobs == 0 {
        // Healthy: a destination at its limit is how work is paced, not a failure.
        return None;
    }
    // A hold matters only to jobs that wait: with none retrying, what is left to
    // advise on is its dead letters (a replay) or its refusal.
    if let Some(held) = facts
        .destination_hold
        .filter(|_| facts.retrying_jobs > 0)
        .filter(|reason| *reason != WaitingReason::DestinationAtLimit)
        .map(|reason| (reason, facts.circuit_retry_at))
        .or(facts
            .endpoint_hold
            .filter(|_| facts.retrying_jobs > 0)
            .map(|reason| (reason, facts.endpoint_hold_until)))
        .or(facts
            .destination_hold
            .filter(|_| facts.retrying_jobs > 0)
            .map(|reason| (reason, facts.circuit_retry_at)))
        .and_then(|(reason, until)| for_hold(reason, until))
    {
        return Some(held);
    }
    if let Some(no) = facts
        .last_error_class
        .and_then(|class| refused(class, facts.last_status))
    {
        return Some(no);
    }
    if facts.retrying_jobs > 0 {
        return Some(RetryAdvice::new(
            RetryVerdict::Yes,
            format!(
                "{} job(s) wait after {}, which is transient; they are retried from `at`, \
                 and POST /v1/jobs/{{id}}/retry or a replay selecting `retrying` jobs sends \
                 them now",
                facts.retrying_jobs,
                describe(facts.last_error_class, facts.last_status)
            ),
            facts.next_attempt_at,
        ));
    }
    facts.last_error_class.map(|class| {
        RetryAdvice::new(
            RetryVerdict::Replay,
            format!(
                "its last attempt failed with {}, which is transient, and nothing waits: \
                 a replay of its dead letters can deliver them once it recovers",
                describe(Some(class), facts.last_status)
            ),
            None,
        )
    })
}

fn for_dead(facts: &JobFacts) -> RetryAdvice {
    let what = describe(facts.last_error_class, facts.last_status);
    match facts.dead_reason {
        Some(DeadReason::NonRetryableResponse) => RetryAdvice::new(
            RetryVerdict::No,
            format!(
                "the receiver answered {what}: the same request gets the same answer; fix \
                 the receiver, then replay"
            ),
            None,
        ),
        Some(DeadReason::TargetRejected) => RetryAdvice::new(
            RetryVerdict::No,
            "the target was refused before connecting (the outbound target policy); fix \
             the subscriber's URL, then replay",
            None,
        ),
        Some(DeadReason::SubscriberDeleted) => deleted(),
        _ if facts.subscriber_deleted => deleted(),
        _ if facts.dead_detail == Some(WaitingReason::SubscriberPaused) => RetryAdvice::new(
            RetryVerdict::AfterResume,
            "it died at its deadline while its subscriber was paused; resume the \
             subscriber, then replay",
            None,
        ),
        _ => match facts
            .last_error_class
            .and_then(|class| refused(class, facts.last_status))
        {
            Some(no) => no,
            None if facts.last_error_class.is_none() && facts.last_status.is_none() => {
                RetryAdvice::new(
                    RetryVerdict::Replay,
                    "it died at its deadline with no failed attempt (none could start in \
                     time, or the last one's outcome is unknown); a replay sends it again \
                     with a new deadline",
                    None,
                )
            }
            None => RetryAdvice::new(
                RetryVerdict::Replay,
                format!(
                    "it died after {what}, which is transient; a replay can deliver it once \
                     the receiver recovers"
                ),
                None,
            ),
        },
    }
}

/// `No` for a job of a deleted subscriber: no replay matches it, no retry sends it.
fn deleted() -> RetryAdvice {
    RetryAdvice::new(
        RetryVerdict::No,
        "its subscriber was deleted: nothing sends it again (a replay never matches it)",
        None,
    )
}

/// The advice for a job or subscriber held back for `reason`; `None` for the reasons
/// that are not holds (not yet due, backing off, in flight).
fn for_hold(reason: WaitingReason, until: Option<Timestamp>) -> Option<RetryAdvice> {
    let (verdict, text, at) = match reason {
        WaitingReason::SubscriberPaused => (
            RetryVerdict::AfterResume,
            "its subscriber is paused: nothing is sent until it is resumed",
            None,
        ),
        WaitingReason::DestinationCircuitOpen => (
            RetryVerdict::NotBefore,
            "its destination's circuit is open: nothing but the probe is sent before `at`",
            until,
        ),
        WaitingReason::DestinationPaused => (
            RetryVerdict::NotBefore,
            "an operator paused its destination: nothing is sent until it is unpaused",
            None,
        ),
        WaitingReason::SubscriberCircuitOpen => (
            RetryVerdict::NotBefore,
            "its subscriber's endpoint circuit is open (most of its recent attempts \
             failed): nothing but one probe is sent before `at`, the end of its cool-down",
            until,
        ),
        WaitingReason::SubscriberRetryAfter => (
            RetryVerdict::NotBefore,
            "its subscriber's receiver asked to wait (429, or 503 with Retry-After): \
             nothing is sent to it before `at`",
            until,
        ),
        WaitingReason::DestinationAtLimit => (
            RetryVerdict::NotBefore,
            "its destination has its max_in_flight requests open: it is sent when one \
             finishes",
            None,
        ),
        WaitingReason::SubscriberAtLimit => (
            RetryVerdict::NotBefore,
            "its subscriber has its max_in_flight requests open: it is sent when one \
             finishes",
            None,
        ),
        WaitingReason::SubscriberRateLimited => (
            RetryVerdict::NotBefore,
            "its subscriber used its rate_limit_per_second: it is sent in the next slot",
            None,
        ),
        WaitingReason::Scheduled | WaitingReason::BackingOff | WaitingReason::InFlight => {
            return None;
        }
    };
    Some(RetryAdvice::new(verdict, text, at))
}

/// `No` for a failure a retry cannot change: a 3xx or 4xx other than 408/425/429
/// (RFC 9110 §15.5: the client must change the request), a refused target, an
/// unreadable secret.
fn refused(class: ErrorClass, status: Option<u16>) -> Option<RetryAdvice> {
    let reason = match class {
        ErrorClass::Http3xx => {
            "the receiver redirects and redirects are not followed; point the subscriber at \
             the final URL"
        }
        ErrorClass::Http4xx if !matches!(status, Some(408 | 425)) => {
            "the receiver refuses the request (4xx): the same request gets the same answer \
             until the receiver is fixed"
        }
        ErrorClass::Blocked => {
            "the target is refused before connecting (the outbound target policy); fix the \
             subscriber's URL"
        }
        ErrorClass::SecretUnreadable => {
            "the signing secret cannot be read with this instance's --secret-key; start an \
             instance with the right key"
        }
        _ => return None,
    };
    Some(RetryAdvice::new(RetryVerdict::No, reason, None))
}

fn describe(class: Option<ErrorClass>, status: Option<u16>) -> String {
    match (class, status) {
        (Some(class), Some(status)) => format!("{class} (HTTP {status})"),
        (Some(class), None) => class.to_string(),
        (None, Some(status)) => format!("HTTP {status}"),
        (None, None) => "an unknown outcome".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: Timestamp = Timestamp::from_millis(50_000);

    fn job(state: JobState) -> JobFacts {
        JobFacts {
            state,
            waiting_reason: None,
            dead_reason: None,
            dead_detail: None,
            last_error_class: None,
            last_status: None,
            due_at: None,
            circuit_retry_at: None,
            endpoint_hold: None,
            endpoint_hold_until: None,
            timeout_bound: None,
            subscriber_paused: false,
            destination_hold: None,
            deadline_passed: false,
            attempts_spent: false,
            subscriber_deleted: false,
        }
    }

    fn verdict(facts: JobFacts) -> Option<RetryVerdict> {
        for_job(&facts).map(|a| a.verdict)
    }

    #[test]
    fn nothing_failed_means_no_advice() {
        for state in [
            JobState::Scheduled,
            JobState::InFlight,
            JobState::Delivered,
            JobState::Cancelled,
        ] {
            assert_eq!(verdict(job(state)), None, "{state}");
        }
        let waiting = JobFacts {
            waiting_reason: Some(WaitingReason::Scheduled),
            ..job(JobState::Scheduled)
        };
        assert_eq!(verdict(waiting), None);
    }

    #[test]
    fn a_transient_failure_pending_is_yes_at_its_next_attempt() {
        for (class, status) in [
            (ErrorClass::Timeout, None),
            (ErrorClass::Http5xx, Some(503)),
            (ErrorClass::Http4xx, Some(408)),
            (ErrorClass::Http429, Some(429)),
        ] {
            let advice = for_job(&JobFacts {
                waiting_reason: Some(WaitingReason::BackingOff),
                last_error_class: Some(class),
                last_status: status,
                due_at: Some(AT),
                ..job(JobState::Retrying)
            })
            .unwrap();
            assert_eq!(advice.verdict, RetryVerdict::Yes, "{class}");
            assert_eq!(advice.at, Some(AT));
            assert!(advice.reason.contains(class.as_str()), "{}", advice.reason);
        }
    }

    #[test]
    fn a_job_backing_off_behind_a_lasting_hold_would_still_wait() {
        let backing_off = JobFacts {
            waiting_reason: Some(WaitingReason::BackingOff),
            last_error_class: Some(ErrorClass::Timeout),
            due_at: Some(AT),
            ..job(JobState::Retrying)
        };
        let open = for_job(&JobFacts {
            destination_hold: Some(WaitingReason::DestinationCircuitOpen),
            circuit_retry_at: Some(Timestamp::from_millis(90_000)),
            ..backing_off
        })
        .unwrap();
        assert_eq!(
            (open.verdict, open.at),
            (
                RetryVerdict::NotBefore,
                Some(Timestamp::from_millis(90_000))
            )
        );
        let paused = JobFacts {
            subscriber_paused: true,
            ..backing_off
        };
        assert_eq!(verdict(paused), Some(RetryVerdict::AfterResume));
        let destination_paused = JobFacts {
            destination_hold: Some(WaitingReason::DestinationPaused),
            ..backing_off
        };
        assert_eq!(verdict(destination_paused), Some(RetryVerdict::NotBefore));
        // A destination at its limit clears as requests finish: retrying still helps.
        let at_limit = JobFacts {
            destination_hold: Some(WaitingReason::DestinationAtLimit),
            ..backing_off
        };
        assert_eq!(verdict(at_limit), Some(RetryVerdict::Yes));
        // Its subscriber's own endpoint circuit is open: brought forward it would wait
        // for the end of the cool-down.
        let own = for_job(&JobFacts {
            endpoint_hold: Some(WaitingReason::SubscriberCircuitOpen),
            endpoint_hold_until: Some(Timestamp::from_millis(70_000)),
            ..backing_off
        })
        .unwrap();
        assert_eq!(
            (own.verdict, own.at),
            (
                RetryVerdict::NotBefore,
                Some(Timestamp::from_millis(70_000))
            )
        );
        // A scheduled job that never failed gets no advice, whatever its destination.
        let future = JobFacts {
            waiting_reason: Some(WaitingReason::Scheduled),
            destination_hold: Some(WaitingReason::DestinationCircuitOpen),
            ..job(JobState::Scheduled)
        };
        assert_eq!(verdict(future), None);
    }

    #[test]
    fn holds_come_before_the_failure() {
        let held = |reason| JobFacts {
            waiting_reason: Some(reason),
            last_error_class: Some(ErrorClass::Http5xx),
            circuit_retry_at: Some(AT),
            ..job(JobState::Retrying)
        };
        assert_eq!(
            verdict(held(WaitingReason::SubscriberPaused)),
            Some(RetryVerdict::AfterResume)
        );
        let open = for_job(&held(WaitingReason::DestinationCircuitOpen)).unwrap();
        assert_eq!(open.verdict, RetryVerdict::NotBefore);
        assert_eq!(open.at, Some(AT));
        for reason in [
            WaitingReason::DestinationPaused,
            WaitingReason::DestinationAtLimit,
            WaitingReason::SubscriberAtLimit,
            WaitingReason::SubscriberRateLimited,
        ] {
            let advice = for_job(&held(reason)).unwrap();
            assert_eq!(advice.verdict, RetryVerdict::NotBefore, "{reason}");
            assert_eq!(advice.at, None, "only a circuit knows when: {reason}");
        }
        // The endpoint's holds know when they end: the cool-down, the Retry-After.
        for reason in [
            WaitingReason::SubscriberCircuitOpen,
            WaitingReason::SubscriberRetryAfter,
        ] {
            let until = AT.plus_ms(1_234);
            let advice = for_job(&JobFacts {
                endpoint_hold_until: Some(until),
                ..held(reason)
            })
            .unwrap();
            assert_eq!(
                (advice.verdict, advice.at),
                (RetryVerdict::NotBefore, Some(until))
            );
        }
        // A scheduled job that never failed, held by a paused subscriber.
        let paused = JobFacts {
            waiting_reason: Some(WaitingReason::SubscriberPaused),
            ..job(JobState::Scheduled)
        };
        assert_eq!(verdict(paused), Some(RetryVerdict::AfterResume));
    }

    #[test]
    fn dead_jobs_say_whether_a_replay_can_help() {
        let dead = |reason, class, status| JobFacts {
            dead_reason: Some(reason),
            last_error_class: class,
            last_status: status,
            ..job(JobState::Dead)
        };
        let v = |facts| verdict(facts).unwrap();
        assert_eq!(
            v(dead(
                DeadReason::NonRetryableResponse,
                Some(ErrorClass::Http4xx),
                Some(404)
            )),
            RetryVerdict::No
        );
        assert_eq!(
            v(dead(
                DeadReason::TargetRejected,
                Some(ErrorClass::Blocked),
                None
            )),
            RetryVerdict::No
        );
        assert_eq!(
            v(dead(DeadReason::SubscriberDeleted, None, None)),
            RetryVerdict::No
        );
        assert_eq!(
            v(dead(
                DeadReason::MaxAttempts,
                Some(ErrorClass::Http5xx),
                Some(500)
            )),
            RetryVerdict::Replay
        );
        assert_eq!(
            v(dead(
                DeadReason::DeadlineExceeded,
                Some(ErrorClass::Timeout),
                None
            )),
            RetryVerdict::Replay
        );
        let unattempted = for_job(&dead(DeadReason::DeadlineExceeded, None, None)).unwrap();
        assert_eq!(unattempted.verdict, RetryVerdict::Replay);
        assert!(
            unattempted.reason.contains("no failed attempt"),
            "{}",
            unattempted.reason
        );
        let paused = JobFacts {
            dead_detail: Some(WaitingReason::SubscriberPaused),
            ..dead(DeadReason::DeadlineExceeded, None, None)
        };
        assert_eq!(v(paused), RetryVerdict::AfterResume);
        // A 410 pauses the subscriber and kills the job as a non-retryable answer.
        let gone = for_job(&dead(
            DeadReason::NonRetryableResponse,
            Some(ErrorClass::Http4xx),
            Some(410),
        ))
        .unwrap();
        assert!(gone.reason.contains("410"), "{}", gone.reason);
    }

    #[test]
    fn a_timeout_bound_subscriber_gets_no_whatever_holds_its_jobs() {
        let bound = Some(TimeoutBound {
            attempts: 5,
            timeout_ms: 5_000,
        });
        let timed_out = JobFacts {
            last_error_class: Some(ErrorClass::Timeout),
            timeout_bound: bound,
            ..job(JobState::Retrying)
        };
        // Backing off, held by its own circuit, due, dead at its deadline or out of
        // attempts: the same verdict and the same reason (issue #33: it said
        // not_before, then yes, then replay).
        let cases = [
            JobFacts {
                waiting_reason: Some(WaitingReason::BackingOff),
                due_at: Some(AT),
                ..timed_out
            },
            JobFacts {
                waiting_reason: Some(WaitingReason::SubscriberCircuitOpen),
                endpoint_hold_until: Some(AT),
                ..timed_out
            },
            JobFacts {
                deadline_passed: true,
                ..timed_out
            },
            JobFacts {
                dead_reason: Some(DeadReason::DeadlineExceeded),
                ..job(JobState::Dead)
            }
            .with(timed_out),
            JobFacts {
                dead_reason: Some(DeadReason::MaxAttempts),
                ..job(JobState::Dead)
            }
            .with(timed_out),
        ];
        let advice: Vec<RetryAdvice> = cases.iter().map(|f| for_job(f).unwrap()).collect();
        for given in &advice {
            assert_eq!(given, &advice[0]);
        }
        let no = &advice[0];
        assert_eq!((no.verdict, no.at), (RetryVerdict::No, None));
        assert!(
            no.reason.starts_with(
                "answers slower than the 5 s attempt timeout: its last 5 attempts all timed \
                 out (p50 of recent attempts ≥ 5 s)"
            ),
            "{}",
            no.reason
        );
        assert!(no.reason.contains("attempt_timeout_ms"), "{}", no.reason);
        assert!(no.reason.contains("answer sooner"), "{}", no.reason);
        // Its other failures keep their own advice; a deleted subscriber is deleted.
        let gone = JobFacts {
            dead_reason: Some(DeadReason::NonRetryableResponse),
            last_error_class: Some(ErrorClass::Http4xx),
            last_status: Some(410),
            timeout_bound: bound,
            ..job(JobState::Dead)
        };
        assert!(for_job(&gone).unwrap().reason.contains("410"));
        let deleted = JobFacts {
            subscriber_deleted: true,
            ..timed_out
        };
        assert!(for_job(&deleted).unwrap().reason.contains("deleted"));
        // Nothing failed, nothing holds it: still no advice.
        let fresh = JobFacts {
            timeout_bound: bound,
            waiting_reason: Some(WaitingReason::Scheduled),
            ..job(JobState::Scheduled)
        };
        assert_eq!(for_job(&fresh), None);
        // The subscriber's advice is the same.
        let subscriber = SubscriberFacts {
            paused: false,
            destination_hold: None,
            circuit_retry_at: None,
            endpoint_hold: Some(WaitingReason::SubscriberCircuitOpen),
            endpoint_hold_until: Some(AT),
            timeout_bound: bound,
            last_error_class: Some(ErrorClass::Timeout),
            last_status: None,
            retrying_jobs: 300,
            next_attempt_at: Some(AT),
        };
        assert_eq!(for_subscriber(&subscriber).as_ref(), Some(no));
        // Its circuit still open but nothing waits: its dead letters are what is left.
        let done = SubscriberFacts {
            endpoint_hold: Some(WaitingReason::SubscriberCircuitOpen),
            endpoint_hold_until: Some(AT),
            last_error_class: Some(ErrorClass::Http5xx),
            last_status: Some(500),
            retrying_jobs: 0,
            timeout_bound: None,
            ..subscriber
        };
        assert_eq!(
            for_subscriber(&done).map(|a| a.verdict),
            Some(RetryVerdict::Replay)
        );
        assert_eq!(seconds(2_500), "2.5 s");
        assert_eq!(seconds(300), "300 ms");
    }

    impl JobFacts {
        /// `self` with `other`'s last error and timeout evidence.
        fn with(self, other: JobFacts) -> JobFacts {
            JobFacts {
                last_error_class: other.last_error_class,
                timeout_bound: other.timeout_bound,
                ..self
            }
        }
    }

    #[test]
    fn subscribers() {
        let base = SubscriberFacts {
            paused: false,
            destination_hold: None,
            circuit_retry_at: None,
            endpoint_hold: None,
            endpoint_hold_until: None,
            timeout_bound: None,
            last_error_class: None,
            last_status: None,
            retrying_jobs: 0,
            next_attempt_at: None,
        };
        assert_eq!(for_subscriber(&base), None);
        // A healthy subscriber gets no advice, even while its destination holds work.
        let held = SubscriberFacts {
            destination_hold: Some(WaitingReason::DestinationAtLimit),
            ..base
        };
        assert_eq!(for_subscriber(&held), None);
        let v = |facts| for_subscriber(&facts).map(|a| a.verdict);
        assert_eq!(
            v(SubscriberFacts {
                paused: true,
                last_error_class: Some(ErrorClass::Http4xx),
                last_status: Some(410),
                ..base
            }),
            Some(RetryVerdict::AfterResume)
        );
        let open = for_subscriber(&SubscriberFacts {
            destination_hold: Some(WaitingReason::DestinationCircuitOpen),
            circuit_retry_at: Some(AT),
            last_error_class: Some(ErrorClass::Timeout),
            retrying_jobs: 3,
            ..base
        })
        .unwrap();
        assert_eq!((open.verdict, open.at), (RetryVerdict::NotBefore, Some(AT)));
        // Its own endpoint circuit: not before the end of its cool-down, which comes
        // before a destination merely at its limit.
        let later = AT.plus_ms(5_000);
        let own = for_subscriber(&SubscriberFacts {
            destination_hold: Some(WaitingReason::DestinationAtLimit),
            endpoint_hold: Some(WaitingReason::SubscriberCircuitOpen),
            endpoint_hold_until: Some(later),
            last_error_class: Some(ErrorClass::Http5xx),
            last_status: Some(500),
            retrying_jobs: 3,
            ..base
        })
        .unwrap();
        assert_eq!(
            (own.verdict, own.at),
            (RetryVerdict::NotBefore, Some(later))
        );
        assert!(own.reason.contains("endpoint circuit"), "{}", own.reason);
        assert_eq!(
            v(SubscriberFacts {
                last_error_class: Some(ErrorClass::Http4xx),
                last_status: Some(400),
                retrying_jobs: 2,
                ..base
            }),
            Some(RetryVerdict::No)
        );
        let failing = for_subscriber(&SubscriberFacts {
            last_error_class: Some(ErrorClass::Http5xx),
            last_status: Some(500),
            retrying_jobs: 2,
            next_attempt_at: Some(AT),
            ..base
        })
        .unwrap();
        assert_eq!((failing.verdict, failing.at), (RetryVerdict::Yes, Some(AT)));
        assert_eq!(
            v(SubscriberFacts {
                last_error_class: Some(ErrorClass::Timeout),
                ..base
            }),
            Some(RetryVerdict::Replay)
        );
    }
}
