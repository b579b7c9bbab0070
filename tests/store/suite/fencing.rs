//! Fenced outcomes: with the current lease token the job moves as the state machine
//! decided; with a stale one only the attempt row records the result.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent, JobState, Transition};
use deferhook::store::{Fenced, LastError, PausedReason, SharedStore};

use crate::support::{
    OWNER, add_subscriber, at, claim, claim_one, create, create_due, delivered, failed, job,
    new_job, outcome,
};

store_case!(
    delivered_applies_with_the_current_token,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;

        let record = outcome(&claimed, JobEvent::Delivered, delivered(204), at(400));
        let fenced = store.record_outcomes(&[record], at(450)).await.unwrap();

        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Delivered);
        assert_eq!(
            stored.delivered_at,
            Some(at(400)),
            "when the 2xx came (finished_at)"
        );
        assert_eq!(stored.due_at, None);
        assert_eq!(stored.lease, None);
        assert_eq!(stored.attempts, 1);
        assert_eq!(stored.updated_at, at(450));
        assert_eq!((stored.dead_at, stored.dead_reason), (None, None));
        assert_eq!(stored.last_error, None);
        let attempts = store.list_attempts(created.id, at(0)).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Delivered);
        assert_eq!(attempts[0].status, Some(204));
        assert_eq!(attempts[0].finished_at, Some(at(400)));
        assert_eq!(attempts[0].error_class, None);
    }
);

store_case!(
    retryable_failure_sets_next_attempt_and_last_error,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Http5xx,
            Some(503),
            "503 Service Unavailable",
            Some("try later"),
        );
        let event = JobEvent::RetryableFailure {
            retry_at: at(5_000),
        };

        let fenced = store
            .record_outcomes(&[outcome(&claimed, event, result, at(300))], at(300))
            .await
            .unwrap();

        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Retrying);
        assert_eq!(stored.due_at, Some(at(5_000)));
        assert_eq!(stored.next_attempt_at(), Some(at(5_000)));
        assert_eq!(stored.lease, None);
        assert_eq!(stored.attempts, 1);
        let last_error = LastError {
            class: ErrorClass::Http5xx,
            status: Some(503),
            reason: Some("503 Service Unavailable".into()),
            body_excerpt: Some("try later".into()),
        };
        assert_eq!(stored.last_error, Some(last_error.clone()));
        let attempt = &store.list_attempts(created.id, at(0)).await.unwrap()[0];
        assert_eq!(attempt.outcome, AttemptOutcome::Retryable);
        assert_eq!(attempt.status, Some(503));
        assert_eq!(attempt.error_class, Some(ErrorClass::Http5xx));
        assert_eq!(attempt.reason.as_deref(), Some("503 Service Unavailable"));
        assert_eq!(attempt.body_excerpt.as_deref(), Some("try later"));

        // Not due before the next attempt time, due at it.
        assert!(
            crate::support::claim(&store, at(4_999), 10)
                .await
                .is_empty()
        );
        let retry = claim_one(&store, OWNER, at(5_000)).await;
        assert_eq!(retry.attempt, 2);
        assert!(!retry.possible_duplicate);
        assert!(!retry.reclaimed_expired_lease);
        assert_eq!(retry.due_since, at(5_000));

        // A later success has no error class: the last error stays for the record.
        let success = outcome(&retry, JobEvent::Delivered, delivered(200), at(5_100));
        let fenced = store.record_outcomes(&[success], at(5_100)).await.unwrap();
        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Delivered);
        assert_eq!(stored.attempts, 2);
        assert_eq!(stored.last_error, Some(last_error));
    }
);

store_case!(
    a_timeout_without_status_is_recorded,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Timeout,
            None,
            "no answer within 10000 ms",
            None,
        );
        let event = JobEvent::RetryableFailure {
            retry_at: at(11_000),
        };
        let record = outcome(&claimed, event, result, at(10_000));
        store.record_outcomes(&[record], at(10_000)).await.unwrap();

        let last_error = LastError {
            class: ErrorClass::Timeout,
            status: None,
            reason: Some("no answer within 10000 ms".into()),
            body_excerpt: None,
        };
        assert_eq!(job(&store, created.id).await.last_error, Some(last_error));
    }
);

store_case!(
    terminal_failure_makes_the_job_dead,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let result = failed(
            AttemptOutcome::Terminal,
            ErrorClass::Http4xx,
            Some(404),
            "404 Not Found",
            Some("no such hook"),
        );
        let event = JobEvent::TerminalFailure {
            reason: DeadReason::NonRetryableResponse,
        };

        let fenced = store
            .record_outcomes(&[outcome(&claimed, event, result, at(200))], at(250))
            .await
            .unwrap();

        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Dead);
        assert_eq!(stored.dead_reason, Some(DeadReason::NonRetryableResponse));
        assert_eq!(
            stored.dead_at,
            Some(at(250)),
            "when the store recorded it (now)"
        );
        assert_eq!(stored.delivered_at, None);
        assert_eq!(stored.due_at, None);
        assert_eq!(stored.lease, None);
        let last_error = stored.last_error.expect("last_error");
        assert_eq!(last_error.class, ErrorClass::Http4xx);
        assert_eq!(last_error.status, Some(404));
        assert_eq!(last_error.body_excerpt.as_deref(), Some("no such hook"));
    }
);

