//! A job whose lease has expired (its worker died) before any claim or sweep took it
//! over: every read sees it as what it is — `retrying`, due at the lease's expiry,
//! its attempt's outcome unknown (docs/DESIGN.md §2.2) — and an operator can cancel
//! it, which fences its worker out.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{JobEvent, JobState, Timestamp};
use deferhook::store::{
    CreateOutcome, Fenced, Job, JobFilter, LeaseInfo, PageRequest, SharedStore,
};
use uuid::Uuid;

use crate::support::{
    OWNER, add_subscriber, at, claim, claim_as, claim_one, claimed_ids, create_due, delivered,
    failed, ids, job, job_at, lease, list_at, new_job, outcome,
};

/// What the sweep and a claim record on the attempt of an expired lease.
const LEASE_EXPIRED: &str = "the lease expired before a result was recorded";

fn by_state(state: JobState) -> JobFilter {
    JobFilter {
        states: vec![state],
        ..JobFilter::default()
    }
}

/// Cancels the job as read at `now`, as the API does; whether the store applied it.
async fn cancel(store: &SharedStore, read: &Job, now: Timestamp) -> bool {
    let cancel = transition(&read.snapshot(), JobEvent::Cancel, now).expect("cancellable");
    store
        .transition_waiting(read.id, read.version(), cancel, now)
        .await
        .unwrap()
}

store_case!(
    an_expired_lease_reads_retrying_due_at_its_expiry,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let expiry = claimed.lease_expires_at;

        let live = job_at(&store, created.id, expiry.minus_ms(1)).await;
        assert_eq!(live.state, JobState::InFlight);
        assert_eq!(
            live.lease,
            Some(LeaseInfo {
                owner: OWNER.into(),
                token: claimed.lease_token,
                expires_at: expiry,
            })
        );
        let attempts = store
            .list_attempts(created.id, expiry.minus_ms(1))
            .await
            .unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::InProgress);

        let expired = job_at(&store, created.id, expiry).await;
        assert_eq!(
            expired,
            Job {
                state: JobState::Retrying,
                lease: None,
                ..live.clone()
            }
        );
        assert_eq!(expired.due_at, Some(expiry));
        assert_eq!(expired.next_attempt_at(), Some(expiry), "due at the expiry");
        let attempts = store.list_attempts(created.id, expiry).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        assert_eq!(attempts[0].reason.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(attempts[0].finished_at, None, "no result was recorded");
        assert_eq!(attempts[0].lease_token, claimed.lease_token);

        // A repeat of its create answers it as read then.
        let repeat = deferhook::store::NewJob {
            created_at: expiry.plus_ms(5),
            ..new_job("s", &created.event_id, at(0), at(3_600_000))
        };
        let outcomes = store.create_jobs(vec![repeat]).await.unwrap();
        let [CreateOutcome::Existing { job: existing, .. }] = &outcomes[..] else {
            panic!("a repeat: {outcomes:?}");
        };
        assert_eq!(existing, &expired);

        // Nothing was written: the claim still takes it over as an expired lease.
        assert_eq!(job(&store, created.id).await, live);
        let taken = claim_one(&store, "worker-b", expiry).await;
        assert!(taken.reclaimed_expired_lease);
        assert_eq!(taken.due_since, expiry);
        let attempts = store.list_attempts(created.id, expiry).await.unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        assert_eq!(attempts[0].finished_at, Some(expiry));
        assert_eq!(attempts[1].outcome, AttemptOutcome::InProgress);
        let reclaimed = job_at(&store, created.id, expiry).await;
        assert_eq!(reclaimed.state, JobState::InFlight);
    }
);

