//! The periods of cron patterns (in UTC and across daylight saving time changes) and of
//! intervals, the checks on their fields, and event id templates. Instants are written
//! as [`period_text`] writes them, UTC.

use proptest::prelude::*;

use super::*;

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap_or_else(|_| panic!("{text} is not RFC 3339"))
}

fn cron(pattern: &str, time_zone: &str) -> Recurrence {
    Recurrence::cron(pattern, Some(time_zone))
        .unwrap_or_else(|errors| panic!("`{pattern}` in {time_zone}: {errors:?}"))
}

fn every(every_ms: u64, anchor: &str) -> Recurrence {
    Recurrence::every(every_ms, at(anchor)).unwrap()
}

fn text(start: Option<Timestamp>) -> String {
    start.map_or_else(|| "none".into(), period_text)
}

fn next(recurrence: &Recurrence, t: &str) -> String {
    text(recurrence.next_after(at(t)))
}

fn latest(recurrence: &Recurrence, t: &str) -> String {
    text(recurrence.latest_at_or_before(at(t)))
}

fn between(recurrence: &Recurrence, from: &str, to: &str, limit: usize) -> Vec<String> {
    recurrence
        .starts_between(at(from), at(to), limit)
        .into_iter()
        .map(period_text)
        .collect()
}

/// The fields and messages of a refused cron pattern.
fn refused(pattern: &str, time_zone: Option<&str>) -> Vec<(String, String)> {
    match Recurrence::cron(pattern, time_zone) {
        Err(errors) => errors.into_iter().map(|e| (e.field, e.message)).collect(),
        Ok(recurrence) => panic!("`{pattern}` in {time_zone:?} accepted: {recurrence:?}"),
    }
}

#[test]
fn a_five_field_pattern_starts_on_the_wall_clock_of_utc() {
    let hourly = cron("0 * * * *", "UTC");
    assert_eq!(
        next(&hourly, "2026-11-30T10:15:00Z"),
        "2026-11-30T11:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T10:15:00Z"),
        "2026-11-30T10:00:00Z"
    );
    // Exactly at a start: the next is the following one, the latest is that one.
    assert_eq!(
        next(&hourly, "2026-11-30T11:00:00Z"),
        "2026-11-30T12:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T11:00:00Z"),
        "2026-11-30T11:00:00Z"
    );
    // Milliseconds around a start.
    assert_eq!(
        next(&hourly, "2026-11-30T10:59:59.999Z"),
        "2026-11-30T11:00:00Z"
    );
    assert_eq!(
        next(&hourly, "2026-11-30T11:00:00.001Z"),
        "2026-11-30T12:00:00Z"
    );
    assert_eq!(
        next(&hourly, "2026-11-30T11:00:00.999Z"),
        "2026-11-30T12:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T11:00:00.500Z"),
        "2026-11-30T11:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T10:59:59.999Z"),
        "2026-11-30T10:00:00Z"
    );
}

#[test]
fn a_six_field_pattern_starts_on_seconds() {
    let ten_seconds = cron("*/10 * * * * *", "UTC");
    assert_eq!(
        next(&ten_seconds, "2026-11-30T10:15:00Z"),
        "2026-11-30T10:15:10Z"
    );
    assert_eq!(
        next(&ten_seconds, "2026-11-30T10:15:05.250Z"),
        "2026-11-30T10:15:10Z"
    );
    assert_eq!(
        next(&ten_seconds, "2026-11-30T10:15:59Z"),
        "2026-11-30T10:16:00Z"
    );
    assert_eq!(
        latest(&ten_seconds, "2026-11-30T10:15:09.999Z"),
        "2026-11-30T10:15:00Z"
    );
    assert_eq!(
        latest(&ten_seconds, "2026-11-30T10:15:10Z"),
        "2026-11-30T10:15:10Z"
    );
    assert_eq!(
        between(
            &ten_seconds,
            "2026-11-30T10:15:00Z",
            "2026-11-30T10:15:30Z",
            10
        ),
        [
            "2026-11-30T10:15:10Z",
            "2026-11-30T10:15:20Z",
            "2026-11-30T10:15:30Z"
        ]
    );
}

