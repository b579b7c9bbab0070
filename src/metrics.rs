//! Prometheus metrics (docs/DESIGN.md §7). Every series is registered at start (counters at 0)
//! so a scrape shows them all before the first event. Labels are bounded: no
//! subscriber or event ever becomes a label.

use std::sync::OnceLock;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::attempt::AttemptOutcome;
use crate::domain::circuit::CircuitState;
use crate::domain::policy::ErrorClass;
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::{PurgedJobs, StoreGauges};

/// Buckets of the duration histograms, in seconds.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0, 3600.0,
];
/// Buckets of `deferhook_retry_depth`, in attempts.
const ATTEMPT_BUCKETS: &[f64] = &[
    1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0,
];

/// The (outcome, class) pairs an attempt can end with; `none` when it did not fail.
const ATTEMPT_LABELS: &[(AttemptOutcome, Option<ErrorClass>)] = &[
    (AttemptOutcome::Delivered, None),
    (AttemptOutcome::Retryable, Some(ErrorClass::Timeout)),
    (AttemptOutcome::Retryable, Some(ErrorClass::Connect)),
    (AttemptOutcome::Retryable, Some(ErrorClass::Http4xx)),
    (AttemptOutcome::Retryable, Some(ErrorClass::Http429)),
    (AttemptOutcome::Retryable, Some(ErrorClass::Http5xx)),
    (AttemptOutcome::Retryable, Some(ErrorClass::Protocol)),
    (
        AttemptOutcome::Retryable,
        Some(ErrorClass::SecretUnreadable),
    ),
    (AttemptOutcome::Terminal, Some(ErrorClass::Http3xx)),
    (AttemptOutcome::Terminal, Some(ErrorClass::Http4xx)),
    (AttemptOutcome::Unknown, None),
    (AttemptOutcome::Blocked, Some(ErrorClass::Blocked)),
];

/// The states retention purges (`deferhook_jobs_purged_total{state}`).
const PURGED_STATES: [JobState; 3] = [JobState::Delivered, JobState::Cancelled, JobState::Dead];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder (once) and registers every series. Returns the
/// handle that renders the Prometheus text.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(SECONDS_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("deferhook_retry_depth".into()),
                        ATTEMPT_BUCKETS,
                    )
                })
                .expect("bucket lists are not empty");
            let handle = match builder.install_recorder() {
                Ok(handle) => handle,
                // Another recorder is installed (an embedding program's): keep ours
                // private so /metrics still renders deferhook's series.
                Err(_) => PrometheusBuilder::new().build_recorder().handle(),
            };
            register();
            handle
        })
        .clone()
}

