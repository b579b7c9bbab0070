//! Subscriber health (issue #16 part 3): its status moves with its attempts (a 5xx
//! makes it failing, a 2xx healthy again once nothing retries), a 410 pauses it with
//! reason `gone`, `dead_last_hour` is a sliding window, the listing by health puts the
//! most failing jobs first and pages without a skip or a repeat; and the deadline
//! sweep keeps why a paused subscriber's job waited (`dead_detail`).

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::health::HealthStatus;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::waiting::WaitingReason;
use deferhook::domain::{DeadReason, JobEvent, JobState, Timestamp};
use deferhook::store::{
    DestinationPut, HealthCursor, HealthFigures, PageRequest, PausedReason, SharedStore,
    SubscriberHealth,
};
use deferhook::testing::START;

use crate::finish::{Fate, finish, job_created_at, record};
use crate::support::{
    OWNER, add_subscriber, at, claim_one, create, delivered, failed, job, new_job, outcome,
    set_enabled,
};

fn new(subscriber: &str, event: &str) -> deferhook::store::NewJob {
    job_created_at(subscriber, event, START)
}

/// Subscriber `id` with its health figures at `now`.
async fn health(store: &SharedStore, id: &str, now: Timestamp) -> SubscriberHealth {
    let subscriber = store.get_subscriber(id).await.unwrap().unwrap();
    let mut figures = store
        .subscriber_health(&[id.to_owned()], now)
        .await
        .unwrap();
    SubscriberHealth {
        subscriber,
        figures: figures
            .remove(id)
            .expect("figures of an existing subscriber"),
    }
}

/// The status and since of subscriber `id` at `now`.
async fn status(
    store: &SharedStore,
    id: &str,
    now: Timestamp,
) -> (HealthStatus, Option<Timestamp>) {
    let health = health(store, id, now).await.health();
    (health.status, health.since)
}

store_case!(
    health_goes_failing_after_a_5xx_and_healthy_after_a_2xx,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        add_subscriber(&store, "other").await;
        assert_eq!(
            status(&store, "s", at(500)).await,
            (HealthStatus::Healthy, None)
        );

        finish(&store, new("s", "a"), at(1_000), Fate::Delivered).await;
        assert_eq!(
            status(&store, "s", at(1_500)).await,
            (HealthStatus::Healthy, Some(at(1_000)))
        );

        // A 503: failing since then, one job retrying at 60 s.
        let b = finish(&store, new("s", "b"), at(2_000), Fate::Retrying(at(60_000))).await;
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        finish(&store, new("s", "c"), at(3_000), dead).await;
        // Another subscriber's failure is not s's.
        finish(&store, new("other", "x"), at(3_500), dead).await;
        let seen = health(&store, "s", at(3_600)).await;
        assert_eq!(
            (seen.health().status, seen.health().since),
            (HealthStatus::Failing, Some(at(2_000))),
            "since the first failure after the last success"
        );
        let failure = seen.figures.last_failure.clone().unwrap();
        assert_eq!((failure.at, failure.status), (at(3_000), Some(400)));
        assert_eq!(failure.class, Some(ErrorClass::Http4xx));
        assert_eq!((seen.figures.retrying, seen.figures.dead_last_hour), (1, 1));
        assert_eq!(seen.figures.failing_jobs(), 2);
        assert_eq!(seen.figures.next_attempt_at, Some(at(60_000)));

        // A 2xx of another job: its last attempt succeeded, but b still retries.
        finish(&store, new("s", "d"), at(4_000), Fate::Delivered).await;
        assert_eq!(
            status(&store, "s", at(4_500)).await,
            (HealthStatus::Failing, Some(at(3_000)))
        );
        // An attempt whose outcome is unknown (b's worker stopped) is not a failure;
        // its job is due again, retrying.
        let claimed = claim_one(&store, OWNER, at(60_000)).await;
        assert_eq!(claimed.job_id, b.id);
        record(
            &store,
            &claimed,
            JobEvent::Released,
            crate::finish::released(),
            at(61_000),
        )
        .await;
        let seen = health(&store, "s", at(61_000)).await;
        assert_eq!(seen.health().status, HealthStatus::Failing);
        assert_eq!(seen.figures.last_failure.unwrap().at, at(3_000));

        // b delivered: nothing retries, the last attempt succeeded.
        let claimed = claim_one(&store, OWNER, at(61_000)).await;
        assert_eq!(claimed.job_id, b.id);
        record(
            &store,
            &claimed,
            JobEvent::Delivered,
            delivered(200),
            at(62_000),
        )
        .await;
        assert_eq!(
            status(&store, "s", at(62_500)).await,
            (HealthStatus::Healthy, Some(at(62_000)))
        );
        // A late read of the failure's window: dead_last_hour still counts c.
        assert_eq!(
            health(&store, "s", at(62_500)).await.figures.dead_last_hour,
            1
        );
    }
);

