//! What the operator console reads and writes (issue #19): the instances' heartbeats,
//! jobs accepted / delivered / dead per minute, the dead letters grouped by reason and
//! subscriber, and console sessions ended by logout.

use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, Timestamp};
use deferhook::store::instances::FORGET_AFTER_MS;
use deferhook::store::{
    DeadLetterCause, DeadLetterGroup, Heartbeat, InstanceSeen, MinuteCounts, SharedStore,
};

use crate::finish::{Fate, finish, job_created_at};
use crate::support::{add_subscriber, at, create};

fn beat(id: &str, slots_in_use: u32) -> Heartbeat {
    Heartbeat {
        id: id.to_owned(),
        version: "0.1.0".to_owned(),
        started_at: at(0),
        worker_slots: 64,
        slots_in_use,
    }
}

store_case!(
    heartbeats_list_the_live_instances_and_forget_the_stopped_ones,
    async |store: SharedStore| {
        store
            .record_heartbeat(beat("b:2:x", 3), at(1_000))
            .await
            .unwrap();
        store
            .record_heartbeat(beat("a:1:x", 0), at(2_000))
            .await
            .unwrap();
        // A later heartbeat replaces the row.
        store
            .record_heartbeat(beat("b:2:x", 7), at(6_000))
            .await
            .unwrap();
        let live = store.live_instances(at(0)).await.unwrap();
        assert_eq!(
            live,
            [
                InstanceSeen {
                    heartbeat: beat("a:1:x", 0),
                    seen_at: at(2_000)
                },
                InstanceSeen {
                    heartbeat: beat("b:2:x", 7),
                    seen_at: at(6_000)
                },
            ],
            "in id order, each as its latest heartbeat left it"
        );
        let recent: Vec<String> = store
            .live_instances(at(5_000))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.heartbeat.id)
            .collect();
        assert_eq!(recent, ["b:2:x"], "a instance not seen since is not live");

        store.forget_instance("b:2:x").await.unwrap();
        store.forget_instance("never-seen").await.unwrap();
        let ids: Vec<String> = store
            .live_instances(at(0))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.heartbeat.id)
            .collect();
        assert_eq!(ids, ["a:1:x"], "a stopping instance's row goes");

        // The next heartbeat of any instance deletes a row not seen for an hour.
        let later = at(2_000).plus_ms(FORGET_AFTER_MS + 1);
        store
            .record_heartbeat(beat("c:3:x", 1), later)
            .await
            .unwrap();
        let ids: Vec<String> = store
            .live_instances(Timestamp::from_millis(0))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.heartbeat.id)
            .collect();
        assert_eq!(ids, ["c:3:x"]);
    }
);

store_case!(
    jobs_are_counted_per_minute_accepted_delivered_and_dead,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let minute = |n: i64| at(n * 60_000);
        // Before the window: accepted at -2 min, delivered in minute 0.
        finish(
            &store,
            job_created_at("s", "old", minute(-2)),
            minute(0).plus_ms(5),
            Fate::Delivered,
        )
        .await;
        // Accepted in minute 0 (two) and 2; one delivered in minute 1, one dead in 2.
        finish(
            &store,
            job_created_at("s", "a", minute(0).plus_ms(10)),
            minute(1).plus_ms(30),
            Fate::Delivered,
        )
        .await;
        finish(
            &store,
            job_created_at("s", "b", minute(0).plus_ms(59_999)),
            minute(2).plus_ms(1),
            Fate::Dead(DeadReason::NonRetryableResponse),
        )
        .await;
        create(
            &store,
            vec![job_created_at("s", "c", minute(2).plus_ms(100))],
        )
        .await;
        // Created after `now` (a clock ahead): left out.
        create(&store, vec![job_created_at("s", "d", minute(4))]).await;

        let counts = store
            .jobs_per_minute(minute(0).plus_ms(1), minute(3).plus_ms(10))
            .await
            .unwrap();
        let row = |n: i64, accepted, delivered, dead| MinuteCounts {
            minute: minute(n),
            accepted,
            delivered,
            dead,
        };
        assert_eq!(
            counts,
            [
                row(0, 2, 1, 0),
                row(1, 0, 1, 0),
                row(2, 1, 0, 1),
                row(3, 0, 0, 0),
            ],
            "every minute from since's to now's, oldest first, empty ones included"
        );
    }
);

