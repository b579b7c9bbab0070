//! The scheduler of recurring schedules over each store (issue #20), with the instant
//! of every pass given: periods become ordinary jobs just before they start (cron in
//! UTC and across both daylight-saving changes of a zone, intervals from an anchor),
//! once per period across a restart and across two instances, missed periods by the
//! catch-up policy, a deleted schedule stops, event-type schedules fan out, and a
//! scheduler that stalled past its hold writes nothing of a period another counted
//! skipped.

use std::sync::Arc;

use deferhook::domain::job_template::JobLimits;
use deferhook::domain::recurring::CatchUp;
use deferhook::domain::{JobState, ManualClock, Timestamp};
use deferhook::scheduler::period::{
    Written, create_period, plan_period, recurrence_of, write_period,
};
use deferhook::scheduler::{HOLD_MS, PassReport, Scheduler};
use deferhook::store::{
    Job, JobFilter, PeriodFence, ScheduleDefinition, ScheduleTarget, ScheduleTiming, SharedStore,
    SubscriberPut,
};

use crate::suite::schedules::put_of;
use crate::support::{Backend, list_at, subscriber_put};

const LIMITS: JobLimits = JobLimits {
    max_payload_bytes: 65_536,
    default_ttl_ms: 86_400_000,
};

fn t(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

fn scheduler(store: &SharedStore) -> Scheduler {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    Scheduler::new(store.clone(), clock, LIMITS)
}

fn cron(id: &str, pattern: &str, zone: &str) -> ScheduleDefinition {
    ScheduleDefinition {
        id: id.to_owned(),
        target: ScheduleTarget::Subscriber("s".into()),
        timing: ScheduleTiming::Cron {
            cron: pattern.into(),
            time_zone: zone.into(),
        },
        // Each schedule's own event ids: two schedules of one subscriber with one
        // template would make one job per period between them.
        event_id: format!("cleanup:{id}:{{period_start}}"),
        payload: r#"{"room":7}"#.into(),
        ttl_ms: Some(60_000),
        max_attempts: Some(3),
        catch_up: CatchUp::Latest,
        enabled: true,
    }
}

/// Stores `definition` as created at `now`: its cursor the first period after `now`.
async fn put(store: &SharedStore, definition: ScheduleDefinition, now: Timestamp) {
    let next = recurrence_of(&definition).unwrap().next_after(now);
    store
        .put_schedule(put_of(definition, next), now)
        .await
        .unwrap();
}

async fn pass(store: &SharedStore, now: &str) -> PassReport {
    scheduler(store).pass(t(now)).await.unwrap()
}

/// Schedule `id`'s jobs as read at `now`, oldest first.
async fn jobs_of(store: &SharedStore, id: &str) -> Vec<Job> {
    let filter = JobFilter {
        schedule_id: Some(id.to_owned()),
        ..JobFilter::default()
    };
    let mut jobs = list_at(store, filter, t("2026-01-01T00:00:00Z")).await;
    jobs.reverse();
    jobs
}

/// The periods of schedule `id`'s jobs, oldest first: their event ids without the
/// `cleanup:{id}:` of [`cron`]'s template.
async fn event_ids(store: &SharedStore, id: &str) -> Vec<String> {
    let prefix = format!("cleanup:{id}:");
    jobs_of(store, id)
        .await
        .into_iter()
        .map(|j| {
            j.event_id
                .strip_prefix(&prefix)
                .unwrap_or(&j.event_id)
                .to_owned()
        })
        .collect()
}

async fn add(store: &SharedStore, id: &str, types: &[&str]) {
    let put = SubscriberPut {
        event_types: Some(types.iter().map(|p| p.to_string()).collect()),
        ..subscriber_put(id)
    };
    store
        .put_subscriber(put, t("2026-01-01T00:00:00Z"))
        .await
        .unwrap();
}

store_case!(
    a_period_becomes_a_job_just_before_it_starts,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("h", "0 * * * *", "UTC"),
            t("2026-11-30T10:15:00Z"),
        )
        .await;

        assert_eq!(
            pass(&store, "2026-11-30T10:59:54Z").await.periods,
            0,
            "6 s early"
        );
        let report = pass(&store, "2026-11-30T10:59:55Z").await;
        assert_eq!((report.schedules, report.periods), (1, 1));
        let jobs = jobs_of(&store, "h").await;
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        assert_eq!(job.event_id, "cleanup:h:2026-11-30T11:00:00Z");
        assert_eq!(job.subscriber_id, "s");
        assert_eq!(job.state, JobState::Scheduled);
        assert_eq!(
            job.deliver_at,
            t("2026-11-30T11:00:00Z"),
            "due when the period starts"
        );
        assert_eq!(job.deadline, t("2026-11-30T11:01:00Z"), "its ttl_ms after");
        assert_eq!(job.max_attempts, Some(3));
        assert_eq!(job.schedule_id.as_deref(), Some("h"));
        assert_eq!(job.event_type, None);

        assert_eq!(
            pass(&store, "2026-11-30T10:59:58Z").await.periods,
            0,
            "made once"
        );
        assert_eq!(pass(&store, "2026-11-30T11:59:55Z").await.periods, 1);
        assert_eq!(
            event_ids(&store, "h").await,
            ["2026-11-30T11:00:00Z", "2026-11-30T12:00:00Z"]
        );
        let schedule = store.get_schedule("h").await.unwrap().unwrap();
        let last = schedule.last_run.unwrap();
        assert_eq!(last.period, t("2026-11-30T12:00:00Z"));
        assert_eq!(last.event_id, "cleanup:h:2026-11-30T12:00:00Z");
        assert_eq!(last.jobs, 1);
        assert_eq!(last.job_id, Some(jobs_of(&store, "h").await[1].id));
        assert_eq!(schedule.next_period, Some(t("2026-11-30T13:00:00Z")));
    }
);