#[test]
fn starts_between_keeps_to_its_bounds_and_limit() {
    let hourly = cron("0 * * * *", "UTC");
    let (from, to) = ("2026-11-30T10:00:00Z", "2026-11-30T13:00:00Z");
    let all = [
        "2026-11-30T11:00:00Z",
        "2026-11-30T12:00:00Z",
        "2026-11-30T13:00:00Z",
    ];
    assert_eq!(between(&hourly, from, to, 10), all);
    assert_eq!(between(&hourly, from, to, 3), all);
    assert_eq!(between(&hourly, from, to, 2), all[..2]);
    assert!(between(&hourly, from, to, 0).is_empty());
    assert_eq!(
        between(&hourly, from, "2026-11-30T12:59:59.999Z", 10),
        all[..2]
    );
    assert!(between(&hourly, from, from, 10).is_empty());
    assert!(between(&hourly, to, from, 10).is_empty());
    assert!(
        between(
            &hourly,
            "2026-11-30T10:00:00.001Z",
            "2026-11-30T10:59:59Z",
            10
        )
        .is_empty()
    );
}

#[test]
fn nicknames_and_names_parse_and_the_pattern_is_kept_as_given() {
    let by_nickname = cron("@hourly", "UTC");
    assert_eq!(
        next(&by_nickname, "2026-11-30T10:15:00Z"),
        "2026-11-30T11:00:00Z"
    );
    assert_eq!(
        next(&cron("@DAILY", "UTC"), "2026-11-30T10:15:00Z"),
        "2026-12-01T00:00:00Z"
    );
    let named = cron("0 9 * JAN-MAR MON-FRI", "UTC");
    assert_eq!(next(&named, "2026-11-30T10:15:00Z"), "2027-01-01T09:00:00Z");
    let last_friday = cron("0 9 * * 5#L", "UTC");
    assert_eq!(
        next(&last_friday, "2026-11-01T00:00:00Z"),
        "2026-11-27T09:00:00Z"
    );

    let Ok(Recurrence::Cron(zoned)) = Recurrence::cron("30 2 * * *", None) else {
        panic!("a pattern without a zone is taken in UTC");
    };
    assert_eq!(zoned.pattern(), "30 2 * * *");
    assert_eq!(zoned.time_zone(), "UTC");
    assert_eq!(
        Recurrence::cron("30 2 * * *", Some("UTC")),
        Recurrence::cron("30 2 * * *", None)
    );
    assert_ne!(
        Recurrence::cron("30 2 * * *", Some("UTC")),
        Recurrence::cron("30 2 * * *", Some("Europe/Berlin"))
    );
}

#[test]
fn a_bad_pattern_or_zone_names_its_field() {
    let cases: [(&str, Option<&str>, &[&str], &str); 16] = [
        ("* * * *", None, &["cron"], "it has 4 fields"),
        (
            "0 0 0 * * * 2026",
            None,
            &["cron"],
            "it has 7 fields (a year field is not supported)",
        ),
        (
            "61 * * * *",
            None,
            &["cron"],
            "its minute field `61` is invalid",
        ),
        (
            "0 25 * * *",
            None,
            &["cron"],
            "its hour field `25` is invalid",
        ),
        (
            "0 0 0 32 * *",
            None,
            &["cron"],
            "its day-of-month field `32`",
        ),
        (
            "0 0 * 1 MON-XYZ",
            None,
            &["cron"],
            "its day-of-week field `MON-XYZ`",
        ),
        ("5/10 * * * *", None, &["cron"], "single number steps"),
        ("*/0 * * * *", None, &["cron"], "step cannot be zero"),
        ("garbage", None, &["cron"], "it has 1 field,"),
        ("@fortnightly", None, &["cron"], "the nicknames are @yearly"),
        ("", None, &["cron"], "not empty"),
        ("0 0 30 2 *", None, &["cron"], "is never due"),
        (
            "0 0 * * *",
            Some("Mars/Olympus"),
            &["time_zone"],
            "`Mars/Olympus` is not an IANA",
        ),
        (
            "0 0 * * *",
            Some(""),
            &["time_zone"],
            "must be an IANA time zone name (such as `UTC`",
        ),
        (
            "0 0 * * *",
            Some("europe/berlin"),
            &["time_zone"],
            "`Europe/Berlin`",
        ),
        (
            "0 0 * *",
            Some("+01:00"),
            &["cron", "time_zone"],
            "it has 4 fields",
        ),
    ];
    for (pattern, time_zone, fields, message) in cases {
        let errors = refused(pattern, time_zone);
        let named: Vec<&str> = errors.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(named, fields, "`{pattern}` in {time_zone:?}: {errors:?}");
        assert!(
            errors[0].1.contains(message),
            "`{pattern}` in {time_zone:?}: {:?} does not say {message:?}",
            errors[0].1
        );
    }
    assert_eq!(
        refused("0 25 * * *", None)[0].1,
        "`0 25 * * *` is not a cron pattern: its hour field `25` is invalid (number out of \
         bounds); it takes 0-23"
    );
    for not_a_name in ["Etc/Unknown", "+01:00", "UTC+1", "Z", "localtime"] {
        assert_eq!(
            refused("0 0 * * *", Some(not_a_name))[0].0,
            "time_zone",
            "{not_a_name}"
        );
    }
    let long = format!("0 0 * * {}", vec!["1"; MAX_CRON_LEN].join(","));
    assert!(
        refused(&long, None)[0]
            .1
            .starts_with("must be at most 512 bytes")
    );
}

