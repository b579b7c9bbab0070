//! Figures for the operator on call: a subscriber's jobs per state, the oldest due
//! waiting job as of `now`, the last success and the last failure; nothing of other
//! subscribers leaks in; and the gauges' dead jobs per reason.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent, JobState};
use deferhook::store::{AttemptFailure, JobCounts, SharedStore, SubscriberStats};
use deferhook::testing::START;

use crate::finish::{Fate, finish, job_created_at, record, released};
use crate::support::{OWNER, add_subscriber, at, claim_one, create, new_job};

fn new(subscriber: &str, event: &str) -> deferhook::store::NewJob {
    job_created_at(subscriber, event, START)
}

store_case!(
    stats_count_jobs_and_find_the_last_success_and_failure,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        add_subscriber(&store, "other").await;
        finish(&store, new("s", "a"), at(1_000), Fate::Delivered).await;
        let dead = Fate::Dead(DeadReason::NonRetryableResponse);
        finish(&store, new("s", "b"), at(2_000), dead).await;
        let retrying = finish(&store, new("s", "c"), at(3_000), Fate::Retrying(at(60_000))).await;
        assert_eq!(retrying.state, JobState::Retrying);
        create(&store, vec![new_job("s", "d", at(4_000), at(200_000))]).await;
        let in_flight = claim_one(&store, OWNER, at(4_000)).await;
        create(&store, vec![new_job("s", "e", at(100_000), at(200_000))]).await;
        finish(&store, new("s", "f"), at(5_000), Fate::Cancelled).await;
        // The other subscriber succeeds and fails later: none of it is s's.
        finish(&store, new("other", "g"), at(6_000), Fate::Delivered).await;
        let blocked = Fate::Dead(DeadReason::TargetRejected);
        finish(&store, new("other", "h"), at(7_000), blocked).await;

        let stats = store
            .subscriber_stats("s", at(4_500))
            .await
            .unwrap()
            .unwrap();
        let expected_failure = AttemptFailure {
            at: at(3_000),
            outcome: AttemptOutcome::Retryable,
            class: Some(ErrorClass::Http5xx),
            status: Some(503),
            reason: Some("503 Service Unavailable".into()),
        };
        assert_eq!(
            stats,
            SubscriberStats {
                jobs: JobCounts {
                    scheduled: 1,
                    in_flight: 1,
                    retrying: 1,
                    delivered: 1,
                    dead: 1,
                    cancelled: 1,
                },
                // The retrying job is due at 60 s, the scheduled one at 100 s.
                oldest_eligible_since: None,
                last_success_at: Some(at(1_000)),
                last_failure: Some(expected_failure.clone()),
            }
        );

        // The attempt in flight is released at 8 s, its outcome unknown: not a failure,
        // and the job is due again at once.
        record(
            &store,
            &in_flight,
            JobEvent::Released,
            released(),
            at(8_000),
        )
        .await;
        let stats = store
            .subscriber_stats("s", at(10_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((stats.jobs.in_flight, stats.jobs.retrying), (0, 2));
        assert_eq!(stats.oldest_eligible_since, Some(at(8_000)));
        assert_eq!(stats.last_failure, Some(expected_failure));

        // A scheduled job due long ago is older still; eligibility is as of `now`.
        create(&store, vec![new_job("s", "old", at(-5_000), at(200_000))]).await;
        let stats = store
            .subscriber_stats("s", at(10_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stats.oldest_eligible_since, Some(at(-5_000)));
        assert_eq!(stats.jobs.scheduled, 2);
        let earlier = store
            .subscriber_stats("s", at(-6_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(earlier.oldest_eligible_since, None);

        let other = store
            .subscriber_stats("other", at(10_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(other.jobs.delivered, 1);
        assert_eq!(other.jobs.dead, 1);
        assert_eq!(other.last_success_at, Some(at(6_000)));
        assert_eq!(
            other.last_failure.map(|f| (f.at, f.outcome)),
            Some((at(7_000), AttemptOutcome::Terminal))
        );
    }
);

store_case!(
    stats_of_a_quiet_or_unknown_subscriber,
    async |store: SharedStore| {
        add_subscriber(&store, "quiet").await;
        assert_eq!(
            store.subscriber_stats("quiet", at(0)).await.unwrap(),
            Some(SubscriberStats::default())
        );
        assert_eq!(store.subscriber_stats("nobody", at(0)).await.unwrap(), None);
    }
);

store_case!(
    gauges_count_the_dead_jobs_per_reason,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let empty = store.gauges(START, 60_000).await.unwrap();
        assert_eq!(empty.dead_by_reason, []);
        let fates = [
            Fate::Dead(DeadReason::TargetRejected),
            Fate::Dead(DeadReason::NonRetryableResponse),
            Fate::Delivered,
            Fate::Dead(DeadReason::NonRetryableResponse),
            Fate::Dead(DeadReason::MaxAttempts),
        ];
        let mut now = START;
        for (i, fate) in fates.into_iter().enumerate() {
            now = START.plus_ms(1_000 * i as u64);
            finish(&store, new("s", &format!("e{i}")), now, fate).await;
        }

        let gauges = store.gauges(now, 60_000).await.unwrap();
        assert_eq!(
            gauges.dead_by_reason,
            [
                (DeadReason::NonRetryableResponse, 2),
                (DeadReason::MaxAttempts, 1),
                (DeadReason::TargetRejected, 1),
            ],
            "in the order of DeadReason::ALL"
        );
        assert!(gauges.jobs_by_state.contains(&(JobState::Dead, 4)));
    }
);
