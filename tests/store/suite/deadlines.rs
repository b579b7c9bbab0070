//! The deadline sweep: waiting jobs past their deadline and in-flight jobs whose lease
//! expired past it go `dead` (`deadline_exceeded`); live leases and jobs before their
//! deadline are left alone.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent, JobState};
use deferhook::store::{ExpiredJobs, Fenced, Job, SharedStore};

use crate::support::{
    OWNER, add_subscriber, at, claim, claim_one, claimed_ids, create, delivered, failed, job,
    new_job, outcome, set_enabled,
};

fn expired(dead: u64, lease_expired: u64) -> ExpiredJobs {
    ExpiredJobs {
        dead,
        max_attempts: 0,
        released: 0,
        lease_expired,
    }
}

fn assert_deadline_dead(job: &Job, now: deferhook::domain::Timestamp) {
    assert_eq!(job.state, JobState::Dead, "{}", job.event_id);
    assert_eq!(
        job.dead_reason,
        Some(DeadReason::DeadlineExceeded),
        "{}",
        job.event_id
    );
    assert_eq!(job.dead_at, Some(now), "{}", job.event_id);
    assert_eq!(job.due_at, None, "{}", job.event_id);
    assert_eq!(job.lease, None, "{}", job.event_id);
}

store_case!(
    waiting_jobs_past_their_deadline_die,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let jobs = create(
            &store,
            vec![
                new_job("s", "scheduled-at-deadline", at(-5_000), at(0)),
                new_job("s", "retrying-at-deadline", at(-10_000), at(0)),
                new_job("s", "scheduled-before-deadline", at(-5_000), at(1)),
                new_job("s", "scheduled-past-deadline", at(-5_000), at(-1)),
            ],
        )
        .await;
        // Make the second one `retrying`, due before its deadline.
        let claimed = claim_one(&store, OWNER, at(-10_000)).await;
        assert_eq!(claimed.job_id, jobs[1].id);
        let event = JobEvent::RetryableFailure {
            retry_at: at(-9_000),
        };
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Http429,
            Some(429),
            "429",
            None,
        );
        let record = outcome(&claimed, event, result, at(-9_500));
        store.record_outcomes(&[record], at(-9_500)).await.unwrap();
        assert_eq!(job(&store, jobs[1].id).await.state, JobState::Retrying);
        let untouched = job(&store, jobs[2].id).await;

        let swept = store.expire_deadlines(at(0), 100).await.unwrap();

        assert_eq!(swept, expired(3, 0));
        for index in [0, 1, 3] {
            assert_deadline_dead(&job(&store, jobs[index].id).await, at(0));
        }
        assert_eq!(job(&store, jobs[2].id).await, untouched);
        let retried = job(&store, jobs[1].id).await;
        assert_eq!(retried.attempts, 1);
        assert_eq!(retried.last_error.map(|e| e.status), Some(Some(429)));
        assert_eq!(
            store.expire_deadlines(at(0), 100).await.unwrap(),
            expired(0, 0)
        );
    }
);

