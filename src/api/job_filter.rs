//! The query of `GET /v1/jobs`: its filters, checked and turned into a [`JobFilter`].
//! Every invalid parameter is reported at once, each naming its field.

use serde::Deserialize;

use super::problem::{AppError, FieldError};
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::WaitingReason;
use crate::domain::{DeadReason, JobState, Timestamp, event_type, validate};
use crate::store::JobFilter;

/// Query of the job listing; all given filters must match. `*_after` bounds are
/// inclusive, `*_before` bounds exclusive.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListJobsQuery {
    /// Only jobs of this event.
    pub event_id: Option<String>,
    /// Only jobs of this subscriber.
    pub subscriber_id: Option<String>,
    /// Only jobs of this event type (exactly; no wildcard).
    pub event_type: Option<String>,
    /// Only jobs created by this recurring schedule.
    pub schedule_id: Option<String>,
    /// Only jobs in one of these states, comma-separated (`retrying,dead`), as read
    /// now: an `in_flight` job whose lease has expired is `retrying`.
    #[param(value_type = Option<Vec<JobState>>, style = Form, explode = false)]
    pub state: Option<String>,
    /// Only jobs with this `waiting_reason` now: `scheduled`, `backing_off`,
    /// `subscriber_paused` or `in_flight` (the reasons that depend on load at the
    /// instant cannot be filtered on: 422).
    #[param(value_type = Option<WaitingReason>)]
    pub waiting_reason: Option<String>,
    /// Only jobs whose last error has this class (`last_error.class`).
    #[param(value_type = Option<ErrorClass>)]
    pub error_class: Option<String>,
    /// Only jobs whose last error has this HTTP status (`last_error.status`), 100–599.
    #[param(value_type = Option<u16>, minimum = 100, maximum = 599)]
    pub last_status: Option<String>,
    /// Only dead jobs with this reason (implies `state=dead`).
    #[param(value_type = Option<DeadReason>)]
    pub dead_reason: Option<String>,
    /// Only jobs created at or after this instant (RFC 3339 with an offset), as recorded
    /// in the job's UUIDv7 id.
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_after: Option<String>,
    /// Only jobs created before this instant (RFC 3339 with an offset).
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_before: Option<String>,
    /// Only jobs that went dead at or after this instant (RFC 3339 with an offset;
    /// implies `state=dead`).
    #[param(value_type = Option<String>, format = DateTime)]
    pub dead_after: Option<String>,
    /// Only jobs that went dead before this instant (RFC 3339 with an offset; implies
    /// `state=dead`).
    #[param(value_type = Option<String>, format = DateTime)]
    pub dead_before: Option<String>,
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The filters of `query`, or a 422 naming every invalid one: an unknown or empty item
/// of the `state` list, an unknown dead reason, waiting reason or error class, a
/// waiting reason that cannot be filtered on ([`WaitingReason::FILTERABLE`]), a
/// `last_status` that is not an integer in 100–599, an instant that is not RFC 3339
/// with an offset, an `*_after` bound not before its `*_before` bound, a dead-only
/// filter with a `state` other than `dead`, and a `waiting_reason` no job in the
/// states asked for can have.
pub fn job_filter(query: &ListJobsQuery) -> Result<JobFilter, AppError> {
    let mut errors = Vec::new();
    // The same rules as where ids are written: an id that cannot exist is a mistake.
    for (field, raw, rule) in [
        (
            "subscriber_id",
            &query.subscriber_id,
            validate::subscriber_id as fn(&str) -> _,
        ),
        ("event_id", &query.event_id, validate::event_id),
        ("event_type", &query.event_type, event_type::event_type),
        ("schedule_id", &query.schedule_id, validate::schedule_id),
    ] {
        if let Some(Err(message)) = raw.as_deref().map(rule) {
            errors.push(FieldError::new(field, message));
        }
    }
    let states = state_list(query.state.as_deref(), &mut errors);
    let waiting_reason = named::<WaitingReason>(
        "waiting_reason",
        query.waiting_reason.as_deref(),
        &mut errors,
    );
    if let Some(reason) = waiting_reason.filter(|r| !r.filterable()) {
        let names: Vec<&str> = WaitingReason::FILTERABLE
            .map(WaitingReason::as_str)
            .to_vec();
        errors.push(FieldError::new(
            "waiting_reason",
            format!(
                "{reason} depends on load at the instant and cannot be filtered on; \
                 one of {} can",
                names.join(", ")
            ),
        ));
    }
    let error_class = named::<ErrorClass>("error_class", query.error_class.as_deref(), &mut errors);
    let last_status = query.last_status.as_deref().and_then(|raw| {
        raw.parse::<u16>()
            .ok()
            .filter(|s| (100..=599).contains(s))
            .or_else(|| {
                let message = "must be an HTTP status, an integer from 100 to 599";
                errors.push(FieldError::new("last_status", message));
                None
            })
    });
    let dead_reason = named::<DeadReason>("dead_reason", query.dead_reason.as_deref(), &mut errors);
    let mut instant = |field: &str, raw: &Option<String>| {
        raw.as_deref().and_then(|raw| {
            Timestamp::parse_rfc3339(raw)
                .map_err(|e| {
                    let mut message = e.to_string();
                    if raw.contains(' ') {
                        // `+01:00` in a query string decodes to ` 01:00`.
                        message.push_str(" (write `+` as `%2B` in a URL)");
                    }
                    errors.push(FieldError::new(field, message));
                })
                .ok()
        })
    };
    let filter = JobFilter {
        event_id: query.event_id.clone(),
        subscriber_id: query.subscriber_id.clone(),
        states: states.clone(),
        dead_reason,
        created_after: instant("created_after", &query.created_after),
        created_before: instant("created_before", &query.created_before),
        dead_after: instant("dead_after", &query.dead_after),
        dead_before: instant("dead_before", &query.dead_before),
        waiting_reason,
        error_class,
        last_status,
        event_type: query.event_type.clone(),
        schedule_id: query.schedule_id.clone(),
    };
    for (after, before, prefix) in [
        (filter.created_after, filter.created_before, "created"),
        (filter.dead_after, filter.dead_before, "dead"),
    ] {
        if let (Some(after), Some(before)) = (after, before)
            && after >= before
        {
            errors.push(FieldError::new(
                format!("{prefix}_before"),
                format!("must be later than {prefix}_after"),
            ));
        }
    }
    if filter.implies_dead() && states.iter().any(|s| *s != JobState::Dead) {
        errors.push(FieldError::new(
            "state",
            "must be dead (or left out) with dead_reason, dead_after or dead_before",
        ));
    }
    if let Some(reason) = waiting_reason.filter(|r| r.filterable())
        && filter.matching_states().is_some_and(|s| s.is_empty())
    {
        let names: Vec<&str> = reason.states().iter().map(|s| s.as_str()).collect();
        errors.push(FieldError::new(
            "waiting_reason",
            format!(
                "{reason} is the reason of {} jobs only, not of the state asked for",
                names.join(" or ")
            ),
        ));
    }
    if errors.is_empty() {
        Ok(filter)
    } else {
        Err(AppError::Invalid(errors))
    }
}

