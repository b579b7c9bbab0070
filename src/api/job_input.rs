//! The body of `POST /v1/jobs`, checked by the domain's rules
//! ([`crate::domain::job_template`]) and turned into a job to store.

use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::problem::{AppError, FieldError};
use crate::domain::job_template::{JobFields, JobLimits, JobTemplate};
use crate::domain::schedule::ScheduleFields;
use crate::domain::{Timestamp, event_type, validate};
use crate::store::NewJob;

/// A job to schedule. Give `deliver_at` or `delay_ms` (neither: now), and `deadline`
/// or `ttl_ms` (neither: `deliver_at` + the server's default TTL).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJobRequest {
    /// The subscriber to deliver to; must exist.
    #[schema(min_length = 1, max_length = 128)]
    pub subscriber_id: String,
    /// The producer's stable event id (1–256 visible ASCII characters); with the
    /// subscriber id it identifies the job, and it is sent as `webhook-id`.
    #[schema(min_length = 1, max_length = 256)]
    pub event_id: String,
    /// The event's type (1–128 of A-Z a-z 0-9 . _ : -), sent as `webhook-event-type`;
    /// the job listing filters on it.
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_type: Option<String>,
    /// Any JSON value but `null`; delivered byte for byte as sent.
    #[schema(schema_with = crate::domain::job_template::payload_schema)]
    pub payload: Box<RawValue>,
    /// RFC 3339 with an offset; a past instant means now.
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
    /// Milliseconds from now until delivery.
    pub delay_ms: Option<u64>,
    /// RFC 3339 with an offset; must be after `deliver_at`.
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
    /// Milliseconds from `deliver_at` until the deadline; must be positive.
    #[schema(minimum = 1)]
    pub ttl_ms: Option<u64>,
    /// Most attempts (1–10000); absent: only the deadline bounds them.
    #[schema(minimum = 1, maximum = 10000)]
    pub max_attempts: Option<u32>,
}

impl CreateJobRequest {
    /// The fields a job shares with a fan-out, for [`JobTemplate::check`].
    fn fields(&self) -> JobFields<'_> {
        JobFields {
            event_id: &self.event_id,
            payload: self.payload.get(),
            schedule: ScheduleFields {
                deliver_at: self.deliver_at.as_deref(),
                delay_ms: self.delay_ms,
                deadline: self.deadline.as_deref(),
                ttl_ms: self.ttl_ms,
            },
            max_attempts: self.max_attempts,
        }
    }
}

/// Checks `request` and builds the job to store, with id `id`, at `now`. A payload over
/// the limit is a 413; every other problem is a 422 listing all invalid fields.
pub fn new_job(
    request: CreateJobRequest,
    id: Uuid,
    now: Timestamp,
    limits: JobLimits,
) -> Result<NewJob, AppError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::subscriber_id(&request.subscriber_id) {
        errors.push(FieldError::new("subscriber_id", message));
    }
    if let Some(Err(message)) = request.event_type.as_deref().map(event_type::event_type) {
        errors.push(FieldError::new("event_type", message));
    }
    let template = JobTemplate::check(request.fields(), now, limits, &mut errors)?;
    match template {
        Some(template) if errors.is_empty() => Ok(NewJob {
            event_type: request.event_type,
            ..job_record(&template, request.subscriber_id, id)
        }),
        _ => Err(AppError::Invalid(errors)),
    }
}

/// The job of `template` for `subscriber_id`, with id `id`, as the store takes it.
pub fn job_record(template: &JobTemplate, subscriber_id: String, id: Uuid) -> NewJob {
    NewJob {
        id,
        subscriber_id,
        event_id: template.event_id.clone(),
        payload: template.payload.clone(),
        deliver_at: template.deliver_at,
        deadline: template.deadline,
        max_attempts: template.max_attempts,
        created_at: template.created_at,
        event_type: None,
        schedule_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extract::parse_json;
    use crate::testing::START;

    const LIMITS: JobLimits = JobLimits {
        max_payload_bytes: 64,
        default_ttl_ms: 86_400_000,
    };

    fn build(body: &str) -> Result<NewJob, AppError> {
        let request: CreateJobRequest = parse_json(body.as_bytes())?;
        new_job(request, Uuid::nil(), START, LIMITS)
    }

    fn invalid_fields(body: &str) -> Vec<String> {
        match build(body) {
            Err(AppError::Invalid(errors)) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("expected 422 for {body}, got {other:?}"),
        }
    }

    #[test]
    fn defaults_deliver_now_with_the_default_ttl() {
        let job = build(r#"{"subscriber_id":"s","event_id":"e","payload":{"a":1}}"#).unwrap();
        assert_eq!(job.deliver_at, START);
        assert_eq!(job.deadline, START.plus_ms(86_400_000));
        assert_eq!(&*job.payload, r#"{"a":1}"#);
        assert_eq!(job.max_attempts, None);
    }

    #[test]
    fn keeps_the_payload_text_exactly() {
        let raw = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;
        let body = format!(r#"{{"subscriber_id":"s","event_id":"e","payload":{raw}}}"#);
        let job = new_job(
            parse_json(body.as_bytes()).unwrap(),
            Uuid::nil(),
            START,
            JobLimits {
                max_payload_bytes: 1024,
                ..LIMITS
            },
        )
        .unwrap();
        assert_eq!(&*job.payload, raw);
    }

    #[test]
    fn the_subscriber_id_is_named_before_the_shared_fields() {
        assert_eq!(
            invalid_fields(r#"{"subscriber_id":"a b","event_id":"","payload":null}"#),
            vec!["subscriber_id", "event_id", "payload"]
        );
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        assert_eq!(
            invalid_fields(r#"{"subscriber_id":"s","payload":1}"#),
            vec!["event_id"]
        );
        assert_eq!(
            invalid_fields(r#"{"subscriber_id":"s","event_id":"e","payload":1,"delay":5}"#),
            vec!["delay"]
        );
        assert_eq!(
            invalid_fields(r#"{"subscriber_id":"s","event_id":"e","payload":1,"delay_ms":-5}"#),
            vec!["delay_ms"]
        );
    }

    #[test]
    fn an_oversized_payload_is_413() {
        let big = format!(r#""{}""#, "x".repeat(70));
        let body = format!(r#"{{"subscriber_id":"s","event_id":"e","payload":{big}}}"#);
        match build(&body) {
            Err(AppError::TooLarge(error)) => assert_eq!(error.field, "payload"),
            other => panic!("expected 413, got {other:?}"),
        }
    }
}