store_case!(
    an_expired_lease_reads_as_retrying_and_failing,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        create(&store, vec![new_job("s", "a", at(0), at(600_000))]).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let live = health(&store, "s", at(1_000)).await;
        assert_eq!((live.figures.in_flight, live.figures.retrying), (1, 0));
        assert_eq!(live.health().status, HealthStatus::Healthy);
        let expired = health(&store, "s", claimed.lease_expires_at).await;
        assert_eq!(
            (expired.figures.in_flight, expired.figures.retrying),
            (0, 1)
        );
        assert_eq!(
            (expired.health().status, expired.health().since),
            (HealthStatus::Failing, None),
            "retrying, though no attempt failed"
        );
        assert_eq!(
            expired.figures.next_attempt_at,
            Some(claimed.lease_expires_at)
        );
    }
);

store_case!(
    a_410_pauses_the_subscriber_with_reason_gone,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        create(&store, vec![new_job("s", "a", at(0), at(600_000))]).await;
        let claimed = claim_one(&store, OWNER, at(0)).await;
        let result = failed(
            AttemptOutcome::Terminal,
            ErrorClass::Http4xx,
            Some(410),
            "410 Gone",
            None,
        );
        let event = JobEvent::TerminalFailure {
            reason: DeadReason::NonRetryableResponse,
        };
        let mut gone = outcome(&claimed, event, result, at(1_000));
        gone.pause_subscriber = true;
        store.record_outcomes(&[gone], at(1_000)).await.unwrap();

        let seen = health(&store, "s", at(2_000)).await;
        assert_eq!(
            (seen.health().status, seen.health().since),
            (HealthStatus::Paused, Some(at(1_000)))
        );
        assert_eq!(seen.subscriber.paused_reason, Some(PausedReason::Gone));
        assert_eq!(seen.figures.last_failure.unwrap().status, Some(410));
        assert_eq!(seen.figures.dead_last_hour, 1);
        let paused = store
            .list_subscribers_by_health(
                HealthStatus::Paused,
                PageRequest {
                    after: None,
                    limit: 10,
                },
                at(2_000),
            )
            .await
            .unwrap();
        assert_eq!(paused.len(), 1);
        assert_eq!(paused[0].subscriber.id, "s");
    }
);

store_case!(
    dead_last_hour_is_a_sliding_window,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        finish(&store, new("s", "a"), at(0), dead).await;
        finish(&store, new("s", "b"), at(1_000), dead).await;
        let dead_last_hour = async |now| health(&store, "s", now).await.figures.dead_last_hour;
        assert_eq!(dead_last_hour(at(1_000)).await, 2);
        assert_eq!(
            dead_last_hour(at(500)).await,
            1,
            "b is not dead yet at 0.5 s"
        );
        // (now − 1 h, now]: a job dead exactly an hour ago is out.
        assert_eq!(dead_last_hour(at(3_600_000)).await, 1);
        assert_eq!(dead_last_hour(at(3_601_000)).await, 0);
    }
);

/// The ids of the listing of `status` at `now`, walked `limit` at a time.
async fn walk(
    store: &SharedStore,
    status: HealthStatus,
    limit: u32,
    now: Timestamp,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_subscribers_by_health(status, PageRequest { after, limit }, now)
            .await
            .unwrap();
        assert!(page.len() <= limit as usize);
        ids.extend(page.iter().map(|e| e.subscriber.id.clone()));
        let Some(last) = page.last().filter(|_| page.len() == limit as usize) else {
            return ids;
        };
        after = Some(HealthCursor {
            failing_jobs: last.figures.failing_jobs(),
            id: last.subscriber.id.clone(),
        });
    }
}