/// Parses the comma-separated `state` list: each item a known state (duplicates are
/// harmless), no empty item; records a field error naming `state` otherwise.
fn state_list(raw: Option<&str>, errors: &mut Vec<FieldError>) -> Vec<JobState> {
    let Some(raw) = raw else {
        return Vec::new();
    };
    let mut states = Vec::new();
    for item in raw.split(',') {
        if item.is_empty() {
            errors.push(FieldError::new(
                "state",
                "must be a comma-separated list of states with no empty item",
            ));
            return Vec::new();
        }
        match named::<JobState>("state", Some(item), errors) {
            Some(state) => states.push(state),
            None => return Vec::new(),
        }
    }
    states
}

/// Parses an optional wire name of `T`, recording a field error that lists the names.
fn named<T>(field: &str, raw: Option<&str>, errors: &mut Vec<FieldError>) -> Option<T>
where
    T: std::str::FromStr + Copy + std::fmt::Display + WireNames,
{
    let raw = raw?;
    raw.parse::<T>()
        .map_err(|_| {
            let names: Vec<String> = T::all().iter().map(ToString::to_string).collect();
            errors.push(FieldError::new(
                field,
                format!("must be one of {}", names.join(", ")),
            ));
        })
        .ok()
}

/// Every value of a fieldless wire-named enum.
trait WireNames: Sized + 'static {
    fn all() -> &'static [Self];
}

impl WireNames for JobState {
    fn all() -> &'static [Self] {
        &JobState::ALL
    }
}

impl WireNames for WaitingReason {
    fn all() -> &'static [Self] {
        &WaitingReason::ALL
    }
}

impl WireNames for ErrorClass {
    fn all() -> &'static [Self] {
        &ErrorClass::ALL
    }
}

