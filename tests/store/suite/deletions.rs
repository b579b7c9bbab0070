//! Deleting a subscriber (issue #16 part 8): its waiting jobs end `dead`
//! (`subscriber_deleted`) in one transaction, the late result of an attempt in flight
//! is fenced out, its history stays readable by job and event id, and its id may be
//! registered again as a new subscriber that inherits nothing. A long history moves
//! to the tombstone in batches after the first step, and an interrupted move is
//! finished by the maintenance step.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::replay::ReplayFilter;
use deferhook::domain::{DeadReason, JobEvent, JobState};
use std::time::Duration;

use deferhook::delivery::deletions;
use deferhook::store::{
    CreateOutcome, Fenced, HistoryMoved, Job, JobFilter, PageRequest, SharedStore, StoreError,
    SubscriberPut, SubscriberStats,
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::{
    add_subscriber, at, claim_as, claim_one, create, create_due, current_secret, delivered, failed,
    job_at, lease, list_at, new_job, outcome, subscriber_put,
};

store_case!(
    a_deletion_kills_the_waiting_jobs_and_keeps_the_history,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        add_subscriber(&store, "other").await;
        // delivered before the deletion
        let done = create_due(&store, "acme", at(0)).await;
        let claimed = claim_one(&store, "w", at(1)).await;
        let record = outcome(&claimed, JobEvent::Delivered, delivered(200), at(2));
        store.record_outcomes(&[record], at(2)).await.unwrap();
        // in flight at the deletion
        let flying = create_due(&store, "acme", at(10)).await;
        let in_flight = claim_one(&store, "w", at(11)).await;
        assert_eq!(in_flight.job_id, flying.id);
        // scheduled for later
        let later = create(
            &store,
            vec![new_job("acme", "later", at(60_000), at(3_600_000))],
        )
        .await
        .remove(0);
        let bystander = create_due(&store, "other", at(50_000)).await;

        let deleted = store
            .delete_subscriber("acme", at(1_000))
            .await
            .unwrap()
            .expect("it existed");
        assert_eq!(deleted.subscriber_id, "acme");
        assert_eq!(deleted.jobs_dead, 2);
        assert_eq!(deleted.deleted_at, at(1_000));

        for id in [flying.id, later.id] {
            let job = job_at(&store, id, at(1_000)).await;
            assert_eq!(job.state, JobState::Dead);
            assert_eq!(job.dead_reason, Some(DeadReason::SubscriberDeleted));
            assert_eq!(job.dead_at, Some(at(1_000)));
            assert_eq!(job.subscriber_id, "acme", "shown under the id it had");
            assert!(job.lease.is_none());
        }
        let kept = job_at(&store, done.id, at(1_000)).await;
        assert_eq!(kept.state, JobState::Delivered);
        assert_eq!(kept.subscriber_id, "acme");
        assert_eq!(
            job_at(&store, bystander.id, at(1_000)).await.state,
            JobState::Scheduled
        );
        // findable by event id, no longer under the subscriber's id
        let by_event = JobFilter {
            event_id: Some("later".into()),
            ..JobFilter::default()
        };
        assert_eq!(list_at(&store, by_event, at(1_000)).await.len(), 1);
        let by_subscriber = JobFilter {
            subscriber_id: Some("acme".into()),
            ..JobFilter::default()
        };
        assert!(list_at(&store, by_subscriber, at(1_000)).await.is_empty());
        // the attempt in flight reads unknown until a result lands on it
        let attempts = store.list_attempts(flying.id, at(1_000)).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
        // gone from reads and listings
        assert_eq!(store.get_subscriber("acme").await.unwrap(), None);
        assert_eq!(
            store.subscriber_stats("acme", at(1_000)).await.unwrap(),
            None
        );
        let listed = store
            .list_subscribers(PageRequest {
                after: None,
                limit: 100,
            })
            .await
            .unwrap();
        let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["other"]);
    }
);

