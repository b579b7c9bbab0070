//! The on-call filters of the job listing: a dead reason, creation bounds (on the
//! UUIDv7 id) and `dead_at` bounds; `*_after` inclusive, `*_before` exclusive; alone,
//! combined with the other filters, and across pages.

use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobState, Timestamp};
use deferhook::store::{JobFilter, PageRequest, SharedStore};
use uuid::Uuid;

use crate::finish::{Fate, finish, job_created_at};
use crate::support::{add_subscriber, at, create, ids, list};

/// The jobs every case lists, by name; see [`fixture`].
struct Jobs {
    j1: Uuid,
    j2: Uuid,
    j3: Uuid,
    j4: Uuid,
    j5: Uuid,
    j6: Uuid,
}

/// `k` seconds after [`START`](deferhook::testing::START), the creation instant of
/// job `jk`.
fn created(k: i64) -> Timestamp {
    at(k * 1_000)
}

/// Six jobs, `jk` created at `created(k)`:
///
/// | job | subscriber | event | fate |
/// | --- | --- | --- | --- |
/// | j1 | s1 | e1 | dead, `max_attempts`, at 11 s |
/// | j2 | s1 | e2 | dead, `deadline_exceeded`, at 12 s |
/// | j3 | s2 | e1 | dead, `max_attempts`, at 13 s |
/// | j4 | s2 | e2 | delivered at 14 s |
/// | j5 | s1 | e3 | scheduled (not due) |
/// | j6 | s2 | e3 | dead, `max_attempts`, at 16 s |
async fn fixture(store: &SharedStore) -> Jobs {
    add_subscriber(store, "s1").await;
    add_subscriber(store, "s2").await;
    let made = |subscriber: &'static str, event: &'static str, k: i64, fate: Fate| {
        let store = store.clone();
        async move {
            let new = job_created_at(subscriber, event, created(k));
            finish(&store, new, at(10_000 + k * 1_000), fate).await.id
        }
    };
    let j1 = made("s1", "e1", 1, Fate::Dead(DeadReason::MaxAttempts)).await;
    let j2 = made("s1", "e2", 2, Fate::Dead(DeadReason::DeadlineExceeded)).await;
    let j3 = made("s2", "e1", 3, Fate::Dead(DeadReason::MaxAttempts)).await;
    let j4 = made("s2", "e2", 4, Fate::Delivered).await;
    let mut waiting = job_created_at("s1", "e3", created(5));
    waiting.deliver_at = at(3_600_000);
    waiting.deadline = at(7_200_000);
    let j5 = create(store, vec![waiting]).await[0].id;
    let j6 = made("s2", "e3", 6, Fate::Dead(DeadReason::MaxAttempts)).await;
    Jobs {
        j1,
        j2,
        j3,
        j4,
        j5,
        j6,
    }
}

async fn found(store: &SharedStore, filter: JobFilter) -> Vec<Uuid> {
    ids(&list(store, filter).await)
}

fn reason(reason: DeadReason) -> JobFilter {
    JobFilter {
        dead_reason: Some(reason),
        ..JobFilter::default()
    }
}

fn created_between(after: Option<Timestamp>, before: Option<Timestamp>) -> JobFilter {
    JobFilter {
        created_after: after,
        created_before: before,
        ..JobFilter::default()
    }
}

fn dead_between(after: Option<Timestamp>, before: Option<Timestamp>) -> JobFilter {
    JobFilter {
        dead_after: after,
        dead_before: before,
        ..JobFilter::default()
    }
}

store_case!(
    dead_reason_lists_dead_jobs_with_that_reason,
    async |store: SharedStore| {
        let Jobs { j1, j2, j3, j6, .. } = fixture(&store).await;

        let max_attempts = reason(DeadReason::MaxAttempts);
        assert_eq!(found(&store, max_attempts.clone()).await, [j6, j3, j1]);
        assert_eq!(
            found(&store, reason(DeadReason::DeadlineExceeded)).await,
            [j2]
        );
        assert!(
            found(&store, reason(DeadReason::TargetRejected))
                .await
                .is_empty()
        );
        let with_state = JobFilter {
            states: vec![JobState::Dead],
            ..max_attempts.clone()
        };
        assert_eq!(found(&store, with_state).await, [j6, j3, j1]);
        let of_s1 = JobFilter {
            subscriber_id: Some("s1".into()),
            ..max_attempts.clone()
        };
        assert_eq!(found(&store, of_s1).await, [j1]);
        let of_e1 = JobFilter {
            event_id: Some("e1".into()),
            ..max_attempts.clone()
        };
        assert_eq!(found(&store, of_e1).await, [j3, j1]);
        // A dead-only filter with another state matches nothing (the API refuses it).
        let contradiction = JobFilter {
            states: vec![JobState::Scheduled],
            ..max_attempts
        };
        assert!(found(&store, contradiction).await.is_empty());
    }
);

