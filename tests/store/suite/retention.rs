//! Retention: finished jobs go with their attempts once last updated before the cutoff
//! of their kind (exclusive); dead jobs only by their own cutoff; a job that is not
//! finished never goes, however old; each call deletes at most its limit.

use std::sync::Arc;
use std::time::Duration;

use deferhook::delivery::retention::{self, RetentionSettings, purge_once};
use deferhook::domain::{DeadReason, JobState, ManualClock, Timestamp};
use deferhook::store::{PurgedJobs, SharedStore};
use deferhook::testing::START;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::finish::{Fate, finish, job_created_at};
use crate::support::{add_subscriber, at, claim, create, delivered, job_at, new_job};

/// Ten days, in milliseconds.
const DAYS_10: i64 = 864_000_000;

fn purged(delivered: u64, cancelled: u64, dead: u64) -> PurgedJobs {
    PurgedJobs {
        delivered,
        cancelled,
        dead,
    }
}

async fn gone(store: &SharedStore, id: Uuid) -> bool {
    let attempts = store.list_attempts(id, at(0)).await.unwrap();
    store.get_job(id, at(0)).await.unwrap().is_none() && attempts.is_empty()
}

async fn kept(store: &SharedStore, id: Uuid) -> bool {
    store.get_job(id, at(0)).await.unwrap().is_some()
}

store_case!(
    old_delivered_and_cancelled_jobs_go_with_their_attempts,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let new = |event: &str| job_created_at("s", event, START);
        let old_delivered = finish(&store, new("a"), at(1_000), Fate::Delivered)
            .await
            .id;
        let old_cancelled = finish(&store, new("b"), at(2_000), Fate::Cancelled)
            .await
            .id;
        let recent = finish(&store, new("c"), at(5_000), Fate::Delivered)
            .await
            .id;
        let dead = finish(
            &store,
            new("d"),
            at(1_000),
            Fate::Dead(DeadReason::MaxAttempts),
        )
        .await
        .id;
        assert_eq!(
            store
                .list_attempts(old_delivered, at(0))
                .await
                .unwrap()
                .len(),
            1
        );

        // Last updated at the cutoff itself: kept (the bound is exclusive).
        let first = store
            .purge_finished(Some(at(5_000)), None, 100)
            .await
            .unwrap();

        assert_eq!(first, purged(1, 1, 0));
        assert!(gone(&store, old_delivered).await);
        assert!(gone(&store, old_cancelled).await);
        assert!(kept(&store, recent).await);
        assert_eq!(store.list_attempts(recent, at(0)).await.unwrap().len(), 1);
        assert!(
            kept(&store, dead).await,
            "dead jobs follow their own setting"
        );

        let second = store
            .purge_finished(Some(at(5_001)), None, 100)
            .await
            .unwrap();
        assert_eq!(second, purged(1, 0, 0));
        assert!(gone(&store, recent).await);
        assert!(kept(&store, dead).await);
    }
);

store_case!(
    dead_jobs_go_only_by_their_own_cutoff,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let new = |event: &str| job_created_at("s", event, START);
        let dead = finish(
            &store,
            new("a"),
            at(1_000),
            Fate::Dead(DeadReason::TargetRejected),
        )
        .await
        .id;
        let done = finish(&store, new("b"), at(1_000), Fate::Delivered)
            .await
            .id;

        assert_eq!(
            store.purge_finished(None, None, 100).await.unwrap(),
            purged(0, 0, 0)
        );
        let finished_only = store.purge_finished(Some(at(DAYS_10)), None, 100).await;
        assert_eq!(finished_only.unwrap(), purged(1, 0, 0));
        assert!(gone(&store, done).await);
        assert!(kept(&store, dead).await);
        let at_cutoff = store.purge_finished(None, Some(at(1_000)), 100).await;
        assert_eq!(at_cutoff.unwrap(), purged(0, 0, 0));
        assert!(kept(&store, dead).await);

        let dead_only = store.purge_finished(None, Some(at(1_001)), 100).await;

        assert_eq!(dead_only.unwrap(), purged(0, 0, 1));
        assert!(gone(&store, dead).await);
    }
);

