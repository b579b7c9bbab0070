//! Backoff, Retry-After, classification and the error-class names.

use proptest::prelude::*;

use super::*;
use crate::domain::names::UnknownName;
use crate::testing::START;

/// The instant the tests happen at, [`START`], in epoch milliseconds.
const NOW: i64 = START.as_millis();

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// The capped nominal delay, computed independently in u128.
fn nominal(policy: &BackoffPolicy, attempt: u32) -> u64 {
    let doublings = attempt.max(1) - 1;
    let uncapped = if policy.base_ms == 0 {
        0
    } else if doublings >= 64 {
        u128::MAX
    } else {
        u128::from(policy.base_ms) << doublings
    };
    uncapped.min(u128::from(policy.max_ms)) as u64
}

#[test]
fn default_is_one_second_doubling_up_to_an_hour() {
    let policy = BackoffPolicy::default();
    assert_eq!((policy.base_ms, policy.max_ms), (1_000, 3_600_000));
    let lowest: Vec<_> = (1..=14).map(|a| policy.delay_ms(a, 0.0)).collect();
    let want = [
        500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000,
        1_024_000, 1_800_000, 1_800_000,
    ];
    assert_eq!(lowest, want);
    assert_eq!(policy.delay_ms(3, 0.5), 3_000);
    assert_eq!(policy.delay_ms(0, 0.0), policy.delay_ms(1, 0.0));
    assert_eq!(policy.delay_ms(1, 0.999_999), 999);
}

#[test]
fn jitter_outside_zero_one_is_clamped() {
    let policy = BackoffPolicy::default();
    for jitter in [-1.0, f64::NEG_INFINITY, f64::NAN] {
        assert_eq!(policy.delay_ms(2, jitter), 1_000, "{jitter}");
    }
    for jitter in [1.0, 7.5, f64::INFINITY] {
        let delay = policy.delay_ms(2, jitter);
        assert!((1_999..=2_000).contains(&delay), "{jitter}: {delay}");
    }
}

#[test]
fn extreme_inputs_neither_overflow_nor_panic() {
    let values = [0, 1, 3, u64::MAX / 2, u64::MAX];
    let attempts = [0, 1, 2, 63, 64, 65, 1_000, u32::MAX];
    let jitters = [0.0, 0.5, 0.999_999_999, 1.0, -3.0, f64::NAN, f64::INFINITY];
    for base_ms in values {
        for max_ms in values {
            let policy = BackoffPolicy { base_ms, max_ms };
            for attempt in attempts {
                let d = nominal(&policy, attempt);
                for jitter in jitters {
                    let delay = policy.delay_ms(attempt, jitter);
                    assert!(delay >= d / 2 && delay <= d && delay <= max_ms);
                }
            }
        }
    }
    let policy = BackoffPolicy::default();
    assert_eq!(policy.delay_ms(1_000, 0.0), 1_800_000);
    assert_eq!(policy.delay_ms(u32::MAX, 0.0), 1_800_000);
}

#[test]
fn retry_after_seconds() {
    let now = at(NOW);
    let cases = [
        ("3", NOW + 3_000),
        ("0", NOW),
        (" 120\t", NOW + 120_000),
        ("86400", NOW + 86_400_000),
        ("007", NOW + 7_000),
    ];
    for (value, want) in cases {
        assert_eq!(parse_retry_after(value, now), Some(at(want)), "{value:?}");
    }
    let huge = "99999999999999999999999999999999";
    assert_eq!(parse_retry_after(huge, now), Some(Timestamp::MAX));
    assert_eq!(
        parse_retry_after("18446744073709551615", now),
        Some(Timestamp::MAX)
    );
}

#[test]
fn retry_after_garbage_is_none() {
    let bad = [
        "",
        " ",
        "abc",
        "-1",
        "+3",
        "1.5",
        "1e3",
        "3 s",
        "0x10",
        "３",
        "3,4",
        "Sun, 32 Nov 1994 08:49:37 GMT", // no such day
        "Mon, 06 Nov 1994 08:49:37 GMT", // wrong weekday
        "2026-11-30T12:00:00Z",
    ];
    for value in bad {
        assert_eq!(parse_retry_after(value, at(NOW)), None, "{value:?}");
    }
}