store_case!(
    dead_letters_are_grouped_by_cause_then_subscriber_and_paged,
    async |store: SharedStore| {
        for id in ["a", "b", "c"] {
            add_subscriber(&store, id).await;
        }
        let rejected = Fate::Dead(DeadReason::NonRetryableResponse);
        for (n, (subscriber, dead_at)) in [("a", 1_000), ("a", 3_000), ("b", 2_000)]
            .into_iter()
            .enumerate()
        {
            let job = job_created_at(subscriber, &format!("e{n}"), at(0));
            finish(&store, job, at(dead_at), rejected).await;
        }
        let refused = Fate::Dead(DeadReason::TargetRejected);
        for (n, (subscriber, dead_at)) in [("b", 4_000), ("c", 5_000), ("c", 6_000), ("c", 7_000)]
            .into_iter()
            .enumerate()
        {
            let job = job_created_at(subscriber, &format!("r{n}"), at(0));
            finish(&store, job, at(dead_at), refused).await;
        }
        // Neither a delivered nor a waiting job is a dead letter.
        finish(
            &store,
            job_created_at("a", "ok", at(0)),
            at(500),
            Fate::Delivered,
        )
        .await;

        let dead = store.dead_letters(0, 10).await.unwrap();
        // The support's dead jobs end on a 400.
        let cause = |reason, jobs, subscribers| DeadLetterCause {
            dead_reason: reason,
            error_class: Some(ErrorClass::Http4xx),
            status: Some(400),
            jobs,
            subscribers,
        };
        assert_eq!(
            dead.causes,
            [
                cause(DeadReason::TargetRejected, 4, 2),
                cause(DeadReason::NonRetryableResponse, 3, 2),
            ]
        );
        let group = |reason, subscriber: &str, jobs, first, last| DeadLetterGroup {
            dead_reason: reason,
            error_class: Some(ErrorClass::Http4xx),
            status: Some(400),
            subscriber_id: subscriber.to_owned(),
            jobs,
            first_dead_at: at(first),
            last_dead_at: at(last),
        };
        let expected = [
            group(DeadReason::TargetRejected, "c", 3, 5_000, 7_000),
            group(DeadReason::TargetRejected, "b", 1, 4_000, 4_000),
            group(DeadReason::NonRetryableResponse, "a", 2, 1_000, 3_000),
            group(DeadReason::NonRetryableResponse, "b", 1, 2_000, 2_000),
        ];
        assert_eq!(
            dead.groups, expected,
            "the cause with most jobs first, then most jobs, then by subscriber"
        );
        assert_eq!(dead.total_groups, 4);
        let second = store.dead_letters(2, 1).await.unwrap();
        assert_eq!(second.groups, expected[2..3]);
        assert_eq!((second.total_groups, second.causes.len()), (4, 2));
        let past = store.dead_letters(10, 5).await.unwrap();
        assert_eq!((past.groups.len(), past.total_groups), (0, 4));
    }
);

store_case!(
    ended_console_sessions_are_refused_until_they_expire,
    async |store: SharedStore| {
        assert!(!store.console_session_ended("s1").await.unwrap());
        store
            .end_console_session("s1", at(60_000), at(1_000))
            .await
            .unwrap();
        store
            .end_console_session("s1", at(60_000), at(2_000))
            .await
            .unwrap();
        assert!(store.console_session_ended("s1").await.unwrap());
        assert!(!store.console_session_ended("s2").await.unwrap());
        // Once s1 would have expired, the next logout forgets it.
        store
            .end_console_session("s2", at(120_000), at(60_001))
            .await
            .unwrap();
        assert!(!store.console_session_ended("s1").await.unwrap());
        assert!(store.console_session_ended("s2").await.unwrap());
    }
);

store_case!(
    a_subscriber_s_recent_attempts_come_latest_first_with_their_jobs,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        add_subscriber(&store, "other").await;
        let first = finish(
            &store,
            job_created_at("s", "e1", at(0)),
            at(1_000),
            Fate::Delivered,
        )
        .await;
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        let second = finish(&store, job_created_at("s", "e2", at(0)), at(2_000), dead).await;
        finish(
            &store,
            job_created_at("other", "e3", at(0)),
            at(3_000),
            Fate::Delivered,
        )
        .await;

        let recent = store.recent_attempts("s", 10).await.unwrap();
        let seen: Vec<(uuid::Uuid, &str, u32)> = recent
            .iter()
            .map(|r| (r.job_id, r.event_id.as_str(), r.attempt.number))
            .collect();
        assert_eq!(seen, [(second.id, "e2", 1), (first.id, "e1", 1)]);
        assert_eq!(recent[0].attempt.status, Some(400));
        assert_eq!(store.recent_attempts("s", 1).await.unwrap().len(), 1);
        assert!(
            store
                .recent_attempts("nobody", 10)
                .await
                .unwrap()
                .is_empty()
        );
    }
);
