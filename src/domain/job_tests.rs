//! Every allowed transition and every guard of [`transition`], one test each.

use super::*;
use crate::testing::START;

/// The instant the tests happen at, [`START`], in epoch milliseconds.
const NOW: i64 = START.as_millis();

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// A job with 2 of 5 attempts used, its deadline 10 s after `NOW`.
fn job(state: JobState, due_at: Option<i64>) -> JobSnapshot {
    JobSnapshot {
        state,
        attempts: 2,
        max_attempts: Some(5),
        due_at: due_at.map(at),
        deadline: at(NOW + 10_000),
    }
}

/// What `job` becomes when nothing but the listed fields change.
fn expect(job: &JobSnapshot, to: JobState, due_at: Option<i64>) -> Transition {
    Transition {
        to,
        due_at: due_at.map(at),
        attempts: job.attempts,
        dead_reason: None,
        deadline: job.deadline,
        possible_duplicate: false,
    }
}

fn dead(job: &JobSnapshot, reason: DeadReason, possible_duplicate: bool) -> Transition {
    Transition {
        dead_reason: Some(reason),
        possible_duplicate,
        ..expect(job, JobState::Dead, None)
    }
}

const CLAIM: JobEvent = JobEvent::Claim {
    lease_until: Timestamp::from_millis(NOW + 30_000),
};

#[test]
fn claim_starts_an_attempt_from_scheduled_and_retrying() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        for due in [NOW - 5_000, NOW] {
            let j = job(state, Some(due));
            let want = Transition {
                attempts: 3,
                ..expect(&j, JobState::InFlight, Some(NOW + 30_000))
            };
            assert_eq!(
                transition(&j, CLAIM, at(NOW)),
                Ok(want),
                "{state} due {due}"
            );
        }
    }
}

#[test]
fn claim_saturates_the_attempt_count() {
    let j = JobSnapshot {
        attempts: u32::MAX,
        max_attempts: None,
        ..job(JobState::Retrying, Some(NOW))
    };
    assert_eq!(transition(&j, CLAIM, at(NOW)).unwrap().attempts, u32::MAX);
}

#[test]
fn delivered_ends_the_job() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    let got = transition(&j, JobEvent::Delivered, at(NOW));
    assert_eq!(got, Ok(expect(&j, JobState::Delivered, None)));
}

#[test]
fn retryable_failure_that_fits_waits_until_retry_at() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    for retry_at in [NOW + 2_000, NOW + 9_999] {
        let event = JobEvent::RetryableFailure {
            retry_at: at(retry_at),
        };
        let got = transition(&j, event, at(NOW));
        assert_eq!(got, Ok(expect(&j, JobState::Retrying, Some(retry_at))));
    }
}

#[test]
fn retryable_failure_with_a_past_retry_at_is_due_now() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    let event = JobEvent::RetryableFailure {
        retry_at: at(NOW - 1_000),
    };
    let got = transition(&j, event, at(NOW));
    assert_eq!(got, Ok(expect(&j, JobState::Retrying, Some(NOW))));
}

#[test]
fn terminal_failure_goes_dead_with_its_reason() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    for reason in DeadReason::ALL {
        let got = transition(&j, JobEvent::TerminalFailure { reason }, at(NOW));
        assert_eq!(got, Ok(dead(&j, reason, false)), "{reason:?}");
    }
}

#[test]
fn lease_expired_or_released_retries_now_as_a_possible_duplicate() {
    let j = job(JobState::InFlight, Some(NOW));
    for event in [JobEvent::LeaseExpired, JobEvent::Released] {
        let want = Transition {
            possible_duplicate: true,
            ..expect(&j, JobState::Retrying, Some(NOW))
        };
        assert_eq!(transition(&j, event, at(NOW)), Ok(want), "{event:?}");
    }
}

#[test]
fn deadline_passed_kills_a_waiting_job() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        let j = job(state, Some(NOW + 20_000));
        for now in [NOW + 10_000, NOW + 60_000] {
            let got = transition(&j, JobEvent::DeadlinePassed, at(now));
            assert_eq!(got, Ok(dead(&j, DeadReason::DeadlineExceeded, false)));
        }
    }
}

#[test]
fn cancel_ends_a_waiting_job() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        let j = job(state, Some(NOW + 1_000));
        let got = transition(&j, JobEvent::Cancel, at(NOW));
        assert_eq!(got, Ok(expect(&j, JobState::Cancelled, None)), "{state}");
    }
}

