//! Figures an operator reads: the gauges and one subscriber's statistics.

use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::ErrorClass;
use crate::domain::{DeadReason, JobState, Timestamp};

/// Figures for the gauges an on-call engineer alerts on (docs/DESIGN.md §7), read at one `now`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// Jobs per state as read at `now` (a job whose lease has expired counts as
    /// `retrying`, docs/DESIGN.md §2.2); states with no job are absent.
    pub jobs_by_state: Vec<(crate::domain::JobState, u64)>,
    /// Jobs `dead` now, per `dead_reason`, in the order of [`DeadReason::ALL`] (read in
    /// the same snapshot as `jobs_by_state`, so they add up to its `dead` count);
    /// reasons with no job are absent.
    pub dead_by_reason: Vec<(DeadReason, u64)>,
    /// The earliest due time among due, unclaimed jobs of enabled subscribers (a job
    /// whose lease has expired is due since the expiry).
    pub oldest_eligible_since: Option<Timestamp>,
    /// The earliest `deliver_at` among `retrying` jobs, those whose lease has expired
    /// included (retry age counts from it).
    pub oldest_retrying_since: Option<Timestamp>,
    /// Non-terminal jobs eligible for longer than the delivery objective.
    pub past_slo: u64,
    /// Non-terminal jobs within 10 % of their time to deadline.
    pub near_deadline: u64,
    /// Destinations with as many requests open as their limit.
    pub destinations_at_limit: u64,
    /// Destinations whose circuit is open (cooling down, or held open).
    pub circuits_open: u64,
    /// Destinations whose circuit is half-open (a probe may go, or is out).
    pub circuits_half_open: u64,
}

/// Jobs per state, each state counted (0 when it has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// `scheduled` jobs.
    pub scheduled: u64,
    /// `in_flight` jobs.
    pub in_flight: u64,
    /// `retrying` jobs.
    pub retrying: u64,
    /// `delivered` jobs.
    pub delivered: u64,
    /// `dead` jobs.
    pub dead: u64,
    /// `cancelled` jobs.
    pub cancelled: u64,
}

impl JobCounts {
    /// Adds `n` jobs in `state`.
    pub fn add(&mut self, state: JobState, n: u64) {
        let slot = match state {
            JobState::Scheduled => &mut self.scheduled,
            JobState::InFlight => &mut self.in_flight,
            JobState::Retrying => &mut self.retrying,
            JobState::Delivered => &mut self.delivered,
            JobState::Dead => &mut self.dead,
            JobState::Cancelled => &mut self.cancelled,
        };
        *slot += n;
    }

    /// Counts `n` of the `in_flight` jobs as `retrying`: their lease has expired, so a
    /// reader sees them `retrying` (docs/DESIGN.md §2.2). At most the `in_flight`
    /// count moves.
    pub fn lease_expired(&mut self, n: u64) {
        let n = n.min(self.in_flight);
        self.in_flight -= n;
        self.retrying += n;
    }

    /// The count of `state`.
    pub fn get(&self, state: JobState) -> u64 {
        match state {
            JobState::Scheduled => self.scheduled,
            JobState::InFlight => self.in_flight,
            JobState::Retrying => self.retrying,
            JobState::Delivered => self.delivered,
            JobState::Dead => self.dead,
            JobState::Cancelled => self.cancelled,
        }
    }
}

/// A failed attempt, as [`SubscriberStats::last_failure`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptFailure {
    /// When its result was recorded (`finished_at`).
    pub at: Timestamp,
    /// `retryable`, `terminal` or `blocked`.
    pub outcome: AttemptOutcome,
    /// The failure class, as recorded.
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account.
    pub reason: Option<String>,
}

/// What an operator on call wants to know of one subscriber, read at one `now`
/// ([`crate::store::Store::subscriber_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriberStats {
    /// Its jobs per state (a job whose lease has expired counts as `retrying`).
    pub jobs: JobCounts,
    /// The earliest due time among its `scheduled`/`retrying` jobs whose due time has
    /// come (`due_at <= now`; a job whose lease has expired is due since the expiry);
    /// `None` when none is due.
    pub oldest_eligible_since: Option<Timestamp>,
    /// `finished_at` of its latest `delivered` attempt.
    pub last_success_at: Option<Timestamp>,
    /// Its latest finished attempt with outcome `retryable`, `terminal` or `blocked`.
    pub last_failure: Option<AttemptFailure>,
}
