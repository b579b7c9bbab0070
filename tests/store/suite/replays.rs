//! Replays: matching dead letters, pacing by the token bucket stored with the replay,
//! requeueing only what is still dead, cancelling, and a fresh attempt budget.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::replay::{ReplayFilter, ReplayState};
use deferhook::domain::{DeadReason, JobEvent, JobState, Timestamp};
use deferhook::store::{Fenced, Job, NewJob, NewReplay, Replay, SharedStore, StoreError};
use uuid::Uuid;

use crate::support::{
    add_subscriber, at, claim, claim_one, create, delivered, failed, fresh_id, job, new_job,
    outcome, set_enabled,
};

const TTL_MS: u64 = 600_000;

/// Creates `n` jobs of `subscriber` with deadline `deadline` and sweeps them dead
/// (`deadline_exceeded`) at `dead_at`; returns them in the order they were created.
async fn dead_jobs(
    store: &SharedStore,
    subscriber: &str,
    n: usize,
    deadline: Timestamp,
    dead_at: Timestamp,
) -> Vec<Job> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            new_job(
                subscriber,
                &format!("{subscriber}-{i}-{}", fresh_id()),
                at(0),
                deadline,
            )
        })
        .collect();
    let created = create(store, jobs).await;
    store.expire_deadlines(dead_at, 10_000).await.unwrap();
    let mut out = Vec::new();
    for created in created {
        let dead = job(store, created.id).await;
        assert_eq!(dead.state, JobState::Dead);
        out.push(dead);
    }
    out
}

fn filter_of(subscriber: &str) -> ReplayFilter {
    ReplayFilter {
        subscriber_id: Some(subscriber.to_owned()),
        ..ReplayFilter::default()
    }
}

fn new_replay(filter: ReplayFilter, rate_per_second: u32, now: Timestamp) -> NewReplay {
    NewReplay {
        id: fresh_id(),
        filter,
        max_jobs: 1_000,
        rate_per_second,
        ttl_ms: TTL_MS,
        rate_budget: 10_000,
        created_at: now,
    }
}

async fn replay(store: &SharedStore, id: Uuid) -> Replay {
    store
        .get_replay(id)
        .await
        .unwrap()
        .expect("the replay exists")
}

store_case!(
    a_dry_run_counts_matching_dead_jobs_and_changes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "s1").await;
        add_subscriber(&store, "s2").await;
        let early = dead_jobs(&store, "s1", 3, at(1_000), at(2_000)).await;
        dead_jobs(&store, "s2", 2, at(5_000), at(6_000)).await;
        let live = create(&store, vec![new_job("s1", "live", at(0), at(3_600_000))]).await;

        let count = |filter: ReplayFilter, max: u32| {
            let store = store.clone();
            async move { store.count_replay_matches(&filter, max).await.unwrap() }
        };
        assert_eq!(
            count(filter_of("s1"), 100).await,
            3,
            "the live job is not dead"
        );
        assert_eq!(count(filter_of("s2"), 100).await, 2);
        let all = ReplayFilter {
            all: true,
            ..ReplayFilter::default()
        };
        assert_eq!(count(all.clone(), 100).await, 5);
        assert_eq!(count(all, 4).await, 4, "max_jobs bounds the match");
        let reason = |reason| ReplayFilter {
            dead_reason: Some(reason),
            ..ReplayFilter::default()
        };
        assert_eq!(count(reason(DeadReason::DeadlineExceeded), 100).await, 5);
        assert_eq!(count(reason(DeadReason::MaxAttempts), 100).await, 0);
        let window = ReplayFilter {
            dead_after: Some(at(2_000)),
            dead_before: Some(at(6_000)),
            ..ReplayFilter::default()
        };
        assert_eq!(
            count(window, 100).await,
            3,
            "after is inclusive, before exclusive"
        );
        let event = ReplayFilter {
            event_id: Some(early[1].event_id.clone()),
            ..ReplayFilter::default()
        };
        assert_eq!(count(event, 100).await, 1);

        for dead in &early {
            assert_eq!(
                job(&store, dead.id).await,
                *dead,
                "a dry run changes nothing"
            );
        }
        assert_eq!(job(&store, live[0].id).await.state, JobState::Scheduled);
    }
);

store_case!(
    a_replay_matching_nothing_is_done_at_once,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = store
            .create_replay(new_replay(filter_of("s"), 5, at(0)))
            .await
            .unwrap();
        assert_eq!(created.matched, 0);
        assert_eq!(created.state, ReplayState::Done);
        assert_eq!(created.finished_at, Some(at(0)));
        assert_eq!(store.next_wake_at(at(0)).await.unwrap(), None);
    }
);

