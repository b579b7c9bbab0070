//! The body of `PUT /v1/schedules/{schedule_id}`, checked by the domain's rules
//! ([`crate::domain::recurrence`], [`crate::domain::recurring`], a period's job as
//! [`crate::domain::job_template`] checks a posted one) and turned into the definition
//! the store keeps (docs/DESIGN.md §5.14).

use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::error::AppError;
use crate::domain::field_error::FieldError;
use crate::domain::job_template::{JobFields, JobLimits, JobTemplate};
use crate::domain::recurrence::{Recurrence, check_event_id_template, fill_event_id};
use crate::domain::recurring::CatchUp;
use crate::domain::schedule::ScheduleFields;
use crate::domain::{Timestamp, event_type, validate};
use crate::store::{ScheduleDefinition, ScheduleTarget, ScheduleTiming};

/// Creates or replaces a schedule. Give `subscriber_id` or `event_type`, and `cron`
/// or `every_ms`. On update every field is replaced, except `anchor` and `enabled`,
/// which keep their stored value when left out (so a producer that puts its schedules
/// again when it starts never shifts their periods or undoes an operator's pause).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutScheduleRequest {
    /// Deliver each period to this subscriber (it must exist).
    #[schema(min_length = 1, max_length = 128)]
    pub subscriber_id: Option<String>,
    /// Deliver each period to every subscriber (enabled or paused) whose
    /// `event_types` match this type when the period's jobs are created, as
    /// `POST /v1/events` with an `event_type`; sent as `webhook-event-type`.
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_type: Option<String>,
    /// A cron pattern of 5 fields (minute hour day-of-month month day-of-week) or 6
    /// (seconds first), read in `time_zone`; `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly` are taken too.
    #[schema(example = "0 0 * * *", min_length = 1, max_length = 512)]
    pub cron: Option<String>,
    /// Milliseconds between periods (1,000 to 31,622,400,000): the periods start at
    /// whole multiples of it from `anchor`.
    #[schema(minimum = 1000, maximum = 31_622_400_000_u64)]
    pub every_ms: Option<u64>,
    /// With `every_ms`: one period's start (RFC 3339 with an offset); default: when
    /// the schedule was created, to the second. Kept when left out on update.
    #[schema(format = DateTime)]
    pub anchor: Option<String>,
    /// With `cron`: the IANA time zone its wall clock is read in (default `UTC`).
    #[schema(example = "Europe/Berlin", min_length = 1)]
    pub time_zone: Option<String>,
    /// The event id of each period's jobs: must contain `{period_start}`, replaced by
    /// the period's start in UTC (`2026-11-30T00:00:00Z`, with milliseconds only when
    /// it has some); 1–256 visible ASCII characters once filled.
    #[schema(
        example = "cleanup:room-7:{period_start}",
        min_length = 15,
        max_length = 256
    )]
    pub event_id: String,
    /// Any JSON value but `null`; every period's jobs send it byte for byte.
    #[schema(schema_with = crate::domain::job_template::payload_schema)]
    pub payload: Box<RawValue>,
    /// Each job's deadline after its `deliver_at` (the period's start), in
    /// milliseconds; default: the server's TTL.
    #[schema(minimum = 1)]
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts (1–10000); absent: only the deadline bounds them.
    #[schema(minimum = 1, maximum = 10000)]
    pub max_attempts: Option<u32>,
    /// After downtime: `latest` (default) creates the most recent missed period's
    /// jobs, due at once; `none` creates none. A period is missed when its start passed
    /// more than 5 s before a scheduler reached it.
    #[schema(value_type = Option<CatchUp>)]
    pub catch_up: Option<String>,
    /// False: no period's jobs are created (a manual run still creates them); true
    /// again: periods resume from the next one. Default true; kept when left out on
    /// update.
    pub enabled: Option<bool>,
}

