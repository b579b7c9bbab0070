//! Recurring schedules as stored (issue #20): put, read, list, delete; the due read;
//! the scheduler's conditional advance; a manual run's record.

use deferhook::domain::recurring::CatchUp;
use deferhook::store::{
    PageRequest, Schedule, ScheduleAdvance, ScheduleDefinition, ScheduleRun, ScheduleTarget,
    ScheduleTiming, SharedStore,
};

use crate::support::{at, fresh_id};

/// A schedule of subscriber `s`, hourly in UTC.
pub fn hourly(id: &str) -> ScheduleDefinition {
    ScheduleDefinition {
        id: id.to_owned(),
        target: ScheduleTarget::Subscriber("s".into()),
        timing: ScheduleTiming::Cron {
            cron: "0 * * * *".into(),
            time_zone: "UTC".into(),
        },
        event_id: "cleanup:room-7:{period_start}".into(),
        payload: r#"{"room": 7}"#.into(),
        ttl_ms: Some(60_000),
        max_attempts: Some(3),
        catch_up: CatchUp::Latest,
        enabled: true,
    }
}

/// A put of `definition` with cursor `next` that gives `enabled`.
pub fn put_of(
    definition: ScheduleDefinition,
    next: Option<deferhook::domain::Timestamp>,
) -> deferhook::store::SchedulePut {
    deferhook::store::SchedulePut {
        definition,
        next_period: next,
        enabled_given: true,
        max_schedules: 1_000,
    }
}

async fn ids_due(store: &SharedStore, until: i64) -> Vec<String> {
    store
        .due_schedules(at(until), 10, at(0))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.definition.id)
        .collect()
}

store_case!(
    a_schedule_is_put_read_listed_and_deleted,
    async |store: SharedStore| {
        let every = ScheduleDefinition {
            target: ScheduleTarget::EventType("report.daily".into()),
            timing: ScheduleTiming::Every {
                every_ms: 90_000,
                anchor: at(-5),
            },
            catch_up: CatchUp::None,
            ttl_ms: None,
            max_attempts: None,
            ..hourly("b-every")
        };
        let stored = store
            .put_schedule(put_of(every.clone(), Some(at(1_000))), at(0))
            .await
            .unwrap();
        let expected = Schedule {
            definition: every.clone(),
            created_at: at(0),
            updated_at: at(0),
            next_period: Some(at(1_000)),
            cursor_version: 0,
            last_run: None,
            last_error: None,
        };
        assert_eq!(stored, expected);
        assert_eq!(store.get_schedule("b-every").await.unwrap(), Some(expected));
        store
            .put_schedule(put_of(hourly("a-cron"), Some(at(2_000))), at(0))
            .await
            .unwrap();
        let first = store
            .list_schedules(PageRequest {
                after: None,
                limit: 1,
            })
            .await
            .unwrap();
        assert_eq!(first[0].definition.id, "a-cron");
        let rest = store
            .list_schedules(PageRequest {
                after: Some("a-cron".into()),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].definition, every);

        assert!(store.delete_schedule("b-every").await.unwrap());
        assert!(!store.delete_schedule("b-every").await.unwrap());
        assert_eq!(store.get_schedule("b-every").await.unwrap(), None);
    }
);

store_case!(
    a_put_replaces_the_definition_and_keeps_creation_and_last_run,
    async |store: SharedStore| {
        let first = store
            .put_schedule(put_of(hourly("h"), Some(at(1_000))), at(0))
            .await
            .unwrap();
        let run = ScheduleRun {
            period: at(1_000),
            event_id: "cleanup:room-7:x".into(),
            job_id: Some(fresh_id()),
            jobs: 1,
        };
        let advance = ScheduleAdvance {
            next_period: Some(at(2_000)),
            run: Some(run.clone()),
            error: None,
        };
        assert!(
            store
                .advance_schedule("h", first.seen(), advance)
                .await
                .unwrap()
        );
        let changed = ScheduleDefinition {
            payload: r#"{"room": 8}"#.into(),
            enabled: false,
            ..hourly("h")
        };
        let replaced = store
            .put_schedule(put_of(changed.clone(), Some(at(2_000))), at(500))
            .await
            .unwrap();
        assert_eq!(replaced.definition, changed);
        assert_eq!(replaced.created_at, at(0));
        assert_eq!(replaced.updated_at, at(500));
        assert_eq!(replaced.last_run, Some(run));
    }
);

