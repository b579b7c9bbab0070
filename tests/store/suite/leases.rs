//! Lease renewal (fenced by the token) and the release of leases at shutdown.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{JobEvent, JobState};
use deferhook::store::{Fenced, LeaseRef, SharedStore};

use crate::support::{
    LEASE_MS, OWNER, add_subscriber, at, claim, claim_one, create_due, delivered, failed, fresh_id,
    job, lease, outcome, unknown,
};

store_case!(
    renewal_with_the_current_token_extends_the_lease,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;

        let held = store
            .renew_leases(&[lease(&claimed)], at(60_000), at(10_000))
            .await
            .unwrap();

        assert_eq!(held, [true]);
        let stored = job(&store, created.id).await;
        let info = stored.lease.clone().expect("still leased");
        assert_eq!(info.expires_at, at(60_000));
        assert_eq!(info.token, claimed.lease_token, "renewal keeps the token");
        assert_eq!(info.owner, OWNER);
        assert_eq!(stored.due_at, Some(at(60_000)));
        assert_eq!(stored.updated_at, at(10_000));
        assert_eq!(stored.state, JobState::InFlight);
        // The original expiry no longer frees the job; the renewed one does.
        assert!(claim(&store, claimed.lease_expires_at, 10).await.is_empty());
        assert!(claim(&store, at(59_999), 10).await.is_empty());
        let reclaimed = claim_one(&store, "worker-b", at(60_000)).await;
        assert!(reclaimed.reclaimed_expired_lease);
        assert_eq!(reclaimed.due_since, at(60_000));
    }
);

store_case!(
    renewal_with_a_stale_token_changes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let stale = claim_one(&store, OWNER, at(0)).await;
        let current = claim_one(&store, "worker-b", stale.lease_expires_at).await;
        let before = job(&store, created.id).await;

        let held = store
            .renew_leases(&[lease(&stale)], at(500_000), at(31_000))
            .await
            .unwrap();

        assert_eq!(held, [false]);
        assert_eq!(job(&store, created.id).await, before);

        // Per lease, in order: stale, unknown job, current.
        let nobody = LeaseRef {
            job_id: fresh_id(),
            token: 1,
        };
        let leases = [lease(&stale), nobody, lease(&current)];
        let held = store
            .renew_leases(&leases, at(90_000), at(32_000))
            .await
            .unwrap();
        assert_eq!(held, [false, false, true]);
        let info = job(&store, created.id).await.lease.expect("leased");
        assert_eq!(
            (info.owner.as_str(), info.expires_at),
            ("worker-b", at(90_000))
        );
    }
);

store_case!(
    a_finished_job_lease_cannot_be_renewed,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let done = outcome(&claimed, JobEvent::Delivered, delivered(200), at(100));
        store.record_outcomes(&[done], at(100)).await.unwrap();
        let before = job(&store, created.id).await;

        let held = store
            .renew_leases(&[lease(&claimed)], at(60_000), at(200))
            .await
            .unwrap();

        assert_eq!(held, [false]);
        assert_eq!(job(&store, created.id).await, before);
    }
);

store_case!(
    release_at_shutdown_retries_at_once_as_a_possible_duplicate,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;

        let release = outcome(
            &claimed,
            JobEvent::Released,
            unknown("released at shutdown"),
            at(2_000),
        );
        assert!(release.transition.possible_duplicate);
        let fenced = store.record_outcomes(&[release], at(2_000)).await.unwrap();

        assert_eq!(fenced, [Fenced::Applied]);
        let stored = job(&store, created.id).await;
        assert_eq!(stored.state, JobState::Retrying);
        assert_eq!(stored.due_at, Some(at(2_000)), "due at once");
        assert_eq!(stored.lease, None);
        assert_eq!(stored.attempts, 1);
        assert_eq!(stored.last_error, None);
        let first = &store.list_attempts(created.id, at(0)).await.unwrap()[0];
        assert_eq!(first.outcome, AttemptOutcome::Unknown);
        assert_eq!(first.finished_at, Some(at(2_000)));
        assert_eq!(first.reason.as_deref(), Some("released at shutdown"));

        let next = claim_one(&store, "worker-b", at(2_000)).await;
        assert_eq!(next.job_id, created.id);
        assert_eq!(next.attempt, 2);
        assert!(next.possible_duplicate);
        assert!(!next.reclaimed_expired_lease);
        assert!(next.lease_token > claimed.lease_token);
        assert_eq!(next.lease_expires_at, at(2_000).plus_ms(LEASE_MS));
        let attempts = store.list_attempts(created.id, at(0)).await.unwrap();
        assert_eq!(attempts.len(), 2);
        assert!(attempts[1].possible_duplicate);
        assert_eq!(attempts[1].outcome, AttemptOutcome::InProgress);
    }
);

// docs/DESIGN.md §2: the outcome is unknown, "so the next attempt is a possible duplicate";
// once that attempt has a known result, the one after it is not flagged again.
store_case!(
    only_the_next_attempt_is_a_possible_duplicate,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let first = claim_one(&store, OWNER, at(0)).await;
        let release = outcome(&first, JobEvent::Released, unknown("shutdown"), at(1_000));
        store.record_outcomes(&[release], at(1_000)).await.unwrap();
        let second = claim_one(&store, OWNER, at(1_000)).await;
        assert!(second.possible_duplicate);

        let event = JobEvent::RetryableFailure {
            retry_at: at(5_000),
        };
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Http5xx,
            Some(500),
            "500",
            None,
        );
        let record = outcome(&second, event, result, at(2_000));
        let fenced = store.record_outcomes(&[record], at(2_000)).await.unwrap();
        assert_eq!(fenced, [Fenced::Applied]);
        let third = claim_one(&store, OWNER, at(5_000)).await;

        assert_eq!(third.attempt, 3);
        assert!(!third.possible_duplicate);
        let flags: Vec<bool> = store
            .list_attempts(created.id, at(0))
            .await
            .unwrap()
            .iter()
            .map(|a| a.possible_duplicate)
            .collect();
        assert_eq!(flags, [false, true, false]);
    }
);