store_case!(
    the_health_listing_puts_most_failing_jobs_first_and_pages_stably,
    async |store: SharedStore| {
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        let mut instant = 1_000;
        // f-a 3, f-b 1, f-c 3, f-d 2 (one dead, one retrying), f-e 1.
        for (id, n) in [("f-a", 3), ("f-b", 1), ("f-c", 3), ("f-d", 1), ("f-e", 1)] {
            add_subscriber(&store, id).await;
            for k in 0..n {
                finish(&store, new(id, &format!("e{k}")), at(instant), dead).await;
                instant += 1_000;
            }
        }
        finish(
            &store,
            new("f-d", "r"),
            at(instant),
            Fate::Retrying(at(900_000)),
        )
        .await;
        add_subscriber(&store, "h").await;
        finish(&store, new("h", "ok"), at(instant + 1_000), Fate::Delivered).await;
        add_subscriber(&store, "p").await;
        set_enabled(&store, "p", false, at(instant + 2_000)).await;
        let now = at(instant + 3_000);

        let expected = ["f-a", "f-c", "f-d", "f-b", "f-e"];
        for limit in [1, 2, 3, 10] {
            assert_eq!(
                walk(&store, HealthStatus::Failing, limit, now).await,
                expected,
                "pages of {limit}"
            );
        }
        let first = store
            .list_subscribers_by_health(
                HealthStatus::Failing,
                PageRequest {
                    after: None,
                    limit: 5,
                },
                now,
            )
            .await
            .unwrap();
        let counts: Vec<u64> = first.iter().map(|e| e.figures.failing_jobs()).collect();
        assert_eq!(counts, [3, 3, 2, 1, 1]);
        let d: &HealthFigures = &first[2].figures;
        assert_eq!((d.retrying, d.dead_last_hour), (1, 1));
        assert_eq!(walk(&store, HealthStatus::Healthy, 10, now).await, ["h"]);
        assert_eq!(walk(&store, HealthStatus::Paused, 10, now).await, ["p"]);

        // A page boundary after f-c (3); then f-e's count changes (1 → 2) and the
        // others' do not: the next page neither skips nor repeats any of them.
        let after = Some(HealthCursor {
            failing_jobs: 3,
            id: "f-c".into(),
        });
        finish(&store, new("f-e", "more"), at(instant + 4_000), dead).await;
        let rest = store
            .list_subscribers_by_health(
                HealthStatus::Failing,
                PageRequest { after, limit: 10 },
                at(instant + 5_000),
            )
            .await
            .unwrap();
        let rest: Vec<&str> = rest.iter().map(|e| e.subscriber.id.as_str()).collect();
        assert_eq!(rest, ["f-d", "f-e", "f-b"]);
    }
);

store_case!(
    the_sweep_keeps_why_a_paused_subscribers_job_waited,
    async |store: SharedStore| {
        add_subscriber(&store, "paused").await;
        add_subscriber(&store, "open").await;
        let jobs = create(
            &store,
            vec![
                new_job("paused", "a", at(100_000), at(200_000)),
                new_job("open", "b", at(100_000), at(200_000)),
            ],
        )
        .await;
        set_enabled(&store, "paused", false, at(1_000)).await;
        let expired = store.expire_deadlines(at(200_000), 10).await.unwrap();
        assert_eq!(expired.dead, 2);
        let waited = job(&store, jobs[0].id).await;
        assert_eq!(waited.state, JobState::Dead);
        assert_eq!(waited.dead_reason, Some(DeadReason::DeadlineExceeded));
        assert_eq!(waited.dead_detail, Some(WaitingReason::SubscriberPaused));
        let other = job(&store, jobs[1].id).await;
        assert_eq!(other.dead_reason, Some(DeadReason::DeadlineExceeded));
        assert_eq!(other.dead_detail, None);
    }
);

store_case!(
    the_sweep_keeps_a_held_destination_as_why_a_job_waited,
    async |store: SharedStore| {
        add_subscriber(&store, "held").await;
        let jobs = create(&store, vec![new_job("held", "a", at(100_000), at(200_000))]).await;
        let put = DestinationPut {
            max_in_flight: None,
            paused: Some(true),
            circuit: None,
        };
        let key = "held.example.test:443";
        assert!(
            store
                .put_destination(key, put, at(1_000))
                .await
                .unwrap()
                .is_some()
        );
        store.expire_deadlines(at(200_000), 10).await.unwrap();
        let waited = job(&store, jobs[0].id).await;
        assert_eq!(waited.dead_reason, Some(DeadReason::DeadlineExceeded));
        assert_eq!(waited.dead_detail, Some(WaitingReason::DestinationPaused));
    }
);
