//! The whole (state, event) table, the names, and properties of [`transition`].

use proptest::prelude::*;

use super::*;
use crate::testing::START;

/// The instant the tests happen at, [`START`], in epoch milliseconds.
const NOW: i64 = START.as_millis();

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// The pairs docs/DESIGN.md §2 allows, by event name.
const ALLOWED: [(JobState, &str); 14] = [
    (JobState::Scheduled, "claim"),
    (JobState::Retrying, "claim"),
    (JobState::InFlight, "delivered"),
    (JobState::InFlight, "retryable_failure"),
    (JobState::InFlight, "terminal_failure"),
    (JobState::InFlight, "lease_expired"),
    (JobState::InFlight, "released"),
    (JobState::Scheduled, "deadline_passed"),
    (JobState::Retrying, "deadline_passed"),
    (JobState::Scheduled, "cancel"),
    (JobState::Retrying, "cancel"),
    (JobState::Dead, "replay"),
    (JobState::Scheduled, "reschedule"),
    (JobState::Retrying, "retry_now"),
];

/// One event of each kind, its expected name, and an instant at which its guards pass
/// for [`table_job`].
fn every_event() -> [(JobEvent, &'static str, i64); 11] {
    [
        (
            JobEvent::Claim {
                lease_until: at(NOW + 30_000),
            },
            "claim",
            NOW,
        ),
        (JobEvent::Delivered, "delivered", NOW),
        (
            JobEvent::RetryableFailure {
                retry_at: at(NOW + 1_000),
            },
            "retryable_failure",
            NOW,
        ),
        (
            JobEvent::TerminalFailure {
                reason: DeadReason::NonRetryableResponse,
            },
            "terminal_failure",
            NOW,
        ),
        (JobEvent::LeaseExpired, "lease_expired", NOW),
        (JobEvent::Released, "released", NOW),
        (JobEvent::DeadlinePassed, "deadline_passed", NOW + 10_000),
        (JobEvent::Cancel, "cancel", NOW),
        (
            JobEvent::Replay {
                deadline: at(NOW + 60_000),
            },
            "replay",
            NOW,
        ),
        (
            JobEvent::Reschedule {
                deliver_at: at(NOW + 1_000),
                deadline: at(NOW + 60_000),
            },
            "reschedule",
            NOW,
        ),
        (JobEvent::RetryNow, "retry_now", NOW),
    ]
}

fn table_job(state: JobState) -> JobSnapshot {
    JobSnapshot {
        state,
        attempts: 1,
        max_attempts: Some(5),
        due_at: Some(at(NOW - 1_000)),
        deadline: at(NOW + 10_000),
    }
}

#[test]
fn every_state_event_pair_is_allowed_or_not_allowed() {
    let mut allowed = 0;
    for state in JobState::ALL {
        for (event, name, now) in every_event() {
            assert_eq!(event.name(), name);
            let got = transition(&table_job(state), event, at(now));
            if ALLOWED.contains(&(state, name)) {
                allowed += 1;
                assert!(got.is_ok(), "{state} + {name}: {got:?}");
                continue;
            }
            let want = TransitionError::NotAllowed {
                from: state,
                event: name,
            };
            // The state is checked before any guard, whatever the time and due_at.
            for now in [now, i64::MIN, NOW - 86_400_000, NOW + 86_400_000, i64::MAX] {
                for due_at in [None, Some(at(NOW)), Some(at(i64::MAX))] {
                    let job = JobSnapshot {
                        due_at,
                        ..table_job(state)
                    };
                    let got = transition(&job, event, at(now));
                    assert_eq!(got, Err(want), "{state} + {name} at {now}");
                }
            }
        }
    }
    assert_eq!(allowed, ALLOWED.len());
}

#[test]
fn not_allowed_names_the_state_and_the_event() {
    let err = transition(&table_job(JobState::Delivered), JobEvent::Cancel, at(NOW));
    let text = err.unwrap_err().to_string();
    assert_eq!(text, "`cancel` is not allowed when the job is delivered");
}

#[test]
fn job_state_names_round_trip() {
    for state in JobState::ALL {
        assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        assert_eq!(state.to_string(), state.as_str());
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(json, format!("\"{}\"", state.as_str()));
    }
    let names: Vec<_> = JobState::ALL.iter().map(|s| s.as_str()).collect();
    let want = [
        "scheduled",
        "in_flight",
        "retrying",
        "delivered",
        "dead",
        "cancelled",
    ];
    assert_eq!(names, want);
    for bad in ["", "In_Flight", "inflight", " dead", "canceled"] {
        assert_eq!(bad.parse::<JobState>(), Err(UnknownName(bad.to_owned())));
    }
}

#[test]
fn terminal_states_are_delivered_dead_and_cancelled() {
    let terminal: Vec<_> = JobState::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .collect();
    let want = [JobState::Delivered, JobState::Dead, JobState::Cancelled];
    assert_eq!(terminal, want);
}

#[test]
fn dead_reason_names_round_trip() {
    for reason in DeadReason::ALL {
        assert_eq!(reason.as_str().parse::<DeadReason>(), Ok(reason));
        let json = serde_json::to_string(&reason).unwrap();
        assert_eq!(json, format!("\"{}\"", reason.as_str()));
    }
    let names: Vec<_> = DeadReason::ALL.iter().map(|r| r.as_str()).collect();
    let want = [
        "non_retryable_response",
        "deadline_exceeded",
        "max_attempts",
        "target_rejected",
        "subscriber_deleted",
    ];
    assert_eq!(names, want);
    for bad in ["", "Deadline_Exceeded", "expired"] {
        assert_eq!(bad.parse::<DeadReason>(), Err(UnknownName(bad.to_owned())));
    }
}

fn instant() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        (NOW - 50..NOW + 50),
        Just(i64::MIN),
        Just(i64::MAX),
        any::<i64>(),
    ]
    .prop_map(Timestamp::from_millis)
}

