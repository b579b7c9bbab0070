//! The event reads (issue #16 parts 1 and 2): which events have affected jobs
//! (retrying, an expired lease included; dead since an instant; due and held back by a
//! paused subscriber, a subscriber at its limit, a paused destination, an open circuit
//! or a destination at its limit), newest first and paginated, with the counts of all their jobs; and one
//! event's jobs with what holds its due ones back.

use deferhook::domain::circuit::ForcedCircuit;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::waiting::WaitingReason;
use deferhook::domain::{DeadReason, JobState, Timestamp};
use deferhook::store::{
    AffectedEvent, DestinationPut, JobCounts, NewJob, PageRequest, SharedStore, SubscriberPut,
};
use uuid::Uuid;

use crate::finish::{Fate, finish, job_created_at};
use crate::support::{add_subscriber, at, create, set_enabled, subscriber_put};

/// When the cases read.
const NOW: i64 = 100_000;
/// `affected_since` of the cases.
const SINCE: i64 = 50_000;

/// The affected events at [`NOW`], dead since `since`, `limit` a page, after `after`.
async fn affected(
    store: &SharedStore,
    since: Timestamp,
    after: Option<Uuid>,
    limit: u32,
) -> Vec<AffectedEvent> {
    store
        .list_affected_events(since, PageRequest { after, limit }, at(NOW))
        .await
        .expect("list_affected_events")
}

/// Every affected event at [`NOW`] since `since`, page after page of `limit`.
async fn all_pages(store: &SharedStore, since: Timestamp, limit: u32) -> Vec<Vec<AffectedEvent>> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = affected(store, since, after, limit).await;
        after = page.last().map(|e| e.newest_job_id);
        let full = page.len() == limit as usize;
        pages.push(page);
        if !full {
            return pages;
        }
    }
}

/// A job of `subscriber` for `event` created at `created`, due at `due`.
fn due_job(subscriber: &str, event: &str, created: i64, due: i64) -> NewJob {
    let mut job = job_created_at(subscriber, event, at(created));
    job.deliver_at = at(due);
    job.deadline = at(due + 3_600_000);
    job
}

fn counts(scheduled: u64, in_flight: u64, retrying: u64, delivered: u64, dead: u64) -> JobCounts {
    JobCounts {
        scheduled,
        in_flight,
        retrying,
        delivered,
        dead,
        cancelled: 0,
    }
}

/// Events in every situation, read at [`NOW`] (created in this order; each event's
/// jobs created at the instants given, which order the listing):
///
/// | event | jobs | affected since 50 s |
/// | --- | --- | --- |
/// | e-dead-old | a dead at 10 s, b delivered | no (yes since 0 s) |
/// | e-retry | a retrying (503) until 500 s, b delivered | 1 |
/// | e-delivered | a, b delivered | no |
/// | e-dead-recent | a dead at 60 s | 1 |
/// | e-expired | c in flight from 65 s: its lease expired at 95 s | 1 |
/// | e-running | c in flight from 90 s, lease live | no |
/// | e-cancelled | b cancelled | no |
/// | e-paused | p (paused) due at 0 s, d due at 900 s | 1 |
/// | e-later | p (paused) due at 300 s | no |
/// | e-dest-paused | d (its destination paused) due | 1 |
async fn fixture(store: &SharedStore) {
    for id in ["a", "b", "c", "d", "p"] {
        add_subscriber(store, id).await;
    }
    let dead = Fate::Dead(DeadReason::NonRetryableResponse);
    let fates = [
        ("a", "e-dead-old", -90_000, 10_000, dead),
        ("b", "e-dead-old", -89_000, 11_000, Fate::Delivered),
        ("a", "e-retry", -80_000, 12_000, Fate::Retrying(at(500_000))),
        ("b", "e-retry", -79_000, 13_000, Fate::Delivered),
        ("a", "e-delivered", -70_000, 14_000, Fate::Delivered),
        ("b", "e-delivered", -69_000, 15_000, Fate::Delivered),
        ("a", "e-dead-recent", -60_000, 60_000, dead),
        ("c", "e-expired", -50_000, 65_000, Fate::InFlight),
        ("c", "e-running", -40_000, 90_000, Fate::InFlight),
        ("b", "e-cancelled", -35_000, 91_000, Fate::Cancelled),
    ];
    for (subscriber, event, created, when, fate) in fates {
        finish(
            store,
            job_created_at(subscriber, event, at(created)),
            at(when),
            fate,
        )
        .await;
    }
    set_enabled(store, "p", false, at(95_000)).await;
    let paused = DestinationPut {
        paused: Some(true),
        ..DestinationPut::default()
    };
    store
        .put_destination("d.example.test:443", paused, at(95_000))
        .await
        .unwrap()
        .expect("d's destination exists");
    create(
        store,
        vec![
            due_job("p", "e-paused", -30_000, 0),
            due_job("d", "e-paused", -29_000, 900_000),
            due_job("p", "e-later", -20_000, 300_000),
            due_job("d", "e-dest-paused", -10_000, 0),
        ],
    )
    .await;
}

