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

/// `deliver_at` at the end of time left the default deadline cut to 999 ms after it
/// (issue #15): a deadline counted from `deliver_at` that would pass the last
/// expressible instant is refused, naming the field that can fix it.
#[test]
fn a_deadline_counted_past_the_end_of_time_is_refused() {
    let none = ScheduleFields::default();
    let last_second = ScheduleFields {
        deliver_at: Some("9999-12-31T23:59:59Z"),
        ..none
    };
    assert_eq!(invalid_fields(last_second), vec!["deadline".to_owned()]);
    let with_ttl = ScheduleFields {
        ttl_ms: Some(2000),
        ..last_second
    };
    assert_eq!(invalid_fields(with_ttl), vec!["ttl_ms".to_owned()]);
    let fitting = schedule(ScheduleFields {
        ttl_ms: Some(999),
        ..last_second
    });
    assert_eq!(fitting.deadline, Timestamp::MAX);
    let explicit = schedule(ScheduleFields {
        deadline: Some("9999-12-31T23:59:59.500Z"),
        ..last_second
    });
    assert_eq!(explicit.deadline.millis_since(explicit.deliver_at), 500);
}

fn current() -> Schedule {
    Schedule {
        deliver_at: START.plus_ms(10_000),
        deadline: START.plus_ms(20_000),
    }
}

#[test]
fn moving_replaces_what_is_given_and_keeps_the_rest() {
    let moved = current()
        .moved(Some(START.plus_ms(15_000)), None, START)
        .unwrap();
    assert_eq!(moved.deliver_at, START.plus_ms(15_000));
    assert_eq!(moved.deadline, START.plus_ms(20_000));
    let both = current()
        .moved(
            Some(START.plus_ms(30_000)),
            Some(START.plus_ms(40_000)),
            START,
        )
        .unwrap();
    assert_eq!(both.deadline, START.plus_ms(40_000));
    let past = current()
        .moved(Some(START.minus_ms(5)), None, START)
        .unwrap();
    assert_eq!(past.deliver_at, START, "a past deliver_at means now");
}

/// Moving only `deliver_at` past the deadline names `deliver_at` and says how to move
/// both; a given deadline before `deliver_at` names `deadline`.
#[test]
fn moving_names_the_field_the_request_can_fix() {
    let late = current()
        .moved(Some(START.plus_ms(25_000)), None, START)
        .unwrap_err();
    assert_eq!(late.field, "deliver_at");
    assert!(
        late.message.contains("deadline in the same request"),
        "{late:?}"
    );
    let early = current()
        .moved(None, Some(START.plus_ms(5_000)), START)
        .unwrap_err();
    assert_eq!(early.field, "deadline");
    let early_both = current()
        .moved(
            Some(START.plus_ms(30_000)),
            Some(START.plus_ms(30_000)),
            START,
        )
        .unwrap_err();
    assert_eq!(early_both.field, "deadline");
}