// America/New_York springs forward on 2026-03-08: 02:00 EST (07:00Z) is 03:00 EDT.

#[test]
fn a_fixed_time_in_the_spring_gap_starts_when_the_gap_ends() {
    let at_2_30 = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        between(&at_2_30, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z", 10),
        [
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT, the first instant after the gap
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ]
    );
    assert_eq!(
        next(&at_2_30, "2026-03-08T06:59:59.999Z"),
        "2026-03-08T07:00:00Z"
    );
    assert_eq!(
        next(&at_2_30, "2026-03-08T07:00:00Z"),
        "2026-03-09T06:30:00Z"
    );
    assert_eq!(
        latest(&at_2_30, "2026-03-08T07:00:00Z"),
        "2026-03-08T07:00:00Z"
    );
    assert_eq!(
        latest(&at_2_30, "2026-03-08T06:59:59.999Z"),
        "2026-03-07T07:30:00Z"
    );
    assert_eq!(
        latest(&at_2_30, "2026-03-09T06:29:59Z"),
        "2026-03-08T07:00:00Z"
    );
}

#[test]
fn an_interval_skips_the_wall_times_of_the_spring_gap() {
    let half_hourly = cron("*/30 * * * *", "America/New_York");
    assert_eq!(
        between(
            &half_hourly,
            "2026-03-08T05:45:00Z",
            "2026-03-08T08:00:00Z",
            10
        ),
        [
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T06:30:00Z", // 01:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT: no 02:00, no 02:30
            "2026-03-08T07:30:00Z", // 03:30 EDT
            "2026-03-08T08:00:00Z", // 04:00 EDT
        ]
    );
    assert_eq!(
        next(&half_hourly, "2026-03-08T06:30:00Z"),
        "2026-03-08T07:00:00Z"
    );
    assert_eq!(
        latest(&half_hourly, "2026-03-08T06:59:59.999Z"),
        "2026-03-08T06:30:00Z"
    );
}

// America/New_York falls back on 2026-11-01: 02:00 EDT (06:00Z) is 01:00 EST, so
// 01:00-01:59 happens twice: 05:00Z-05:59Z (EDT), then 06:00Z-06:59Z (EST).