fn register() {
    describe_counter!(
        "deferhook_jobs_accepted_total",
        "Jobs created through the API and by recurring schedules."
    );
    describe_counter!(
        "deferhook_schedule_periods_total",
        "Periods of recurring schedules, by outcome: created, skipped (missed), refused."
    );
    describe_counter!(
        "deferhook_attempts_total",
        "Attempts finished, by outcome and error class."
    );
    describe_histogram!(
        "deferhook_attempt_duration_seconds",
        metrics::Unit::Seconds,
        "Duration of one attempt, request sent to outcome known."
    );
    describe_histogram!(
        "deferhook_claim_delay_seconds",
        metrics::Unit::Seconds,
        "Eligible (due) to claimed."
    );
    describe_gauge!(
        "deferhook_oldest_eligible_age_seconds",
        metrics::Unit::Seconds,
        "Age of the oldest due, unclaimed job."
    );
    describe_gauge!("deferhook_jobs", "Jobs per state.");
    describe_gauge!(
        "deferhook_dead_jobs",
        "Jobs dead now (not yet replayed or purged), by reason."
    );
    describe_histogram!(
        "deferhook_retry_depth",
        "Attempts used per job that reached a terminal state."
    );
    describe_counter!("deferhook_lease_extensions_total", "Leases renewed.");
    describe_counter!(
        "deferhook_lease_expirations_total",
        "Leases that expired with the attempt's outcome unknown."
    );
    describe_counter!(
        "deferhook_possible_duplicates_total",
        "Attempts started after an attempt whose outcome is unknown, and requests resent \
         on a fresh connection after the first one's closed before an answer."
    );
    describe_counter!(
        "deferhook_late_results_total",
        "Attempt results that arrived after their lease was lost; recorded, not applied."
    );
    describe_counter!(
        "deferhook_dead_letters_total",
        "Jobs that went dead, by reason."
    );
    describe_counter!(
        "deferhook_replayed_total",
        "Dead jobs moved back to scheduled."
    );
    describe_counter!(
        "deferhook_jobs_purged_total",
        "Finished jobs deleted with their attempts by retention, by state."
    );
    describe_gauge!(
        "deferhook_oldest_retrying_age_seconds",
        metrics::Unit::Seconds,
        "How long the oldest retrying job has waited since it first became eligible."
    );
    describe_gauge!(
        "deferhook_jobs_past_slo",
        "Non-terminal jobs eligible for longer than --delivery-slo-ms."
    );
    describe_gauge!(
        "deferhook_jobs_near_deadline",
        "Non-terminal jobs within 10 % of their time to deadline."
    );
    describe_gauge!(
        "deferhook_destinations_at_limit",
        "Destinations (host:port) with as many requests open as their max_in_flight."
    );
    describe_gauge!(
        "deferhook_circuits",
        "Destinations whose circuit breaker is open or half-open, by state."
    );
    describe_gauge!(
        "deferhook_worker_slots_busy",
        "Attempts this instance's worker is running (slots taken)."
    );
    describe_gauge!(
        "deferhook_worker_slots_free",
        "Slots of this instance's worker not running an attempt."
    );
    describe_gauge!(
        "deferhook_clock_offset_seconds",
        metrics::Unit::Seconds,
        "The database's clock minus this machine's, as last measured (0 on SQLite)."
    );

    for name in [
        "deferhook_jobs_accepted_total",
        "deferhook_lease_extensions_total",
        "deferhook_lease_expirations_total",
        "deferhook_possible_duplicates_total",
        "deferhook_late_results_total",
        "deferhook_replayed_total",
    ] {
        counter!(name).absolute(0);
    }
    for &(outcome, class) in ATTEMPT_LABELS {
        counter!("deferhook_attempts_total", "outcome" => outcome.as_str(), "class" => class_label(class))
            .absolute(0);
    }
    for reason in DeadReason::ALL {
        counter!("deferhook_dead_letters_total", "reason" => reason.as_str()).absolute(0);
    }
    for state in JobState::ALL {
        gauge!("deferhook_jobs", "state" => state.as_str()).set(0.0);
    }
    for reason in DeadReason::ALL {
        gauge!("deferhook_dead_jobs", "reason" => reason.as_str()).set(0.0);
    }
    for state in PURGED_STATES {
        counter!("deferhook_jobs_purged_total", "state" => state.as_str()).absolute(0);
    }
    for outcome in PERIOD_OUTCOMES {
        counter!("deferhook_schedule_periods_total", "outcome" => outcome).absolute(0);
    }
    describe_counter!(
        "deferhook_audit_write_failures_total",
        "Audit entries that could not be written (the action refused) or settled (left without a status)."
    );
    counter!("deferhook_audit_write_failures_total").absolute(0);
    describe_counter!(
        "deferhook_connections_refused_total",
        "API connections closed at once: their client address held its \
         --max-connections-per-client."
    );
    counter!("deferhook_connections_refused_total").absolute(0);
    describe_counter!(
        "deferhook_connections_shed_total",
        "API connections closed to give their place to a client address holding fewer, \
         every place being taken."
    );
    counter!("deferhook_connections_shed_total").absolute(0);
    describe_counter!(
        "deferhook_credential_failures_total",
        "Requests whose API token was not one of the server's, by surface (api: a \
         bearer token; console: a login)."
    );
    describe_counter!(
        "deferhook_credential_lockouts_total",
        "Requests with a credential refused unchecked (429): their client address had \
         used up its failed guesses."
    );
    for surface in CREDENTIAL_SURFACES {
        counter!("deferhook_credential_failures_total", "surface" => surface).absolute(0);
        counter!("deferhook_credential_lockouts_total", "surface" => surface).absolute(0);
    }
    for name in [
        "deferhook_oldest_eligible_age_seconds",
        "deferhook_oldest_retrying_age_seconds",
        "deferhook_jobs_past_slo",
        "deferhook_jobs_near_deadline",
        "deferhook_destinations_at_limit",
        "deferhook_worker_slots_busy",
        "deferhook_worker_slots_free",
        "deferhook_clock_offset_seconds",
    ] {
        gauge!(name).set(0.0);
    }
    for state in CIRCUIT_STATES {
        gauge!("deferhook_circuits", "state" => state.as_str()).set(0.0);
    }
    // Histograms appear once observed; touching them registers an empty series.
    for name in [
        "deferhook_attempt_duration_seconds",
        "deferhook_claim_delay_seconds",
        "deferhook_retry_depth",
    ] {
        let _ = histogram!(name);
    }
}