store_case!(
    a_replay_requeues_at_its_pace_keeping_id_and_history,
    async |store: SharedStore| {
        add_subscriber(&store, "s1").await;
        add_subscriber(&store, "s2").await;
        // One dead job of s1 has an attempt on record.
        let first = create(&store, vec![new_job("s1", "tried", at(0), at(1_000))]).await;
        let claimed = claim_one(&store, "w", at(10)).await;
        let failure = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Http5xx,
            Some(503),
            "503",
            None,
        );
        let retry = JobEvent::RetryableFailure {
            retry_at: at(5_000),
        };
        let result = store
            .record_outcomes(&[outcome(&claimed, retry, failure, at(20))], at(20))
            .await
            .unwrap();
        assert_eq!(result, vec![Fenced::Applied]);
        assert_eq!(
            job(&store, first[0].id).await.dead_reason,
            Some(DeadReason::DeadlineExceeded)
        );
        let others = dead_jobs(&store, "s1", 3, at(1_000), at(2_000)).await;
        let untouched = dead_jobs(&store, "s2", 2, at(1_000), at(2_000)).await;

        // rate 5/s: one job per 200 ms, oldest dead first.
        let start = at(10_000);
        let created = store
            .create_replay(new_replay(filter_of("s1"), 5, start))
            .await
            .unwrap();
        assert_eq!((created.matched, created.state), (4, ReplayState::Running));
        assert_eq!(store.next_wake_at(start).await.unwrap(), Some(start));

        let step = store.advance_replays(start).await.unwrap();
        assert_eq!(step.requeued, 1);
        let requeued = job(&store, first[0].id).await;
        assert_eq!(requeued.state, JobState::Scheduled);
        assert_eq!(requeued.due_at, Some(start));
        assert_eq!(
            requeued.deliver_at, start,
            "eligible again from the replay on"
        );
        assert_eq!(requeued.deadline, start.plus_ms(TTL_MS));
        assert_eq!((requeued.dead_reason, requeued.dead_at), (None, None));
        assert_eq!(requeued.event_id, "tried");
        assert_eq!(requeued.attempts, 1, "the attempt count is history");
        assert_eq!(
            store.list_attempts(first[0].id, at(0)).await.unwrap().len(),
            1
        );

        assert_eq!(store.advance_replays(at(10_199)).await.unwrap().requeued, 0);
        // Once the requeued job is taken, the worker's next wake-up is the next burst.
        claim_one(&store, "w", at(10_100)).await;
        assert_eq!(
            store.next_wake_at(at(10_100)).await.unwrap(),
            Some(at(10_200))
        );
        assert_eq!(store.advance_replays(at(10_200)).await.unwrap().requeued, 1);
        let progress = replay(&store, created.id).await;
        assert_eq!(
            (progress.requeued, progress.state),
            (2, ReplayState::Running)
        );

        // Workers take each burst before the next one (a burst still waiting holds the
        // replay: see `a_replay_holds_while_its_last_burst_waits`).
        claim_one(&store, "w", at(10_300)).await;
        assert_eq!(store.advance_replays(at(10_400)).await.unwrap().requeued, 1);
        claim_one(&store, "w", at(10_500)).await;
        let last = store.advance_replays(at(10_600)).await.unwrap();
        assert_eq!((last.requeued, last.finished), (1, 1));
        let done = replay(&store, created.id).await;
        assert_eq!(
            (done.requeued, done.skipped, done.state, done.finished_at),
            (4, 0, ReplayState::Done, Some(at(10_600)))
        );
        claim_one(&store, "w", at(10_700)).await;
        for dead in &others {
            let taken = job(&store, dead.id).await;
            assert_eq!(taken.state, JobState::InFlight, "requeued, then claimed");
            assert_eq!(taken.attempts, 1);
        }
        for dead in &untouched {
            assert_eq!(
                job(&store, dead.id).await,
                *dead,
                "another subscriber's dead jobs stay"
            );
        }
        assert_eq!(store.advance_replays(at(20_000)).await.unwrap().requeued, 0);
    }
);