#[test]
fn a_fixed_time_in_the_fall_overlap_starts_at_its_first_pass_only() {
    let at_1_30 = cron("30 1 * * *", "America/New_York");
    assert_eq!(
        between(&at_1_30, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z", 10),
        [
            "2026-10-31T05:30:00Z", // 01:30 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT, the first pass; not 06:30Z (EST)
            "2026-11-02T06:30:00Z", // 01:30 EST
        ]
    );
    assert_eq!(
        next(&at_1_30, "2026-11-01T05:30:00Z"),
        "2026-11-02T06:30:00Z"
    );
    assert_eq!(
        next(&at_1_30, "2026-11-01T06:15:00Z"),
        "2026-11-02T06:30:00Z"
    );
    assert_eq!(
        latest(&at_1_30, "2026-11-01T06:30:00Z"),
        "2026-11-01T05:30:00Z"
    );
    assert_eq!(
        latest(&at_1_30, "2026-11-01T06:45:00Z"),
        "2026-11-01T05:30:00Z"
    );
}

#[test]
fn an_interval_starts_at_both_passes_of_the_fall_overlap() {
    let half_hourly = cron("*/30 * * * *", "America/New_York");
    assert_eq!(
        between(
            &half_hourly,
            "2026-11-01T04:45:00Z",
            "2026-11-01T07:00:00Z",
            10
        ),
        [
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ]
    );
    // From within either pass, to the millisecond.
    assert_eq!(
        next(&half_hourly, "2026-11-01T05:30:00Z"),
        "2026-11-01T06:00:00Z"
    );
    assert_eq!(
        next(&half_hourly, "2026-11-01T05:30:00.500Z"),
        "2026-11-01T06:00:00Z"
    );
    assert_eq!(
        next(&half_hourly, "2026-11-01T06:15:00Z"),
        "2026-11-01T06:30:00Z"
    );
    assert_eq!(
        next(&half_hourly, "2026-11-01T06:30:00.500Z"),
        "2026-11-01T07:00:00Z"
    );
    assert_eq!(
        latest(&half_hourly, "2026-11-01T05:45:00Z"),
        "2026-11-01T05:30:00Z"
    );
    assert_eq!(
        latest(&half_hourly, "2026-11-01T06:15:00Z"),
        "2026-11-01T06:00:00Z"
    );
    assert_eq!(
        latest(&half_hourly, "2026-11-01T06:59:59.999Z"),
        "2026-11-01T06:30:00Z"
    );
}

#[test]
fn berlin_springs_forward_and_falls_back_alike() {
    // 2026-03-29: 02:00 CET (01:00Z) is 03:00 CEST.
    let at_2_30 = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        between(&at_2_30, "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z", 10),
        [
            "2026-03-28T01:30:00Z", // 02:30 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST
            "2026-03-30T00:30:00Z", // 02:30 CEST
        ]
    );
    // 2026-10-25: 03:00 CEST (01:00Z) is 02:00 CET, so 02:00-02:59 happens twice.
    let in_hour_2 = cron("*/30 2 * * *", "Europe/Berlin");
    assert_eq!(
        between(
            &in_hour_2,
            "2026-10-24T12:00:00Z",
            "2026-10-26T12:00:00Z",
            10
        ),
        [
            "2026-10-25T00:00:00Z", // 02:00 CEST
            "2026-10-25T00:30:00Z", // 02:30 CEST
            "2026-10-25T01:00:00Z", // 02:00 CET
            "2026-10-25T01:30:00Z", // 02:30 CET
            "2026-10-26T01:00:00Z", // 02:00 CET
            "2026-10-26T01:30:00Z", // 02:30 CET
        ]
    );
    assert_eq!(
        between(&at_2_30, "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z", 10),
        ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    );
}

#[test]
fn lord_howe_repeats_half_an_hour() {
    // 2026-04-05: 02:00 LHDT (+11:00, 15:00Z the day before) is 01:30 LHST (+10:30).
    let half_hourly = cron("*/30 * * * *", "Australia/Lord_Howe");
    assert_eq!(
        between(
            &half_hourly,
            "2026-04-04T13:45:00Z",
            "2026-04-04T15:30:00Z",
            10
        ),
        [
            "2026-04-04T14:00:00Z", // 01:00 LHDT
            "2026-04-04T14:30:00Z", // 01:30 LHDT
            "2026-04-04T15:00:00Z", // 01:30 LHST
            "2026-04-04T15:30:00Z", // 02:00 LHST
        ]
    );
    // Asked from 01:59:59.999 LHDT, croner itself answers 01:30 LHST, in the future.
    assert_eq!(
        latest(&half_hourly, "2026-04-04T14:59:59.999Z"),
        "2026-04-04T14:30:00Z"
    );
    assert_eq!(
        next(&half_hourly, "2026-04-04T14:59:59.999Z"),
        "2026-04-04T15:00:00Z"
    );
    assert_eq!(
        latest(&half_hourly, "2026-04-04T15:00:00.001Z"),
        "2026-04-04T15:00:00Z"
    );
}