#[test]
fn replay_schedules_a_dead_job_now_with_the_new_deadline() {
    let j = job(JobState::Dead, None);
    let event = JobEvent::Replay {
        deadline: at(NOW + 3_600_000),
    };
    let want = Transition {
        deadline: at(NOW + 3_600_000),
        ..expect(&j, JobState::Scheduled, Some(NOW))
    };
    assert_eq!(transition(&j, event, at(NOW)), Ok(want));
}

#[test]
fn reschedule_moves_deliver_at_and_deadline() {
    let j = job(JobState::Scheduled, Some(NOW + 1_000));
    let event = JobEvent::Reschedule {
        deliver_at: at(NOW + 5_000),
        deadline: at(NOW + 50_000),
    };
    let want = Transition {
        deadline: at(NOW + 50_000),
        ..expect(&j, JobState::Scheduled, Some(NOW + 5_000))
    };
    assert_eq!(transition(&j, event, at(NOW)), Ok(want));
}

#[test]
fn reschedule_into_the_past_is_due_now() {
    let j = job(JobState::Scheduled, Some(NOW + 1_000));
    let event = JobEvent::Reschedule {
        deliver_at: at(NOW - 5_000),
        deadline: at(NOW + 1),
    };
    let got = transition(&j, event, at(NOW)).unwrap();
    assert_eq!((got.due_at, got.deadline), (Some(at(NOW)), at(NOW + 1)));
}

// Guards.

#[test]
fn claim_before_due_is_not_due() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        let j = job(state, Some(NOW + 1));
        let want = TransitionError::NotDue {
            due_at: Some(at(NOW + 1)),
        };
        assert_eq!(transition(&j, CLAIM, at(NOW)), Err(want));
        let unknown = job(state, None);
        let want = TransitionError::NotDue { due_at: None };
        assert_eq!(transition(&unknown, CLAIM, at(NOW)), Err(want));
    }
}

#[test]
fn claim_at_or_after_the_deadline_is_refused() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        // Also when not due yet: the deadline is checked first.
        for due in [NOW, NOW + 20_000] {
            let j = job(state, Some(due));
            for now in [NOW + 10_000, NOW + 10_001] {
                let got = transition(&j, CLAIM, at(now));
                assert_eq!(got, Err(TransitionError::DeadlinePassed));
            }
        }
    }
}

#[test]
fn deadline_passed_before_the_deadline_is_refused() {
    for state in [JobState::Scheduled, JobState::Retrying] {
        let j = job(state, Some(NOW));
        let got = transition(&j, JobEvent::DeadlinePassed, at(NOW + 9_999));
        assert_eq!(got, Err(TransitionError::DeadlineNotPassed));
    }
}

#[test]
fn retryable_failure_after_the_last_attempt_is_max_attempts() {
    for attempts in [5, 6] {
        let j = JobSnapshot {
            attempts,
            ..job(JobState::InFlight, Some(NOW + 30_000))
        };
        let event = JobEvent::RetryableFailure {
            retry_at: at(NOW + 1_000),
        };
        let got = transition(&j, event, at(NOW));
        assert_eq!(got, Ok(dead(&j, DeadReason::MaxAttempts, false)));
    }
}

#[test]
fn retryable_failure_with_one_attempt_left_retries() {
    let j = JobSnapshot {
        attempts: 4,
        ..job(JobState::InFlight, Some(NOW + 30_000))
    };
    let event = JobEvent::RetryableFailure {
        retry_at: at(NOW + 1_000),
    };
    assert_eq!(
        transition(&j, event, at(NOW)).unwrap().to,
        JobState::Retrying
    );
}

#[test]
fn retryable_failure_that_does_not_fit_is_deadline_exceeded() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    for retry_at in [NOW + 10_000, NOW + 86_400_000] {
        let event = JobEvent::RetryableFailure {
            retry_at: at(retry_at),
        };
        let got = transition(&j, event, at(NOW));
        assert_eq!(got, Ok(dead(&j, DeadReason::DeadlineExceeded, false)));
    }
}

#[test]
fn stale_retry_at_after_the_deadline_is_deadline_exceeded() {
    let j = job(JobState::InFlight, Some(NOW + 30_000));
    let event = JobEvent::RetryableFailure {
        retry_at: at(NOW + 1_000),
    };
    let got = transition(&j, event, at(NOW + 10_000));
    assert_eq!(got, Ok(dead(&j, DeadReason::DeadlineExceeded, false)));
}

