//! The rules of a new job without its subscriber (docs/DESIGN.md §5), shared by a single job
//! and each job of a fan-out: the event id, the payload, the attempt budget and the
//! [`Schedule`]. Pure: `now` and the server's [`JobLimits`] are given.

use super::Timestamp;
use super::field_error::{self, FieldError};
use super::schedule::{Schedule, ScheduleFields};
use super::validate;

/// Most `max_attempts` a job may ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

/// Limits from the server's configuration.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    /// Most bytes of payload text (413 above it).
    pub max_payload_bytes: usize,
    /// Deadline after `deliver_at` when a job names none, in milliseconds.
    pub default_ttl_ms: u64,
}

/// The fields a job and a fan-out share, as received.
#[derive(Debug, Clone, Copy)]
pub struct JobFields<'a> {
    /// `event_id`.
    pub event_id: &'a str,
    /// `payload`: the JSON text exactly as the producer wrote it.
    pub payload: &'a str,
    /// `deliver_at`, `delay_ms`, `deadline` and `ttl_ms`.
    pub schedule: ScheduleFields<'a>,
    /// `max_attempts`.
    pub max_attempts: Option<u32>,
}

/// A payload over [`JobLimits::max_payload_bytes`]: refused at once, before any other
/// rule (the API answers 413), as an error about `payload`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadTooLarge(pub FieldError);

/// A checked job without its subscriber: what a single job and each job of a fan-out
/// share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTemplate {
    /// The event id.
    pub event_id: String,
    /// The payload text, byte for byte; every job made of the template shares it.
    pub payload: std::sync::Arc<str>,
    /// When the jobs first become eligible.
    pub deliver_at: Timestamp,
    /// After it no attempt starts.
    pub deadline: Timestamp,
    /// Most attempts.
    pub max_attempts: Option<u32>,
    /// Now.
    pub created_at: Timestamp,
}

impl JobTemplate {
    /// Checks the shared fields at `now`. A payload over the limit is an immediate
    /// [`PayloadTooLarge`]; other problems are pushed onto `errors` (after those the
    /// caller found already, so all are answered together) and give `None`.
    pub fn check(
        fields: JobFields<'_>,
        now: Timestamp,
        limits: JobLimits,
        errors: &mut Vec<FieldError>,
    ) -> Result<Option<JobTemplate>, PayloadTooLarge> {
        let payload = fields.payload;
        if payload.len() > limits.max_payload_bytes {
            return Err(PayloadTooLarge(FieldError::new(
                "payload",
                format!(
                    "is {} bytes; at most {} are accepted",
                    payload.len(),
                    limits.max_payload_bytes
                ),
            )));
        }
        let before = errors.len();
        field_error::collect(errors, "event_id", validate::event_id(fields.event_id));
        field_error::collect(errors, "payload", comparable_payload(payload));
        if fields
            .max_attempts
            .is_some_and(|n| !(1..=MAX_ATTEMPTS_LIMIT).contains(&n))
        {
            errors.push(FieldError::new(
                "max_attempts",
                format!("must be from 1 to {MAX_ATTEMPTS_LIMIT}"),
            ));
        }
        let schedule = Schedule::check(fields.schedule, now, limits.default_ttl_ms)
            .map_err(|invalid| errors.extend(invalid));
        let Ok(schedule) = schedule else {
            return Ok(None);
        };
        if errors.len() > before {
            return Ok(None);
        }
        Ok(Some(JobTemplate {
            event_id: fields.event_id.to_owned(),
            payload: std::sync::Arc::from(payload),
            deliver_at: schedule.deliver_at,
            deadline: schedule.deadline,
            max_attempts: fields.max_attempts,
            created_at: now,
        }))
    }
}

/// A payload is any JSON value but `null` that deferhook can compare: repeats are
/// compared as JSON values (idempotency), so lone surrogate escapes and nesting deeper
/// than 128 levels are refused.
fn comparable_payload(payload: &str) -> Result<(), String> {
    if payload == "null" {
        return Err("must be a JSON value other than null".into());
    }
    serde_json::from_str::<serde_json::Value>(payload)
        .map(drop)
        .map_err(|error| format!("is not a JSON value deferhook can compare: {error}"))
}

/// The JSON Schema of a webhook payload in a request, for the OpenAPI document: any JSON value but `null` (`not: {type: null}`;
/// utoipa's schema type has no `not`, so it is written as an extension field, which
/// serialises at the schema's top level).
pub fn payload_schema() -> utoipa::openapi::schema::Object {
    let not_null: utoipa::openapi::extensions::Extensions =
        [("not", serde_json::json!({ "type": "null" }))]
            .into_iter()
            .collect();
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
        .description(Some(
            "Any JSON value but `null` (object, array, string, number or boolean); \
             delivered byte for byte as sent.",
        ))
        .extensions(Some(not_null))
        .build()
}

#[cfg(test)]
#[path = "job_template_tests.rs"]
mod tests;