/// Every question agrees with one forward run of starts, at and around each start and
/// on a grid of odd instants, across the four changes above and Lord Howe Island's,
/// whose clock moves by half an hour (2026-04-05: 02:00 LHDT is 01:30 LHST, 15:00Z the
/// day before; 2026-10-04: 02:00 LHST is 02:30 LHDT, 15:30Z the day before).
#[test]
fn the_three_questions_agree_across_daylight_saving_changes() {
    let changes = [
        ("America/New_York", "2026-03-07T20:00:00Z"),
        ("America/New_York", "2026-10-31T20:00:00Z"),
        ("Europe/Berlin", "2026-03-28T12:00:00Z"),
        ("Europe/Berlin", "2026-10-24T12:00:00Z"),
        ("Australia/Lord_Howe", "2026-04-04T04:00:00Z"),
        ("Australia/Lord_Howe", "2026-10-03T04:00:00Z"),
    ];
    let patterns = [
        "30 2 * * *",
        "30 1 * * *",
        "45 1 * * *",
        "15 2 * * *",
        "*/30 * * * *",
        "15 1-2 * * *",
        "0 */20 1-3 * * *",
        "59 59 1 * * *",
    ];
    for (zone, from) in changes {
        let from = at(from);
        let to = from.plus_ms(24 * 3_600_000);
        for pattern in patterns {
            let recurrence = cron(pattern, zone);
            let starts = recurrence.starts_between(from, to, 1_000);
            assert!(
                starts.windows(2).all(|w| w[0] < w[1]),
                "{pattern} in {zone}"
            );
            let mut probes: Vec<Timestamp> = starts
                .iter()
                .flat_map(|s| [s.minus_ms(1), *s, s.plus_ms(1), s.plus_ms(999)])
                .collect();
            let mut t = from.plus_ms(3_600_000);
            while t < to.minus_ms(3_600_000) {
                probes.push(t);
                t = t.plus_ms(13 * 60_000 + 7_250);
            }
            for t in probes.into_iter().filter(|t| *t > from && *t < to) {
                let context = format!("`{pattern}` in {zone} at {}", t.to_rfc3339());
                let rest: Vec<Timestamp> = starts.iter().filter(|s| **s > t).copied().collect();
                if let Some(next) = rest.first() {
                    assert_eq!(recurrence.next_after(t), Some(*next), "next, {context}");
                    let three = &rest[..rest.len().min(3)];
                    assert_eq!(recurrence.starts_between(t, to, 3), three, "{context}");
                }
                if let Some(latest) = starts.iter().rev().find(|s| **s <= t) {
                    assert_eq!(
                        recurrence.latest_at_or_before(t),
                        Some(*latest),
                        "{context}"
                    );
                }
            }
        }
    }
}

#[test]
fn cron_periods_end_at_croners_horizon_and_the_api_range() {
    let new_year = cron("0 0 1 1 *", "UTC");
    assert_eq!(
        next(&new_year, "4999-06-01T00:00:00Z"),
        "5000-01-01T00:00:00Z"
    );
    assert_eq!(next(&new_year, "5000-01-01T00:00:00Z"), "none");
    assert_eq!(text(new_year.next_after(Timestamp::MAX)), "none");
    assert_eq!(
        text(new_year.next_after(Timestamp::from_millis(i64::MAX))),
        "none"
    );
    assert_eq!(
        text(new_year.latest_at_or_before(Timestamp::MAX)),
        "5000-01-01T00:00:00Z"
    );
    assert_eq!(
        text(new_year.latest_at_or_before(Timestamp::from_millis(i64::MAX))),
        "5000-01-01T00:00:00Z"
    );
    assert_eq!(
        text(new_year.next_after(Timestamp::from_millis(i64::MIN))),
        "0001-01-01T00:00:00Z"
    );
    assert_eq!(
        text(new_year.latest_at_or_before(Timestamp::MIN)),
        "0001-01-01T00:00:00Z"
    );
    assert_eq!(
        text(new_year.latest_at_or_before(Timestamp::MIN.minus_ms(1))),
        "none"
    );
    assert_eq!(
        new_year
            .starts_between(at("4990-06-01T00:00:00Z"), Timestamp::MAX, 100)
            .len(),
        10
    );
}