store_case!(
    interval_periods_are_whole_multiples_from_the_anchor,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        let every = ScheduleDefinition {
            timing: ScheduleTiming::Every {
                every_ms: 90_000,
                anchor: t("2026-11-30T10:00:30Z"),
            },
            ..cron("i", "", "")
        };
        put(&store, every, t("2026-11-30T10:15:00Z")).await;
        pass(&store, "2026-11-30T10:15:26Z").await;
        pass(&store, "2026-11-30T10:16:56Z").await;
        assert_eq!(
            event_ids(&store, "i").await,
            ["2026-11-30T10:15:30Z", "2026-11-30T10:17:00Z"]
        );
    }
);

store_case!(
    periods_follow_the_zone_across_spring_forward,
    async |store: SharedStore| {
        // America/New_York, 2026-03-08: 02:00 EST jumps to 03:00 EDT.
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("fixed", "30 2 * * *", "America/New_York"),
            t("2026-03-07T00:00:00Z"),
        )
        .await;
        put(
            &store,
            cron("every", "*/30 * * * *", "America/New_York"),
            t("2026-03-08T05:50:00Z"),
        )
        .await;
        for now in [
            "2026-03-07T07:29:56Z",
            "2026-03-08T05:59:56Z",
            "2026-03-08T06:29:56Z",
            "2026-03-08T06:59:56Z",
            "2026-03-08T07:29:56Z",
            "2026-03-09T06:29:56Z",
        ] {
            pass(&store, now).await;
        }
        assert_eq!(
            event_ids(&store, "fixed").await,
            [
                "2026-03-07T07:30:00Z", // 02:30 EST
                "2026-03-08T07:00:00Z", // 02:30 does not exist: 03:00 EDT
                "2026-03-09T06:30:00Z", // 02:30 EDT
            ]
        );
        let every: Vec<String> = event_ids(&store, "every")
            .await
            .into_iter()
            .take(4)
            .collect();
        assert_eq!(
            every,
            [
                "2026-03-08T06:00:00Z", // 01:00 EST
                "2026-03-08T06:30:00Z", // 01:30 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT: 02:00 and 02:30 skipped
                "2026-03-08T07:30:00Z", // 03:30 EDT
            ]
        );
    }
);

