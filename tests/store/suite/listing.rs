//! Reading jobs: one by id, and listings filtered by event, subscriber and state,
//! newest first, paged without repeats or gaps.

use deferhook::domain::JobState;
use deferhook::store::{JobFilter, PageRequest, SharedStore};
use uuid::Uuid;

use crate::support::{add_subscriber, at, claim_one, create, fresh_id, ids, list, new_job};

fn filter(event: Option<&str>, subscriber: Option<&str>, state: Option<JobState>) -> JobFilter {
    JobFilter {
        event_id: event.map(str::to_owned),
        subscriber_id: subscriber.map(str::to_owned),
        states: state.into_iter().collect(),
        ..JobFilter::default()
    }
}

store_case!(get_unknown_job_is_none, async |store: SharedStore| {
    add_subscriber(&store, "orders").await;
    create(&store, vec![new_job("orders", "e", at(0), at(60_000))]).await;
    assert_eq!(store.get_job(fresh_id(), at(0)).await.unwrap(), None);
    assert_eq!(store.get_job(Uuid::nil(), at(0)).await.unwrap(), None);
});

store_case!(
    list_filters_by_event_subscriber_and_state,
    async |store: SharedStore| {
        add_subscriber(&store, "s1").await;
        add_subscriber(&store, "s2").await;
        let later = at(60_000);
        let jobs = create(
            &store,
            vec![
                new_job("s1", "e1", later, at(120_000)),
                new_job("s1", "e2", later, at(120_000)),
                new_job("s2", "e1", at(0), at(120_000)),
                new_job("s2", "e2", later, at(120_000)),
            ],
        )
        .await;
        let [s1e1, s1e2, s2e1, s2e2] = [jobs[0].id, jobs[1].id, jobs[2].id, jobs[3].id];
        // Only (s2, e1) is due: it goes in flight.
        assert_eq!(claim_one(&store, "w", at(0)).await.job_id, s2e1);

        let found = |f: JobFilter| {
            let store = store.clone();
            async move { ids(&list(&store, f).await) }
        };
        assert_eq!(
            found(filter(None, None, None)).await,
            [s2e2, s2e1, s1e2, s1e1]
        );
        assert_eq!(found(filter(Some("e1"), None, None)).await, [s2e1, s1e1]);
        assert_eq!(found(filter(None, Some("s1"), None)).await, [s1e2, s1e1]);
        let in_flight = Some(JobState::InFlight);
        assert_eq!(found(filter(None, None, in_flight)).await, [s2e1]);
        let scheduled = Some(JobState::Scheduled);
        assert_eq!(
            found(filter(None, None, scheduled)).await,
            [s2e2, s1e2, s1e1]
        );
        assert_eq!(found(filter(Some("e1"), Some("s1"), None)).await, [s1e1]);
        assert_eq!(
            found(filter(Some("e2"), Some("s2"), scheduled)).await,
            [s2e2]
        );
        assert!(
            found(filter(Some("e1"), Some("s2"), scheduled))
                .await
                .is_empty()
        );
        assert!(found(filter(Some("e3"), None, None)).await.is_empty());
        assert!(
            found(filter(None, None, Some(JobState::Dead)))
                .await
                .is_empty()
        );

        let listed = list(&store, filter(None, None, in_flight)).await;
        assert_eq!(listed[0].state, JobState::InFlight);
        assert_eq!(listed[0].attempts, 1);
    }
);

store_case!(
    list_pages_newest_first_without_repeats,
    async |store: SharedStore| {
        add_subscriber(&store, "s1").await;
        add_subscriber(&store, "s2").await;
        let mut created = Vec::new();
        for n in 0..25 {
            created.extend(
                create(
                    &store,
                    vec![new_job("s1", &format!("e{n}"), at(0), at(60_000))],
                )
                .await,
            );
            if n % 5 == 0 {
                create(
                    &store,
                    vec![new_job("s2", &format!("e{n}"), at(0), at(60_000))],
                )
                .await;
            }
        }
        let newest_first: Vec<Uuid> = ids(&created).into_iter().rev().collect();
        let only_s1 = filter(None, Some("s1"), None);

        let mut seen = Vec::new();
        let mut after = None;
        let mut sizes = Vec::new();
        // Bounded, so a cursor that repeats fails the test instead of hanging it.
        for _ in 0..10 {
            let page = PageRequest { after, limit: 10 };
            let items = store.list_jobs(&only_s1, page, at(0)).await.unwrap();
            sizes.push(items.len());
            let Some(last) = items.last() else { break };
            after = Some(last.id);
            seen.extend(ids(&items));
        }

        assert_eq!(sizes, [10, 10, 5, 0]);
        assert_eq!(seen, newest_first);
        // Without a filter, the five s2 jobs are interleaved in the same order.
        let everything = ids(&list(&store, JobFilter::default()).await);
        assert_eq!(everything.len(), 30);
        let mut sorted = everything.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(everything, sorted);
    }
);