store_case!(
    created_bounds_follow_the_id_instant,
    async |store: SharedStore| {
        let Jobs {
            j1,
            j2,
            j3,
            j4,
            j5,
            j6,
        } = fixture(&store).await;

        let since_3 = created_between(Some(created(3)), None);
        assert_eq!(found(&store, since_3.clone()).await, [j6, j5, j4, j3]);
        let just_after_3 = created_between(Some(created(3).plus_ms(1)), None);
        assert_eq!(found(&store, just_after_3).await, [j6, j5, j4]);
        let before_3 = created_between(None, Some(created(3)));
        assert_eq!(found(&store, before_3).await, [j2, j1]);
        let from_2_to_5 = created_between(Some(created(2)), Some(created(5)));
        assert_eq!(found(&store, from_2_to_5).await, [j4, j3, j2]);
        let nothing = created_between(Some(created(7)), None);
        assert!(found(&store, nothing).await.is_empty());
        let everything = created_between(Some(Timestamp::MIN), Some(Timestamp::MAX));
        assert_eq!(found(&store, everything).await.len(), 6);

        let of_s2 = JobFilter {
            subscriber_id: Some("s2".into()),
            ..since_3.clone()
        };
        assert_eq!(found(&store, of_s2).await, [j6, j4, j3]);
        let of_e1 = JobFilter {
            event_id: Some("e1".into()),
            ..created_between(Some(created(2)), None)
        };
        assert_eq!(found(&store, of_e1).await, [j3]);
        let scheduled = JobFilter {
            states: vec![JobState::Scheduled],
            ..since_3
        };
        assert_eq!(found(&store, scheduled).await, [j5]);
    }
);

store_case!(
    dead_at_bounds_select_dead_jobs,
    async |store: SharedStore| {
        let Jobs { j1, j2, j3, j6, .. } = fixture(&store).await;
        let (d1, d2, d3) = (at(11_000), at(12_000), at(13_000));

        let since_d2 = dead_between(Some(d2), None);
        assert_eq!(found(&store, since_d2).await, [j6, j3, j2]);
        let after_d2 = dead_between(Some(d2.plus_ms(1)), None);
        assert_eq!(found(&store, after_d2).await, [j6, j3]);
        let before_d3 = dead_between(None, Some(d3));
        assert_eq!(found(&store, before_d3).await, [j2, j1]);
        let only_d2 = dead_between(Some(d2), Some(d3));
        assert_eq!(found(&store, only_d2).await, [j2]);
        assert!(found(&store, dead_between(None, Some(d1))).await.is_empty());
        // Delivered and scheduled jobs have no dead_at: never listed.
        let all_time = dead_between(Some(Timestamp::MIN), Some(Timestamp::MAX));
        assert_eq!(found(&store, all_time.clone()).await, [j6, j3, j2, j1]);
        let of_s1 = JobFilter {
            subscriber_id: Some("s1".into()),
            ..all_time
        };
        assert_eq!(found(&store, of_s1).await, [j2, j1]);
    }
);

store_case!(
    all_filters_combine_across_pages,
    async |store: SharedStore| {
        let Jobs { j1, j2, j3, j6, .. } = fixture(&store).await;
        let combined = JobFilter {
            event_id: None,
            subscriber_id: Some("s2".into()),
            states: vec![JobState::Dead],
            dead_reason: Some(DeadReason::MaxAttempts),
            created_after: Some(created(1)),
            created_before: Some(created(7)),
            dead_after: Some(at(13_000)),
            dead_before: Some(at(17_000)),
            waiting_reason: None,
            error_class: Some(ErrorClass::Http4xx),
            last_status: Some(400),
            event_type: None,
            schedule_id: None,
        };
        assert_eq!(pages(&store, &combined, 1).await, [vec![j6], vec![j3]]);
        let narrower = JobFilter {
            created_before: Some(created(6)),
            ..combined.clone()
        };
        assert_eq!(found(&store, narrower).await, [j3]);
        let with_event = JobFilter {
            event_id: Some("e3".into()),
            ..combined
        };
        assert_eq!(found(&store, with_event).await, [j6]);

        let dead = dead_between(Some(Timestamp::MIN), None);
        assert_eq!(pages(&store, &dead, 2).await, [vec![j6, j3], vec![j2, j1]]);
        let early = created_between(None, Some(created(4)));
        assert_eq!(pages(&store, &early, 2).await, [vec![j3, j2], vec![j1]]);
    }
);

/// Every non-empty page of `filter`, `limit` at a time, following the last id.
async fn pages(store: &SharedStore, filter: &JobFilter, limit: u32) -> Vec<Vec<Uuid>> {
    let mut pages = Vec::new();
    let mut after = None;
    // Bounded, so a cursor that repeats fails the case instead of hanging it.
    for _ in 0..10 {
        let page = PageRequest { after, limit };
        let items = store.list_jobs(filter, page, at(0)).await.unwrap();
        let Some(last) = items.last() else {
            return pages;
        };
        after = Some(last.id);
        pages.push(ids(&items));
    }
    panic!("paging did not end: {pages:?}");
}