#[test]
fn retry_after_http_date_in_all_three_forms() {
    let date = at(784_111_777_000); // Sun, 06 Nov 1994 08:49:37 GMT
    let now = at(784_111_773_000); // 4 s earlier (CASES C-05)
    let forms = [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ];
    for value in forms {
        assert_eq!(parse_retry_after(value, now), Some(date), "{value:?}");
    }
    let latest = "Fri, 31 Dec 9999 23:59:59 GMT";
    assert_eq!(
        parse_retry_after(latest, now),
        Some(at(253_402_300_799_000))
    );
}

#[test]
fn retry_after_date_in_the_past_is_now() {
    let value = "Sun, 06 Nov 1994 08:49:37 GMT";
    assert_eq!(parse_retry_after(value, at(NOW)), Some(at(NOW)));
}

#[test]
fn next_attempt_honours_a_later_retry_after_whatever_the_jitter() {
    // CASES C-05: base 200 ms, `429` with `Retry-After: 3`.
    let backoff = BackoffPolicy {
        base_ms: 200,
        max_ms: 3_600_000,
    };
    let retry_after = parse_retry_after("3", at(NOW));
    for jitter in [0.0, 0.5, 0.999_999] {
        let next = next_attempt_at(at(NOW), 1, &backoff, retry_after, jitter);
        assert_eq!(next, at(NOW + 3_000));
    }
}

#[test]
fn next_attempt_uses_the_backoff_when_it_is_later_or_alone() {
    let backoff = BackoffPolicy::default();
    let early = Some(at(NOW + 10));
    assert_eq!(
        next_attempt_at(at(NOW), 3, &backoff, early, 0.0),
        at(NOW + 2_000)
    );
    assert_eq!(
        next_attempt_at(at(NOW), 3, &backoff, None, 0.5),
        at(NOW + 3_000)
    );
    let past = Some(at(NOW - 60_000));
    assert_eq!(
        next_attempt_at(at(NOW), 1, &backoff, past, 0.0),
        at(NOW + 500)
    );
}

#[test]
fn error_class_names_round_trip_and_match_serde() {
    let names: Vec<_> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
    let want = [
        "timeout",
        "connect",
        "http_3xx",
        "http_4xx",
        "http_429",
        "http_5xx",
        "protocol",
        "blocked",
        "secret_unreadable",
    ];
    assert_eq!(names, want);
    for class in ErrorClass::ALL {
        assert_eq!(class.as_str().parse::<ErrorClass>(), Ok(class));
        assert_eq!(class.to_string(), class.as_str());
        let json = serde_json::to_string(&class).unwrap();
        assert_eq!(json, format!("\"{}\"", class.as_str()));
    }
    for bad in ["", "http3xx", "HTTP_5XX", "5xx"] {
        assert_eq!(bad.parse::<ErrorClass>(), Err(UnknownName(bad.to_owned())));
    }
}

#[test]
fn serde_snake_case_alone_would_say_http3xx() {
    // Why ErrorClass renames each variant: snake_case puts no `_` before a digit.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Probe {
        Http3xx,
    }
    assert_eq!(
        serde_json::to_string(&Probe::Http3xx).unwrap(),
        "\"http3xx\""
    );
}

#[test]
fn error_class_schema_lists_the_wire_names() {
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(ErrorClass::schema()).unwrap();
    let values = schema["enum"].as_array().expect("an enum schema");
    let names: Vec<_> = values.iter().filter_map(|v| v.as_str()).collect();
    let want: Vec<_> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(names, want);
}

/// The expected verdict, written from the status class rather than from ranges.
fn expected_verdict(status: u16) -> Verdict {
    use ErrorClass::*;
    let retryable_4xx = [408, 425];
    match status / 100 {
        2 => Verdict::Delivered,
        3 => Verdict::Terminal(Http3xx),
        4 if status == 429 => Verdict::Retryable(Http429),
        4 if retryable_4xx.contains(&status) => Verdict::Retryable(Http4xx),
        4 => Verdict::Terminal(Http4xx),
        5 => Verdict::Retryable(Http5xx),
        _ => Verdict::Retryable(Http5xx), // protocol violation
    }
}

#[test]
fn every_status_from_100_to_699_is_classified() {
    for status in 100..=699 {
        assert_eq!(
            classify_status(status),
            expected_verdict(status),
            "{status}"
        );
    }
    let all: Vec<_> = (100..=699).map(classify_status).collect();
    let delivered = all.iter().filter(|v| **v == Verdict::Delivered).count();
    let terminal = all
        .iter()
        .filter(|v| matches!(v, Verdict::Terminal(_)))
        .count();
    assert_eq!(
        (delivered, terminal, all.len() - delivered - terminal),
        (100, 197, 303)
    );
}