store_case!(
    a_job_no_longer_dead_is_skipped_never_resent,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let dead = dead_jobs(&store, "s", 3, at(1_000), at(2_000)).await;
        let first = store
            .create_replay(new_replay(filter_of("s"), 100, at(3_000)))
            .await
            .unwrap();
        let second = store
            .create_replay(new_replay(filter_of("s"), 100, at(3_000)))
            .await
            .unwrap();
        assert_eq!((first.matched, second.matched), (3, 3));
        // Deliver the first replay's jobs, then let the second one run.
        let step = store.advance_replays(at(3_000)).await.unwrap();
        assert_eq!(step.requeued + step.skipped, 6);
        assert_eq!(step.requeued, 3, "each job is requeued once");
        let claimed = claim(&store, at(3_100), 10).await;
        assert_eq!(claimed.len(), 3);
        let records: Vec<_> = claimed
            .iter()
            .map(|c| outcome(c, JobEvent::Delivered, delivered(200), at(3_200)))
            .collect();
        store.record_outcomes(&records, at(3_200)).await.unwrap();
        let (a, b) = (
            replay(&store, first.id).await,
            replay(&store, second.id).await,
        );
        assert_eq!(a.requeued + b.requeued, 3);
        assert_eq!(a.skipped + b.skipped, 3);
        assert_eq!((a.state, b.state), (ReplayState::Done, ReplayState::Done));
        for job_ in &dead {
            assert_eq!(job(&store, job_.id).await.state, JobState::Delivered);
        }
        // Run again: nothing is dead any more.
        let again = store
            .create_replay(new_replay(filter_of("s"), 100, at(4_000)))
            .await
            .unwrap();
        assert_eq!((again.matched, again.state), (0, ReplayState::Done));
    }
);

store_case!(
    a_cancelled_replay_requeues_nothing_more,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let dead = dead_jobs(&store, "s", 3, at(1_000), at(2_000)).await;
        let created = store
            .create_replay(new_replay(filter_of("s"), 1, at(3_000)))
            .await
            .unwrap();
        assert_eq!(store.advance_replays(at(3_000)).await.unwrap().requeued, 1);
        let cancelled = store
            .cancel_replay(created.id, at(3_500))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cancelled.state, ReplayState::Cancelled);
        assert_eq!(
            (cancelled.requeued, cancelled.finished_at),
            (1, Some(at(3_500)))
        );
        assert_eq!(store.advance_replays(at(10_000)).await.unwrap().requeued, 0);
        let still_dead = {
            let mut n = 0;
            for job_ in &dead {
                n += usize::from(job(&store, job_.id).await.state == JobState::Dead);
            }
            n
        };
        assert_eq!(still_dead, 2);
        // Cancelling again changes nothing; an unknown replay is None.
        let again = store
            .cancel_replay(created.id, at(4_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.finished_at, Some(at(3_500)));
        assert!(
            store
                .cancel_replay(fresh_id(), at(4_000))
                .await
                .unwrap()
                .is_none()
        );
        assert!(store.get_replay(fresh_id()).await.unwrap().is_none());
    }
);

store_case!(
    a_replayed_job_gets_a_fresh_attempt_budget,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let new = NewJob {
            max_attempts: Some(2),
            ..new_job("s", "budget", at(0), at(3_600_000))
        };
        let id = create(&store, vec![new]).await[0].id;
        let mut now = at(0);
        // A failure that says nothing about the receiver (its secret unreadable, so
        // nothing was sent): six 500s in a row would open its endpoint circuit
        // (docs/DESIGN.md §15.1), which is not this case's subject.
        let fail_once = |store: SharedStore, now: Timestamp| async move {
            let claimed = claim_one(&store, "w", now).await;
            let failure = failed(
                AttemptOutcome::Retryable,
                ErrorClass::SecretUnreadable,
                None,
                "the subscriber's secret cannot be read",
                None,
            );
            let retry = JobEvent::RetryableFailure {
                retry_at: now.plus_ms(1),
            };
            store
                .record_outcomes(&[outcome(&claimed, retry, failure, now)], now)
                .await
                .unwrap();
        };
        for _ in 0..2 {
            fail_once(store.clone(), now).await;
            now = now.plus_ms(10);
        }
        let dead = job(&store, id).await;
        assert_eq!(
            (dead.attempts, dead.dead_reason),
            (2, Some(DeadReason::MaxAttempts))
        );

        for round in 1..=2u32 {
            let created = store
                .create_replay(new_replay(filter_of("s"), 10, now))
                .await
                .unwrap();
            assert_eq!(created.matched, 1);
            store.advance_replays(now).await.unwrap();
            let requeued = job(&store, id).await;
            assert_eq!(requeued.state, JobState::Scheduled);
            assert_eq!(
                requeued.max_attempts,
                Some(2 + 2 * round),
                "two more attempts"
            );
            for _ in 0..2 {
                now = now.plus_ms(10);
                fail_once(store.clone(), now).await;
            }
            let dead = job(&store, id).await;
            assert_eq!(dead.attempts, 2 + 2 * round);
            assert_eq!(dead.dead_reason, Some(DeadReason::MaxAttempts));
            assert_eq!(
                store.list_attempts(id, at(0)).await.unwrap().len() as u32,
                2 + 2 * round
            );
            now = now.plus_ms(10);
        }
    }
);

