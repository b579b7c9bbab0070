//! Planning a replay (docs/DESIGN.md §5, CASES C-11): which dead jobs an operator's request
//! selects, how many at most, at what rate and with what new deadline, checked against
//! the server's [`ReplayLimits`]. Pure: nothing is read or stored here.

use super::field_error::{self, FieldError};
use super::policy::ErrorClass;
use super::replay::{ReplayFilter, ReplaySelection};
use super::{DeadReason, Timestamp, validate};

/// The most `ttl_ms` of a replay: ten years, in ms.
pub const MAX_REPLAY_TTL_MS: u64 = 315_360_000_000;

/// Most ids a replay's `subscriber_ids` names.
pub const MAX_REPLAY_SUBSCRIBERS: usize = 1000;

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

/// A replay as an operator asked for it (instants, class and status not yet checked).
#[derive(Debug, Clone, Default)]
pub struct ReplayFields {
    /// Dead jobs (`None`: the default) or retrying ones.
    pub selects: Option<ReplaySelection>,
    /// Only this subscriber's jobs.
    pub subscriber_id: Option<String>,
    /// Only the jobs of these subscribers (1 to [`MAX_REPLAY_SUBSCRIBERS`] distinct
    /// ids; not with `subscriber_id`).
    pub subscriber_ids: Option<Vec<String>>,
    /// Only jobs whose last error has this class (an [`ErrorClass`] name).
    pub error_class: Option<String>,
    /// Only jobs whose last error has this HTTP status (100–599).
    pub last_status: Option<i64>,
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
    /// required (or `all: true`, alone), so nothing replays every job by accident; the
    /// `dead_*` filters and `ttl_ms` apply to dead jobs only, so they are refused with
    /// `selects: retrying` (whose jobs keep their deadline).
    pub fn check(
        fields: ReplayFields,
        limits: ReplayLimits,
    ) -> Result<ReplayPlan, Vec<FieldError>> {
        // The rule looks at what was given, valid or not (an invalid one is reported
        // on its own).
        let narrowed = fields.subscriber_id.is_some()
            || fields.subscriber_ids.is_some()
            || fields.event_id.is_some()
            || fields.error_class.is_some()
            || fields.last_status.is_some()
            || fields.dead_reason.is_some()
            || fields.dead_after.is_some()
            || fields.dead_before.is_some();
        let selects = fields.selects.unwrap_or_default();
        let mut errors = Vec::new();
        check_ids(&mut errors, &fields);
        if selects == ReplaySelection::Retrying {
            check_retrying(&mut errors, &fields);
        }
        let dead_after = instant(&mut errors, "dead_after", fields.dead_after.as_deref());
        let dead_before = instant(&mut errors, "dead_before", fields.dead_before.as_deref());
        if let (Some(after), Some(before)) = (dead_after, dead_before)
            && after >= before
        {
            errors.push(FieldError::new("dead_before", "must be after dead_after"));
        }
        let error_class = error_class(&mut errors, fields.error_class.as_deref());
        let last_status = last_status(&mut errors, fields.last_status);
        check_amounts(&mut errors, &fields, limits);
        let filter = ReplayFilter {
            selects,
            subscriber_id: fields.subscriber_id,
            subscriber_ids: fields.subscriber_ids.unwrap_or_default(),
            event_id: fields.event_id,
            dead_reason: fields.dead_reason,
            dead_after,
            dead_before,
            error_class,
            last_status,
            all: fields.all.unwrap_or(false),
        };
        let filter_error = match (filter.all, narrowed) {
            (true, true) => Some("`all: true` replays every job selected: give it without filters"),
            (false, false) => Some(
                "give at least one of subscriber_id, subscriber_ids, event_id, error_class, \
                 last_status, dead_reason, dead_after, dead_before, or `all: true` to replay \
                 every job selected",
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

/// `subscriber_id`, `subscriber_ids` (not both; 1 to [`MAX_REPLAY_SUBSCRIBERS`]
/// distinct valid ids) and `event_id`.
fn check_ids(errors: &mut Vec<FieldError>, fields: &ReplayFields) {
    if let Some(id) = &fields.subscriber_id {
        field_error::collect(errors, "subscriber_id", validate::subscriber_id(id));
    }
    if let Some(ids) = &fields.subscriber_ids {
        if fields.subscriber_id.is_some() {
            errors.push(FieldError::new(
                "subscriber_ids",
                "give subscriber_id or subscriber_ids, not both",
            ));
        }
        if ids.is_empty() || ids.len() > MAX_REPLAY_SUBSCRIBERS {
            errors.push(FieldError::new(
                "subscriber_ids",
                format!(
                    "names {} subscribers; 1 to {MAX_REPLAY_SUBSCRIBERS} per replay",
                    ids.len()
                ),
            ));
        } else {
            errors.extend(validate::subscriber_id_list(ids, "subscriber_ids"));
        }
    }
    if let Some(id) = &fields.event_id {
        field_error::collect(errors, "event_id", validate::event_id(id));
    }
}

/// With `selects: retrying`: no `dead_*` filter (a retrying job is not dead) and no
/// `ttl_ms` (a job brought forward keeps its deadline).
fn check_retrying(errors: &mut Vec<FieldError>, fields: &ReplayFields) {
    let dead_only = [
        ("dead_reason", fields.dead_reason.is_some()),
        ("dead_after", fields.dead_after.is_some()),
        ("dead_before", fields.dead_before.is_some()),
    ];
    for (field, given) in dead_only {
        if given {
            errors.push(FieldError::new(
                field,
                "applies to dead jobs only: not with `selects: retrying`",
            ));
        }
    }
    if fields.ttl_ms.is_some() {
        errors.push(FieldError::new(
            "ttl_ms",
            "a retrying job brought forward keeps its deadline: not with `selects: retrying`",
        ));
    }
}

/// The class named `text`, if given and known; an unknown one is an error naming
/// `error_class` and the known ones.
fn error_class(errors: &mut Vec<FieldError>, text: Option<&str>) -> Option<ErrorClass> {
    text?
        .parse::<ErrorClass>()
        .map_err(|_| {
            let known: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
            errors.push(FieldError::new(
                "error_class",
                format!("must be one of {}", known.join(", ")),
            ));
        })
        .ok()
}

/// `status`, if given and an HTTP status (100–599); else an error naming `last_status`.
fn last_status(errors: &mut Vec<FieldError>, status: Option<i64>) -> Option<u16> {
    let status = status?;
    u16::try_from(status)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .or_else(|| {
            let message = "must be an HTTP status, an integer from 100 to 599";
            errors.push(FieldError::new("last_status", message));
            None
        })
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