#[test]
fn an_interval_counts_whole_multiples_from_its_anchor() {
    let hourly = every(3_600_000, "2026-11-30T00:00:00Z");
    assert_eq!(
        next(&hourly, "2026-11-30T10:15:00Z"),
        "2026-11-30T11:00:00Z"
    );
    assert_eq!(
        next(&hourly, "2026-11-30T11:00:00Z"),
        "2026-11-30T12:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T10:15:00Z"),
        "2026-11-30T10:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-30T11:00:00Z"),
        "2026-11-30T11:00:00Z"
    );
    // Before the anchor: negative multiples.
    assert_eq!(
        next(&hourly, "2026-11-29T22:30:00Z"),
        "2026-11-29T23:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-29T22:30:00Z"),
        "2026-11-29T22:00:00Z"
    );
    assert_eq!(
        latest(&hourly, "2026-11-29T23:59:59.999Z"),
        "2026-11-29T23:00:00Z"
    );
    assert_eq!(
        between(&hourly, "2026-11-29T22:00:00Z", "2026-11-30T02:00:00Z", 3),
        [
            "2026-11-29T23:00:00Z",
            "2026-11-30T00:00:00Z",
            "2026-11-30T01:00:00Z"
        ]
    );
    // An anchor with milliseconds keeps them.
    let seconds = every(1_000, "2026-11-30T00:00:00.250Z");
    assert_eq!(
        next(&seconds, "2026-11-30T10:15:00Z"),
        "2026-11-30T10:15:00.250Z"
    );
    assert_eq!(
        next(&seconds, "2026-11-30T10:15:00.250Z"),
        "2026-11-30T10:15:01.250Z"
    );
    assert_eq!(
        latest(&seconds, "2026-11-30T10:15:00.249Z"),
        "2026-11-30T10:14:59.250Z"
    );
}

#[test]
fn an_interval_is_one_second_to_366_days() {
    let anchor = at("2026-11-30T00:00:00Z");
    for bad in [0, 1, MIN_EVERY_MS - 1, MAX_EVERY_MS + 1, u64::MAX] {
        let error = Recurrence::every(bad, anchor).unwrap_err();
        assert_eq!(error.field, "every_ms", "{bad}");
        assert_eq!(
            error.message,
            "must be 1000 (1 s) to 31622400000 (366 days) milliseconds"
        );
    }
    for good in [MIN_EVERY_MS, MAX_EVERY_MS] {
        let Ok(Recurrence::Every(interval)) = Recurrence::every(good, anchor) else {
            panic!("{good} refused");
        };
        assert_eq!((interval.every_ms(), interval.anchor()), (good, anchor));
    }
    assert_eq!(MAX_EVERY_MS, 31_622_400_000);
}

#[test]
fn interval_periods_stay_within_the_api_range() {
    let last = Recurrence::every(1_000, Timestamp::MAX).unwrap();
    assert_eq!(
        last.next_after(Timestamp::MAX.minus_ms(1)),
        Some(Timestamp::MAX)
    );
    assert_eq!(last.next_after(Timestamp::MAX), None);
    assert_eq!(last.next_after(Timestamp::from_millis(i64::MAX)), None);
    assert_eq!(
        last.latest_at_or_before(Timestamp::from_millis(i64::MAX)),
        Some(Timestamp::MAX)
    );
    assert_eq!(
        last.starts_between(
            Timestamp::MAX.minus_ms(2_500),
            Timestamp::from_millis(i64::MAX),
            10
        ),
        [
            Timestamp::MAX.minus_ms(2_000),
            Timestamp::MAX.minus_ms(1_000),
            Timestamp::MAX
        ]
    );

    let first = Recurrence::every(1_000, Timestamp::MIN).unwrap();
    assert_eq!(
        first.next_after(Timestamp::from_millis(i64::MIN)),
        Some(Timestamp::MIN)
    );
    assert_eq!(
        first.latest_at_or_before(Timestamp::MIN),
        Some(Timestamp::MIN)
    );
    assert_eq!(first.latest_at_or_before(Timestamp::MIN.minus_ms(1)), None);
    assert_eq!(
        first.latest_at_or_before(Timestamp::from_millis(i64::MIN)),
        None
    );

    // The farthest anchor from the farthest question, without overflow.
    let far = Recurrence::every(MAX_EVERY_MS, Timestamp::from_millis(i64::MIN)).unwrap();
    assert!(far.next_after(Timestamp::from_millis(i64::MAX)).is_none());
    let start = far.latest_at_or_before(Timestamp::MAX).unwrap();
    let after_start = i128::from(start.as_millis()) + i128::from(MAX_EVERY_MS);
    assert!(start <= Timestamp::MAX && after_start > i128::from(Timestamp::MAX.as_millis()));
}

