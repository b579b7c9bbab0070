//! Planning a replay (docs/DESIGN.md §5, CASES C-11): which dead jobs an operator's request
//! selects, how many at most, at what rate and with what new deadline, checked against
//! the server's [`ReplayLimits`]. Pure: nothing is read or stored here.

use super::field_error::{self, FieldError};
use super::replay::ReplayFilter;
use super::{DeadReason, Timestamp, validate};

/// The most `ttl_ms` of a replay: ten years, in ms.
pub const MAX_REPLAY_TTL_MS: u64 = 315_360_000_000;

/// Limits from the server's configuration.
#[derive(Debug, Clone, Copy)]
pub struct ReplayLimits {
    /// Most `rate_per_second` a replay may ask for, and the most all running replays
    /// together may use (`--max-replay-rate`).
    pub max_rate_per_second: u32,
    /// `ttl_ms` when a replay names none (`--default-ttl-ms`).
    pub default_ttl_ms: u64,
    /// The least `ttl_ms` (`--attempt-timeout-ms`): a requeued job must have time for
    /// at least one whole attempt.
    pub min_ttl_ms: u64,
    /// Most `max_jobs` (the store's `MAX_REPLAY_JOBS`: how many jobs one replay may
    /// snapshot).
    pub max_jobs: u32,
}

/// A replay as an operator asked for it (instants not yet parsed).
#[derive(Debug, Clone, Default)]
pub struct ReplayFields {
    /// Only this subscriber's dead jobs.
    pub subscriber_id: Option<String>,
    /// Only this event's dead jobs.
    pub event_id: Option<String>,
    /// Only jobs dead for this reason.
    pub dead_reason: Option<DeadReason>,
    /// Only jobs dead at or after this instant (RFC 3339 with an offset).
    pub dead_after: Option<String>,
    /// Only jobs dead before this instant (RFC 3339 with an offset).
    pub dead_before: Option<String>,
    /// `Some(true)`: every dead job, with no other filter.
    pub all: Option<bool>,
    /// Most jobs to replay.
    pub max_jobs: u32,
    /// Most jobs requeued per second.
    pub rate_per_second: u32,
    /// Each requeued job's time to its new deadline, in ms; `None`: the default.
    pub ttl_ms: Option<u64>,
}

/// A checked replay, ready to be created (or counted, for a dry run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    /// Which dead jobs.
    pub filter: ReplayFilter,
    /// Most jobs it takes (the oldest dead first), 1 to [`ReplayLimits::max_jobs`].
    pub max_jobs: u32,
    /// Most jobs requeued per second, across all instances.
    pub rate_per_second: u32,
    /// Each requeued job's new deadline is its requeue time plus this, in ms.
    pub ttl_ms: u64,
    /// Most jobs/s all running replays together may requeue, this one included.
    pub rate_budget: u32,
}

impl ReplayPlan {
    /// Checks `fields` against `limits`; fails with every invalid field. A filter is
    /// required (or `all: true`, alone), so nothing replays every dead job by accident.
    pub fn check(
        fields: ReplayFields,
        limits: ReplayLimits,
    ) -> Result<ReplayPlan, Vec<FieldError>> {
        // The rule looks at what was given, valid or not (an invalid one is reported
        // on its own).
        let narrowed = fields.subscriber_id.is_some()
            || fields.event_id.is_some()
            || fields.dead_reason.is_some()
            || fields.dead_after.is_some()
            || fields.dead_before.is_some();
        let mut errors = Vec::new();
        if let Some(id) = &fields.subscriber_id {
            field_error::collect(&mut errors, "subscriber_id", validate::subscriber_id(id));
        }
        if let Some(id) = &fields.event_id {
            field_error::collect(&mut errors, "event_id", validate::event_id(id));
        }
        let dead_after = instant(&mut errors, "dead_after", fields.dead_after.as_deref());
        let dead_before = instant(&mut errors, "dead_before", fields.dead_before.as_deref());
        if let (Some(after), Some(before)) = (dead_after, dead_before)
            && after >= before
        {
            errors.push(FieldError::new("dead_before", "must be after dead_after"));
        }
        check_amounts(&mut errors, &fields, limits);
        let filter = ReplayFilter {
            subscriber_id: fields.subscriber_id,
            event_id: fields.event_id,
            dead_reason: fields.dead_reason,
            dead_after,
            dead_before,
            all: fields.all.unwrap_or(false),
        };
        let filter_error = match (filter.all, narrowed) {
            (true, true) => Some("`all: true` replays every dead job: give it without filters"),
            (false, false) => Some(
                "give at least one of subscriber_id, event_id, dead_reason, dead_after, \
                 dead_before, or `all: true` to replay every dead job",
            ),
            _ => None,
        };
        if let Some(message) = filter_error {
            errors.push(FieldError::new("all", message));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ReplayPlan {
            filter,
            max_jobs: fields.max_jobs,
            rate_per_second: fields.rate_per_second,
            ttl_ms: fields.ttl_ms.unwrap_or(limits.default_ttl_ms),
            rate_budget: limits.max_rate_per_second,
        })
    }
}

/// The instant in `text`, if given and valid; an invalid one is an error about `field`.
fn instant(errors: &mut Vec<FieldError>, field: &str, text: Option<&str>) -> Option<Timestamp> {
    Timestamp::parse_rfc3339(text?)
        .map_err(|error| errors.push(FieldError::new(field, error.to_string())))
        .ok()
}

/// `max_jobs`, `rate_per_second` and `ttl_ms` within their limits.
fn check_amounts(errors: &mut Vec<FieldError>, fields: &ReplayFields, limits: ReplayLimits) {
    if !(1..=limits.max_jobs).contains(&fields.max_jobs) {
        errors.push(FieldError::new(
            "max_jobs",
            format!("must be from 1 to {}", limits.max_jobs),
        ));
    }
    if !(1..=limits.max_rate_per_second).contains(&fields.rate_per_second) {
        errors.push(FieldError::new(
            "rate_per_second",
            format!(
                "must be from 1 to {} (the server's --max-replay-rate)",
                limits.max_rate_per_second
            ),
        ));
    }
    if let Some(ttl) = fields.ttl_ms
        && !(limits.min_ttl_ms..=MAX_REPLAY_TTL_MS).contains(&ttl)
    {
        errors.push(FieldError::new(
            "ttl_ms",
            format!(
                "must be from {} (the attempt timeout: a shorter deadline would cut \
                 attempts short) to {MAX_REPLAY_TTL_MS} (ten years)",
                limits.min_ttl_ms
            ),
        ));
    }
}

#[cfg(test)]
#[path = "replay_plan_tests.rs"]
mod tests;