fn count() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..8, Just(u32::MAX), any::<u32>()]
}

fn snapshot() -> impl Strategy<Value = JobSnapshot> {
    let state = proptest::sample::select(JobState::ALL.to_vec());
    let max = proptest::option::of(count());
    let due = proptest::option::of(instant());
    (state, count(), max, due, instant()).prop_map(|(state, attempts, max, due, deadline)| {
        JobSnapshot {
            state,
            attempts,
            max_attempts: max,
            due_at: due,
            deadline,
        }
    })
}

fn event() -> impl Strategy<Value = JobEvent> {
    let reason = proptest::sample::select(DeadReason::ALL.to_vec());
    prop_oneof![
        instant().prop_map(|lease_until| JobEvent::Claim { lease_until }),
        Just(JobEvent::Delivered),
        instant().prop_map(|retry_at| JobEvent::RetryableFailure { retry_at }),
        reason.prop_map(|reason| JobEvent::TerminalFailure { reason }),
        Just(JobEvent::LeaseExpired),
        Just(JobEvent::Released),
        Just(JobEvent::DeadlinePassed),
        Just(JobEvent::Cancel),
        Just(JobEvent::RetryNow),
        instant().prop_map(|deadline| JobEvent::Replay { deadline }),
        (instant(), instant()).prop_map(|(deliver_at, deadline)| JobEvent::Reschedule {
            deliver_at,
            deadline
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_096))]

    #[test]
    fn transition_never_panics_and_keeps_its_invariants(
        job in snapshot(),
        event in event(),
        now in instant(),
    ) {
        match transition(&job, event, now) {
            Err(TransitionError::NotAllowed { from, event: name }) => {
                prop_assert_eq!(from, job.state);
                prop_assert_eq!(name, event.name());
            }
            Err(_) => {
                // A guard only ever refuses an event the state allows.
                let replay = matches!(event, JobEvent::Replay { .. });
                prop_assert!(!job.state.is_terminal() || (job.state == JobState::Dead && replay));
            }
            Ok(t) => {
                if job.state.is_terminal() {
                    // Only a replay leaves a terminal state, and only from dead.
                    prop_assert_eq!(job.state, JobState::Dead);
                    let replay = matches!(event, JobEvent::Replay { .. });
                prop_assert!(replay, "left {} by {}", job.state, event.name());
                    prop_assert_eq!(t.to, JobState::Scheduled);
                }
                prop_assert_eq!(t.to == JobState::Dead, t.dead_reason.is_some());
                prop_assert_eq!(t.to.is_terminal(), t.due_at.is_none());
                let claimed = matches!(event, JobEvent::Claim { .. });
                let attempts = if claimed { job.attempts.saturating_add(1) } else { job.attempts };
                prop_assert_eq!(t.attempts, attempts);
                let moves_deadline =
                    matches!(event, JobEvent::Replay { .. } | JobEvent::Reschedule { .. });
                if !moves_deadline {
                    prop_assert_eq!(t.deadline, job.deadline);
                }
                if matches!(t.to, JobState::Scheduled | JobState::Retrying) {
                    // A waiting job can always still be claimed before its deadline.
                    prop_assert!(t.due_at.is_some_and(|due| due < t.deadline));
                }
                if t.to == JobState::Retrying {
                    prop_assert!(job.max_attempts.is_none_or(|max| t.attempts < max));
                }
            }
        }
    }
}
