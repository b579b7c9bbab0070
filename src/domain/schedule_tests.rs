//! How `deliver_at`/`delay_ms` and `deadline`/`ttl_ms` become a [`Schedule`].

use super::*;
use crate::testing::START;

const DEFAULT_TTL_MS: u64 = 86_400_000;

fn schedule(fields: ScheduleFields<'_>) -> Schedule {
    Schedule::check(fields, START, DEFAULT_TTL_MS).unwrap()
}

fn invalid_fields(fields: ScheduleFields<'_>) -> Vec<String> {
    match Schedule::check(fields, START, DEFAULT_TTL_MS) {
        Err(errors) => errors.into_iter().map(|e| e.field).collect(),
        Ok(schedule) => panic!("expected invalid fields for {fields:?}, got {schedule:?}"),
    }
}

#[test]
fn defaults_deliver_now_with_the_default_ttl() {
    let schedule = schedule(ScheduleFields::default());
    assert_eq!(schedule.deliver_at, START);
    assert_eq!(schedule.deadline, START.plus_ms(86_400_000));
}

#[test]
fn delay_and_ttl_count_from_now_and_deliver_at() {
    let schedule = schedule(ScheduleFields {
        delay_ms: Some(5000),
        ttl_ms: Some(1000),
        ..ScheduleFields::default()
    });
    assert_eq!(schedule.deliver_at, START.plus_ms(5000));
    assert_eq!(schedule.deadline, START.plus_ms(6000));
}

#[test]
fn a_past_deliver_at_means_now() {
    let schedule = schedule(ScheduleFields {
        deliver_at: Some("2020-01-01T00:00:00Z"),
        ..ScheduleFields::default()
    });
    assert_eq!(schedule.deliver_at, START);
}

#[test]
fn explicit_times_with_offsets() {
    let schedule = schedule(ScheduleFields {
        deliver_at: Some("2026-11-30T13:00:00+01:00"),
        deadline: Some("2026-11-30T12:00:01Z"),
        ..ScheduleFields::default()
    });
    assert_eq!(schedule.deliver_at, START);
    assert_eq!(schedule.deadline, START.plus_ms(1000));
}

#[test]
fn each_bad_field_is_named() {
    let none = ScheduleFields::default();
    let cases = [
        (
            ScheduleFields {
                deliver_at: Some("2026-11-30T12:00:00Z"),
                delay_ms: Some(1),
                ..none
            },
            "delay_ms",
        ),
        (
            ScheduleFields {
                deadline: Some("2026-12-30T12:00:00Z"),
                ttl_ms: Some(1),
                ..none
            },
            "ttl_ms",
        ),
        (
            ScheduleFields {
                deliver_at: Some("2026-12-01T12:00:00"),
                ..none
            },
            "deliver_at",
        ),
        (
            ScheduleFields {
                deadline: Some("2026-12-01 12:00"),
                ..none
            },
            "deadline",
        ),
        (
            ScheduleFields {
                deadline: Some("2026-11-30T12:00:00Z"),
                ..none
            },
            "deadline",
        ),
        (
            ScheduleFields {
                delay_ms: Some(5000),
                deadline: Some("2026-11-30T12:00:04Z"),
                ..none
            },
            "deadline",
        ),
        (
            ScheduleFields {
                ttl_ms: Some(0),
                ..none
            },
            "ttl_ms",
        ),
    ];
    for (fields, field) in cases {
        assert_eq!(invalid_fields(fields), vec![field.to_owned()], "{fields:?}");
    }
}