store_case!(
    periods_follow_the_zone_across_fall_back,
    async |store: SharedStore| {
        // America/New_York, 2026-11-01: 02:00 EDT falls back to 01:00 EST.
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("fixed", "30 1 * * *", "America/New_York"),
            t("2026-10-31T12:00:00Z"),
        )
        .await;
        put(
            &store,
            cron("every", "*/30 * * * *", "America/New_York"),
            t("2026-11-01T04:50:00Z"),
        )
        .await;
        for now in [
            "2026-11-01T04:59:56Z",
            "2026-11-01T05:29:56Z",
            "2026-11-01T05:59:56Z",
            "2026-11-01T06:29:56Z",
            "2026-11-01T06:59:56Z",
            "2026-11-02T06:29:56Z",
        ] {
            pass(&store, now).await;
        }
        assert_eq!(
            event_ids(&store, "fixed").await,
            [
                "2026-11-01T05:30:00Z", // the first 01:30 (EDT) only
                "2026-11-02T06:30:00Z", // 01:30 EST the next day
            ]
        );
        let every: Vec<String> = event_ids(&store, "every")
            .await
            .into_iter()
            .take(5)
            .collect();
        assert_eq!(
            every,
            [
                "2026-11-01T05:00:00Z", // 01:00 EDT
                "2026-11-01T05:30:00Z", // 01:30 EDT
                "2026-11-01T06:00:00Z", // 01:00 EST: the hour again
                "2026-11-01T06:30:00Z", // 01:30 EST
                "2026-11-01T07:00:00Z", // 02:00 EST
            ]
        );
    }
);

store_case!(
    a_period_made_before_a_crash_is_not_made_twice_after_the_restart,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("h", "0 * * * *", "UTC"),
            t("2026-11-30T10:15:00Z"),
        )
        .await;
        // The instance made the period's job and died before moving the cursor.
        let schedule = store.get_schedule("h").await.unwrap().unwrap();
        let made = create_period(
            &store,
            &schedule.definition,
            t("2026-11-30T11:00:00Z"),
            t("2026-11-30T10:59:55Z"),
            LIMITS,
        )
        .await
        .unwrap();
        assert_eq!(schedule.next_period, Some(t("2026-11-30T11:00:00Z")));
        // The restarted instance passes: the same period, the same job.
        let report = pass(&store, "2026-11-30T10:59:57Z").await;
        assert_eq!((report.schedules, report.periods), (1, 1));
        let jobs = jobs_of(&store, "h").await;
        assert_eq!(jobs.len(), 1, "one job for the period");
        assert_eq!(Some(jobs[0].id), made.run.job_id);
        let after = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(after.next_period, Some(t("2026-11-30T12:00:00Z")));
    }
);

/// Issue #34 item 5.3: instance A holds the schedule and plans the 11:00 period of its
/// three subscribers, then freezes (SIGSTOP) before its write commits; instance B,
/// once A's hold has run out and the period is more than 5 s late, counts it skipped
/// and moves on. A resumes and writes: refused, nothing written, the period counted
/// skipped once and made never.
async fn a_period_skipped_by_one_instance_is_not_made_by_another_that_resumes(
    store: SharedStore,
    typed: bool,
) {
    for id in ["a", "b", "c"] {
        add(&store, id, &["cleanup.*"]).await;
    }
    let hourly = ScheduleDefinition {
        catch_up: CatchUp::None,
        ..cron("h", "0 * * * *", "UTC")
    };
    let definition = if typed {
        ScheduleDefinition {
            target: ScheduleTarget::EventType("cleanup.hourly".into()),
            ..hourly
        }
    } else {
        ScheduleDefinition {
            target: ScheduleTarget::Subscriber("a".into()),
            ..hourly
        }
    };
    put(&store, definition, t("2026-11-30T10:15:00Z")).await;
    let read = store.get_schedule("h").await.unwrap().unwrap();
    let (period, a_now) = (t("2026-11-30T11:00:00Z"), t("2026-11-30T10:59:55Z"));
    let held_until = a_now.plus_ms(HOLD_MS);
    assert!(
        store
            .lease_schedule("h", read.seen(), held_until, a_now)
            .await
            .unwrap()
    );
    let planned = plan_period(&store, &read.definition, period, a_now, LIMITS)
        .await
        .unwrap();
    assert_eq!(planned.jobs.len(), if typed { 3 } else { 1 });

    // B, 6 s after the period's start: A's hold is over, the period missed.
    let b = pass(&store, "2026-11-30T11:00:06Z").await;
    assert_eq!((b.schedules, b.periods, b.skipped), (1, 0, 1), "{b:?}");

    let fence = PeriodFence {
        schedule_id: "h".into(),
        seen: read.seen(),
        held_until,
        next_period: Some(t("2026-11-30T12:00:00Z")),
    };
    let written = write_period(&store, &read.definition, planned, Some(fence))
        .await
        .unwrap();
    assert!(matches!(written, Written::Fenced), "{written:?}");
    assert!(
        jobs_of(&store, "h").await.is_empty(),
        "no job for the period"
    );
    let after = store.get_schedule("h").await.unwrap().unwrap();
    assert_eq!(after.next_period, Some(t("2026-11-30T12:00:00Z")));
    assert_eq!(after.last_run, None);
    // Nothing of the period is counted again, and the next one is made.
    assert_eq!(
        pass(&store, "2026-11-30T11:00:07Z").await,
        PassReport::default()
    );
    let next = pass(&store, "2026-11-30T11:59:56Z").await;
    assert_eq!((next.periods, next.skipped), (1, 0));
}

