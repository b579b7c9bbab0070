//! SQLite's planner has no statistics, so the replay match names its index: every
//! filter shape must search the index that fits it, never scan the jobs table nor
//! walk every dead job (a million jobs).

use deferhook::domain::policy::ErrorClass;
use deferhook::domain::replay::{ReplayFilter, ReplaySelection};
use deferhook::domain::{DeadReason, Timestamp};
use deferhook::store::replays::matching_index;
use deferhook::store::sqlite::push_matching;
use sqlx::{Row, Sqlite, SqlitePool};

async fn plan(pool: &SqlitePool, filter: &ReplayFilter) -> Vec<String> {
    let mut query = sqlx::QueryBuilder::<Sqlite>::new("EXPLAIN QUERY PLAN SELECT j.id");
    push_matching(&mut query, filter, 100, true);
    query
        .build()
        .fetch_all(pool)
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get::<String, _>("detail"))
        .collect()
}

#[tokio::test]
async fn every_replay_filter_searches_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("plans.db").display());
    deferhook::store::open(&url).await.expect("migrate");
    let pool = SqlitePool::connect(&url).await.unwrap();
    let shapes = [
        ReplayFilter {
            all: true,
            ..ReplayFilter::default()
        },
        ReplayFilter {
            subscriber_id: Some("s".into()),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            event_id: Some("e".into()),
            subscriber_id: Some("s".into()),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            dead_reason: Some(DeadReason::MaxAttempts),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            dead_after: Some(Timestamp::from_millis(1)),
            dead_before: Some(Timestamp::from_millis(2)),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            subscriber_ids: vec!["a".into(), "b".into(), "c".into()],
            error_class: Some(ErrorClass::Http5xx),
            last_status: Some(503),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            error_class: Some(ErrorClass::Timeout),
            ..ReplayFilter::default()
        },
        ReplayFilter {
            selects: ReplaySelection::Retrying,
            all: true,
            ..ReplayFilter::default()
        },
        ReplayFilter {
            selects: ReplaySelection::Retrying,
            subscriber_ids: vec!["a".into(), "b".into()],
            ..ReplayFilter::default()
        },
        ReplayFilter {
            selects: ReplaySelection::Retrying,
            event_id: Some("e".into()),
            ..ReplayFilter::default()
        },
    ];
    for filter in &shapes {
        let lines = plan(&pool, filter).await;
        let on_jobs: Vec<&String> = lines.iter().filter(|l| l.contains(" j ")).collect();
        assert!(!on_jobs.is_empty(), "{filter:?}: {lines:?}");
        for line in on_jobs {
            // The named index, not just any: `jobs_state` would walk every dead job
            // (it is the index of a retrying selection with no narrower condition).
            let index = matching_index(filter);
            let searched = [
                format!("USING INDEX {index}"),
                format!("USING COVERING INDEX {index}"),
            ];
            assert!(
                searched.iter().any(|s| line.contains(s.as_str())),
                "{filter:?}: {line}"
            );
        }
    }
}