store_case!(
    jobs_that_are_not_finished_are_never_purged,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let long_ago = at(-DAYS_10);
        let new = |event: &str| job_created_at("s", event, long_ago);
        // Each one last changed ten days ago; none is finished.
        let mut far_deadline = new("r");
        far_deadline.deadline = at(2 * DAYS_10);
        let retrying = finish(
            &store,
            far_deadline,
            at(-DAYS_10),
            Fate::Retrying(at(DAYS_10)),
        )
        .await;
        let in_flight = finish(&store, new("i"), at(-DAYS_10 + 1_000), Fate::InFlight).await;
        let mut waiting = new("w");
        waiting.deliver_at = at(DAYS_10);
        waiting.deadline = at(2 * DAYS_10);
        let scheduled = create(&store, vec![waiting]).await.remove(0);
        let old_done = finish(&store, new("d"), at(-DAYS_10 + 2_000), Fate::Delivered).await;
        let states = [
            (retrying.id, JobState::Retrying, 1),
            (in_flight.id, JobState::InFlight, 1),
            (scheduled.id, JobState::Scheduled, 0),
        ];
        // Read while the in-flight job's lease is live (later it reads `retrying`).
        let seen = at(-DAYS_10 + 1_000);
        for (id, state, attempts) in states {
            assert_eq!(store.list_attempts(id, seen).await.unwrap().len(), attempts);
            let stored = job_at(&store, id, seen).await;
            assert_eq!(stored.state, state);
            assert!(stored.updated_at <= at(-DAYS_10 + 1_000), "{stored:?}");
        }

        let everything = Some(Timestamp::MAX);
        let swept = store.purge_finished(everything, everything, 100).await;

        assert_eq!(swept.unwrap(), purged(1, 0, 0));
        assert!(gone(&store, old_done.id).await);
        for (id, state, attempts) in states {
            assert_eq!(job_at(&store, id, seen).await.state, state);
            assert_eq!(store.list_attempts(id, seen).await.unwrap().len(), attempts);
        }
        let again = store.purge_finished(everything, everything, 100).await;
        assert_eq!(again.unwrap(), purged(0, 0, 0));
    }
);

store_case!(
    a_purge_deletes_at_most_its_limit,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let due: Vec<_> = (0..5)
            .map(|n| new_job("s", &format!("done-{n}"), at(0), at(60_000)))
            .collect();
        create(&store, due).await;
        let claimed = claim(&store, at(0), 10).await;
        assert_eq!(claimed.len(), 5);
        let records: Vec<_> = claimed
            .iter()
            .map(|c| {
                let event = deferhook::domain::JobEvent::Delivered;
                crate::support::outcome(c, event, delivered(200), at(1_000))
            })
            .collect();
        store.record_outcomes(&records, at(1_000)).await.unwrap();
        let dead = Fate::Dead(DeadReason::MaxAttempts);
        for (n, when) in [(0, 2_000), (1, 3_000)] {
            let new = job_created_at("s", &format!("dead-{n}"), START);
            finish(&store, new, at(when), dead).await;
        }

        let cutoff = Some(at(10_000));
        let mut batches = Vec::new();
        for _ in 0..5 {
            let batch = store.purge_finished(cutoff, cutoff, 3).await.unwrap();
            batches.push(batch);
            if batch.total() == 0 {
                break;
            }
        }

        assert_eq!(
            batches,
            [
                purged(3, 0, 0),
                purged(2, 0, 1),
                purged(0, 0, 1),
                purged(0, 0, 0)
            ]
        );
    }
);

store_case!(
    the_retention_task_purges_in_batches_until_done,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let mut ids = Vec::new();
        for n in 0..5 {
            let new = job_created_at("s", &format!("done-{n}"), START);
            ids.push(finish(&store, new, at(n * 1_000), Fate::Delivered).await.id);
        }
        let dead = Fate::Dead(DeadReason::DeadlineExceeded);
        let dead_id = finish(&store, job_created_at("s", "dead", START), at(5_000), dead)
            .await
            .id;
        let settings = RetentionSettings {
            retain_finished_ms: Some(10_000),
            retain_dead_ms: Some(60_000),
            interval: Duration::from_secs(3_600),
            batch: 2,
            pause: Duration::ZERO,
        };
        let stop = CancellationToken::new();

        // At 13.5 s the jobs finished before 3.5 s are older than 10 s: 0, 1, 2, 3 s.
        let first = purge_once(&store, at(13_500), &settings, &stop)
            .await
            .unwrap();

        assert_eq!(first, purged(4, 0, 0));
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(kept(&store, *id).await, n == 4, "job {n}");
        }
        assert!(kept(&store, dead_id).await);
        let later = purge_once(&store, at(65_001), &settings, &stop)
            .await
            .unwrap();
        assert_eq!(later, purged(1, 0, 1));

        // The task stops when told, even while waiting for its next run.
        let clock = Arc::new(ManualClock::new(at(65_001)));
        let task = tokio::spawn(retention::run(store.clone(), clock, settings, stop.clone()));
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the task stops on cancel")
            .unwrap();
    }
);