store_case!(
    the_late_result_of_an_attempt_in_flight_is_fenced_out,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        let job = create_due(&store, "acme", at(0)).await;
        let claimed = claim_one(&store, "w", at(1)).await;
        store.delete_subscriber("acme", at(5)).await.unwrap();
        // recreated at once: a late 410 must not pause the new subscriber
        store
            .put_subscriber(subscriber_put("acme"), at(6))
            .await
            .unwrap();

        let renewed = store
            .renew_leases(&[lease(&claimed)], at(60_000), at(7))
            .await
            .unwrap();
        assert_eq!(renewed, [false], "the lease is gone");
        let mut late = outcome(
            &claimed,
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
            at(8),
        );
        late.pause_subscriber = true;
        let fenced = store.record_outcomes(&[late], at(8)).await.unwrap();
        assert_eq!(fenced, [Fenced::Late]);

        let stored = job_at(&store, job.id, at(9)).await;
        assert_eq!(stored.state, JobState::Dead);
        assert_eq!(stored.dead_reason, Some(DeadReason::SubscriberDeleted));
        let attempts = store.list_attempts(job.id, at(9)).await.unwrap();
        assert_eq!(
            attempts[0].status,
            Some(410),
            "the late result lands on its attempt"
        );
        let new = store
            .get_subscriber("acme")
            .await
            .unwrap()
            .expect("new one");
        assert!(
            new.enabled,
            "a late 410 of the old one does not pause the new one"
        );
        assert_eq!(new.paused_reason, None);
    }
);

store_case!(
    the_id_may_be_registered_again_as_a_new_subscriber,
    async |store: SharedStore| {
        let old_secret = add_subscriber(&store, "acme").await;
        let first = create(&store, vec![new_job("acme", "evt-1", at(0), at(3_600_000))])
            .await
            .remove(0);
        let pause = SubscriberPut {
            enabled: Some(false),
            ..subscriber_put("acme")
        };
        store.put_subscriber(pause, at(1)).await.unwrap();
        store.delete_subscriber("acme", at(10)).await.unwrap();
        assert!(
            store
                .create_jobs(vec![new_job("acme", "evt-2", at(20), at(3_600_000))])
                .await
                .is_err(),
            "no subscriber until it is registered again"
        );

        let created = store
            .put_subscriber(subscriber_put("acme"), at(20))
            .await
            .unwrap();
        let new_secret = created.created_secret.expect("a new subscriber");
        assert_ne!(new_secret, old_secret);
        let new = created.subscriber;
        assert!(new.enabled, "not paused as the old one was");
        assert_eq!(new.created_at, at(20));
        assert_eq!(
            store.subscriber_stats("acme", at(20)).await.unwrap(),
            Some(SubscriberStats::default()),
            "no history of the old one"
        );

        // the same event id is a new job, not the old one's repeat
        let again = new_job("acme", "evt-1", at(20), at(3_600_000));
        let outcome = store.create_jobs(vec![again]).await.unwrap().remove(0);
        let CreateOutcome::Created(second) = outcome else {
            panic!("evt-1 is new for the new subscriber: {outcome:?}");
        };
        assert_ne!(second.id, first.id);
        let claimed = claim_one(&store, "w", at(21)).await;
        assert_eq!(claimed.job_id, second.id);
        assert_eq!(
            current_secret(&claimed),
            &new_secret,
            "signed with the new secret"
        );
        assert_eq!(
            job_at(&store, first.id, at(21)).await.dead_reason,
            Some(DeadReason::SubscriberDeleted)
        );
    }
);

store_case!(
    an_unknown_subscriber_is_not_deleted,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        assert_eq!(
            store.delete_subscriber("nobody", at(1)).await.unwrap(),
            None
        );
        let deleted = store.delete_subscriber("acme", at(2)).await.unwrap();
        assert_eq!(deleted.map(|d| d.jobs_dead), Some(0));
        assert_eq!(store.delete_subscriber("acme", at(3)).await.unwrap(), None);
    }
);

store_case!(
    replays_never_requeue_a_deleted_subscribers_jobs,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        create_due(&store, "acme", at(60_000)).await;
        store.delete_subscriber("acme", at(1)).await.unwrap();
        let filter = ReplayFilter {
            dead_reason: Some(DeadReason::SubscriberDeleted),
            ..ReplayFilter::default()
        };
        assert_eq!(store.count_replay_matches(&filter, 100).await.unwrap(), 0);
        let all = ReplayFilter {
            all: true,
            ..ReplayFilter::default()
        };
        assert_eq!(store.count_replay_matches(&all, 100).await.unwrap(), 0);
    }
);

