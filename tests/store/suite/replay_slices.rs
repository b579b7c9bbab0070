//! Replays of a slice (issue #16 part 7): a list of subscribers, the last error's class
//! and HTTP status; retrying jobs brought forward at the replay's pace; the rate budget
//! counting only the replays that still have jobs to release; the listing.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::replay::{ReplayFilter, ReplaySelection, ReplayState};
use deferhook::domain::{DeadReason, JobEvent, JobState, Timestamp};
use deferhook::store::{Fenced, Job, NewReplay, PageRequest, Replay, SharedStore, StoreError};
use uuid::Uuid;

use crate::support::{
    add_subscriber, at, claim_one, create, create_due, failed, fresh_id, job, new_job, outcome,
};

/// Creates a job of `subscriber` due at `now`, claims it and records a failure of
/// `class` and `status` at `now`: dead (`non_retryable_response`) when `terminal`,
/// else retrying a minute later. Nothing else may be due at `now`.
async fn failed_job(
    store: &SharedStore,
    subscriber: &str,
    class: ErrorClass,
    status: Option<u16>,
    terminal: bool,
    now: Timestamp,
) -> Job {
    let id = create_due(store, subscriber, now).await.id;
    let claimed = claim_one(store, "w", now).await;
    assert_eq!(claimed.job_id, id);
    let (kind, event) = if terminal {
        let reason = DeadReason::NonRetryableResponse;
        (
            AttemptOutcome::Terminal,
            JobEvent::TerminalFailure { reason },
        )
    } else {
        let retry_at = now.plus_ms(60_000);
        (
            AttemptOutcome::Retryable,
            JobEvent::RetryableFailure { retry_at },
        )
    };
    let result = failed(kind, class, status, "failed", None);
    let record = outcome(&claimed, event, result, now);
    assert_eq!(
        store.record_outcomes(&[record], now).await.unwrap(),
        [Fenced::Applied]
    );
    job(store, id).await
}