store_case!(
    affected_events_are_the_ones_not_delivered,
    async |store: SharedStore| {
        fixture(&store).await;
        let events = affected(&store, at(SINCE), None, 100).await;
        let names: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(
            names,
            [
                "e-dest-paused",
                "e-paused",
                "e-expired",
                "e-dead-recent",
                "e-retry"
            ],
            "newest first; delivered, cancelled, running, not yet due and dead before \
         affected_since are not affected"
        );
        let by_name = |name: &str| events.iter().find(|e| e.event_id == name).unwrap();
        assert_eq!(by_name("e-retry").jobs, counts(0, 0, 1, 1, 0));
        assert_eq!(
            by_name("e-expired").jobs,
            counts(0, 0, 1, 0, 0),
            "expired lease"
        );
        assert_eq!(by_name("e-dead-recent").jobs, counts(0, 0, 0, 0, 1));
        assert_eq!(by_name("e-paused").jobs, counts(2, 0, 0, 0, 0));
        assert_eq!(by_name("e-dest-paused").jobs, counts(1, 0, 0, 0, 0));
        for event in &events {
            assert_eq!(event.affected, 1, "{}", event.event_id);
        }
        assert_eq!(
            by_name("e-retry").created_at,
            at(-80_000),
            "its first job's"
        );
        assert_eq!(by_name("e-paused").created_at, at(-30_000));

        // Dead since an earlier instant: the old dead letter's event too.
        let earlier = affected(&store, at(0), None, 100).await;
        let old = earlier.iter().find(|e| e.event_id == "e-dead-old").unwrap();
        assert_eq!((old.affected, old.jobs), (1, counts(0, 0, 0, 1, 1)));
        assert_eq!(earlier.len(), 6);
    }
);

store_case!(
    affected_events_page_without_gaps,
    async |store: SharedStore| {
        fixture(&store).await;
        let whole = affected(&store, at(0), None, 100).await;
        let pages = all_pages(&store, at(0), 2).await;
        let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 2, 2, 0]);
        let paged: Vec<AffectedEvent> = pages.into_iter().flatten().collect();
        assert_eq!(paged, whole, "pages concatenate to the whole listing");
        let newest: Vec<Uuid> = whole.iter().map(|e| e.newest_job_id).collect();
        let mut sorted = newest.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(newest, sorted, "descending newest job id");
    }
);

store_case!(
    limits_and_circuits_hold_jobs_back,
    async |store: SharedStore| {
        let one = SubscriberPut {
            max_in_flight: Some(1),
            ..subscriber_put("m")
        };
        store.put_subscriber(one, at(0)).await.unwrap();
        add_subscriber(&store, "o").await;
        add_subscriber(&store, "l").await;
        finish(
            &store,
            job_created_at("m", "e-busy", at(-5_000)),
            at(90_000),
            Fate::InFlight,
        )
        .await;
        finish(
            &store,
            job_created_at("l", "e-busy-l", at(-4_500)),
            at(91_000),
            Fate::InFlight,
        )
        .await;
        let one = DestinationPut {
            max_in_flight: Some(Some(1)),
            ..DestinationPut::default()
        };
        store
            .put_destination("l.example.test:443", one, at(91_000))
            .await
            .unwrap()
            .unwrap();
        let open = DestinationPut {
            circuit: Some(Some(ForcedCircuit::Open)),
            ..DestinationPut::default()
        };
        store
            .put_destination("o.example.test:443", open, at(90_000))
            .await
            .unwrap()
            .unwrap();
        create(
            &store,
            vec![
                due_job("m", "e-queued", -4_000, 0),
                due_job("o", "e-circuit", -3_000, 0),
                due_job("l", "e-destination-full", -2_000, 0),
            ],
        )
        .await;
        let events = affected(&store, at(SINCE), None, 100).await;
        let names: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(
            names,
            ["e-destination-full", "e-circuit", "e-queued"],
            "the jobs in flight are not affected; the ones a limit or a circuit holds back are"
        );

        // The summary's holds say why, for the subscribers with due jobs.
        let read = store
            .event_jobs("e-queued", at(NOW))
            .await
            .unwrap()
            .unwrap();
        let hold = read.holds.get("m").expect("m has a due job");
        assert_eq!((hold.open_attempts, hold.max_in_flight), (1, 1));
        assert_eq!(
            hold.holds_back(at(NOW)),
            Some(WaitingReason::SubscriberAtLimit)
        );
        let read = store
            .event_jobs("e-circuit", at(NOW))
            .await
            .unwrap()
            .unwrap();
        let hold = read.holds.get("o").expect("o has a due job");
        assert_eq!(
            hold.destination_hold,
            Some(WaitingReason::DestinationCircuitOpen)
        );
        let read = store
            .event_jobs("e-destination-full", at(NOW))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            read.holds["l"].holds_back(at(NOW)),
            Some(WaitingReason::DestinationAtLimit)
        );
    }
);

