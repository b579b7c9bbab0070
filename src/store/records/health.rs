//! Subscribers' health figures as the store reads them (docs/DESIGN.md §5.3).

use crate::domain::Timestamp;
use crate::domain::attempt::AttemptOutcome;
use crate::domain::endpoint::RecentResults;
use crate::domain::health::{Health, HealthFacts};
use crate::domain::retry_advice::SubscriberFacts;
use crate::domain::waiting::WaitingReason;

use super::figures::AttemptFailure;
use super::subscribers::Subscriber;

/// How far back `dead_last_hour` counts, in milliseconds.
pub const DEAD_WINDOW_MS: u64 = 3_600_000;

/// A subscriber's figures behind its health, read at one `now`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthFigures {
    /// Its `scheduled` jobs.
    pub scheduled: u64,
    /// Its `in_flight` jobs whose lease holds.
    pub in_flight: u64,
    /// Its `retrying` jobs, those whose lease has expired included.
    pub retrying: u64,
    /// Its jobs that became `dead` in (now − 1 h, now].
    pub dead_last_hour: u64,
    /// The earliest due time of its `retrying` jobs.
    pub next_attempt_at: Option<Timestamp>,
    /// When its latest delivered attempt finished.
    pub last_success_at: Option<Timestamp>,
    /// Its latest failed attempt (`retryable`, `terminal`, `blocked`).
    pub last_failure: Option<AttemptFailure>,
    /// When its first failed attempt after `last_success_at` finished.
    pub first_failure_after_success: Option<Timestamp>,
    /// Why its destination holds its due jobs back at `now`, if it does.
    pub destination_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known (an open circuit's next probe).
    pub destination_hold_until: Option<Timestamp>,
    /// Why its own endpoint circuit holds its due jobs back at `now` (open, or its
    /// receiver's `Retry-After`), if it does.
    pub endpoint_hold: Option<WaitingReason>,
    /// When that hold ends by itself, when known.
    pub endpoint_hold_until: Option<Timestamp>,
    /// What its endpoint's recent results say about how long it takes to answer.
    pub recent: RecentResults,
}

impl HealthFigures {
    /// `failing_jobs`: its `retrying` jobs plus its jobs dead in the last hour (the
    /// sort key of `GET /v1/subscribers?health=`).
    pub fn failing_jobs(&self) -> u64 {
        self.retrying + self.dead_last_hour
    }
}

/// A subscriber with its health figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberHealth {
    /// The subscriber.
    pub subscriber: Subscriber,
    /// Its figures.
    pub figures: HealthFigures,
}

impl SubscriberHealth {
    /// What its health is drawn from.
    pub fn facts(&self) -> HealthFacts {
        HealthFacts {
            enabled: self.subscriber.enabled,
            paused_at: self.subscriber.paused_at,
            last_success_at: self.figures.last_success_at,
            last_failure_at: self.figures.last_failure.as_ref().map(|f| f.at),
            first_failure_after_success: self.figures.first_failure_after_success,
            retrying: self.figures.retrying,
        }
    }

    /// Its health.
    pub fn health(&self) -> Health {
        self.facts().assess()
    }

    /// What the retry advice on it is drawn from. Its latest failure counts when its
    /// last attempt failed, or, when a later attempt succeeded but jobs still retry,
    /// when that failure was transient (`retryable`: what those jobs wait after); an
    /// older refusal does not speak for a receiver that answers 2xx again.
    pub fn advice_facts(&self) -> SubscriberFacts {
        let last_failed = self.facts().last_attempt_failed();
        let failed = self.figures.last_failure.as_ref().filter(|failure| {
            last_failed
                || (self.figures.retrying > 0 && failure.outcome == AttemptOutcome::Retryable)
        });
        SubscriberFacts {
            paused: !self.subscriber.enabled,
            destination_hold: self.figures.destination_hold,
            circuit_retry_at: self.figures.destination_hold_until,
            endpoint_hold: self.figures.endpoint_hold,
            endpoint_hold_until: self.figures.endpoint_hold_until,
            timeout_bound: self.figures.recent.timeout_bound(),
            last_error_class: failed.and_then(|f| f.class),
            last_status: failed.and_then(|f| f.status),
            retrying_jobs: self.figures.retrying,
            next_attempt_at: self.figures.next_attempt_at,
        }
    }
}

/// Where a page of `GET /v1/subscribers?health=` starts: strictly after this
/// subscriber, in the order most `failing_jobs` first, then id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCursor {
    /// The previous page's last `failing_jobs`, as read then.
    pub failing_jobs: u64,
    /// Its id.
    pub id: String,
}

impl HealthCursor {
    /// True when a subscriber with `failing_jobs` and `id` comes after this cursor.
    pub fn precedes(&self, failing_jobs: u64, id: &str) -> bool {
        failing_jobs < self.failing_jobs
            || (failing_jobs == self.failing_jobs && id > self.id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::policy::ErrorClass;
    use crate::domain::retry_advice::{RetryVerdict, for_subscriber};

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn entry(
        failure: AttemptOutcome,
        status: u16,
        success_at: i64,
        retrying: u64,
    ) -> SubscriberHealth {
        SubscriberHealth {
            subscriber: Subscriber {
                id: "s".into(),
                url: "https://example.com/h".into(),
                max_in_flight: 16,
                rate_limit_per_second: None,
                enabled: true,
                created_at: at(0),
                updated_at: at(0),
                paused_reason: None,
                paused_at: None,
                event_types: Vec::new(),
                attempt_timeout_ms: None,
            },
            figures: HealthFigures {
                retrying,
                next_attempt_at: (retrying > 0).then(|| at(9_000)),
                last_success_at: Some(at(success_at)),
                last_failure: Some(AttemptFailure {
                    at: at(5_000),
                    outcome: failure,
                    class: Some(if status >= 500 {
                        ErrorClass::Http5xx
                    } else {
                        ErrorClass::Http4xx
                    }),
                    status: Some(status),
                    reason: None,
                }),
                ..HealthFigures::default()
            },
        }
    }

    fn verdict(entry: &SubscriberHealth) -> Option<RetryVerdict> {
        for_subscriber(&entry.advice_facts()).map(|a| a.verdict)
    }

    #[test]
    fn the_advice_speaks_of_the_failure_that_still_matters() {
        // Its last attempt failed with a 404: no, whatever retries.
        let refused = entry(AttemptOutcome::Terminal, 404, 1_000, 2);
        assert_eq!(verdict(&refused), Some(RetryVerdict::No));
        // A 2xx since the 404, and a job still retries: that job waits after an
        // unknown outcome, not after the 404.
        let recovered = entry(AttemptOutcome::Terminal, 404, 6_000, 1);
        let advice = for_subscriber(&recovered.advice_facts()).unwrap();
        assert_eq!(
            (advice.verdict, advice.at),
            (RetryVerdict::Yes, Some(at(9_000)))
        );
        assert!(!advice.reason.contains("404"), "{}", advice.reason);
        // A 2xx since a 503 and a job still retrying after it: yes, after the 503.
        let transient = entry(AttemptOutcome::Retryable, 503, 6_000, 1);
        let advice = for_subscriber(&transient.advice_facts()).unwrap();
        assert_eq!(advice.verdict, RetryVerdict::Yes);
        assert!(advice.reason.contains("503"), "{}", advice.reason);
        // Nothing retries and the last attempt succeeded: healthy, no advice.
        let healthy = entry(AttemptOutcome::Retryable, 503, 6_000, 0);
        assert_eq!(verdict(&healthy), None);
    }
}
