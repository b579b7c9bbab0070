//! The body of `POST /v1/jobs` and the rules that turn it into a job to store.

use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::problem::{ApiError, FieldError};
use crate::domain::Timestamp;
use crate::domain::validate;
use crate::store::NewJob;

/// Most `max_attempts` a job may ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

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
    /// Any JSON value but `null`; delivered byte for byte as sent.
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    /// RFC 3339 with an offset; a past instant means now.
    pub deliver_at: Option<String>,
    /// Milliseconds from now until delivery.
    pub delay_ms: Option<u64>,
    /// RFC 3339 with an offset; must be after `deliver_at`.
    pub deadline: Option<String>,
    /// Milliseconds from `deliver_at` until the deadline; must be positive.
    #[schema(minimum = 1)]
    pub ttl_ms: Option<u64>,
    /// Most attempts (1–10000); absent: only the deadline bounds them.
    #[schema(minimum = 1, maximum = 10000)]
    pub max_attempts: Option<u32>,
}

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
    /// `payload`, as the producer wrote it.
    pub payload: &'a RawValue,
    /// `deliver_at`.
    pub deliver_at: Option<&'a str>,
    /// `delay_ms`.
    pub delay_ms: Option<u64>,
    /// `deadline`.
    pub deadline: Option<&'a str>,
    /// `ttl_ms`.
    pub ttl_ms: Option<u64>,
    /// `max_attempts`.
    pub max_attempts: Option<u32>,
}

/// A checked job without its subscriber: what a single job and each job of a fan-out
/// share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTemplate {
    /// The event id.
    pub event_id: String,
    /// The payload text, byte for byte.
    pub payload: String,
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
    /// Checks the shared fields at `now`. A payload over the limit is an immediate 413;
    /// other problems are pushed onto `errors` (the caller answers 422 with all of
    /// them) and give `None`.
    pub fn check(
        fields: JobFields<'_>,
        now: Timestamp,
        limits: JobLimits,
        errors: &mut Vec<FieldError>,
    ) -> Result<Option<JobTemplate>, ApiError> {
        let payload = fields.payload.get();
        if payload.len() > limits.max_payload_bytes {
            return Err(ApiError::TooLarge(FieldError::new(
                "payload",
                format!(
                    "is {} bytes; at most {} are accepted",
                    payload.len(),
                    limits.max_payload_bytes
                ),
            )));
        }
        let before = errors.len();
        let mut check = |field: &str, result: Result<(), String>| {
            if let Err(message) = result {
                errors.push(FieldError::new(field, message));
            }
        };
        check("event_id", validate::event_id(fields.event_id));
        if payload == "null" {
            check(
                "payload",
                Err("must be a JSON value other than null".into()),
            );
        } else if let Err(error) = serde_json::from_str::<serde_json::Value>(payload) {
            // Repeats are compared as JSON values (idempotency), so the payload must be
            // one: lone surrogate escapes and nesting deeper than 128 levels are refused.
            check(
                "payload",
                Err(format!(
                    "is not a JSON value deferhook can compare: {error}"
                )),
            );
        }
        if fields
            .max_attempts
            .is_some_and(|n| !(1..=MAX_ATTEMPTS_LIMIT).contains(&n))
        {
            check(
                "max_attempts",
                Err(format!("must be from 1 to {MAX_ATTEMPTS_LIMIT}")),
            );
        }
        let deliver_at = match (fields.deliver_at, fields.delay_ms) {
            (Some(_), Some(_)) => Err(FieldError::new(
                "delay_ms",
                "give deliver_at or delay_ms, not both",
            )),
            (Some(text), None) => Timestamp::parse_rfc3339(text)
                .map(|at| at.max(now))
                .map_err(|e| FieldError::new("deliver_at", e.to_string())),
            (None, Some(delay)) => Ok(now.plus_ms(delay)),
            (None, None) => Ok(now),
        };
        let deliver_at = deliver_at.unwrap_or_else(|error| {
            errors.push(error);
            now
        });
        let deadline = match (fields.deadline, fields.ttl_ms) {
            (Some(_), Some(_)) => Err(FieldError::new(
                "ttl_ms",
                "give deadline or ttl_ms, not both",
            )),
            (Some(text), None) => Timestamp::parse_rfc3339(text)
                .map_err(|e| FieldError::new("deadline", e.to_string()))
                .and_then(|deadline| after(deadline, deliver_at, "deadline")),
            (None, Some(ttl)) => after(deliver_at.plus_ms(ttl), deliver_at, "ttl_ms"),
            // Near the end of time the default deadline saturates onto deliver_at.
            (None, None) => after(
                deliver_at.plus_ms(limits.default_ttl_ms),
                deliver_at,
                if fields.delay_ms.is_some() {
                    "delay_ms"
                } else {
                    "deliver_at"
                },
            ),
        };
        let deadline = deadline.unwrap_or_else(|error| {
            errors.push(error);
            deliver_at
        });
        if errors.len() > before {
            return Ok(None);
        }
        Ok(Some(JobTemplate {
            event_id: fields.event_id.to_owned(),
            payload: payload.to_owned(),
            deliver_at,
            deadline,
            max_attempts: fields.max_attempts,
            created_at: now,
        }))
    }

    /// The job of this template for `subscriber_id`, with id `id`.
    pub fn job_for(&self, subscriber_id: String, id: Uuid) -> NewJob {
        NewJob {
            id,
            subscriber_id,
            event_id: self.event_id.clone(),
            payload: self.payload.clone(),
            deliver_at: self.deliver_at,
            deadline: self.deadline,
            max_attempts: self.max_attempts,
            created_at: self.created_at,
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
) -> Result<NewJob, ApiError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::subscriber_id(&request.subscriber_id) {
        errors.push(FieldError::new("subscriber_id", message));
    }
    let fields = JobFields {
        event_id: &request.event_id,
        payload: &request.payload,
        deliver_at: request.deliver_at.as_deref(),
        delay_ms: request.delay_ms,
        deadline: request.deadline.as_deref(),
        ttl_ms: request.ttl_ms,
        max_attempts: request.max_attempts,
    };
    let template = JobTemplate::check(fields, now, limits, &mut errors)?;
    match template {
        Some(template) if errors.is_empty() => Ok(template.job_for(request.subscriber_id, id)),
        _ => Err(ApiError::Invalid(errors)),
    }
}