store_case!(
    only_enabled_schedules_due_by_the_bound_are_read_earliest_first,
    async |store: SharedStore| {
        for (id, next, enabled) in [
            ("late", Some(3_000), true),
            ("soon", Some(1_000), true),
            ("paused", Some(500), false),
            ("over", None, true),
        ] {
            let definition = ScheduleDefinition {
                enabled,
                ..hourly(id)
            };
            store
                .put_schedule(put_of(definition, next.map(at)), at(0))
                .await
                .unwrap();
        }
        assert_eq!(ids_due(&store, 999).await, Vec::<String>::new());
        assert_eq!(ids_due(&store, 1_000).await, ["soon"]);
        assert_eq!(ids_due(&store, 5_000).await, ["soon", "late"]);
    }
);

store_case!(
    an_advance_applies_only_to_the_schedule_as_read,
    async |store: SharedStore| {
        let read = store
            .put_schedule(put_of(hourly("h"), Some(at(1_000))), at(0))
            .await
            .unwrap();
        let advance = |next: i64, error: Option<&str>| ScheduleAdvance {
            next_period: Some(at(next)),
            run: None,
            error: error.map(str::to_owned),
        };
        assert!(
            store
                .advance_schedule("h", read.seen(), advance(2_000, None))
                .await
                .unwrap()
        );
        // A second instance that read the same cursor is too late.
        assert!(
            !store
                .advance_schedule("h", read.seen(), advance(3_000, None))
                .await
                .unwrap()
        );
        let now = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(now.next_period, Some(at(2_000)));
        // A producer's put that keeps the timing keeps the cursor the scheduler moved,
        // whatever cursor it brings: the pass that read it before still applies.
        let payload_only = ScheduleDefinition {
            payload: r#"{"room": 9}"#.into(),
            ..hourly("h")
        };
        let kept = store
            .put_schedule(put_of(payload_only, Some(at(1_000))), at(100))
            .await
            .unwrap();
        assert_eq!(kept.next_period, Some(at(2_000)), "never back");
        assert_eq!(kept.seen(), now.seen());
        assert!(
            store
                .advance_schedule("h", now.seen(), advance(4_000, None))
                .await
                .unwrap()
        );
        // A put that changes the timing restarts the cursor: a pass that read the old
        // one is too late.
        let read = store.get_schedule("h").await.unwrap().unwrap();
        let half_hourly = ScheduleDefinition {
            timing: ScheduleTiming::Cron {
                cron: "*/30 * * * *".into(),
                time_zone: "UTC".into(),
            },
            ..hourly("h")
        };
        let restarted = store
            .put_schedule(put_of(half_hourly, Some(at(3_000))), at(200))
            .await
            .unwrap();
        assert_eq!(restarted.next_period, Some(at(3_000)));
        assert_eq!(restarted.cursor_version, read.cursor_version + 1);
        assert!(
            !store
                .advance_schedule("h", read.seen(), advance(9_000, None))
                .await
                .unwrap()
        );
        // An error is kept without a run, and cleared by one.
        let now = store.get_schedule("h").await.unwrap().unwrap();
        assert!(
            store
                .advance_schedule(
                    "h",
                    now.seen(),
                    advance(5_000, Some("subscriber `s` does not exist"))
                )
                .await
                .unwrap()
        );
        let errored = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(
            errored.last_error.as_deref(),
            Some("subscriber `s` does not exist")
        );
        assert_eq!(errored.next_period, Some(at(5_000)));
        let run = ScheduleRun {
            period: at(5_000),
            event_id: "e".into(),
            job_id: None,
            jobs: 0,
        };
        let with_run = ScheduleAdvance {
            run: Some(run.clone()),
            ..advance(6_000, None)
        };
        assert!(
            store
                .advance_schedule("h", errored.seen(), with_run)
                .await
                .unwrap()
        );
        let cleared = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(cleared.last_error, None);
        assert_eq!(cleared.last_run, Some(run));
        // A schedule with no period left stops.
        let stop = ScheduleAdvance {
            next_period: None,
            run: None,
            error: None,
        };
        assert!(
            store
                .advance_schedule("h", cleared.seen(), stop)
                .await
                .unwrap()
        );
        assert_eq!(
            store.get_schedule("h").await.unwrap().unwrap().next_period,
            None
        );
    }
);

