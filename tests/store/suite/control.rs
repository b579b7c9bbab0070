//! Operator transitions on waiting jobs apply only while the job is still waiting in
//! the state they were decided from.

use deferhook::domain::job::transition;
use deferhook::domain::{JobEvent, JobState};
use deferhook::store::SharedStore;

use crate::support::{add_subscriber, at, claim_one, create, job, new_job};

store_case!(
    cancel_applies_only_to_a_waiting_job,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let jobs = create(
            &store,
            vec![
                new_job("s", "later", at(5_000), at(60_000)),
                new_job("s", "now", at(0), at(60_000)),
            ],
        )
        .await;
        let later = job(&store, jobs[0].id).await;
        let cancel = transition(&later.snapshot(), JobEvent::Cancel, at(1)).unwrap();
        assert!(
            store
                .transition_waiting(later.id, later.version(), cancel, at(1))
                .await
                .unwrap()
        );
        let cancelled = job(&store, later.id).await;
        assert_eq!(cancelled.state, JobState::Cancelled);
        assert_eq!(cancelled.due_at, None);

        // Decided while scheduled, but a worker claimed it first: refused, unchanged.
        let waiting = job(&store, jobs[1].id).await;
        let cancel = transition(&waiting.snapshot(), JobEvent::Cancel, at(1)).unwrap();
        claim_one(&store, "w", at(1)).await;
        assert!(
            !store
                .transition_waiting(waiting.id, waiting.version(), cancel, at(2))
                .await
                .unwrap()
        );
        assert_eq!(job(&store, waiting.id).await.state, JobState::InFlight);
    }
);

store_case!(
    reschedule_moves_deliver_at_and_deadline,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create(&store, vec![new_job("s", "e", at(5_000), at(60_000))]).await;
        let current = job(&store, created[0].id).await;
        let event = JobEvent::Reschedule {
            deliver_at: at(20_000),
            deadline: at(90_000),
        };
        let moved = transition(&current.snapshot(), event, at(1)).unwrap();
        assert!(
            store
                .transition_waiting(current.id, current.version(), moved, at(1))
                .await
                .unwrap()
        );
        let after = job(&store, current.id).await;
        assert_eq!(after.state, JobState::Scheduled);
        assert_eq!(after.deliver_at, at(20_000));
        assert_eq!(after.due_at, Some(at(20_000)));
        assert_eq!(after.deadline, at(90_000));
    }
);

// A reschedule decided on a read from before the job died and was replayed (scheduled
// again, with a fresh deadline) is refused: it would write back what it read.
store_case!(
    a_decision_on_a_stale_read_is_refused,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let created = create(&store, vec![new_job("s", "e", at(5_000), at(10_000))]).await;
        let read = job(&store, created[0].id).await;
        let event = JobEvent::Reschedule {
            deliver_at: at(8_000),
            deadline: at(9_000),
        };
        let moved = transition(&read.snapshot(), event, at(1)).unwrap();
        // Meanwhile the deadline passes and an operator replays the dead job.
        store.expire_deadlines(at(10_000), 10).await.unwrap();
        let dead = job(&store, read.id).await;
        assert_eq!(dead.state, JobState::Dead);
        let filter = deferhook::domain::replay::ReplayFilter {
            event_id: Some("e".into()),
            ..Default::default()
        };
        store
            .create_replay(deferhook::store::NewReplay {
                id: crate::support::fresh_id(),
                filter,
                max_jobs: 10,
                rate_per_second: 10,
                ttl_ms: 80_000,
                rate_budget: 100,
                created_at: at(10_001),
            })
            .await
            .unwrap();
        store.advance_replays(at(10_001)).await.unwrap();
        let replayed = job(&store, read.id).await;
        assert_eq!(replayed.state, JobState::Scheduled);
        assert_eq!(read.state, replayed.state, "same state as when read…");
        assert!(
            !store
                .transition_waiting(read.id, read.version(), moved, at(10_002))
                .await
                .unwrap(),
            "…but not the same job any more"
        );
        assert_eq!(job(&store, read.id).await.deadline, replayed.deadline);
    }
);