fn after(deadline: Timestamp, deliver_at: Timestamp, field: &str) -> Result<Timestamp, FieldError> {
    if deadline > deliver_at {
        Ok(deadline)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "the deadline must be after deliver_at ({})",
                deliver_at.to_rfc3339()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extract::parse_json;

    const NOW: Timestamp = Timestamp::from_millis(1_796_040_000_000); // 2026-11-30T12:00:00Z
    const LIMITS: JobLimits = JobLimits {
        max_payload_bytes: 64,
        default_ttl_ms: 86_400_000,
    };

    fn build(body: &str) -> Result<NewJob, ApiError> {
        let request: CreateJobRequest = parse_json(body.as_bytes())?;
        new_job(request, Uuid::nil(), NOW, LIMITS)
    }

    fn invalid_fields(body: &str) -> Vec<String> {
        match build(body) {
            Err(ApiError::Invalid(errors)) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("expected 422 for {body}, got {other:?}"),
        }
    }

    #[test]
    fn defaults_deliver_now_with_the_default_ttl() {
        let job = build(r#"{"subscriber_id":"s","event_id":"e","payload":{"a":1}}"#).unwrap();
        assert_eq!(job.deliver_at, NOW);
        assert_eq!(job.deadline, NOW.plus_ms(86_400_000));
        assert_eq!(job.payload, r#"{"a":1}"#);
        assert_eq!(job.max_attempts, None);
    }

    #[test]
    fn keeps_the_payload_text_exactly() {
        let raw = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;
        let body = format!(r#"{{"subscriber_id":"s","event_id":"e","payload":{raw}}}"#);
        let job = new_job(
            parse_json(body.as_bytes()).unwrap(),
            Uuid::nil(),
            NOW,
            JobLimits {
                max_payload_bytes: 1024,
                ..LIMITS
            },
        )
        .unwrap();
        assert_eq!(job.payload, raw);
    }

    #[test]
    fn delay_and_ttl_count_from_now_and_deliver_at() {
        let job = build(
            r#"{"subscriber_id":"s","event_id":"e","payload":1,"delay_ms":5000,"ttl_ms":1000}"#,
        )
        .unwrap();
        assert_eq!(job.deliver_at, NOW.plus_ms(5000));
        assert_eq!(job.deadline, NOW.plus_ms(6000));
    }

    #[test]
    fn a_past_deliver_at_means_now() {
        let job = build(
            r#"{"subscriber_id":"s","event_id":"e","payload":1,"deliver_at":"2020-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(job.deliver_at, NOW);
    }

    #[test]
    fn explicit_times_with_offsets() {
        let job = build(
            r#"{"subscriber_id":"s","event_id":"e","payload":1,
                "deliver_at":"2026-11-30T13:00:00+01:00","deadline":"2026-11-30T12:00:01Z"}"#,
        )
        .unwrap();
        assert_eq!(job.deliver_at, NOW);
        assert_eq!(job.deadline, NOW.plus_ms(1000));
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = r#""subscriber_id":"s","event_id":"e","payload":1"#;
        let cases = [
            (
                r#""deliver_at":"2026-11-30T12:00:00Z","delay_ms":1"#,
                "delay_ms",
            ),
            (r#""deadline":"2026-12-30T12:00:00Z","ttl_ms":1"#, "ttl_ms"),
            (r#""deliver_at":"2026-12-01T12:00:00""#, "deliver_at"),
            (r#""deadline":"2026-12-01 12:00""#, "deadline"),
            (r#""deadline":"2026-11-30T12:00:00Z""#, "deadline"),
            (
                r#""delay_ms":5000,"deadline":"2026-11-30T12:00:04Z""#,
                "deadline",
            ),
            (r#""ttl_ms":0"#, "ttl_ms"),
            (r#""max_attempts":0"#, "max_attempts"),
        ];
        for (extra, field) in cases {
            let body = format!("{{{base},{extra}}}");
            assert_eq!(invalid_fields(&body), vec![field.to_owned()], "{body}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for payload in [r#""\ud800""#, deep.as_str()] {
            let body = format!(r#"{{"subscriber_id":"s","event_id":"e","payload":{payload}}}"#);
            let job = new_job(
                parse_json(body.as_bytes()).unwrap(),
                Uuid::nil(),
                NOW,
                JobLimits {
                    max_payload_bytes: 4096,
                    ..LIMITS
                },
            );
            assert!(
                matches!(&job, Err(ApiError::Invalid(e)) if e[0].field == "payload"),
                "{payload}: {job:?}"
            );
        }
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
            Err(ApiError::TooLarge(error)) => assert_eq!(error.field, "payload"),
            other => panic!("expected 413, got {other:?}"),
        }
    }
}