#[test]
fn an_event_id_template_needs_its_placeholder_and_room_for_it() {
    let error = check_event_id_template("report:daily").unwrap_err();
    assert_eq!(error.field, "event_id");
    assert!(
        error.message.contains("must contain `{period_start}`"),
        "{}",
        error.message
    );

    // 232 characters and the placeholder fill to 256, the most an event id has.
    let longest = format!("{}{PERIOD_START}", "r".repeat(232));
    assert!(check_event_id_template(&longest).is_ok());
    let error = check_event_id_template(&format!("r{longest}")).unwrap_err();
    assert_eq!(error.field, "event_id");
    assert!(
        error.message.contains("it would be 257"),
        "{}",
        error.message
    );

    let error = check_event_id_template("daily report:{period_start}").unwrap_err();
    assert_eq!(
        (error.field.as_str(), error.message.as_str()),
        (
            "event_id",
            "may only contain visible ASCII characters (no spaces)"
        )
    );
    assert!(check_event_id_template(PERIOD_START).is_ok());
    assert!(check_event_id_template("{period_start}:{period_start}").is_ok());
}

#[test]
fn filling_replaces_every_placeholder_with_the_period_text() {
    let start = at("2026-11-30T00:00:00Z");
    assert_eq!(
        fill_event_id("report:{period_start}:{period_start}", start),
        "report:2026-11-30T00:00:00Z:2026-11-30T00:00:00Z"
    );
    assert_eq!(fill_event_id("{period_start", start), "{period_start");
    assert_eq!(period_text(start), "2026-11-30T00:00:00Z");
    assert_eq!(period_text(start.plus_ms(250)), "2026-11-30T00:00:00.250Z");
    assert_eq!(
        period_text(Timestamp::from_millis(-250)),
        "1969-12-31T23:59:59.750Z"
    );
    assert_eq!(period_text(Timestamp::MAX).len(), MAX_PERIOD_TEXT_LEN);
}

fn instant() -> impl Strategy<Value = Timestamp> {
    (Timestamp::MIN.as_millis()..=Timestamp::MAX.as_millis()).prop_map(Timestamp::from_millis)
}

fn interval_ms() -> impl Strategy<Value = u64> {
    prop_oneof![
        MIN_EVERY_MS..=MIN_EVERY_MS * 10,
        MIN_EVERY_MS..=MAX_EVERY_MS,
        Just(MAX_EVERY_MS),
    ]
}

proptest! {
    #[test]
    fn an_interval_finds_the_neighbouring_multiples(
        every_ms in interval_ms(),
        anchor in instant(),
        t in instant(),
    ) {
        let recurrence = Recurrence::every(every_ms, anchor).unwrap();
        let ms = |at: Timestamp| i128::from(at.as_millis());
        let every = i128::from(every_ms);
        match recurrence.next_after(t) {
            Some(next) => {
                prop_assert!(next > t);
                prop_assert!(ms(next) - every <= ms(t));
                prop_assert_eq!((ms(next) - ms(anchor)) % every, 0);
                prop_assert_eq!(recurrence.starts_between(t, next, 2), vec![next]);
            }
            // The multiple after `t` is past the last instant the API can express.
            None => prop_assert!(ms(t) + every > ms(Timestamp::MAX)),
        }
        match recurrence.latest_at_or_before(t) {
            Some(latest) => {
                prop_assert!(latest <= t);
                prop_assert!(ms(latest) + every > ms(t));
                prop_assert_eq!((ms(latest) - ms(anchor)) % every, 0);
            }
            None => prop_assert!(ms(t) - every < ms(Timestamp::MIN)),
        }
    }
}