store_case!(
    a_manual_run_never_records_an_earlier_period_over_a_later_one,
    async |store: SharedStore| {
        store
            .put_schedule(put_of(hourly("h"), Some(at(1_000))), at(0))
            .await
            .unwrap();
        let run = |period: i64| ScheduleRun {
            period: at(period),
            event_id: format!("e{period}"),
            job_id: Some(fresh_id()),
            jobs: 1,
        };
        assert!(store.record_schedule_run("h", run(2_000)).await.unwrap());
        assert!(!store.record_schedule_run("h", run(1_000)).await.unwrap());
        assert!(store.record_schedule_run("h", run(2_000)).await.unwrap());
        let stored = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(stored.last_run.map(|r| r.period), Some(at(2_000)));
        assert!(!store.record_schedule_run("nope", run(3_000)).await.unwrap());
    }
);

store_case!(
    a_scheduler_holds_a_schedule_while_it_makes_its_periods,
    async |store: SharedStore| {
        let read = store
            .put_schedule(put_of(hourly("h"), Some(at(1_000))), at(0))
            .await
            .unwrap();
        assert!(
            store
                .lease_schedule("h", read.seen(), at(30_000), at(0))
                .await
                .unwrap()
        );
        // Another instance passes it by while it is held...
        assert!(
            !store
                .lease_schedule("h", read.seen(), at(30_000), at(10))
                .await
                .unwrap()
        );
        assert_eq!(
            store.due_schedules(at(5_000), 10, at(10)).await.unwrap(),
            Vec::<Schedule>::new()
        );
        // ...and takes it over once the hold has passed (its scheduler died).
        assert_eq!(
            store
                .due_schedules(at(5_000), 10, at(30_000))
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(
            store
                .lease_schedule("h", read.seen(), at(60_000), at(30_000))
                .await
                .unwrap()
        );
        // Moving the cursor ends the hold.
        let advance = ScheduleAdvance {
            next_period: Some(at(2_000)),
            run: None,
            error: None,
        };
        assert!(
            store
                .advance_schedule("h", read.seen(), advance)
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .due_schedules(at(5_000), 10, at(30_001))
                .await
                .unwrap()
                .len(),
            1
        );
        // A hold asks for the cursor as read: a stale read holds nothing.
        assert!(
            !store
                .lease_schedule("h", read.seen(), at(90_000), at(30_001))
                .await
                .unwrap()
        );
        // A put that restarts the cursor ends a hold; one that does not, keeps it.
        let now = store.get_schedule("h").await.unwrap().unwrap();
        assert!(
            store
                .lease_schedule("h", now.seen(), at(90_000), at(30_001))
                .await
                .unwrap()
        );
        let paused = ScheduleDefinition {
            payload: "[]".into(),
            ..hourly("h")
        };
        store
            .put_schedule(put_of(paused, Some(at(9_000))), at(30_002))
            .await
            .unwrap();
        assert!(
            store
                .due_schedules(at(5_000), 10, at(30_003))
                .await
                .unwrap()
                .is_empty()
        );
        let moved = ScheduleDefinition {
            timing: ScheduleTiming::Every {
                every_ms: 60_000,
                anchor: at(0),
            },
            ..hourly("h")
        };
        store
            .put_schedule(put_of(moved, Some(at(60_000))), at(30_004))
            .await
            .unwrap();
        assert_eq!(
            store
                .due_schedules(at(60_000), 10, at(30_005))
                .await
                .unwrap()
                .len(),
            1
        );
    }
);

store_case!(
    enabled_left_out_of_a_put_keeps_the_stored_value,
    async |store: SharedStore| {
        let paused = ScheduleDefinition {
            enabled: false,
            ..hourly("h")
        };
        store
            .put_schedule(put_of(paused, Some(at(1_000))), at(0))
            .await
            .unwrap();
        // A producer's put read the schedule enabled (before the pause) and leaves
        // `enabled` out: the pause stays.
        let stale = deferhook::store::SchedulePut {
            definition: hourly("h"),
            next_period: Some(at(5_000)),
            enabled_given: false,
            max_schedules: 1_000,
        };
        let kept = store.put_schedule(stale, at(10)).await.unwrap();
        assert!(!kept.definition.enabled);
        assert_eq!(
            kept.next_period,
            Some(at(1_000)),
            "not resumed: not restarted"
        );
        // Resumed explicitly: the periods start again from the cursor given.
        let resumed = store
            .put_schedule(put_of(hourly("h"), Some(at(5_000))), at(20))
            .await
            .unwrap();
        assert!(resumed.definition.enabled);
        assert_eq!(resumed.next_period, Some(at(5_000)));
        assert_eq!(resumed.cursor_version, 1);
    }
);