store_case!(
    listings_and_filters_see_an_expired_lease_as_retrying,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let failing = create_due(&store, "s", at(0)).await;
        let orphan = create_due(&store, "s", at(0)).await;
        let claimed = claim(&store, at(0), 10).await;
        assert_eq!(claimed.len(), 2);
        let first = claimed.iter().find(|c| c.job_id == failing.id).unwrap();
        let event = JobEvent::RetryableFailure {
            retry_at: at(50_000),
        };
        let result = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Http5xx,
            Some(503),
            "503",
            None,
        );
        let record = outcome(first, event, result, at(100));
        assert_eq!(
            store.record_outcomes(&[record], at(100)).await.unwrap(),
            [Fenced::Applied]
        );
        let running = create_due(&store, "s", at(20_000)).await;
        assert_eq!(
            claim_one(&store, OWNER, at(20_000)).await.job_id,
            running.id
        );
        let waiting = create_due(&store, "s", at(100_000)).await;

        // Before the orphan's lease expires at 30 s: two in flight, one retrying.
        let before = at(29_999);
        let retrying = list_at(&store, by_state(JobState::Retrying), before).await;
        assert_eq!(ids(&retrying), [failing.id]);
        let in_flight = list_at(&store, by_state(JobState::InFlight), before).await;
        assert_eq!(ids(&in_flight), [running.id, orphan.id]);

        let now = at(30_000);
        let retrying = list_at(&store, by_state(JobState::Retrying), now).await;
        assert_eq!(ids(&retrying), [orphan.id, failing.id], "newest first");
        assert!(retrying.iter().all(|j| j.state == JobState::Retrying));
        assert_eq!(retrying[0], job_at(&store, orphan.id, now).await);
        let in_flight = list_at(&store, by_state(JobState::InFlight), now).await;
        assert_eq!(ids(&in_flight), [running.id]);
        let of_s = JobFilter {
            subscriber_id: Some("s".into()),
            ..by_state(JobState::Retrying)
        };
        assert_eq!(
            ids(&list_at(&store, of_s, now).await),
            [orphan.id, failing.id]
        );
        let everything = list_at(&store, JobFilter::default(), now).await;
        let states: Vec<(Uuid, JobState)> = everything.iter().map(|j| (j.id, j.state)).collect();
        assert_eq!(
            states,
            [
                (waiting.id, JobState::Scheduled),
                (running.id, JobState::InFlight),
                (orphan.id, JobState::Retrying),
                (failing.id, JobState::Retrying),
            ]
        );

        // Pages of one: each listing is read in id order, so paging neither skips nor
        // repeats.
        let mut pages = Vec::new();
        let mut after = None;
        for _ in 0..4 {
            let page = PageRequest { after, limit: 1 };
            let items = store
                .list_jobs(&by_state(JobState::Retrying), page, now)
                .await
                .unwrap();
            let Some(last) = items.last() else { break };
            after = Some(last.id);
            pages.push(ids(&items));
        }
        assert_eq!(pages, [vec![orphan.id], vec![failing.id]]);
    }
);

store_case!(
    stats_and_gauges_count_an_expired_lease_as_retrying,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let orphan = create_due(&store, "s", at(0)).await;
        claim_one(&store, OWNER, at(0)).await;
        create_due(&store, "s", at(20_000)).await;
        claim_one(&store, OWNER, at(20_000)).await;

        let before = at(29_999);
        let stats = store.subscriber_stats("s", before).await.unwrap().unwrap();
        assert_eq!((stats.jobs.in_flight, stats.jobs.retrying), (2, 0));
        assert_eq!(stats.oldest_eligible_since, None);
        let gauges = store.gauges(before, 60_000).await.unwrap();
        assert_eq!(gauges.jobs_by_state, [(JobState::InFlight, 2)]);
        assert_eq!(gauges.oldest_eligible_since, None);
        assert_eq!(gauges.oldest_retrying_since, None);

        let now = at(40_000);
        let stats = store.subscriber_stats("s", now).await.unwrap().unwrap();
        assert_eq!((stats.jobs.in_flight, stats.jobs.retrying), (1, 1));
        assert_eq!(
            stats.oldest_eligible_since,
            Some(at(30_000)),
            "due at expiry"
        );
        let gauges = store.gauges(now, 60_000).await.unwrap();
        assert_eq!(
            gauges.jobs_by_state,
            [(JobState::InFlight, 1), (JobState::Retrying, 1)]
        );
        assert_eq!(gauges.oldest_eligible_since, Some(at(30_000)));
        assert_eq!(gauges.oldest_retrying_since, Some(orphan.deliver_at));
    }
);