store_case!(
    a_period_skipped_by_one_instance_is_not_made_by_a_frozen_one,
    async |store: SharedStore| {
        a_period_skipped_by_one_instance_is_not_made_by_another_that_resumes(store, false).await;
    }
);

store_case!(
    a_fanned_out_period_skipped_by_one_instance_is_not_made_by_a_frozen_one,
    async |store: SharedStore| {
        a_period_skipped_by_one_instance_is_not_made_by_another_that_resumes(store, true).await;
    }
);

// The fence holds for the scheduler whose hold it is: a period written before another
// instance reaches it is made, and the other counts nothing of it.
store_case!(
    a_period_written_under_its_hold_is_made_and_not_skipped,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        let hourly = ScheduleDefinition {
            catch_up: CatchUp::None,
            ..cron("h", "0 * * * *", "UTC")
        };
        put(&store, hourly, t("2026-11-30T10:15:00Z")).await;
        let read = store.get_schedule("h").await.unwrap().unwrap();
        let (period, a_now) = (t("2026-11-30T11:00:00Z"), t("2026-11-30T10:59:55Z"));
        let held_until = a_now.plus_ms(HOLD_MS);
        assert!(
            store
                .lease_schedule("h", read.seen(), held_until, a_now)
                .await
                .unwrap()
        );
        let planned = plan_period(&store, &read.definition, period, a_now, LIMITS)
            .await
            .unwrap();
        let fence = PeriodFence {
            schedule_id: "h".into(),
            seen: read.seen(),
            held_until,
            next_period: Some(t("2026-11-30T12:00:00Z")),
        };
        let written = write_period(&store, &read.definition, planned, Some(fence))
            .await
            .unwrap();
        assert!(matches!(written, Written::Made(_)), "{written:?}");
        // A froze before ending its hold: B, after it, finds nothing to do.
        let b = pass(&store, "2026-11-30T11:00:06Z").await;
        assert_eq!(b, PassReport::default());
        assert_eq!(event_ids(&store, "h").await, ["2026-11-30T11:00:00Z"]);
    }
);

// The hold is the fence's token: once another scheduler has taken the schedule over,
// a write under the old hold is refused even before the other moved the cursor.
store_case!(
    a_write_under_a_hold_taken_over_is_refused,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("h", "0 * * * *", "UTC"),
            t("2026-11-30T10:15:00Z"),
        )
        .await;
        let read = store.get_schedule("h").await.unwrap().unwrap();
        let (period, a_now) = (t("2026-11-30T11:00:00Z"), t("2026-11-30T10:59:55Z"));
        let held_until = a_now.plus_ms(HOLD_MS);
        assert!(
            store
                .lease_schedule("h", read.seen(), held_until, a_now)
                .await
                .unwrap()
        );
        let planned = plan_period(&store, &read.definition, period, a_now, LIMITS)
            .await
            .unwrap();
        let b_now = held_until.plus_ms(1);
        assert!(
            store
                .lease_schedule("h", read.seen(), b_now.plus_ms(HOLD_MS), b_now)
                .await
                .unwrap(),
            "B takes the schedule over"
        );
        let fence = PeriodFence {
            schedule_id: "h".into(),
            seen: read.seen(),
            held_until,
            next_period: Some(t("2026-11-30T12:00:00Z")),
        };
        let written = write_period(&store, &read.definition, planned, Some(fence))
            .await
            .unwrap();
        assert!(matches!(written, Written::Fenced), "{written:?}");
        assert!(jobs_of(&store, "h").await.is_empty());
        let after = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(after.next_period, Some(period), "B's to move");
    }
);