store_case!(
    a_tombstone_goes_once_retention_purged_its_jobs,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        create_due(&store, "acme", at(60_000)).await;
        store.delete_subscriber("acme", at(1)).await.unwrap();
        assert_eq!(
            store.purge_tombstones(at(2), 10).await.unwrap(),
            0,
            "a job left"
        );
        let purged = store.purge_finished(None, Some(at(2)), 10).await.unwrap();
        assert_eq!(purged.dead, 1);
        assert_eq!(
            store.purge_tombstones(at(1), 10).await.unwrap(),
            0,
            "not before"
        );
        assert_eq!(store.purge_tombstones(at(2), 10).await.unwrap(), 1);
        assert_eq!(store.purge_tombstones(at(2), 10).await.unwrap(), 0);
    }
);

store_case!(
    retention_leaves_the_tombstone_of_a_deletion_whose_jobs_have_not_moved_yet,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        create_many(&store, "acme", 3).await;
        store
            .begin_subscriber_deletion("acme", at(100))
            .await
            .unwrap()
            .expect("it existed");
        // Step 1 made the tombstone (no job of its own yet); step 2 has not run.
        assert_eq!(
            store.purge_tombstones(at(i64::MAX / 2), 10).await.unwrap(),
            0,
            "the tombstone a deletion is moving into is not purged"
        );
        let step = store.move_deleted_history("acme", 100).await.unwrap();
        assert_eq!(
            step,
            Some(HistoryMoved {
                jobs: 3,
                attempts: 0,
                finished: true
            }),
            "the history moves into the tombstone"
        );
    }
);

/// Creates `n` jobs of `subscriber` for later (events `evt-0`…), in chunks.
async fn create_many(store: &SharedStore, subscriber: &str, n: usize) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let batch = chunk
            .iter()
            .map(|i| new_job(subscriber, &format!("evt-{i}"), at(60_000), at(3_600_000)))
            .collect();
        jobs.extend(create(store, batch).await);
    }
    jobs
}

/// Delivers `n` due jobs of `subscriber` (one attempt each); returns their ids.
async fn deliver_some(store: &SharedStore, subscriber: &str, n: usize) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for _ in 0..n {
        create_due(store, subscriber, at(0)).await;
    }
    for claimed in claim_as(store, "w", at(1), u32::try_from(n).unwrap()).await {
        let record = outcome(&claimed, JobEvent::Delivered, delivered(200), at(2));
        store.record_outcomes(&[record], at(2)).await.unwrap();
        ids.push(claimed.job_id);
    }
    assert_eq!(ids.len(), n);
    ids
}

/// Runs the second step of `id`'s deletion in batches of `limit` until it finishes;
/// returns (jobs, attempts, batches).
async fn move_all(store: &SharedStore, id: &str, limit: u32) -> (u64, u64, u64) {
    let (mut jobs, mut attempts, mut batches) = (0, 0, 0);
    loop {
        let step = store
            .move_deleted_history(id, limit)
            .await
            .unwrap()
            .expect("being deleted until finished");
        assert!(step.jobs + step.attempts <= u64::from(limit), "{step:?}");
        jobs += step.jobs;
        attempts += step.attempts;
        batches += 1;
        if step.finished {
            return (jobs, attempts, batches);
        }
    }
}

