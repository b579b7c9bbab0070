//! The on-call filters of the job listing (issue #16): a list of states, read as of
//! the listing's instant (an expired lease reads `retrying`); the waiting reasons a
//! listing can filter on, matching the job view's `waiting_reason`; the last error's
//! class and HTTP status.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::waiting::{WaitingReason, waiting_reason};
use deferhook::domain::{DeadReason, JobEvent, JobState, Timestamp};
use deferhook::store::{Fenced, Job, JobFilter, SharedStore};
use uuid::Uuid;

use crate::finish::{Fate, finish, job_created_at};
use crate::support::{
    OWNER, add_subscriber, at, claim, claim_one, create_due, failed, ids, list_at, outcome,
    set_enabled,
};

/// The jobs of [`fixture`], by name.
struct Jobs {
    dead: Uuid,
    failing: Uuid,
    orphan: Uuid,
    running: Uuid,
    waiting: Uuid,
    paused_due: Uuid,
    paused_later: Uuid,
}

/// Read at 30 s (`NOW`):
///
/// | job | subscriber | state | waiting reason | last error |
/// | --- | --- | --- | --- | --- |
/// | dead | s | dead (`max_attempts`) | – | http_4xx, 400 |
/// | failing | s | retrying, due at 50 s | backing_off | http_5xx, 503 |
/// | orphan | s | in_flight, lease expired at 30 s: reads retrying | (load) | – |
/// | running | s | in_flight, lease live until 50 s | in_flight | – |
/// | waiting | s | scheduled, due at 100 s | scheduled | – |
/// | paused_due | p (disabled) | scheduled, due at 0 s | subscriber_paused | – |
/// | paused_later | p (disabled) | scheduled, due at 200 s | scheduled | – |
async fn fixture(store: &SharedStore) -> Jobs {
    add_subscriber(store, "s").await;
    add_subscriber(store, "p").await;
    let dead = finish(
        store,
        job_created_at("s", "e-dead", at(-20_000)),
        at(-10_000),
        Fate::Dead(DeadReason::MaxAttempts),
    )
    .await
    .id;
    set_enabled(store, "p", false, at(-5_000)).await;
    let paused_due = create_due(store, "p", at(0)).await.id;
    let paused_later = create_due(store, "p", at(200_000)).await.id;
    let failing = create_due(store, "s", at(0)).await.id;
    let orphan = create_due(store, "s", at(0)).await.id;
    let claimed = claim(store, at(0), 10).await;
    assert_eq!(claimed.len(), 2, "only s's due jobs are claimed");
    let first = claimed.iter().find(|c| c.job_id == failing).unwrap();
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
    let running = create_due(store, "s", at(20_000)).await.id;
    assert_eq!(claim_one(store, OWNER, at(20_000)).await.job_id, running);
    let waiting = create_due(store, "s", at(100_000)).await.id;
    Jobs {
        dead,
        failing,
        orphan,
        running,
        waiting,
        paused_due,
        paused_later,
    }
}

/// The instant the cases read at: the orphan's lease has just expired.
fn now() -> Timestamp {
    at(30_000)
}

/// `jobs` newest first, the listing's order.
fn newest_first(mut jobs: Vec<Uuid>) -> Vec<Uuid> {
    jobs.sort_by(|a, b| b.cmp(a));
    jobs
}

fn states(states: &[JobState]) -> JobFilter {
    JobFilter {
        states: states.to_vec(),
        ..JobFilter::default()
    }
}

fn reason(reason: WaitingReason) -> JobFilter {
    JobFilter {
        waiting_reason: Some(reason),
        ..JobFilter::default()
    }
}

async fn found(store: &SharedStore, filter: JobFilter, now: Timestamp) -> Vec<Uuid> {
    ids(&list_at(store, filter, now).await)
}

store_case!(
    a_list_of_states_reads_each_as_of_now,
    async |store: SharedStore| {
        let j = fixture(&store).await;
        use JobState::{Dead, InFlight, Retrying, Scheduled};
        let now = now();
        assert_eq!(
            found(&store, states(&[Retrying, Dead]), now).await,
            newest_first(vec![j.dead, j.failing, j.orphan])
        );
        assert_eq!(
            found(&store, states(&[Dead, Retrying, Dead, Retrying]), now).await,
            newest_first(vec![j.dead, j.failing, j.orphan]),
            "duplicates are harmless"
        );
        assert_eq!(
            found(&store, states(&[InFlight, Dead]), now).await,
            newest_first(vec![j.dead, j.running]),
            "an expired lease is not in flight"
        );
        // Both: every stored in_flight row once, whatever its lease.
        assert_eq!(
            found(&store, states(&[InFlight, Retrying]), now).await,
            newest_first(vec![j.failing, j.orphan, j.running])
        );
        let before = at(29_999);
        assert_eq!(
            found(&store, states(&[Retrying, Scheduled]), before).await,
            newest_first(vec![j.failing, j.waiting, j.paused_due, j.paused_later]),
            "before its expiry the orphan is in flight"
        );
        // Each job listed reads as one of the states asked for.
        for listed in list_at(&store, states(&[Retrying, Scheduled]), now).await {
            assert!(matches!(listed.state, Retrying | Scheduled), "{listed:?}");
        }
        // A dead-only filter with a list holding only dead.
        let dead_ones = JobFilter {
            dead_reason: Some(DeadReason::MaxAttempts),
            ..states(&[Dead, Dead])
        };
        assert_eq!(found(&store, dead_ones, now).await, [j.dead]);
        // Pages of one neither skip nor repeat across the merged listings.
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let page = deferhook::store::PageRequest { after, limit: 1 };
            let items = store
                .list_jobs(&states(&[Retrying, Dead, InFlight]), page, now)
                .await
                .unwrap();
            let Some(last) = items.last() else { break };
            after = Some(last.id);
            pages.extend(ids(&items));
        }
        assert_eq!(
            pages,
            newest_first(vec![j.dead, j.failing, j.orphan, j.running])
        );
    }
);