store_case!(
    an_events_jobs_come_with_their_holds,
    async |store: SharedStore| {
        for id in ["a", "b", "c", "p", "z"] {
            add_subscriber(&store, id).await;
        }
        finish(
            &store,
            job_created_at("b", "e", at(-9_000)),
            at(10_000),
            Fate::Dead(DeadReason::NonRetryableResponse),
        )
        .await;
        finish(
            &store,
            job_created_at("a", "e", at(-8_000)),
            at(20_000),
            Fate::Retrying(at(400_000)),
        )
        .await;
        finish(
            &store,
            job_created_at("c", "e", at(-7_000)),
            at(30_000),
            Fate::Delivered,
        )
        .await;
        let running = finish(
            &store,
            job_created_at("z", "e", at(-6_000)),
            at(40_000),
            Fate::InFlight,
        )
        .await;
        set_enabled(&store, "p", false, at(50_000)).await;
        create(&store, vec![due_job("p", "e", -5_000, 0)]).await;
        create(&store, vec![due_job("a", "other", -4_000, 0)]).await;

        let read = store
            .event_jobs("e", at(NOW))
            .await
            .unwrap()
            .expect("e exists");
        let subscribers: Vec<&str> = read
            .jobs
            .iter()
            .map(|j| j.job.subscriber_id.as_str())
            .collect();
        assert_eq!(
            subscribers,
            ["a", "b", "c", "p", "z"],
            "subscriber id order"
        );
        let states: Vec<JobState> = read.jobs.iter().map(|j| j.job.state).collect();
        assert_eq!(
            states,
            [
                JobState::Retrying,
                JobState::Dead,
                JobState::Delivered,
                JobState::Scheduled,
                JobState::Retrying,
            ],
            "z's lease (from 40 s) expired at 70 s: it reads retrying"
        );
        assert_eq!(read.jobs[4].job.id, running.id);
        let a = &read.jobs[0];
        assert_eq!(
            a.job.last_error.as_ref().map(|e| (e.class, e.status)),
            Some((ErrorClass::Http5xx, Some(503)))
        );
        assert_eq!(
            a.last_error_at,
            Some(at(20_000)),
            "when the 503 was recorded"
        );
        assert_eq!(read.jobs[1].last_error_at, Some(at(10_000)));
        assert_eq!(read.jobs[2].last_error_at, None, "delivered at once");
        assert!(
            read.jobs.iter().all(|j| j
                .job
                .last_error
                .as_ref()
                .is_none_or(|e| e.body_excerpt.is_none())),
            "bodies are not read"
        );
        // Holds: the enabled subscribers with a due job waiting for a claim (z's expired
        // lease) or a retrying one (a's, backing off: its advice reads its destination);
        // p is paused.
        let mut held: Vec<&String> = read.holds.keys().collect();
        held.sort();
        assert_eq!(held, ["a", "z"]);
        assert_eq!(read.holds["z"].holds_back(at(NOW)), None);

        assert!(
            store
                .event_jobs("nothing", at(NOW))
                .await
                .unwrap()
                .is_none()
        );
    }
);

store_case!(
    a_deleted_subscribers_jobs_do_not_make_their_events_affected,
    async |store: SharedStore| {
        for id in ["gone", "kept"] {
            add_subscriber(&store, id).await;
        }
        create(&store, vec![due_job("gone", "e-deleted", -30_000, 900_000)]).await;
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        finish(
            &store,
            job_created_at("kept", "e-refused-too", at(-10_000)),
            at(60_000),
            dead,
        )
        .await;
        // Deleted at 60 s: its waiting job dies `subscriber_deleted`, since `SINCE`.
        store.delete_subscriber("gone", at(60_000)).await.unwrap();
        let events = affected(&store, at(SINCE), None, 100).await;
        let names: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(
            names,
            ["e-refused-too"],
            "an operator's deletion is not an incident; a refusal is"
        );
        let summary = store
            .event_jobs("e-deleted", at(NOW))
            .await
            .unwrap()
            .expect("its history stays readable");
        assert_eq!(
            summary.jobs[0].job.dead_reason,
            Some(DeadReason::SubscriberDeleted)
        );
    }
);