store_case!(
    two_instances_passing_at_once_make_each_period_once,
    async |backend: Backend| {
        let store = backend.store.clone();
        let other = deferhook::store::open(&backend.url).await.unwrap();
        add(&store, "s", &[]).await;
        for n in 0..20 {
            let every = ScheduleDefinition {
                timing: ScheduleTiming::Every {
                    every_ms: 60_000,
                    anchor: t("2026-11-30T10:00:00Z"),
                },
                ..cron(&format!("room-{n:02}"), "", "")
            };
            put(&store, every, t("2026-11-30T10:15:30Z")).await;
        }
        let (first, second) = (scheduler(&store), scheduler(&other));
        for now in ["2026-11-30T10:15:56Z", "2026-11-30T10:16:57Z"] {
            let (a, b) = tokio::join!(first.pass(t(now)), second.pass(t(now)));
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(a.schedules + b.schedules, 20, "each cursor moves once");
        }
        for n in 0..20 {
            let id = format!("room-{n:02}");
            assert_eq!(
                event_ids(&store, &id).await,
                ["2026-11-30T10:16:00Z", "2026-11-30T10:17:00Z"],
                "{id}: one job per period"
            );
        }
    }
);

store_case!(
    after_downtime_latest_makes_the_last_missed_period_and_none_makes_none,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        let created = t("2026-11-30T03:30:00Z");
        put(&store, cron("latest", "0 * * * *", "UTC"), created).await;
        let none = ScheduleDefinition {
            catch_up: CatchUp::None,
            ..cron("none", "0 * * * *", "UTC")
        };
        put(&store, none, created).await;
        // Down from 03:50 to 06:30: 04:00, 05:00 and 06:00 were missed.
        let report = pass(&store, "2026-11-30T06:30:00Z").await;
        assert_eq!(report.skipped, 2 + 3);
        let latest = jobs_of(&store, "latest").await;
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].event_id, "cleanup:latest:2026-11-30T06:00:00Z");
        assert_eq!(
            latest[0].deliver_at,
            t("2026-11-30T06:30:00Z"),
            "due at once"
        );
        assert!(jobs_of(&store, "none").await.is_empty());
        for id in ["latest", "none"] {
            let schedule = store.get_schedule(id).await.unwrap().unwrap();
            assert_eq!(
                schedule.next_period,
                Some(t("2026-11-30T07:00:00Z")),
                "{id}"
            );
        }
        // Back to normal: the next period is made by both.
        pass(&store, "2026-11-30T06:59:56Z").await;
        assert_eq!(jobs_of(&store, "latest").await.len(), 2);
        assert_eq!(event_ids(&store, "none").await, ["2026-11-30T07:00:00Z"]);
    }
);

store_case!(
    a_deleted_schedule_makes_no_more_periods_and_its_jobs_stay,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        put(
            &store,
            cron("h", "0 * * * *", "UTC"),
            t("2026-11-30T10:15:00Z"),
        )
        .await;
        pass(&store, "2026-11-30T10:59:56Z").await;
        assert!(store.delete_schedule("h").await.unwrap());
        assert_eq!(
            pass(&store, "2026-11-30T11:59:56Z").await,
            PassReport::default()
        );
        assert_eq!(
            event_ids(&store, "h").await,
            ["2026-11-30T11:00:00Z"],
            "the job made before the deletion stays"
        );
    }
);