#[test]
fn well_known_statuses() {
    use ErrorClass::*;
    let cases = [
        (200, Verdict::Delivered),
        (204, Verdict::Delivered),
        (302, Verdict::Terminal(Http3xx)),
        (308, Verdict::Terminal(Http3xx)),
        (400, Verdict::Terminal(Http4xx)),
        (404, Verdict::Terminal(Http4xx)),
        (410, Verdict::Terminal(Http4xx)),
        (408, Verdict::Retryable(Http4xx)),
        (425, Verdict::Retryable(Http4xx)),
        (429, Verdict::Retryable(Http429)),
        (500, Verdict::Retryable(Http5xx)),
        (503, Verdict::Retryable(Http5xx)),
        (101, Verdict::Retryable(Http5xx)),
        (0, Verdict::Retryable(Http5xx)),
        (700, Verdict::Retryable(Http5xx)),
        (u16::MAX, Verdict::Retryable(Http5xx)),
    ];
    for (status, want) in cases {
        assert_eq!(classify_status(status), want, "{status}");
    }
}

#[test]
fn transport_failures() {
    use TransportFailure as F;
    assert_eq!(
        classify_transport(F::Timeout),
        Verdict::Retryable(ErrorClass::Timeout)
    );
    assert_eq!(
        classify_transport(F::Connect),
        Verdict::Retryable(ErrorClass::Connect)
    );
    // Not valid HTTP: the receiver's fault, retried with the backoff like a 5xx.
    assert_eq!(
        classify_transport(F::Protocol),
        Verdict::Retryable(ErrorClass::Protocol)
    );
    assert_eq!(
        classify_transport(F::Blocked),
        Verdict::Terminal(ErrorClass::Blocked)
    );
}

fn millis() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..10_000_000, any::<u64>(), Just(u64::MAX)]
}

fn instant() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        Just(NOW),
        Timestamp::MIN.as_millis()..=Timestamp::MAX.as_millis(),
    ]
    .prop_map(Timestamp::from_millis)
}

proptest! {
    #[test]
    fn delay_lies_within_half_and_full_nominal(
        base_ms in millis(),
        max_ms in millis(),
        attempt in prop_oneof![0u32..80, any::<u32>()],
        jitter in 0.0f64..1.0,
    ) {
        let policy = BackoffPolicy { base_ms, max_ms };
        let d = nominal(&policy, attempt);
        let delay = policy.delay_ms(attempt, jitter);
        prop_assert!(delay >= d / 2, "{} < {}/2", delay, d);
        prop_assert!(delay <= d && delay <= max_ms);
        prop_assert!(policy.delay_ms(1_000, jitter) <= max_ms);
    }

    #[test]
    fn delay_never_shrinks_with_more_attempts_or_more_jitter(
        base_ms in millis(),
        max_ms in millis(),
        attempt in 0u32..100,
        jitter in 0.0f64..1.0,
        more in 0.0f64..1.0,
    ) {
        let policy = BackoffPolicy { base_ms, max_ms };
        prop_assert!(policy.delay_ms(attempt, jitter) <= policy.delay_ms(attempt + 1, jitter));
        let higher = (jitter + more).min(0.999_999);
        prop_assert!(policy.delay_ms(attempt, jitter) <= policy.delay_ms(attempt, higher));
    }

    #[test]
    fn retry_after_is_never_before_now(value in any::<String>(), now in instant()) {
        if let Some(at) = parse_retry_after(&value, now) {
            prop_assert!(at >= now);
        }
    }

    #[test]
    fn retry_after_digits_are_seconds(seconds in any::<u32>(), now in instant()) {
        let got = parse_retry_after(&seconds.to_string(), now);
        prop_assert_eq!(got, Some(now.plus_ms(u64::from(seconds) * 1_000)));
    }

    #[test]
    fn next_attempt_is_never_before_retry_after_or_the_backoff(
        now in instant(),
        attempt in 0u32..2_000,
        retry_after in proptest::option::of(instant()),
        jitter in 0.0f64..1.0,
    ) {
        let backoff = BackoffPolicy::default();
        let next = next_attempt_at(now, attempt, &backoff, retry_after, jitter);
        prop_assert!(next >= now);
        prop_assert!(retry_after.is_none_or(|at| next >= at));
        prop_assert!(next >= now.plus_ms(backoff.delay_ms(attempt, jitter)));
        prop_assert!(next == now.plus_ms(backoff.delay_ms(attempt, jitter)) || Some(next) == retry_after);
    }
}