store_case!(
    a_long_history_moves_in_batches_and_frees_the_id,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        let waiting = create_many(&store, "acme", 5_000).await;
        let delivered_ids = deliver_some(&store, "acme", 10).await;

        let deleted = store
            .begin_subscriber_deletion("acme", at(100))
            .await
            .unwrap()
            .expect("it existed");
        assert_eq!(deleted.jobs_dead, 5_000);
        // being deleted: gone for every read and change, and its id not yet free
        assert_eq!(store.get_subscriber("acme").await.unwrap(), None);
        assert_eq!(store.subscriber_stats("acme", at(100)).await.unwrap(), None);
        let page = PageRequest {
            after: None,
            limit: 100,
        };
        assert!(store.list_subscribers(page).await.unwrap().is_empty());
        assert_eq!(
            store.delete_subscriber("acme", at(101)).await.unwrap(),
            None
        );
        let put = store.put_subscriber(subscriber_put("acme"), at(101)).await;
        assert!(
            matches!(put, Err(StoreError::SubscriberBeingDeleted(ref id)) if id == "acme"),
            "{put:?}"
        );
        let job = new_job("acme", "evt-new", at(101), at(3_600_000));
        let create = store.create_jobs(vec![job]).await;
        assert!(
            matches!(create, Err(StoreError::UnknownSubscriber(_))),
            "{create:?}"
        );
        assert!(claim_as(&store, "w", at(120_000), 10).await.is_empty());
        assert_eq!(
            store.deletions_in_progress(10).await.unwrap(),
            vec!["acme".to_owned()]
        );

        let (jobs, attempts, batches) = move_all(&store, "acme", 64).await;
        assert_eq!((jobs, attempts), (5_010, 10));
        assert_eq!(
            batches,
            5_020_u64.div_ceil(64),
            "full batches until the last"
        );
        assert_eq!(store.move_deleted_history("acme", 64).await.unwrap(), None);
        assert!(store.deletions_in_progress(10).await.unwrap().is_empty());

        // the history, readable by job id under the id it had
        for job in [&waiting[0], &waiting[4_999]] {
            let read = job_at(&store, job.id, at(200)).await;
            assert_eq!(read.subscriber_id, "acme");
            assert_eq!(read.dead_reason, Some(DeadReason::SubscriberDeleted));
        }
        let attempts = store
            .list_attempts(delivered_ids[0], at(200))
            .await
            .unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Delivered);

        // the id is free: a new subscriber with a fresh idempotency space
        let created = store
            .put_subscriber(subscriber_put("acme"), at(300))
            .await
            .unwrap();
        assert!(created.created_secret.is_some(), "a new subscriber");
        let again = new_job("acme", "evt-0", at(300), at(3_600_000));
        let outcome = store.create_jobs(vec![again]).await.unwrap().remove(0);
        let CreateOutcome::Created(new) = outcome else {
            panic!("evt-0 is new for the new subscriber: {outcome:?}");
        };
        assert_ne!(new.id, waiting[0].id);
        let stats = store
            .subscriber_stats("acme", at(300))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stats.jobs.scheduled, 1, "nothing of the old one: {stats:?}");
        assert_eq!(stats.jobs.dead, 0);
        assert_eq!(stats.last_success_at, None);
    }
);

store_case!(
    an_interrupted_deletion_is_finished_by_the_maintenance_step,
    async |store: SharedStore| {
        add_subscriber(&store, "acme").await;
        create_many(&store, "acme", 50).await;
        deliver_some(&store, "acme", 5).await;
        store
            .begin_subscriber_deletion("acme", at(100))
            .await
            .unwrap()
            .expect("it existed");
        // one batch, then a "crash": the jobs moved, the attempts not yet
        let step = store.move_deleted_history("acme", 55).await.unwrap();
        assert_eq!(
            step,
            Some(HistoryMoved {
                jobs: 55,
                attempts: 0,
                finished: false
            })
        );
        assert_eq!(
            store.purge_tombstones(at(i64::MAX / 2), 10).await.unwrap(),
            0,
            "retention never takes a row still being deleted"
        );

        let stop = CancellationToken::new();
        let finished = deletions::finish_all(&store, 2, Duration::ZERO, &stop)
            .await
            .unwrap();
        assert_eq!(finished, 1);
        assert!(store.deletions_in_progress(10).await.unwrap().is_empty());
        assert_eq!(store.move_deleted_history("acme", 2).await.unwrap(), None);
        let created = store
            .put_subscriber(subscriber_put("acme"), at(300))
            .await
            .unwrap();
        assert!(created.created_secret.is_some(), "a new subscriber");
        let stats = store
            .subscriber_stats("acme", at(300))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stats.jobs, SubscriberStats::default().jobs, "{stats:?}");
        assert_eq!(stats.last_success_at, None, "its attempts moved too");
    }
);