store_case!(
    a_live_lease_is_spared_an_expired_one_is_not,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let jobs = create(
            &store,
            vec![
                new_job("s", "short-deadline", at(-1_000), at(1_000)),
                new_job("s", "long-deadline", at(-1_000), at(3_600_000)),
            ],
        )
        .await;
        let claimed = claim(&store, at(0), 10).await;
        assert_eq!(claimed_ids(&claimed), [jobs[0].id, jobs[1].id]);
        let in_flight = job(&store, jobs[0].id).await;

        // Past the deadline, but the attempt may still be running: leave it.
        assert_eq!(
            store.expire_deadlines(at(1_000), 100).await.unwrap(),
            expired(0, 0)
        );
        assert_eq!(job(&store, jobs[0].id).await, in_flight);

        // The lease expired too: its outcome is unknown and the job is dead.
        let expiry = claimed[0].lease_expires_at;
        let swept = store.expire_deadlines(expiry, 100).await.unwrap();

        assert_eq!(swept, expired(1, 1));
        let dead = job(&store, jobs[0].id).await;
        assert_deadline_dead(&dead, expiry);
        assert_eq!(dead.attempts, 1);
        let attempts = store.list_attempts(jobs[0].id, at(0)).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        assert_eq!(attempts[0].finished_at, Some(expiry));
        // Its lease expired before its deadline: the claim takes that one over, not the sweep.
        let other = job(&store, jobs[1].id).await;
        assert_eq!(other.state, JobState::InFlight);
        assert_eq!(other.lease.map(|l| l.token), Some(claimed[1].lease_token));

        // The old holder's result arrives late: recorded on its attempt, the job stays dead.
        let late = outcome(&claimed[0], JobEvent::Delivered, delivered(200), at(30_500));
        let fenced = store.record_outcomes(&[late], at(30_500)).await.unwrap();
        assert_eq!(fenced, [Fenced::Late]);
        assert_eq!(job(&store, jobs[0].id).await, dead);
        let attempts = store.list_attempts(jobs[0].id, at(0)).await.unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::Delivered);
    }
);

store_case!(
    a_paused_subscriber_jobs_still_expire,
    async |store: SharedStore| {
        add_subscriber(&store, "paused").await;
        let jobs = create(
            &store,
            vec![
                new_job("paused", "past", at(-5_000), at(0)),
                new_job("paused", "not-yet", at(-5_000), at(5_000)),
            ],
        )
        .await;
        set_enabled(&store, "paused", false, at(-4_000)).await;

        let swept = store.expire_deadlines(at(0), 100).await.unwrap();

        assert_eq!(swept, expired(1, 0));
        assert_deadline_dead(&job(&store, jobs[0].id).await, at(0));
        assert_eq!(job(&store, jobs[1].id).await.state, JobState::Scheduled);
    }
);

store_case!(the_sweep_respects_its_limit, async |store: SharedStore| {
    add_subscriber(&store, "s").await;
    let jobs = create(
        &store,
        (0..5)
            .map(|n| new_job("s", &format!("e{n}"), at(-10_000), at(-n)))
            .collect(),
    )
    .await;

    let mut counts = Vec::new();
    for _ in 0..4 {
        counts.push(store.expire_deadlines(at(0), 2).await.unwrap());
    }

    assert_eq!(
        counts,
        [expired(2, 0), expired(2, 0), expired(1, 0), expired(0, 0)]
    );
    for created in &jobs {
        assert_deadline_dead(&job(&store, created.id).await, at(0));
    }
});

store_case!(
    a_paused_subscribers_expired_lease_goes_back_to_waiting,
    async |store: SharedStore| {
        add_subscriber(&store, "paused").await;
        let jobs = create(&store, vec![new_job("paused", "e", at(0), at(3_600_000))]).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        set_enabled(&store, "paused", false, at(1)).await;

        // Not yet expired: nothing to do.
        let early = store.expire_deadlines(at(1_000), 100).await.unwrap();
        assert_eq!(early, ExpiredJobs::default());

        let swept = store
            .expire_deadlines(claimed.lease_expires_at, 100)
            .await
            .unwrap();
        assert_eq!(
            swept,
            ExpiredJobs {
                dead: 0,
                max_attempts: 0,
                released: 1,
                lease_expired: 1,
            }
        );
        let waiting = job(&store, jobs[0].id).await;
        assert_eq!(waiting.state, JobState::Retrying);
        assert_eq!(waiting.due_at, Some(claimed.lease_expires_at));
        assert_eq!(waiting.lease, None);
        assert_eq!(waiting.dead_reason, None);
        let attempts = store.list_attempts(jobs[0].id, at(0)).await.unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        // Resumed, the next claim is a possible duplicate.
        set_enabled(&store, "paused", true, claimed.lease_expires_at).await;
        let next = claim_one(&store, OWNER, claimed.lease_expires_at).await;
        assert_eq!(next.attempt, 2);
        assert!(next.possible_duplicate);
    }
);