/// The definition `body` asks for as schedule `id` at `now`, its stored version being
/// `existing`, with its periods; or a 422 naming every invalid field (413 for a
/// payload over the limit).
pub fn definition(
    limits: JobLimits,
    id: &str,
    body: PutScheduleRequest,
    existing: Option<&ScheduleDefinition>,
    now: Timestamp,
) -> Result<(ScheduleDefinition, Recurrence), AppError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::schedule_id(id) {
        errors.push(FieldError::new("schedule_id", message));
    }
    let target = match (body.subscriber_id, body.event_type) {
        (Some(subscriber), None) => {
            if let Err(message) = validate::subscriber_id(&subscriber) {
                errors.push(FieldError::new("subscriber_id", message));
            }
            Some(ScheduleTarget::Subscriber(subscriber))
        }
        (None, Some(name)) => {
            if let Err(message) = event_type::event_type(&name) {
                errors.push(FieldError::new("event_type", message));
            }
            Some(ScheduleTarget::EventType(name))
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "event_type",
                "give subscriber_id or event_type, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                "subscriber_id",
                "is required without event_type (whom each period is delivered to)",
            ));
            None
        }
    };
    let stored_anchor = existing.and_then(|d| match d.timing {
        ScheduleTiming::Every { anchor, .. } => Some(anchor),
        ScheduleTiming::Cron { .. } => None,
    });
    let recurrence = match (body.cron, body.every_ms) {
        (Some(cron), None) => {
            if body.anchor.is_some() {
                errors.push(FieldError::new("anchor", "applies to every_ms only"));
            }
            Recurrence::cron(&cron, body.time_zone.as_deref())
                .map_err(|invalid| errors.extend(invalid))
                .ok()
        }
        (None, Some(every_ms)) => {
            if body.time_zone.is_some() {
                errors.push(FieldError::new(
                    "time_zone",
                    "applies to cron only (an interval's periods do not depend on a zone)",
                ));
            }
            let anchor = match body.anchor.as_deref().map(Timestamp::parse_rfc3339) {
                Some(Ok(anchor)) => Some(anchor),
                Some(Err(e)) => {
                    errors.push(FieldError::new("anchor", e.to_string()));
                    None
                }
                // The schedule's creation, to the second: event ids without milliseconds.
                None => Some(stored_anchor.unwrap_or_else(|| {
                    Timestamp::from_millis(now.as_millis().div_euclid(1_000) * 1_000)
                })),
            };
            anchor.and_then(|anchor| {
                Recurrence::every(every_ms, anchor)
                    .map_err(|invalid| errors.push(invalid))
                    .ok()
            })
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "every_ms",
                "give cron or every_ms, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                "cron",
                "is required without every_ms (when the periods start)",
            ));
            None
        }
    };
    if let Err(error) = check_event_id_template(&body.event_id) {
        errors.push(error);
    }
    let catch_up = match body.catch_up.as_deref().map(str::parse::<CatchUp>) {
        None => CatchUp::default(),
        Some(Ok(catch_up)) => catch_up,
        Some(Err(_)) => {
            errors.push(FieldError::new("catch_up", "must be `latest` or `none`"));
            CatchUp::default()
        }
    };
    // A period's job must be valid as a posted one: the payload, TTL and attempts.
    let sample_id = fill_event_id(&body.event_id, now);
    let fields = JobFields {
        event_id: &sample_id,
        payload: body.payload.get(),
        schedule: ScheduleFields {
            ttl_ms: body.ttl_ms,
            ..ScheduleFields::default()
        },
        max_attempts: body.max_attempts,
    };
    let mut job_errors = Vec::new();
    JobTemplate::check(fields, now, limits, &mut job_errors)?;
    errors.extend(job_errors.into_iter().filter(|e| e.field != "event_id"));
    let (Some(target), Some(recurrence), true) = (target, recurrence, errors.is_empty()) else {
        return Err(AppError::Invalid(errors));
    };
    let timing = match &recurrence {
        Recurrence::Cron(cron) => ScheduleTiming::Cron {
            cron: cron.pattern().to_owned(),
            time_zone: cron.time_zone().to_owned(),
        },
        Recurrence::Every(interval) => ScheduleTiming::Every {
            every_ms: interval.every_ms(),
            anchor: interval.anchor(),
        },
    };
    let definition = ScheduleDefinition {
        id: id.to_owned(),
        target,
        timing,
        event_id: body.event_id,
        payload: body.payload.get().to_owned(),
        ttl_ms: body.ttl_ms,
        max_attempts: body.max_attempts,
        catch_up,
        enabled: body.enabled.or(existing.map(|d| d.enabled)).unwrap_or(true),
    };
    Ok((definition, recurrence))
}
