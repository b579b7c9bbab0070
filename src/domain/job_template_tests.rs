//! The rules of [`JobTemplate::check`]: the payload, the event id, the attempt budget
//! and the schedule, each invalid field named.

use super::*;
use crate::testing::START;

const LIMITS: JobLimits = JobLimits {
    max_payload_bytes: 64,
    default_ttl_ms: 86_400_000,
};

/// Event `e` with payload `1`, nothing else given.
fn fields(payload: &str) -> JobFields<'_> {
    JobFields {
        event_id: "e",
        payload,
        schedule: ScheduleFields::default(),
        max_attempts: None,
    }
}

fn check(fields: JobFields<'_>, limits: JobLimits) -> Result<JobTemplate, Vec<FieldError>> {
    let mut errors = Vec::new();
    match JobTemplate::check(fields, START, limits, &mut errors) {
        Ok(Some(template)) if errors.is_empty() => Ok(template),
        Ok(_) => Err(errors),
        Err(too_large) => panic!("expected no 413 for {fields:?}, got {too_large:?}"),
    }
}

fn invalid_fields(fields: JobFields<'_>) -> Vec<String> {
    match check(fields, LIMITS) {
        Err(errors) => errors.into_iter().map(|e| e.field).collect(),
        Ok(template) => panic!("expected invalid fields for {fields:?}, got {template:?}"),
    }
}

#[test]
fn defaults_deliver_now_with_the_default_ttl() {
    let template = check(fields(r#"{"a":1}"#), LIMITS).unwrap();
    assert_eq!(template.deliver_at, START);
    assert_eq!(template.deadline, START.plus_ms(86_400_000));
    assert_eq!(&*template.payload, r#"{"a":1}"#);
    assert_eq!(template.max_attempts, None);
    assert_eq!(template.created_at, START);
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (
            ScheduleFields {
                deliver_at: Some("2026-11-30T12:00:00Z"),
                delay_ms: Some(1),
                ..ScheduleFields::default()
            },
            "delay_ms",
        ),
        (
            ScheduleFields {
                ttl_ms: Some(0),
                ..ScheduleFields::default()
            },
            "ttl_ms",
        ),
    ];
    for (schedule, field) in cases {
        let fields = JobFields {
            schedule,
            ..fields("1")
        };
        assert_eq!(invalid_fields(fields), vec![field.to_owned()], "{fields:?}");
    }
    let zero_attempts = JobFields {
        max_attempts: Some(0),
        ..fields("1")
    };
    assert_eq!(invalid_fields(zero_attempts), vec!["max_attempts"]);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for payload in [r#""\ud800""#, deep.as_str()] {
        let limits = JobLimits {
            max_payload_bytes: 4096,
            ..LIMITS
        };
        let template = check(fields(payload), limits);
        assert!(
            matches!(&template, Err(e) if e[0].field == "payload"),
            "{payload}: {template:?}"
        );
    }
    let empty_event = JobFields {
        event_id: "",
        ..fields("null")
    };
    assert_eq!(invalid_fields(empty_event), vec!["event_id", "payload"]);
}

#[test]
fn errors_follow_those_the_caller_found() {
    let mut errors = vec![FieldError::new("subscriber_id", "first")];
    let bad = JobFields {
        event_id: "",
        ..fields("1")
    };
    let template = JobTemplate::check(bad, START, LIMITS, &mut errors).unwrap();
    assert_eq!(template, None);
    let named: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(named, ["subscriber_id", "event_id"]);
}

#[test]
fn an_oversized_payload_is_413() {
    let big = format!(r#""{}""#, "x".repeat(70));
    let mut errors = Vec::new();
    match JobTemplate::check(fields(&big), START, LIMITS, &mut errors) {
        Err(PayloadTooLarge(error)) => assert_eq!(error.field, "payload"),
        other => panic!("expected 413, got {other:?}"),
    }
}