/// Where a credential is presented: `api` (a bearer token), `console` (a login).
pub const CREDENTIAL_SURFACES: [&str; 2] = ["api", "console"];

/// A connection was closed at once: its client address held its share.
pub fn connection_refused() {
    counter!("deferhook_connections_refused_total").increment(1);
}

/// A connection was closed to give its place to another client address.
pub fn connection_shed() {
    counter!("deferhook_connections_shed_total").increment(1);
}

/// A credential presented at `surface` ([`CREDENTIAL_SURFACES`]) was not accepted.
pub fn credential_failed(surface: &'static str) {
    counter!("deferhook_credential_failures_total", "surface" => surface).increment(1);
}

/// A credential presented at `surface` was refused unchecked (the address locked out).
pub fn credential_locked_out(surface: &'static str) {
    counter!("deferhook_credential_lockouts_total", "surface" => surface).increment(1);
}

fn class_label(class: Option<ErrorClass>) -> &'static str {
    class.map_or("none", ErrorClass::as_str)
}

/// `n` jobs were accepted.
pub fn jobs_accepted(n: u64) {
    counter!("deferhook_jobs_accepted_total").increment(n);
}

/// The outcomes of a recurring schedule's period: `created` (its jobs made, or found
/// already there), `skipped` (missed, by the catch-up policy), `refused` (no job could
/// be made; docs/DESIGN.md §5.14).
pub const PERIOD_OUTCOMES: [&str; 3] = ["created", "skipped", "refused"];

/// `n` periods of recurring schedules came to `outcome`, one of [`PERIOD_OUTCOMES`].
pub fn schedule_periods(outcome: &'static str, n: u64) {
    counter!("deferhook_schedule_periods_total", "outcome" => outcome).increment(n);
}

/// An attempt finished with `outcome` after `seconds`.
pub fn attempt_finished(outcome: AttemptOutcome, class: Option<ErrorClass>, seconds: f64) {
    counter!("deferhook_attempts_total", "outcome" => outcome.as_str(), "class" => class_label(class))
        .increment(1);
    histogram!("deferhook_attempt_duration_seconds").record(seconds);
}

/// A job was claimed `seconds` after it became due.
pub fn claimed(seconds: f64, possible_duplicate: bool, reclaimed_expired_lease: bool) {
    histogram!("deferhook_claim_delay_seconds").record(seconds.max(0.0));
    if possible_duplicate {
        counter!("deferhook_possible_duplicates_total").increment(1);
    }
    if reclaimed_expired_lease {
        counter!("deferhook_lease_expirations_total").increment(1);
    }
}

/// A request was sent a second time within its attempt, on a fresh connection, after
/// the first one's connection closed before an answer: the receiver may have read both.
pub fn resent() {
    counter!("deferhook_possible_duplicates_total").increment(1);
}

/// `n` leases were renewed.
pub fn leases_extended(n: u64) {
    counter!("deferhook_lease_extensions_total").increment(n);
}

/// `n` leases expired with their outcome unknown (found by the deadline sweep).
pub fn leases_expired(n: u64) {
    counter!("deferhook_lease_expirations_total").increment(n);
}

/// A result arrived after its lease was lost.
pub fn late_result() {
    counter!("deferhook_late_results_total").increment(1);
}

/// A job reached a terminal state after `attempts` attempts; `dead` names the reason
/// when it is a dead letter.
pub fn job_finished(attempts: u32, dead: Option<DeadReason>) {
    histogram!("deferhook_retry_depth").record(f64::from(attempts));
    if let Some(reason) = dead {
        counter!("deferhook_dead_letters_total", "reason" => reason.as_str()).increment(1);
    }
}

