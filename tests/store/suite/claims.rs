//! Claims: only due jobs of enabled subscribers before their deadline and under their
//! limits, oldest due first, under a new lease with a persisted `in_progress` attempt;
//! concurrent claimers never share a job.

use std::collections::HashSet;

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::{JobEvent, JobSnapshot, JobState};
use deferhook::store::{Attempt, LeaseInfo, NewJob, SharedStore, SubscriberPut};
use uuid::Uuid;

use crate::support::{
    LEASE_MS, add_subscriber, at, claim, claim_as, claim_one, claimed_ids, create, create_due,
    current_secret, delivered, job, new_job, outcome, set_enabled, subscriber_put,
};

store_case!(claims_only_due_jobs, async |store: SharedStore| {
    add_subscriber(&store, "s").await;
    add_subscriber(&store, "paused").await;
    let jobs = create(
        &store,
        vec![
            new_job("s", "due-now", at(0), at(60_000)),
            new_job("s", "due-earlier", at(-1_000), at(60_000)),
            new_job("s", "future", at(1), at(60_000)),
            new_job("s", "deadline-now", at(-5_000), at(0)),
            new_job("s", "deadline-past", at(-5_000), at(-1)),
            new_job("paused", "of-paused", at(-2_000), at(60_000)),
        ],
    )
    .await;
    set_enabled(&store, "paused", false, at(-100)).await;

    let claimed = claim(&store, at(0), 100).await;

    assert_eq!(claimed_ids(&claimed), [jobs[1].id, jobs[0].id]);
    for waiting in &jobs[2..] {
        let now = job(&store, waiting.id).await;
        assert_eq!(now.state, JobState::Scheduled, "{}", waiting.event_id);
        assert_eq!(now.attempts, 0, "{}", waiting.event_id);
        assert_eq!(now.lease, None, "{}", waiting.event_id);
    }
    assert!(!job(&store, jobs[5].id).await.subscriber_enabled);
});

store_case!(
    claim_marks_in_flight_and_persists_the_attempt,
    async |store: SharedStore| {
        let secret = add_subscriber(&store, "orders").await;
        let new = NewJob {
            max_attempts: Some(5),
            ..new_job("orders", "order-1", at(-250), at(60_000))
        };
        create(&store, vec![new.clone()]).await;

        let claimed = claim_one(&store, "worker-7", at(0)).await;

        let lease_until = at(LEASE_MS as i64);
        assert_eq!(claimed.job_id, new.id);
        assert_eq!(claimed.subscriber_id, "orders");
        assert_eq!(claimed.event_id, "order-1");
        assert_eq!(claimed.payload, new.payload);
        assert_eq!(claimed.url, "https://orders.example.test/hook");
        assert_eq!(current_secret(&claimed), &secret);
        assert!(claimed.lease_token > 0);
        assert_eq!(claimed.lease_expires_at, lease_until);
        assert_eq!(claimed.attempt, 1);
        assert!(!claimed.possible_duplicate);
        assert!(!claimed.reclaimed_expired_lease);
        assert_eq!(claimed.due_since, at(-250));
        let snapshot = JobSnapshot {
            state: JobState::InFlight,
            attempts: 1,
            max_attempts: Some(5),
            due_at: Some(lease_until),
            deadline: at(60_000),
        };
        assert_eq!(claimed.snapshot, snapshot);

        let stored = job(&store, new.id).await;
        assert_eq!(stored.state, JobState::InFlight);
        assert_eq!(stored.attempts, 1);
        assert_eq!(stored.due_at, Some(lease_until));
        assert_eq!(stored.updated_at, at(0));
        let lease = LeaseInfo {
            owner: "worker-7".into(),
            token: claimed.lease_token,
            expires_at: lease_until,
        };
        assert_eq!(stored.lease, Some(lease));
        assert_eq!(stored.snapshot(), snapshot);

        let attempts = store.list_attempts(new.id, at(0)).await.unwrap();
        let in_progress = Attempt {
            number: 1,
            started_at: at(0),
            finished_at: None,
            outcome: AttemptOutcome::InProgress,
            status: None,
            error_class: None,
            reason: None,
            body_excerpt: None,
            lease_owner: "worker-7".into(),
            lease_token: claimed.lease_token,
            possible_duplicate: false,
        };
        assert_eq!(attempts, [in_progress]);
    }
);

store_case!(
    claim_respects_limit_and_takes_oldest_due_first,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        // Created in an order unrelated to their due times.
        let offsets = [-3_000, -1_000, -5_000, -2_000, -4_000];
        let jobs = create(
            &store,
            offsets
                .iter()
                .map(|&ms| new_job("s", &format!("e{ms}"), at(ms), at(60_000)))
                .collect(),
        )
        .await;
        let by_due = |order: &[usize]| order.iter().map(|&i| jobs[i].id).collect::<Vec<Uuid>>();

        let first = claim(&store, at(0), 2).await;
        assert_eq!(claimed_ids(&first), by_due(&[2, 4]));
        let rest = claim(&store, at(0), 10).await;
        assert_eq!(claimed_ids(&rest), by_due(&[0, 3, 1]));
        assert!(claim(&store, at(0), 10).await.is_empty());
    }
);

