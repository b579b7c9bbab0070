//! A subscriber's health (docs/DESIGN.md §5.3): `healthy`, `failing` or `paused`, and
//! since when. Pure: derived from the figures the store read and nothing else.
//!
//! - `paused`: it is not enabled (an operator paused it, or its receiver answered
//!   410); since its `paused_at`.
//! - `failing`: not paused, and its last attempt with a known outcome failed
//!   (`retryable`, `terminal` or `blocked`), or some of its jobs are `retrying` (an
//!   expired lease reads as `retrying`). An attempt whose outcome is `unknown` (its
//!   worker stopped or lost its lease) says nothing about the receiver and is not
//!   counted either way. Since its first failed attempt after its latest success (the
//!   start of the failing streak); when its last attempt succeeded but jobs still
//!   retry, since its latest failure; `null` when no attempt failed (jobs retry after
//!   unknown outcomes only).
//! - `healthy` otherwise; since its latest success, `null` when none.

use serde::Serialize;
use utoipa::ToSchema;

use super::names::wire_names;
use super::time::Timestamp;

/// A subscriber's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// Its last attempt succeeded (or none was made) and none of its jobs is retrying.
    Healthy,
    /// Its last attempt failed, or some of its jobs are retrying.
    Failing,
    /// It is paused (`enabled: false`).
    Paused,
}

wire_names!(HealthStatus, "Every status." {
    Healthy => "healthy",
    Failing => "failing",
    Paused => "paused",
});

/// What a subscriber's health is drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthFacts {
    /// False while paused.
    pub enabled: bool,
    /// When it was paused.
    pub paused_at: Option<Timestamp>,
    /// When its latest delivered attempt finished.
    pub last_success_at: Option<Timestamp>,
    /// When its latest failed attempt finished.
    pub last_failure_at: Option<Timestamp>,
    /// When its first failed attempt after `last_success_at` finished (after none:
    /// its first failed attempt).
    pub first_failure_after_success: Option<Timestamp>,
    /// How many of its jobs are `retrying` as read.
    pub retrying: u64,
}

/// A subscriber's health and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Health {
    /// Its status.
    pub status: HealthStatus,
    /// When it entered that status, when known (see the module's rules).
    pub since: Option<Timestamp>,
}

impl HealthFacts {
    /// True when its last attempt with a known outcome failed. An attempt that failed
    /// in the same millisecond as a success does not count as the last one.
    pub fn last_attempt_failed(&self) -> bool {
        match (self.last_failure_at, self.last_success_at) {
            (Some(failure), Some(success)) => failure > success,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Its health (see the module's rules).
    pub fn assess(&self) -> Health {
        if !self.enabled {
            return Health {
                status: HealthStatus::Paused,
                since: self.paused_at,
            };
        }
        if self.last_attempt_failed() {
            return Health {
                status: HealthStatus::Failing,
                since: self.first_failure_after_success.or(self.last_failure_at),
            };
        }
        if self.retrying > 0 {
            return Health {
                status: HealthStatus::Failing,
                since: self.last_failure_at,
            };
        }
        Health {
            status: HealthStatus::Healthy,
            since: self.last_success_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Option<Timestamp> {
        Some(Timestamp::from_millis(ms))
    }

    fn assess(facts: HealthFacts) -> (HealthStatus, Option<Timestamp>) {
        let health = facts.assess();
        (health.status, health.since)
    }

    #[test]
    fn statuses_and_since() {
        let base = HealthFacts {
            enabled: true,
            ..HealthFacts::default()
        };
        assert_eq!(assess(base), (HealthStatus::Healthy, None));
        let delivered = HealthFacts {
            last_success_at: at(10),
            last_failure_at: at(5),
            first_failure_after_success: None,
            ..base
        };
        assert_eq!(assess(delivered), (HealthStatus::Healthy, at(10)));
        let failing = HealthFacts {
            last_success_at: at(10),
            last_failure_at: at(30),
            first_failure_after_success: at(20),
            ..base
        };
        assert_eq!(assess(failing), (HealthStatus::Failing, at(20)));
        let never_delivered = HealthFacts {
            last_failure_at: at(30),
            first_failure_after_success: at(1),
            ..base
        };
        assert_eq!(assess(never_delivered), (HealthStatus::Failing, at(1)));
        let still_retrying = HealthFacts {
            retrying: 2,
            ..delivered
        };
        assert_eq!(assess(still_retrying), (HealthStatus::Failing, at(5)));
        let tie = HealthFacts {
            last_success_at: at(10),
            last_failure_at: at(10),
            ..base
        };
        assert_eq!(assess(tie), (HealthStatus::Healthy, at(10)));
        let paused = HealthFacts {
            enabled: false,
            paused_at: at(40),
            ..failing
        };
        assert_eq!(assess(paused), (HealthStatus::Paused, at(40)));
    }
}