fn new_replay(filter: ReplayFilter, rate_per_second: u32, now: Timestamp) -> NewReplay {
    NewReplay {
        id: fresh_id(),
        filter,
        max_jobs: 1_000,
        rate_per_second,
        ttl_ms: 600_000,
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

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

store_case!(
    a_replay_matches_subscribers_class_and_status_together,
    async |store: SharedStore| {
        for s in ["a", "b", "c"] {
            add_subscriber(&store, s).await;
        }
        let gone = |s| (s, ErrorClass::Http4xx, Some(410));
        let broken = |s| (s, ErrorClass::Http5xx, Some(500));
        let unavailable = |s| (s, ErrorClass::Http5xx, Some(503));
        let slow = |s| (s, ErrorClass::Timeout, None);
        let mut now = at(1_000);
        let mut dead = Vec::new();
        for (s, class, status) in [
            gone("a"),
            broken("a"),
            unavailable("a"),
            slow("b"),
            unavailable("b"),
            unavailable("c"),
        ] {
            dead.push(failed_job(&store, s, class, status, true, now).await);
            now = now.plus_ms(10);
        }
        // A retrying job of `a` with a 503 is not dead: a dead replay leaves it.
        failed_job(&store, "a", ErrorClass::Http5xx, Some(503), false, now).await;

        let count = |filter: ReplayFilter| {
            let store = store.clone();
            async move { store.count_replay_matches(&filter, 100).await.unwrap() }
        };
        let of = |names: &[&str]| ReplayFilter {
            subscriber_ids: ids(names),
            ..ReplayFilter::default()
        };
        assert_eq!(count(of(&["a", "b"])).await, 5);
        assert_eq!(
            count(of(&["c", "nobody"])).await,
            1,
            "an unknown id matches nothing"
        );
        let class = |class| ReplayFilter {
            error_class: Some(class),
            ..ReplayFilter::default()
        };
        assert_eq!(count(class(ErrorClass::Http5xx)).await, 4);
        assert_eq!(count(class(ErrorClass::Timeout)).await, 1);
        let status = |status| ReplayFilter {
            last_status: Some(status),
            ..ReplayFilter::default()
        };
        assert_eq!(count(status(503)).await, 3);
        assert_eq!(count(status(410)).await, 1);
        let slice = ReplayFilter {
            error_class: Some(ErrorClass::Http5xx),
            last_status: Some(503),
            ..of(&["a", "b"])
        };
        assert_eq!(count(slice.clone()).await, 2);

        let created = store
            .create_replay(new_replay(slice.clone(), 100, now))
            .await
            .unwrap();
        assert_eq!(created.matched, 2);
        assert_eq!(created.filter, slice, "the filter reads back as given");
        assert_eq!(store.advance_replays(now).await.unwrap().requeued, 2);
        let states: Vec<JobState> = {
            let mut states = Vec::new();
            for d in &dead {
                states.push(job(&store, d.id).await.state);
            }
            states
        };
        use JobState::{Dead, Scheduled};
        assert_eq!(states, [Dead, Dead, Scheduled, Dead, Scheduled, Dead]);
    }
);

store_case!(
    a_retrying_replay_brings_jobs_forward_at_its_pace,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let mut now = at(1_000);
        let mut retrying = Vec::new();
        for _ in 0..3 {
            let failing = failed_job(&store, "s", ErrorClass::Http5xx, Some(503), false, now).await;
            assert_eq!(failing.state, JobState::Retrying);
            retrying.push(failing);
            now = now.plus_ms(10);
        }
        let dead = failed_job(&store, "s", ErrorClass::Http5xx, Some(503), true, now).await;
        let filter = ReplayFilter {
            selects: ReplaySelection::Retrying,
            subscriber_id: Some("s".into()),
            ..ReplayFilter::default()
        };
        assert_eq!(store.count_replay_matches(&filter, 100).await.unwrap(), 3);
        // 5/s: one job every 200 ms, the oldest first.
        let start = at(2_000);
        let created = store
            .create_replay(new_replay(filter.clone(), 5, start))
            .await
            .unwrap();
        assert_eq!((created.matched, created.state), (3, ReplayState::Running));
        assert_eq!(created.filter.selects, ReplaySelection::Retrying);

        let step = store.advance_replays(start).await.unwrap();
        assert_eq!(
            (step.brought_forward, step.requeued),
            (1, 0),
            "brought forward, not requeued"
        );
        let first = job(&store, retrying[0].id).await;
        assert_eq!(first.state, JobState::Retrying);
        assert_eq!(first.due_at, Some(start), "due at its release time");
        assert_eq!(
            (first.attempts, first.max_attempts, first.deadline),
            (
                retrying[0].attempts,
                retrying[0].max_attempts,
                retrying[0].deadline
            ),
            "no attempt spent, the deadline kept"
        );
        for later in &retrying[1..] {
            assert_eq!(
                job(&store, later.id).await.due_at,
                later.due_at,
                "not yet released"
            );
        }
        assert_eq!(
            store
                .advance_replays(at(2_100))
                .await
                .unwrap()
                .brought_forward,
            0
        );
        assert_eq!(claim_one(&store, "w", at(2_100)).await.job_id, first.id);

        // The second is cancelled before its turn: it is skipped; the third is
        // released in the same burst.
        let second = job(&store, retrying[1].id).await;
        let cancel = transition(&second.snapshot(), JobEvent::Cancel, at(2_150)).unwrap();
        assert!(
            store
                .transition_waiting(second.id, second.version(), cancel, at(2_150))
                .await
                .unwrap()
        );
        let step = store.advance_replays(at(2_200)).await.unwrap();
        assert_eq!(
            (step.brought_forward, step.skipped, step.finished),
            (1, 1, 1)
        );
        let third = job(&store, retrying[2].id).await;
        assert_eq!(
            (third.state, third.due_at),
            (JobState::Retrying, Some(at(2_200)))
        );
        assert_eq!(third.attempts, retrying[2].attempts);
        let done = replay(&store, created.id).await;
        assert_eq!(
            (done.state, done.requeued, done.skipped),
            (ReplayState::Done, 2, 1)
        );
        assert_eq!(
            job(&store, dead.id).await,
            dead,
            "a dead job is not selected"
        );
    }
);

// The budget is for replays that still release jobs: one whose every matched job was
// requeued or skipped, only waiting for its last burst to be taken, leaves its share.
store_case!(
    the_rate_budget_counts_only_replays_with_jobs_left,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        // 64 jobs dead at 2 s, one more at 4 s: a replay at 10/s reads 65 (its burst of
        // one plus 64) per step.
        let early: Vec<_> = (0..64)
            .map(|i| new_job("s", &format!("early-{i}"), at(0), at(1_000)))
            .collect();
        create(&store, early).await;
        store.expire_deadlines(at(2_000), 1_000).await.unwrap();
        let last = create(&store, vec![new_job("s", "last", at(0), at(3_000))]).await;
        store.expire_deadlines(at(4_000), 1_000).await.unwrap();
        let of_s = ReplayFilter {
            subscriber_id: Some("s".into()),
            ..ReplayFilter::default()
        };
        let with_budget = |rate, budget, now| NewReplay {
            rate_budget: budget,
            ..new_replay(of_s.clone(), rate, now)
        };
        // `fast` takes the 64 early ones first (its next burst is due earlier).
        let fast = ReplayFilter {
            dead_before: Some(at(3_000)),
            ..ReplayFilter::default()
        };
        let fast = store
            .create_replay(NewReplay {
                rate_budget: 1_010,
                ..new_replay(fast, 1_000, at(5_000))
            })
            .await
            .unwrap();
        let slow = store
            .create_replay(with_budget(10, 1_010, at(5_001)))
            .await
            .unwrap();
        assert_eq!((fast.matched, slow.matched), (64, 65));
        let refused = store
            .create_replay(with_budget(10, 1_010, at(5_001)))
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                StoreError::ReplayRateBudget {
                    used: 1_010,
                    budget: 1_010
                }
            ),
            "{refused:?}"
        );

        let step = store.advance_replays(at(5_001)).await.unwrap();
        assert_eq!((step.requeued, step.skipped), (65, 64));
        let slow_now = replay(&store, slow.id).await;
        assert_eq!(
            (
                slow_now.state,
                slow_now.matched,
                slow_now.requeued + slow_now.skipped
            ),
            (ReplayState::Running, 65, 65),
            "running, nothing left to release"
        );
        assert_eq!(replay(&store, fast.id).await.state, ReplayState::Done);
        assert_eq!(job(&store, last[0].id).await.state, JobState::Scheduled);
        // Only its last burst keeps it running: a new replay gets the whole budget.
        store
            .create_replay(with_budget(10, 10, at(5_002)))
            .await
            .unwrap();
    }
);

