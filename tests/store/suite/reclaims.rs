//! Expired leases: a held lease is not claimed again, an expired one is taken over
//! under a new token with the lost attempt recorded as `unknown`.

use deferhook::domain::JobState;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::store::{NewJob, SharedStore};

use crate::support::{
    LEASE_MS, OWNER, add_subscriber, at, claim_as, claim_one, create, create_due, job, new_job,
};

store_case!(
    a_held_lease_is_not_claimed_again,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let first = claim_one(&store, OWNER, at(0)).await;

        assert!(claim_as(&store, "worker-b", at(0), 10).await.is_empty());
        let just_before_expiry = at(LEASE_MS as i64 - 1);
        assert!(
            claim_as(&store, "worker-b", just_before_expiry, 10)
                .await
                .is_empty()
        );

        let stored = job(&store, created.id).await;
        assert_eq!(stored.attempts, 1);
        assert_eq!(
            stored.lease.map(|l| (l.owner, l.token)),
            Some((OWNER.into(), first.lease_token))
        );
        assert_eq!(
            store.list_attempts(created.id, at(0)).await.unwrap().len(),
            1
        );
    }
);

store_case!(an_expired_lease_is_reclaimed, async |store: SharedStore| {
    add_subscriber(&store, "s").await;
    let created = create_due(&store, "s", at(0)).await;
    let first = claim_one(&store, OWNER, at(0)).await;
    let expiry = first.lease_expires_at;

    let second = claim_one(&store, "worker-b", expiry).await;

    assert_eq!(second.job_id, created.id);
    assert!(second.lease_token > first.lease_token);
    assert_eq!(second.attempt, 2);
    assert!(second.possible_duplicate);
    assert!(second.reclaimed_expired_lease);
    assert_eq!(second.due_since, expiry);
    assert_eq!(second.lease_expires_at, expiry.plus_ms(LEASE_MS));
    assert_eq!(second.snapshot.attempts, 2);

    let attempts = store.list_attempts(created.id, at(0)).await.unwrap();
    assert_eq!(attempts.len(), 2);
    let (old, new) = (&attempts[0], &attempts[1]);
    assert_eq!(old.number, 1);
    assert_eq!(old.outcome, AttemptOutcome::Unknown);
    assert_eq!(old.finished_at, Some(expiry));
    assert!(old.reason.is_some(), "the unknown outcome says why");
    assert_eq!(
        (old.lease_owner.as_str(), old.lease_token),
        (OWNER, first.lease_token)
    );
    assert!(!old.possible_duplicate);
    assert_eq!(new.number, 2);
    assert_eq!(new.outcome, AttemptOutcome::InProgress);
    assert_eq!(new.started_at, expiry);
    assert_eq!(
        (new.lease_owner.as_str(), new.lease_token),
        ("worker-b", second.lease_token)
    );
    assert!(new.possible_duplicate);

    let stored = job(&store, created.id).await;
    assert_eq!(stored.state, JobState::InFlight);
    assert_eq!(stored.attempts, 2);
    assert_eq!(stored.lease.map(|l| l.owner), Some("worker-b".into()));
});

// docs/DESIGN.md §2: a lost lease counts its attempt, so a job that used all of its
// `max_attempts` goes `dead` (`max_attempts`) instead of getting one more attempt.
store_case!(
    a_reclaim_never_exceeds_max_attempts,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let new = NewJob {
            max_attempts: Some(1),
            ..new_job("s", "once", at(0), at(3_600_000))
        };
        create(&store, vec![new.clone()]).await;
        let first = claim_one(&store, OWNER, at(0)).await;

        let reclaimed = claim_as(&store, "worker-b", first.lease_expires_at, 10).await;

        let attempts: Vec<u32> = reclaimed.iter().map(|c| c.attempt).collect();
        assert!(
            reclaimed.is_empty(),
            "started attempt(s) {attempts:?} of at most 1"
        );
        assert!(job(&store, new.id).await.attempts <= 1);

        // The sweep makes it a dead letter: the unknown attempt was its last.
        let swept = store
            .expire_deadlines(first.lease_expires_at, 10)
            .await
            .unwrap();
        assert_eq!(
            swept,
            deferhook::store::ExpiredJobs {
                dead: 0,
                max_attempts: 1,
                released: 0,
                lease_expired: 1,
            }
        );
        let dead = job(&store, new.id).await;
        assert_eq!(dead.state, deferhook::domain::JobState::Dead);
        assert_eq!(
            dead.dead_reason,
            Some(deferhook::domain::DeadReason::MaxAttempts)
        );
        assert_eq!(dead.attempts, 1);
        let attempts = store.list_attempts(new.id, at(0)).await.unwrap();
        assert_eq!(
            attempts[0].outcome,
            deferhook::domain::attempt::AttemptOutcome::Unknown
        );
    }
);