store_case!(a_paused_subscriber_jobs_wait, async |store: SharedStore| {
    add_subscriber(&store, "s").await;
    let created = create_due(&store, "s", at(-1_000)).await;
    set_enabled(&store, "s", false, at(-500)).await;

    assert!(claim(&store, at(0), 10).await.is_empty());
    let waiting = job(&store, created.id).await;
    assert_eq!(waiting.state, JobState::Scheduled);
    assert!(!waiting.subscriber_enabled);

    set_enabled(&store, "s", true, at(500)).await;
    assert_eq!(
        claimed_ids(&claim(&store, at(1_000), 10).await),
        [created.id]
    );
});

store_case!(
    concurrent_claims_are_disjoint,
    async |store: SharedStore| {
        // Room for all 100 at once: this case is about disjoint claims, not limits.
        let roomy = SubscriberPut {
            max_in_flight: Some(1_000),
            ..subscriber_put("s")
        };
        store.put_subscriber(roomy, at(0)).await.unwrap();
        let jobs = create(
            &store,
            (0..100)
                .map(|n| new_job("s", &format!("e{n}"), at(-n), at(60_000)))
                .collect(),
        )
        .await;
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    // Bounded (100 jobs need at most 15 batches of 7) so a store that hands
                    // out the same jobs again fails the test instead of hanging it.
                    for _ in 0..100 {
                        let batch = claim_as(&store, &format!("worker-{w}"), at(0), 7).await;
                        if batch.is_empty() {
                            break;
                        }
                        mine.extend(claimed_ids(&batch));
                    }
                    mine
                })
            })
            .collect();

        let mut all = Vec::new();
        for worker in workers {
            all.extend(worker.await.expect("worker"));
        }

        assert_eq!(all.len(), 100, "no job is claimed twice");
        let unique: HashSet<Uuid> = all.into_iter().collect();
        let expected: HashSet<Uuid> = jobs.iter().map(|j| j.id).collect();
        assert_eq!(unique, expected);
        for created in &jobs {
            assert_eq!(
                store.list_attempts(created.id, at(0)).await.unwrap().len(),
                1
            );
        }
    }
);

store_case!(
    each_claimed_job_carries_its_subscriber_target,
    async |store: SharedStore| {
        let alpha = add_subscriber(&store, "alpha").await;
        let beta = add_subscriber(&store, "beta").await;
        create(
            &store,
            vec![
                new_job("alpha", "e1", at(-4), at(60_000)),
                new_job("beta", "e2", at(-3), at(60_000)),
                new_job("alpha", "e3", at(-2), at(60_000)),
                new_job("beta", "e4", at(-1), at(60_000)),
            ],
        )
        .await;

        let claimed = claim(&store, at(0), 10).await;

        let targets: Vec<&str> = claimed.iter().map(|c| c.subscriber_id.as_str()).collect();
        assert_eq!(targets, ["alpha", "beta", "alpha", "beta"]);
        for c in &claimed {
            let secret = if c.subscriber_id == "alpha" {
                &alpha
            } else {
                &beta
            };
            assert_eq!(current_secret(c), secret, "{}", c.event_id);
            assert_eq!(
                c.url,
                format!("https://{}.example.test/hook", c.subscriber_id)
            );
        }
    }
);

// docs/DESIGN.md §2 and §3: a claim takes a job only while its subscriber is under its limits,
// and `max_in_flight` counts open attempts across all instances, which only the store
// sees. Deferral uses no attempt, so the claim itself must hold the job back.
store_case!(claim_respects_max_in_flight, async |store: SharedStore| {
    let narrow = SubscriberPut {
        max_in_flight: Some(2),
        ..subscriber_put("narrow")
    };
    store.put_subscriber(narrow, at(0)).await.unwrap();
    add_subscriber(&store, "wide").await;
    let jobs = create(
        &store,
        vec![
            new_job("narrow", "n0", at(-4_000), at(60_000)),
            new_job("narrow", "n1", at(-3_000), at(60_000)),
            new_job("narrow", "n2", at(-2_000), at(60_000)),
            new_job("narrow", "n3", at(-1_500), at(60_000)),
            new_job("wide", "w0", at(-1_000), at(60_000)),
        ],
    )
    .await;

    // Round-robin across subscribers: each one's oldest first.
    let claimed = claim(&store, at(0), 10).await;
    assert_eq!(claimed_ids(&claimed), [jobs[0].id, jobs[4].id, jobs[1].id]);

    let done = outcome(&claimed[0], JobEvent::Delivered, delivered(200), at(100));
    store.record_outcomes(&[done], at(100)).await.unwrap();
    assert_eq!(claimed_ids(&claim(&store, at(200), 10).await), [jobs[2].id]);
    assert_eq!(
        job(&store, jobs[3].id).await.attempts,
        0,
        "deferral uses no attempt"
    );
});