store_case!(
    a_stale_token_is_late_and_changes_only_its_attempt,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let stale = claim_one(&store, OWNER, at(0)).await;
        let current = claim_one(&store, "worker-b", stale.lease_expires_at).await;
        let before = job(&store, created.id).await;

        let late = outcome(&stale, JobEvent::Delivered, delivered(200), at(31_000));
        let fenced = store.record_outcomes(&[late], at(31_000)).await.unwrap();

        assert_eq!(fenced, [Fenced::Late]);
        assert_eq!(
            job(&store, created.id).await,
            before,
            "the job did not move"
        );
        let attempts = store.list_attempts(created.id, at(0)).await.unwrap();
        assert_eq!(
            attempts[0].outcome,
            AttemptOutcome::Delivered,
            "late result kept"
        );
        assert_eq!(attempts[0].status, Some(200));
        assert_eq!(attempts[0].finished_at, Some(at(31_000)));
        assert_eq!(attempts[1].outcome, AttemptOutcome::InProgress);
        assert_eq!(attempts[1].finished_at, None);

        // The current holder still decides.
        let event = JobEvent::RetryableFailure {
            retry_at: at(40_000),
        };
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Connect,
            None,
            "refused",
            None,
        );
        let applied = outcome(&current, event, result, at(32_000));
        let fenced = store.record_outcomes(&[applied], at(32_000)).await.unwrap();
        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Retrying);
        assert_eq!(stored.due_at, Some(at(40_000)));
        assert_eq!(stored.delivered_at, None);
    }
);

store_case!(
    a_batch_of_outcomes_answers_in_order,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let a = create_due(&store, "s", at(-2)).await;
        let b = create_due(&store, "s", at(-1)).await;
        let claimed = crate::support::claim(&store, at(0), 10).await;
        assert_eq!(crate::support::claimed_ids(&claimed), [a.id, b.id]);
        let done_a = outcome(&claimed[0], JobEvent::Delivered, delivered(200), at(100));
        // b once, then the very same write again: the second one finds b no longer in flight.
        let done_b = outcome(&claimed[1], JobEvent::Delivered, delivered(202), at(100));

        let fenced = store
            .record_outcomes(&[done_a, done_b.clone(), done_b], at(100))
            .await
            .unwrap();

        assert_eq!(fenced, [Fenced::Applied, Fenced::Applied, Fenced::Late]);
        assert_eq!(job(&store, a.id).await.state, JobState::Delivered);
        assert_eq!(job(&store, b.id).await.state, JobState::Delivered);
    }
);

store_case!(
    a_transition_into_in_flight_is_refused,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let before = job(&store, created.id).await;
        let good = outcome(&claimed, JobEvent::Delivered, delivered(200), at(100));
        let mut bad = good.clone();
        bad.transition = Transition {
            to: JobState::InFlight,
            due_at: Some(at(60_000)),
            ..good.transition
        };

        let refused = store.record_outcomes(&[good, bad], at(100)).await;

        assert!(refused.is_err(), "got {refused:?}");
        assert_eq!(
            job(&store, created.id).await,
            before,
            "nothing of the batch applied"
        );
        let attempts = store.list_attempts(created.id, at(0)).await.unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::InProgress);
    }
);

// docs/DESIGN.md §3: `410 Gone` kills the job and pauses its subscriber; its other jobs wait.
store_case!(a_410_pauses_the_subscriber, async |store: SharedStore| {
    add_subscriber(&store, "gone").await;
    let jobs = create(
        &store,
        vec![
            new_job("gone", "first", at(-2), at(60_000)),
            new_job("gone", "second", at(-1), at(60_000)),
        ],
    )
    .await;
    let claimed = claim(&store, at(0), 1).await;
    let mut record = outcome(
        &claimed[0],
        JobEvent::TerminalFailure {
            reason: DeadReason::NonRetryableResponse,
        },
        failed(
            AttemptOutcome::Terminal,
            ErrorClass::Http4xx,
            Some(410),
            "HTTP 410 Gone",
            None,
        ),
        at(10),
    );
    record.pause_subscriber = true;
    let fenced = store.record_outcomes(&[record], at(10)).await.unwrap();

    assert_eq!(fenced, [Fenced::Applied]);
    assert_eq!(job(&store, jobs[0].id).await.state, JobState::Dead);
    let subscriber = store.get_subscriber("gone").await.unwrap().unwrap();
    assert!(!subscriber.enabled);
    assert_eq!(subscriber.paused_reason, Some(PausedReason::Gone));
    assert_eq!(subscriber.paused_at, Some(at(10)));
    assert!(
        claim(&store, at(20), 10).await.is_empty(),
        "paused: nothing claimed"
    );
    assert!(!job(&store, jobs[1].id).await.subscriber_enabled);
});

// Two different results for the same lease in one batch: as if written one by one,
// the first applies (to the job and its attempt) and the second is late.
store_case!(
    the_first_of_two_results_for_one_lease_applies,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let job_a = create_due(&store, "s", at(-1)).await;
        let claimed = crate::support::claim(&store, at(0), 10).await;
        let done = outcome(&claimed[0], JobEvent::Delivered, delivered(200), at(100));
        let retry = outcome(
            &claimed[0],
            JobEvent::RetryableFailure {
                retry_at: at(5_000),
            },
            failed(
                AttemptOutcome::Retryable,
                ErrorClass::Connect,
                None,
                "refused",
                None,
            ),
            at(100),
        );

        let fenced = store
            .record_outcomes(&[done, retry], at(100))
            .await
            .unwrap();

        assert_eq!(fenced, [Fenced::Applied, Fenced::Late]);
        assert_eq!(job(&store, job_a.id).await.state, JobState::Delivered);
        let attempts = store.list_attempts(job_a.id, at(0)).await.unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::Delivered);
    }
);
