//! The rules of [`ReplayPlan::check`]: a filter or `all: true` alone, valid filters,
//! amounts within the server's limits, the default TTL.

use super::*;
use crate::domain::policy::ErrorClass;
use crate::domain::replay::ReplaySelection;
use crate::testing::START;

const LIMITS: ReplayLimits = ReplayLimits {
    max_rate_per_second: 100,
    default_ttl_ms: 86_400_000,
    min_ttl_ms: 30_000,
    max_jobs: 100_000,
};

/// Subscriber `s`'s dead jobs, 10 at most, 5 per second.
fn of_s() -> ReplayFields {
    ReplayFields {
        subscriber_id: Some("s".into()),
        max_jobs: 10,
        rate_per_second: 5,
        ..ReplayFields::default()
    }
}

fn invalid_fields(fields: ReplayFields) -> Vec<String> {
    match ReplayPlan::check(fields, LIMITS) {
        Err(errors) => errors.into_iter().map(|e| e.field).collect(),
        Ok(plan) => panic!("expected invalid fields, got {plan:?}"),
    }
}

#[test]
fn a_filtered_replay_takes_the_default_ttl_and_the_server_budget() {
    let plan = ReplayPlan::check(of_s(), LIMITS).unwrap();
    assert_eq!(
        plan,
        ReplayPlan {
            filter: ReplayFilter {
                subscriber_id: Some("s".into()),
                ..ReplayFilter::default()
            },
            max_jobs: 10,
            rate_per_second: 5,
            ttl_ms: 86_400_000,
            rate_budget: 100,
        }
    );
}

#[test]
fn instants_are_parsed_and_ordered() {
    let fields = ReplayFields {
        dead_after: Some("2026-11-30T12:00:00Z".into()),
        dead_before: Some("2026-11-30T13:00:00+01:00".into()),
        ..of_s()
    };
    assert_eq!(invalid_fields(fields), vec!["dead_before"]);
    let fields = ReplayFields {
        subscriber_id: None,
        dead_after: Some("2026-11-30T12:00:00Z".into()),
        ..of_s()
    };
    let plan = ReplayPlan::check(fields, LIMITS).unwrap();
    assert_eq!(plan.filter.dead_after, Some(START));
}

#[test]
fn a_filter_or_all_alone_is_required() {
    let nothing = ReplayFields {
        subscriber_id: None,
        ..of_s()
    };
    assert_eq!(invalid_fields(nothing.clone()), vec!["all"]);
    let all = ReplayFields {
        all: Some(true),
        ..nothing
    };
    assert!(ReplayPlan::check(all, LIMITS).unwrap().filter.all);
    let both = ReplayFields {
        all: Some(true),
        ..of_s()
    };
    assert_eq!(invalid_fields(both), vec!["all"]);
}

#[test]
fn an_invalid_filter_still_counts_as_given() {
    let fields = ReplayFields {
        subscriber_id: Some("a b".into()),
        event_id: Some(String::new()),
        dead_after: Some("yesterday".into()),
        ..of_s()
    };
    assert_eq!(
        invalid_fields(fields),
        vec!["subscriber_id", "event_id", "dead_after"]
    );
}

#[test]
fn amounts_stay_within_the_limits() {
    let over = (100_001, 101, MAX_REPLAY_TTL_MS + 1);
    let under = (0, 0, 29_999);
    for (max_jobs, rate_per_second, ttl_ms) in [over, under] {
        let fields = ReplayFields {
            max_jobs,
            rate_per_second,
            ttl_ms: Some(ttl_ms),
            ..of_s()
        };
        assert_eq!(
            invalid_fields(fields),
            vec!["max_jobs", "rate_per_second", "ttl_ms"]
        );
    }
    let edges = ReplayFields {
        max_jobs: 100_000,
        rate_per_second: 100,
        ttl_ms: Some(30_000),
        ..of_s()
    };
    assert_eq!(ReplayPlan::check(edges, LIMITS).unwrap().ttl_ms, 30_000);
}

#[test]
fn a_slice_by_subscribers_class_and_status_narrows_alone() {
    let fields = ReplayFields {
        subscriber_id: None,
        subscriber_ids: Some(vec!["a".into(), "b".into()]),
        error_class: Some("http_5xx".into()),
        last_status: Some(503),
        ..of_s()
    };
    let filter = ReplayPlan::check(fields, LIMITS).unwrap().filter;
    assert_eq!(
        filter,
        ReplayFilter {
            subscriber_ids: vec!["a".into(), "b".into()],
            error_class: Some(ErrorClass::Http5xx),
            last_status: Some(503),
            ..ReplayFilter::default()
        }
    );
    for one in [
        ReplayFields {
            error_class: Some("timeout".into()),
            ..ReplayFields::default()
        },
        ReplayFields {
            last_status: Some(410),
            ..ReplayFields::default()
        },
    ] {
        let fields = ReplayFields {
            max_jobs: 1,
            rate_per_second: 1,
            ..one
        };
        assert!(ReplayPlan::check(fields, LIMITS).is_ok());
    }
}

#[test]
fn subscriber_ids_are_checked_as_a_list() {
    let ids = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>();
    let with = |list: Vec<String>| ReplayFields {
        subscriber_id: None,
        subscriber_ids: Some(list),
        ..of_s()
    };
    assert!(ReplayPlan::check(with(ids(MAX_REPLAY_SUBSCRIBERS)), LIMITS).is_ok());
    assert_eq!(
        invalid_fields(with(ids(MAX_REPLAY_SUBSCRIBERS + 1))),
        ["subscriber_ids"]
    );
    assert_eq!(invalid_fields(with(Vec::new())), ["subscriber_ids"]);
    assert_eq!(
        invalid_fields(with(vec!["a".into(), "b c".into(), "a".into()])),
        ["subscriber_ids[1]", "subscriber_ids[2]"]
    );
    let both = ReplayFields {
        subscriber_ids: Some(vec!["a".into()]),
        ..of_s()
    };
    assert_eq!(invalid_fields(both), ["subscriber_ids"]);
}

#[test]
fn an_unknown_class_or_a_status_out_of_range_is_named() {
    let fields = ReplayFields {
        error_class: Some("http_500".into()),
        last_status: Some(600),
        ..of_s()
    };
    assert_eq!(invalid_fields(fields), ["error_class", "last_status"]);
    for status in [99, -1, 70_000] {
        let fields = ReplayFields {
            last_status: Some(status),
            ..of_s()
        };
        assert_eq!(invalid_fields(fields), ["last_status"], "{status}");
    }
}

#[test]
fn a_retrying_selection_refuses_the_dead_only_fields() {
    let retrying = ReplayFields {
        selects: Some(ReplaySelection::Retrying),
        ..of_s()
    };
    let plan = ReplayPlan::check(retrying.clone(), LIMITS).unwrap();
    assert_eq!(plan.filter.selects, ReplaySelection::Retrying);
    let fields = ReplayFields {
        dead_reason: Some(DeadReason::MaxAttempts),
        dead_after: Some("2026-11-30T12:00:00Z".into()),
        dead_before: Some("2026-11-30T13:00:00Z".into()),
        ttl_ms: Some(60_000),
        ..retrying
    };
    assert_eq!(
        invalid_fields(fields),
        ["dead_reason", "dead_after", "dead_before", "ttl_ms"]
    );
    let all = ReplayFields {
        selects: Some(ReplaySelection::Retrying),
        subscriber_id: None,
        all: Some(true),
        ..of_s()
    };
    assert!(ReplayPlan::check(all, LIMITS).unwrap().filter.all);
}