// Retention may purge a dead job a running replay has matched: the replay carries on
// with the rest and ends.
store_case!(
    a_replay_survives_the_purge_of_matched_jobs,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let dead = dead_jobs(&store, "s", 3, at(1_000), at(2_000)).await;
        let created = store
            .create_replay(new_replay(filter_of("s"), 1, at(3_000)))
            .await
            .unwrap();
        assert_eq!(store.advance_replays(at(3_000)).await.unwrap().requeued, 1);
        let purged = store
            .purge_finished(None, Some(at(10_000)), 100)
            .await
            .unwrap();
        assert_eq!(purged.dead, 2, "the two still dead");
        claim_one(&store, "w", at(3_500)).await;
        let last = store.advance_replays(at(4_000)).await.unwrap();
        assert_eq!((last.requeued, last.finished), (0, 1));
        let done = replay(&store, created.id).await;
        assert_eq!(
            (done.state, done.matched, done.requeued, done.skipped),
            (ReplayState::Done, 3, 1, 0)
        );
        assert_eq!(job(&store, dead[0].id).await.state, JobState::InFlight);
        assert!(store.get_job(dead[1].id, at(0)).await.unwrap().is_none());
    }
);

/// Records a 503 for `claimed` at `at`, retried a minute later.
async fn answer_503(store: &SharedStore, claimed: &deferhook::store::ClaimedJob, at_: Timestamp) {
    let failure = failed(
        AttemptOutcome::Retryable,
        ErrorClass::Http5xx,
        Some(503),
        "503",
        None,
    );
    let retry = JobEvent::RetryableFailure {
        retry_at: at_.plus_ms(60_000),
    };
    store
        .record_outcomes(&[outcome(claimed, retry, failure, at_)], at_)
        .await
        .unwrap();
}

// A replay releases its next burst only once the last one is taken: while its jobs
// wait (a paused subscriber) or retry (a failing receiver), the replay holds, so
// replayed jobs never pile up to reach the receiver all at once.
store_case!(
    a_replay_holds_while_its_last_burst_waits,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        dead_jobs(&store, "s", 3, at(1_000), at(2_000)).await;
        set_enabled(&store, "s", false, at(2_500)).await;
        let created = store
            .create_replay(new_replay(filter_of("s"), 5, at(3_000)))
            .await
            .unwrap();
        assert_eq!(store.advance_replays(at(3_000)).await.unwrap().requeued, 1);
        // Paused: the requeued job waits, so the replay holds, however long.
        for now in [3_200, 3_400, 10_000] {
            assert_eq!(store.advance_replays(at(now)).await.unwrap().requeued, 0);
        }
        assert_eq!(replay(&store, created.id).await.requeued, 1);

        set_enabled(&store, "s", true, at(10_000)).await;
        let claimed = claim_one(&store, "w", at(10_010)).await;
        assert_eq!(store.advance_replays(at(10_100)).await.unwrap().requeued, 1);
        // The receiver fails: the jobs retry, and the replay holds again.
        answer_503(&store, &claimed, at(10_150)).await;
        let second = claim_one(&store, "w", at(10_200)).await;
        answer_503(&store, &second, at(10_250)).await;
        assert_eq!(store.advance_replays(at(10_400)).await.unwrap().requeued, 0);
        assert_eq!(replay(&store, created.id).await.requeued, 2);
    }
);

// Within a burst, jobs are due one after another across its interval.
store_case!(
    a_burst_is_spread_over_its_interval,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let dead = dead_jobs(&store, "s", 4, at(1_000), at(2_000)).await;
        // 40/s: bursts of 4 every 100 ms, one job every 25 ms.
        store
            .create_replay(new_replay(filter_of("s"), 40, at(3_000)))
            .await
            .unwrap();
        assert_eq!(store.advance_replays(at(3_000)).await.unwrap().requeued, 4);
        let mut due = Vec::new();
        for job_ in &dead {
            due.push(job(&store, job_.id).await.due_at.unwrap());
        }
        assert_eq!(due, [at(3_000), at(3_025), at(3_050), at(3_075)]);
        assert_eq!(
            claim(&store, at(3_030), 10).await.len(),
            2,
            "only those due"
        );
    }
);

// The server's `--max-replay-rate` bounds all running replays together: overlapping
// replays cannot add up to more.
store_case!(
    running_replays_share_one_rate_budget,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        dead_jobs(&store, "s", 2, at(1_000), at(2_000)).await;
        let within = |rate| NewReplay {
            rate_budget: 100,
            ..new_replay(filter_of("s"), rate, at(3_000))
        };
        let first = store.create_replay(within(60)).await.unwrap();
        let refused = store.create_replay(within(41)).await.unwrap_err();
        assert!(
            matches!(
                refused,
                StoreError::ReplayRateBudget {
                    used: 60,
                    budget: 100
                }
            ),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("at most 40/s"), "{refused}");
        store.create_replay(within(40)).await.unwrap();
        // An ended replay frees its share.
        store.cancel_replay(first.id, at(3_100)).await.unwrap();
        store.create_replay(within(60)).await.unwrap();
    }
);