/// The sweep made `deadline` jobs dead with `deadline_exceeded` and `max_attempts`
/// with `max_attempts`.
pub fn swept(deadline: u64, max_attempts: u64) {
    counter!("deferhook_dead_letters_total", "reason" => DeadReason::DeadlineExceeded.as_str())
        .increment(deadline);
    counter!("deferhook_dead_letters_total", "reason" => DeadReason::MaxAttempts.as_str())
        .increment(max_attempts);
}

/// Deleting a subscriber made `n` of its waiting jobs dead (`subscriber_deleted`).
pub fn deleted_dead(n: u64) {
    counter!("deferhook_dead_letters_total", "reason" => DeadReason::SubscriberDeleted.as_str())
        .increment(n);
}

/// An audit entry could not be written (its action refused) or settled (left begun).
pub fn audit_write_failed() {
    counter!("deferhook_audit_write_failures_total").increment(1);
}

/// A replay moved `n` dead jobs back to `scheduled`.
pub fn replayed(n: u64) {
    counter!("deferhook_replayed_total").increment(n);
}

/// Retention deleted `purged` jobs.
pub fn purged(purged: &PurgedJobs) {
    for (state, n) in [
        (JobState::Delivered, purged.delivered),
        (JobState::Cancelled, purged.cancelled),
        (JobState::Dead, purged.dead),
    ] {
        counter!("deferhook_jobs_purged_total", "state" => state.as_str()).increment(n);
    }
}

/// A worker with `slots` slots started (positive) or stopped (negative): its slots
/// join or leave the free ones. Gauges add up over the workers of one process.
pub fn worker_slots_added(slots: f64) {
    gauge!("deferhook_worker_slots_free").increment(slots);
}

/// A worker's attempt took one of its slots.
pub fn worker_slot_taken() {
    gauge!("deferhook_worker_slots_busy").increment(1.0);
    gauge!("deferhook_worker_slots_free").decrement(1.0);
}

/// A worker's attempt ended and freed its slot.
pub fn worker_slot_freed() {
    gauge!("deferhook_worker_slots_busy").decrement(1.0);
    gauge!("deferhook_worker_slots_free").increment(1.0);
}

/// The database's clock was measured `offset_ms` milliseconds ahead of this machine's
/// (negative: behind), docs/DESIGN.md §12.
pub fn clock_offset(offset_ms: i64) {
    gauge!("deferhook_clock_offset_seconds").set(offset_ms as f64 / 1000.0);
}

/// Sets the store-derived gauges as of `now`.
pub fn set_gauges(gauges: &StoreGauges, now: Timestamp) {
    for state in JobState::ALL {
        let n = gauges
            .jobs_by_state
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n);
        gauge!("deferhook_jobs", "state" => state.as_str()).set(n as f64);
    }
    for reason in DeadReason::ALL {
        let n = gauges
            .dead_by_reason
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n);
        gauge!("deferhook_dead_jobs", "reason" => reason.as_str()).set(n as f64);
    }
    let age = |since: Option<Timestamp>| {
        since.map_or(0.0, |t| (now.millis_since(t).max(0) as f64) / 1000.0)
    };
    gauge!("deferhook_oldest_eligible_age_seconds").set(age(gauges.oldest_eligible_since));
    gauge!("deferhook_oldest_retrying_age_seconds").set(age(gauges.oldest_retrying_since));
    gauge!("deferhook_jobs_past_slo").set(gauges.past_slo as f64);
    gauge!("deferhook_jobs_near_deadline").set(gauges.near_deadline as f64);
    gauge!("deferhook_destinations_at_limit").set(gauges.destinations_at_limit as f64);
    for (state, n) in [
        (CircuitState::Open, gauges.circuits_open),
        (CircuitState::HalfOpen, gauges.circuits_half_open),
    ] {
        gauge!("deferhook_circuits", "state" => state.as_str()).set(n as f64);
    }
}

/// The circuit states `deferhook_circuits` counts (closed ones are the rest).
const CIRCUIT_STATES: [CircuitState; 2] = [CircuitState::Open, CircuitState::HalfOpen];