store_case!(
    replays_are_listed_newest_first_by_state,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        failed_job(&store, "s", ErrorClass::Http5xx, Some(503), true, at(1_000)).await;
        let of_s = ReplayFilter {
            subscriber_id: Some("s".into()),
            ..ReplayFilter::default()
        };
        let mut made = Vec::new();
        for n in 0..4 {
            let created = store
                .create_replay(new_replay(of_s.clone(), 1, at(2_000 + n)))
                .await
                .unwrap();
            made.push(created.id);
        }
        store.cancel_replay(made[1], at(3_000)).await.unwrap();
        let list = |state: Option<ReplayState>, after: Option<Uuid>, limit: u32| {
            let store = store.clone();
            async move {
                let page = PageRequest { after, limit };
                let listed = store.list_replays(state, page).await.unwrap();
                listed.into_iter().map(|r| r.id).collect::<Vec<_>>()
            }
        };
        let newest_first: Vec<Uuid> = made.iter().rev().copied().collect();
        assert_eq!(list(None, None, 10).await, newest_first);
        assert_eq!(list(None, None, 2).await, newest_first[..2]);
        assert_eq!(
            list(None, Some(newest_first[1]), 10).await,
            newest_first[2..]
        );
        assert_eq!(
            list(Some(ReplayState::Running), None, 10).await,
            [made[3], made[2], made[0]]
        );
        assert_eq!(
            list(Some(ReplayState::Running), Some(made[2]), 10).await,
            [made[0]]
        );
        assert_eq!(
            list(Some(ReplayState::Cancelled), None, 10).await,
            [made[1]]
        );
        assert!(list(Some(ReplayState::Done), None, 10).await.is_empty());
        let read = store
            .list_replays(
                None,
                PageRequest {
                    after: None,
                    limit: 1,
                },
            )
            .await
            .unwrap();
        assert_eq!(read[0], replay(&store, made[3]).await);
    }
);