store_case!(
    cancelling_an_expired_lease_ends_it_and_fences_its_worker_out,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let expiry = claimed.lease_expires_at;
        let read = job_at(&store, created.id, expiry).await;
        assert_eq!(read.state, JobState::Retrying);

        let now = expiry.plus_ms(1_000);
        assert!(cancel(&store, &read, now).await);

        let cancelled = job_at(&store, created.id, now).await;
        assert_eq!(cancelled.state, JobState::Cancelled);
        assert_eq!((&cancelled.lease, cancelled.due_at), (&None, None));
        assert_eq!(cancelled.updated_at, now);
        assert_eq!(job(&store, created.id).await, cancelled, "as stored");
        let attempts = store.list_attempts(created.id, now).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        assert_eq!(attempts[0].reason.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(attempts[0].finished_at, Some(now));

        // The worker was only slow: its renewal and its result come too late.
        let renewed = store
            .renew_leases(&[lease(&claimed)], now.plus_ms(30_000), now.plus_ms(10))
            .await
            .unwrap();
        assert_eq!(renewed, [false]);
        let late = outcome(
            &claimed,
            JobEvent::Delivered,
            delivered(200),
            now.plus_ms(20),
        );
        let fenced = store
            .record_outcomes(&[late], now.plus_ms(20))
            .await
            .unwrap();
        assert_eq!(fenced, [Fenced::Late]);
        let after = job_at(&store, created.id, now.plus_ms(20)).await;
        assert_eq!(after.state, JobState::Cancelled);
        assert_eq!(after.delivered_at, None);
        assert!(claim(&store, at(3_600_000), 10).await.is_empty());
        let sweep = store.expire_deadlines(at(7_200_000), 100).await.unwrap();
        assert_eq!(sweep.lease_expired, 0, "nothing left to expire");
    }
);

store_case!(
    a_cancel_is_refused_once_the_expired_lease_was_renewed,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let expiry = claimed.lease_expires_at;
        let read = job_at(&store, created.id, expiry).await;
        assert_eq!(read.state, JobState::Retrying);

        // Its worker was only slow: it renews after the read.
        let held = store
            .renew_leases(
                &[lease(&claimed)],
                expiry.plus_ms(30_000),
                expiry.plus_ms(10),
            )
            .await
            .unwrap();
        assert_eq!(held, [true]);
        assert!(!cancel(&store, &read, expiry.plus_ms(20)).await);

        let stored = job_at(&store, created.id, expiry.plus_ms(20)).await;
        assert_eq!(stored.state, JobState::InFlight);
        let attempts = store
            .list_attempts(created.id, expiry.plus_ms(20))
            .await
            .unwrap();
        assert_eq!(attempts[0].outcome, AttemptOutcome::InProgress);
    }
);

store_case!(
    a_cancel_is_refused_once_the_expired_lease_was_taken_over,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let expiry = claimed.lease_expires_at;
        let read = job_at(&store, created.id, expiry).await;
        assert_eq!(read.state, JobState::Retrying);

        let taken = claim_as(&store, "worker-b", expiry, 10).await;
        assert_eq!(claimed_ids(&taken), [created.id]);
        assert!(!cancel(&store, &read, expiry.plus_ms(20)).await);

        let stored = job_at(&store, created.id, expiry.plus_ms(20)).await;
        assert_eq!(stored.state, JobState::InFlight);
        assert_eq!(stored.lease.map(|l| l.owner), Some("worker-b".into()));
        let attempts = store
            .list_attempts(created.id, expiry.plus_ms(20))
            .await
            .unwrap();
        assert_eq!(attempts[1].outcome, AttemptOutcome::InProgress);
    }
);