store_case!(
    a_schedule_of_an_event_type_fans_out_to_its_subscribers,
    async |store: SharedStore| {
        add(&store, "a", &["report.*"]).await;
        add(&store, "b", &["report.daily"]).await;
        add(&store, "c", &["invoice.*"]).await;
        let typed = ScheduleDefinition {
            target: ScheduleTarget::EventType("report.daily".into()),
            event_id: "report:{period_start}".into(),
            ..cron("daily", "0 0 * * *", "UTC")
        };
        put(&store, typed, t("2026-11-29T12:00:00Z")).await;
        let nobody = ScheduleDefinition {
            target: ScheduleTarget::EventType("weekly.none".into()),
            event_id: "weekly:{period_start}".into(),
            ..cron("nobody", "0 0 * * *", "UTC")
        };
        put(&store, nobody, t("2026-11-29T12:00:00Z")).await;
        pass(&store, "2026-11-29T23:59:56Z").await;
        let jobs = jobs_of(&store, "daily").await;
        let mut made: Vec<(String, Option<String>)> = jobs
            .iter()
            .map(|j| (j.subscriber_id.clone(), j.event_type.clone()))
            .collect();
        made.sort();
        let daily = Some("report.daily".to_owned());
        assert_eq!(
            made,
            [("a".to_owned(), daily.clone()), ("b".to_owned(), daily)]
        );
        assert!(
            jobs.iter()
                .all(|j| j.event_id == "report:2026-11-30T00:00:00Z")
        );
        let schedule = store.get_schedule("daily").await.unwrap().unwrap();
        assert_eq!(schedule.last_run.unwrap().jobs, 2);
        // No subscriber of the type: the period is made with no job, and passes.
        let nobody = store.get_schedule("nobody").await.unwrap().unwrap();
        let run = nobody.last_run.unwrap();
        assert_eq!((run.jobs, run.job_id), (0, None));
        assert_eq!(nobody.next_period, Some(t("2026-12-01T00:00:00Z")));
    }
);

store_case!(
    a_period_that_cannot_be_made_is_skipped_and_says_why,
    async |store: SharedStore| {
        put(
            &store,
            cron("h", "0 * * * *", "UTC"),
            t("2026-11-30T10:15:00Z"),
        )
        .await;
        let report = pass(&store, "2026-11-30T10:59:56Z").await;
        assert_eq!((report.refused, report.periods), (1, 0));
        let schedule = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(
            schedule.last_error.as_deref(),
            Some("subscriber `s` does not exist")
        );
        assert_eq!(schedule.next_period, Some(t("2026-11-30T12:00:00Z")));
        // Once the subscriber exists, the next period is made and the error clears.
        add(&store, "s", &[]).await;
        pass(&store, "2026-11-30T11:59:56Z").await;
        let schedule = store.get_schedule("h").await.unwrap().unwrap();
        assert_eq!(schedule.last_error, None);
        assert_eq!(jobs_of(&store, "h").await.len(), 1);
    }
);

store_case!(
    a_paused_schedule_makes_no_period,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        let paused = ScheduleDefinition {
            enabled: false,
            ..cron("h", "0 * * * *", "UTC")
        };
        put(&store, paused, t("2026-11-30T10:15:00Z")).await;
        assert_eq!(
            pass(&store, "2026-11-30T10:59:56Z").await,
            PassReport::default()
        );
        assert!(jobs_of(&store, "h").await.is_empty());
    }
);

store_case!(
    two_schedules_with_one_template_do_not_share_a_period_silently,
    async |store: SharedStore| {
        add(&store, "s", &[]).await;
        for (id, from) in [("col-a", "A"), ("col-b", "B")] {
            let every = ScheduleDefinition {
                timing: ScheduleTiming::Every {
                    every_ms: 60_000,
                    anchor: t("2026-11-30T10:00:00Z"),
                },
                event_id: "{period_start}".into(),
                payload: format!(r#"{{"from":"{from}"}}"#),
                ..cron(id, "", "")
            };
            put(&store, every, t("2026-11-30T10:15:30Z")).await;
        }
        let report = pass(&store, "2026-11-30T10:15:56Z").await;
        assert_eq!((report.periods, report.refused), (1, 1));
        let (a, b) = (
            jobs_of(&store, "col-a").await,
            jobs_of(&store, "col-b").await,
        );
        assert_eq!(
            a.len() + b.len(),
            1,
            "one job for the one (subscriber, event id)"
        );
        let loser = if a.is_empty() { "col-a" } else { "col-b" };
        let schedule = store.get_schedule(loser).await.unwrap().unwrap();
        let error = schedule.last_error.unwrap();
        assert!(
            error.contains("event ids belong to other jobs")
                && error.contains("an event id template of its own"),
            "{error}"
        );
    }
);
