//! The application: each operator action and each view, written once, with the state
//! they share. The API's handlers (`api`) and the console's pages (`console`) both call
//! it, and neither calls the other (docs/DESIGN.md §8): an action takes the parsed
//! request and answers its view or an [`AppError`], which the API answers as problem
//! details and the console as a page. Actions are audited by whoever calls them, in
//! the one write-ahead trail ([`crate::audit_trail`]).

pub mod actions;
pub mod destinations;
mod error;
pub mod event_summary;
pub mod job_control;
pub mod job_views;
pub mod load_reads;
pub mod pagination;
pub mod replays;
pub mod schedule_input;
pub mod schedule_views;
pub mod schedules;
pub mod secrets;
pub mod subscriber_deletion;
pub mod subscriber_pause;
pub mod subscriber_triage;
pub mod subscriber_views;
pub mod subscribers;
pub mod views;

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;

pub use error::AppError;

use crate::domain::Clock;
use crate::domain::job_template::JobLimits;
use crate::domain::replay_plan::ReplayLimits;
use crate::domain::schedule_quota::ScheduleQuotas;
use crate::domain::target::TargetPolicy;
use crate::store::SharedStore;

/// What every action, read and handler shares: the store, the clock, the settings
/// actions check against, and the reads shared between requests.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The store.
    pub store: SharedStore,
    /// The subscriber loads of job views, read once for the requests waiting together.
    pub loads: load_reads::LoadReads,
    /// The source of `now`.
    pub clock: Arc<dyn Clock>,
    /// Limits on new jobs.
    pub job_limits: JobLimits,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The delivery objective behind `deferhook_jobs_past_slo`, in milliseconds.
    pub delivery_slo_ms: u64,
    /// Limits on replays.
    pub replay_limits: ReplayLimits,
    /// Which literal addresses subscriber URLs may name.
    pub target_policy: Arc<TargetPolicy>,
    /// The attempt timeouts: the server's, and the most a subscriber may set.
    pub attempt_timeouts: AttemptTimeouts,
    /// The quotas on recurring schedules.
    pub schedule_quotas: ScheduleQuotas,
    /// Signs and checks the listings' page cursors.
    pub cursors: pagination::Cursors,
    /// How long `DELETE /v1/subscribers/{id}` waits for its history to move before it
    /// answers (the move goes on after; docs/DESIGN.md §5.3.1).
    pub deletion_wait: Duration,
}

/// The attempt timeouts a subscriber's `attempt_timeout_ms` is read against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptTimeouts {
    /// The server's `--attempt-timeout-ms`: a subscriber without its own uses it.
    pub default_ms: u64,
    /// The most a subscriber may set: shorter than the lease by the margin an attempt
    /// stops before an unrenewed lease expires (a tenth of `--lease-ms`, 10 ms–1 s), so
    /// no attempt outlives its lease (CASES C-01).
    pub max_ms: u64,
}

impl AttemptTimeouts {
    /// The fewest milliseconds a subscriber may set.
    pub const MIN_MS: u64 = 100;

    /// The timeouts of a server with `--attempt-timeout-ms` `default_ms` and
    /// `--lease-ms` `lease_ms`.
    pub fn new(default_ms: u64, lease_ms: u64) -> Self {
        let margin = crate::delivery::attempt::lease_margin_ms(lease_ms);
        AttemptTimeouts {
            default_ms,
            max_ms: lease_ms.saturating_sub(margin).max(default_ms),
        }
    }

    /// The timeout a subscriber with `own` (its `attempt_timeout_ms`) gets.
    pub fn of(&self, own: Option<u64>) -> u64 {
        own.unwrap_or(self.default_ms)
    }
}