/// The waiting reason the job view gives `job` at `now`, leaving out what the
/// subscriber's load decides (it never decides a filterable reason).
fn view_reason(job: &Job, now: Timestamp) -> Option<WaitingReason> {
    waiting_reason(job.state, job.due_at, job.subscriber_enabled, None, now)
}

store_case!(
    waiting_reason_matches_the_job_view,
    async |store: SharedStore| {
        let j = fixture(&store).await;
        let now = now();
        let expected = [
            (WaitingReason::Scheduled, vec![j.waiting, j.paused_later]),
            (WaitingReason::BackingOff, vec![j.failing]),
            (WaitingReason::InFlight, vec![j.running]),
            (WaitingReason::SubscriberPaused, vec![j.paused_due]),
        ];
        for (wanted, jobs) in &expected {
            assert_eq!(
                found(&store, reason(*wanted), now).await,
                newest_first(jobs.clone()),
                "{wanted}"
            );
        }
        // A reason that depends on load matches nothing in the store (the API refuses it).
        assert!(
            found(&store, reason(WaitingReason::SubscriberAtLimit), now)
                .await
                .is_empty()
        );
        // Pausing s: its due jobs, the expired lease among them, wait for the resume.
        set_enabled(&store, "s", false, now).await;
        assert_eq!(
            found(&store, reason(WaitingReason::SubscriberPaused), now).await,
            newest_first(vec![j.orphan, j.paused_due])
        );
        let retrying_paused = JobFilter {
            waiting_reason: Some(WaitingReason::SubscriberPaused),
            ..states(&[JobState::Retrying, JobState::Dead])
        };
        assert_eq!(found(&store, retrying_paused, now).await, [j.orphan]);
        let contradiction = JobFilter {
            waiting_reason: Some(WaitingReason::SubscriberPaused),
            ..states(&[JobState::InFlight])
        };
        assert!(found(&store, contradiction, now).await.is_empty());
        // At every instant, the listing by reason is the jobs the view gives it.
        for instant in [at(0), at(29_999), now, at(60_000), at(250_000)] {
            let all = list_at(&store, JobFilter::default(), instant).await;
            for wanted in WaitingReason::FILTERABLE {
                let by_view: Vec<Uuid> = all
                    .iter()
                    .filter(|job| view_reason(job, instant) == Some(wanted))
                    .map(|job| job.id)
                    .collect();
                assert_eq!(
                    found(&store, reason(wanted), instant).await,
                    by_view,
                    "{wanted} at {instant:?}"
                );
            }
        }
    }
);

store_case!(
    error_class_and_last_status_match_the_last_error,
    async |store: SharedStore| {
        let j = fixture(&store).await;
        let now = now();
        let by = |class: Option<ErrorClass>, status: Option<u16>| JobFilter {
            error_class: class,
            last_status: status,
            ..JobFilter::default()
        };
        assert_eq!(
            found(&store, by(Some(ErrorClass::Http5xx), None), now).await,
            [j.failing]
        );
        assert_eq!(
            found(&store, by(Some(ErrorClass::Http4xx), None), now).await,
            [j.dead]
        );
        assert_eq!(found(&store, by(None, Some(503)), now).await, [j.failing]);
        assert_eq!(found(&store, by(None, Some(400)), now).await, [j.dead]);
        assert!(
            found(&store, by(Some(ErrorClass::Http5xx), Some(400)), now)
                .await
                .is_empty()
        );
        assert!(
            found(&store, by(Some(ErrorClass::Timeout), None), now)
                .await
                .is_empty()
        );
        let retrying_5xx = JobFilter {
            subscriber_id: Some("s".into()),
            ..JobFilter {
                states: vec![JobState::Retrying, JobState::Dead],
                ..by(Some(ErrorClass::Http5xx), Some(503))
            }
        };
        assert_eq!(found(&store, retrying_5xx, now).await, [j.failing]);
    }
);