#[test]
fn lease_lost_after_the_deadline_is_deadline_exceeded_and_a_possible_duplicate() {
    let j = job(JobState::InFlight, Some(NOW + 10_000));
    for event in [JobEvent::LeaseExpired, JobEvent::Released] {
        for now in [NOW + 10_000, NOW + 40_000] {
            let got = transition(&j, event, at(now));
            let want = dead(&j, DeadReason::DeadlineExceeded, true);
            assert_eq!(got, Ok(want), "{event:?} at {now}");
        }
    }
}

#[test]
fn lease_lost_on_the_last_attempt_is_max_attempts_and_a_possible_duplicate() {
    let j = JobSnapshot {
        attempts: 5,
        ..job(JobState::InFlight, Some(NOW))
    };
    for event in [JobEvent::LeaseExpired, JobEvent::Released] {
        let got = transition(&j, event, at(NOW));
        assert_eq!(
            got,
            Ok(dead(&j, DeadReason::MaxAttempts, true)),
            "{event:?}"
        );
    }
}

#[test]
fn without_max_attempts_only_the_deadline_bounds_retries() {
    let j = JobSnapshot {
        attempts: u32::MAX,
        max_attempts: None,
        ..job(JobState::InFlight, Some(NOW + 30_000))
    };
    let event = JobEvent::RetryableFailure {
        retry_at: at(NOW + 1_000),
    };
    assert_eq!(
        transition(&j, event, at(NOW)).unwrap().to,
        JobState::Retrying
    );
    let lost = transition(&j, JobEvent::LeaseExpired, at(NOW)).unwrap();
    assert_eq!(lost.to, JobState::Retrying);
}

#[test]
fn replay_with_a_deadline_not_after_now_is_refused() {
    let j = job(JobState::Dead, None);
    for deadline in [NOW, NOW - 1] {
        let event = JobEvent::Replay {
            deadline: at(deadline),
        };
        let got = transition(&j, event, at(NOW));
        assert_eq!(got, Err(TransitionError::DeadlineNotAfterDelivery));
    }
}

#[test]
fn reschedule_with_a_deadline_not_after_delivery_is_refused() {
    let j = job(JobState::Scheduled, Some(NOW + 1_000));
    for (deliver_at, deadline) in [
        (NOW + 5_000, NOW + 5_000),
        (NOW + 5_000, NOW + 4_999),
        (NOW - 5_000, NOW), // deliver_at in the past means now
    ] {
        let event = JobEvent::Reschedule {
            deliver_at: at(deliver_at),
            deadline: at(deadline),
        };
        let got = transition(&j, event, at(NOW));
        assert_eq!(got, Err(TransitionError::DeadlineNotAfterDelivery));
    }
}

#[test]
fn retry_now_makes_a_retrying_job_due_now_and_keeps_the_rest() {
    let j = job(JobState::Retrying, Some(NOW + 5_000));
    let got = transition(&j, JobEvent::RetryNow, at(NOW)).unwrap();
    assert_eq!(got, expect(&j, JobState::Retrying, Some(NOW)));
}

#[test]
fn retry_now_is_only_for_retrying_jobs() {
    for state in JobState::ALL {
        if state == JobState::Retrying {
            continue;
        }
        let got = transition(&job(state, Some(NOW + 5_000)), JobEvent::RetryNow, at(NOW));
        let want = TransitionError::NotAllowed {
            from: state,
            event: "retry_now",
        };
        assert_eq!(got, Err(want), "{state}");
    }
}

#[test]
fn retry_now_at_or_after_the_deadline_or_with_no_attempt_left_is_refused() {
    let j = job(JobState::Retrying, Some(NOW + 5_000));
    for now in [NOW + 10_000, NOW + 10_001] {
        let got = transition(&j, JobEvent::RetryNow, at(now));
        assert_eq!(got, Err(TransitionError::DeadlinePassed));
    }
    // Read as retrying because the lease of its last allowed attempt expired.
    let spent = JobSnapshot {
        attempts: 5,
        ..job(JobState::Retrying, Some(NOW - 1))
    };
    let got = transition(&spent, JobEvent::RetryNow, at(NOW));
    assert_eq!(got, Err(TransitionError::NoAttemptLeft));
}