impl WireNames for DeadReason {
    fn all() -> &'static [Self] {
        &DeadReason::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::START;

    fn query(pairs: &str) -> ListJobsQuery {
        serde_urlencoded::from_str(pairs).expect("a well-formed query")
    }

    fn fields(pairs: &str) -> Vec<String> {
        match job_filter(&query(pairs)) {
            Err(AppError::Invalid(errors)) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("{pairs}: expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn valid_filters_are_parsed() {
        let filter = job_filter(&query(
            "dead_reason=max_attempts&created_after=2026-11-30T12:00:00Z\
             &created_before=2026-11-30T14:00:00%2B01:00&dead_after=2026-11-30T12:00:00Z\
             &dead_before=2026-11-30T12:00:00.001Z&state=dead",
        ))
        .unwrap();
        assert_eq!(filter.dead_reason, Some(DeadReason::MaxAttempts));
        assert_eq!(filter.created_after, Some(START));
        assert_eq!(filter.created_before, Some(START.plus_ms(3_600_000)));
        assert_eq!(filter.dead_before, Some(START.plus_ms(1)));
        assert_eq!(filter.states, [JobState::Dead]);
        assert!(filter.implies_dead());
        assert_eq!(job_filter(&query("")).unwrap(), JobFilter::default());
    }

    #[test]
    fn each_invalid_filter_is_named() {
        assert_eq!(fields("dead_reason=tired"), ["dead_reason"]);
        assert_eq!(
            fields("created_after=2026-11-30T12:00:00"),
            ["created_after"]
        );
        assert_eq!(fields("dead_before=yesterday"), ["dead_before"]);
        let unescaped_plus = job_filter(&query("created_after=2026-11-30T13:00:00+01:00"));
        let Err(AppError::Invalid(errors)) = unescaped_plus else {
            panic!("expected a 422")
        };
        assert!(errors[0].message.contains("%2B"), "{errors:?}");
        let same = "2026-11-30T12:00:00Z";
        assert_eq!(
            fields(&format!("created_after={same}&created_before={same}")),
            ["created_before"]
        );
        assert_eq!(
            fields("dead_after=2026-11-30T12:00:01Z&dead_before=2026-11-30T12:00:00Z"),
            ["dead_before"]
        );
        assert_eq!(
            fields("state=scheduled&dead_reason=max_attempts"),
            ["state"]
        );
        assert_eq!(
            fields(&format!("state=delivered&dead_after={same}")),
            ["state"]
        );
        assert_eq!(
            fields("state=nope&dead_reason=nope&created_before=x"),
            ["state", "dead_reason", "created_before"]
        );
    }

    #[test]
    fn lists_of_states_and_the_on_call_filters_are_parsed() {
        let filter = job_filter(&query(
            "state=retrying,dead,retrying&waiting_reason=backing_off\
             &error_class=http_5xx&last_status=503",
        ))
        .unwrap();
        assert_eq!(
            filter.states,
            [JobState::Retrying, JobState::Dead, JobState::Retrying]
        );
        assert_eq!(filter.matching_states(), Some(vec![JobState::Retrying]));
        assert_eq!(filter.waiting_reason, Some(WaitingReason::BackingOff));
        assert_eq!(filter.error_class, Some(ErrorClass::Http5xx));
        assert_eq!(filter.last_status, Some(503));
        let dead = job_filter(&query("state=dead,dead&dead_reason=max_attempts")).unwrap();
        assert_eq!(dead.matching_states(), Some(vec![JobState::Dead]));
    }

    #[test]
    fn each_invalid_on_call_filter_is_named() {
        for bad in [
            "state=retrying,",
            "state=,dead",
            "state=retrying,nope",
            "state=",
        ] {
            assert_eq!(fields(bad), ["state"], "{bad}");
        }
        assert_eq!(
            fields("state=retrying,scheduled&dead_reason=max_attempts"),
            ["state"]
        );
        for bad in [
            "waiting_reason=idle",
            "waiting_reason=subscriber_at_limit",
            "waiting_reason=destination_circuit_open",
            "waiting_reason=scheduled&state=retrying,dead",
            "waiting_reason=in_flight&dead_reason=max_attempts",
        ] {
            assert_eq!(fields(bad), ["waiting_reason"], "{bad}");
        }
        assert_eq!(fields("error_class=http_500"), ["error_class"]);
        for bad in ["99", "600", "5xx", "-1", ""] {
            assert_eq!(
                fields(&format!("last_status={bad}")),
                ["last_status"],
                "{bad}"
            );
        }
    }
}
