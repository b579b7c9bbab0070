//! Query plans: every job listing filter, alone and combined, and the operator queries
//! read `jobs` through an index, never by a full table scan (`SCAN j` without
//! `USING … INDEX`); the filters that select few jobs search an index rather than walk
//! the primary key.

use crate::store::figures::FigureStatements;
use crate::store::maintenance::PurgeStatements;
use sqlx::Row;
use uuid::Uuid;

use super::{Pools, SqliteStore, binds};
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::WaitingReason;
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::Sealer;
use crate::store::attempts::AttemptStatements;
use crate::store::audit::AuditStatements;
use crate::store::dead_letters::DeadLetterStatements;
use crate::store::deletions::DeletionStatements;
use crate::store::dialect::listing::job_listings;
use crate::store::dialect::{Dialect, Part, Query, Statement};
use crate::store::records::{JobFilter, PageRequest};
use crate::store::throughput::ThroughputStatements;

async fn store() -> SqliteStore {
    SqliteStore::open("sqlite::memory:", Sealer::plaintext())
        .await
        .unwrap()
}

/// `EXPLAIN QUERY PLAN `, to which a statement is appended.
fn explain() -> Statement {
    Statement::new(Dialect::Sqlite, "EXPLAIN QUERY PLAN ")
}

/// The statements a listing of `filter` runs at `now`, each after `EXPLAIN QUERY PLAN`.
fn explained_listings(
    filter: &JobFilter,
    page: &PageRequest<Uuid>,
    now: Timestamp,
) -> Vec<Statement> {
    job_listings(Dialect::Sqlite, filter, page, now)
        .into_iter()
        .map(|listing| {
            let mut query = explain();
            for part in listing.parts() {
                match part {
                    Part::Sql(sql) => query.push(sql),
                    Part::Bind(value) => query.bind(value.clone()),
                };
            }
            query
        })
        .collect()
}

/// The `detail` column of `EXPLAIN QUERY PLAN` for `query`.
async fn plan(store: &SqliteStore, query: Statement) -> Vec<String> {
    let (sql, arguments) = binds::bound(Query::from(query)).unwrap();
    sqlx::query_with(sql, arguments)
        .fetch_all(&store.db.readers)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>("detail"))
        .collect()
}

/// The plan lines that read `table` (named `alias` in the query).
fn reads<'a>(plan: &'a [String], table: &str, alias: &str) -> Vec<&'a str> {
    plan.iter()
        .map(String::as_str)
        .filter(|line| {
            let rest = line
                .strip_prefix("SCAN ")
                .or_else(|| line.strip_prefix("SEARCH "));
            rest.is_some_and(|rest| {
                let name = rest.split_whitespace().next().unwrap_or("");
                name == table || name == alias
            })
        })
        .collect()
}

fn uses_an_index(line: &str) -> bool {
    line.contains(" USING INDEX ")
        || line.contains(" USING COVERING INDEX ")
        || line.contains(" USING PRIMARY KEY")
        || line.contains(" USING INTEGER PRIMARY KEY")
}

/// Every combination of the listing's filters (each one on or off, the states `dead`,
/// `retrying` — stored, and expired leases —, `in_flight`, `retrying,dead` or
/// `in_flight,retrying`), with and without a cursor.
fn every_filter() -> Vec<(String, JobFilter, PageRequest<Uuid>)> {
    use JobState::{Dead, InFlight, Retrying};
    let at = Timestamp::from_millis(1_796_040_000_000);
    let mut cases = Vec::new();
    let lists: [&[JobState]; 5] = [
        &[Dead],
        &[Retrying],
        &[InFlight],
        &[Retrying, Dead],
        &[InFlight, Retrying],
    ];
    for (bits, states) in
        (0u32..(1 << 8)).flat_map(|bits| lists.map(|states| (bits, states.to_vec())))
    {
        let on = |bit: u32| bits & (1 << bit) != 0;
        let filter = JobFilter {
            event_id: on(0).then(|| "e".to_owned()),
            subscriber_id: on(1).then(|| "s".to_owned()),
            states: if on(2) { states } else { Vec::new() },
            dead_reason: on(3).then_some(DeadReason::MaxAttempts),
            created_after: on(4).then_some(at),
            created_before: on(4).then_some(at.plus_ms(60_000)),
            dead_after: on(5).then_some(at),
            dead_before: on(5).then_some(at.plus_ms(60_000)),
            waiting_reason: None,
            error_class: on(7).then_some(ErrorClass::Http5xx),
            last_status: on(7).then_some(503),
            event_type: None,
            schedule_id: None,
        };
        let page = PageRequest {
            after: on(6).then(|| Uuid::from_u128(u128::MAX >> 1)),
            limit: 101,
        };
        cases.push((format!("{filter:?} after {:?}", page.after), filter, page));
    }
    cases
}

#[tokio::test]
async fn every_listing_reads_jobs_through_an_index() {
    let store = store().await;
    let now = Timestamp::from_millis(1_796_040_000_000);
    for (name, filter, page) in every_filter() {
        for query in explained_listings(&filter, &page, now) {
            let plan = plan(&store, query).await;
            let jobs = reads(&plan, "jobs", "j");
            assert!(!jobs.is_empty(), "{name}: no read of jobs in {plan:?}");
            for line in &jobs {
                assert!(uses_an_index(line), "{name}: `{line}` in {plan:?}");
            }
            // A selective filter searches; only an unfiltered or state-only listing may
            // walk an index from its end (newest first, stopping at the page's size).
            let selective = filter.event_id.is_some()
                || filter.subscriber_id.is_some()
                || filter.implies_dead()
                || filter.created_after.is_some();
            if selective {
                assert!(
                    jobs.iter().all(|line| line.starts_with("SEARCH ")),
                    "{name}: {plan:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_listing_by_any_state_searches_jobs_state() {
    let store = store().await;
    for state in JobState::ALL {
        for subscriber_id in [None, Some("s".to_owned())] {
            let filter = JobFilter {
                states: vec![state],
                subscriber_id,
                ..JobFilter::default()
            };
            let page = PageRequest {
                after: None,
                limit: 101,
            };
            // `retrying` is two listings (stored; expired leases), each read in id
            // order.
            let now = Timestamp::from_millis(1_796_040_000_000);
            for query in explained_listings(&filter, &page, now) {
                let plan = plan(&store, query).await;
                let jobs = reads(&plan, "jobs", "j");
                assert_eq!(jobs.len(), 1, "{filter:?}: {plan:?}");
                assert!(jobs[0].starts_with("SEARCH "), "{filter:?}: {plan:?}");
                assert!(
                    !plan.iter().any(|line| line.contains("TEMP B-TREE")),
                    "{filter:?}: sorts instead of reading in id order: {plan:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_listing_by_waiting_reason_searches_jobs_state_in_id_order() {
    let store = store().await;
    let now = Timestamp::from_millis(1_796_040_000_000);
    for reason in WaitingReason::FILTERABLE {
        for subscriber_id in [None, Some("s".to_owned())] {
            let filter = JobFilter {
                waiting_reason: Some(reason),
                subscriber_id,
                error_class: Some(ErrorClass::Timeout),
                ..JobFilter::default()
            };
            let page = PageRequest {
                after: None,
                limit: 101,
            };
            let queries = explained_listings(&filter, &page, now);
            assert!(!queries.is_empty(), "{filter:?}");
            for query in queries {
                let plan = plan(&store, query).await;
                let jobs = reads(&plan, "jobs", "j");
                assert_eq!(jobs.len(), 1, "{filter:?}: {plan:?}");
                assert!(jobs[0].starts_with("SEARCH "), "{filter:?}: {plan:?}");
                assert!(
                    !plan.iter().any(|line| line.contains("TEMP B-TREE")),
                    "{filter:?}: sorts instead of reading in id order: {plan:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn dead_letter_filters_use_their_indexes() {
    let store = store().await;
    let at = Timestamp::from_millis(1_796_040_000_000);
    let by_reason = JobFilter {
        dead_reason: Some(DeadReason::DeadlineExceeded),
        ..JobFilter::default()
    };
    let by_time = JobFilter {
        dead_after: Some(at),
        dead_before: Some(at.plus_ms(1)),
        ..JobFilter::default()
    };
    let page = PageRequest {
        after: None,
        limit: 10,
    };
    for (filter, index) in [(by_reason, "jobs_dead_reason"), (by_time, "jobs_dead_at")] {
        let mut queries = explained_listings(&filter, &page, at);
        assert_eq!(queries.len(), 1);
        let plan = plan(&store, queries.remove(0)).await;
        assert!(
            reads(&plan, "jobs", "j")
                .iter()
                .any(|line| line.contains(index)),
            "{filter:?}: {plan:?}"
        );
    }
}

#[tokio::test]
async fn operator_queries_read_through_indexes() {
    let store = store().await;
    for (sql, table, index) in [
        (
            <Pools as FigureStatements>::STATE_COUNTS,
            "jobs",
            "jobs_subscriber_state",
        ),
        (
            <Pools as FigureStatements>::EXPIRED_LEASES_ALL,
            "jobs",
            "jobs_in_flight_subscriber",
        ),
        (
            <Pools as FigureStatements>::EXPIRED_LEASES,
            "jobs",
            "jobs_in_flight_subscriber",
        ),
        (
            <Pools as FigureStatements>::ELIGIBLE_AND_SUCCESS,
            "jobs",
            "jobs_subscriber_state",
        ),
        (
            <Pools as FigureStatements>::ELIGIBLE_AND_SUCCESS,
            "attempts",
            "attempts_subscriber_finished",
        ),
        (
            <Pools as FigureStatements>::LAST_FAILURE,
            "attempts",
            "attempts_subscriber_finished",
        ),
        (<Pools as PurgeStatements>::PURGE, "jobs", "jobs_finished"),
        (
            <Pools as ThroughputStatements>::ACCEPTED,
            "jobs",
            "sqlite_autoindex_jobs_1",
        ),
        (
            <Pools as ThroughputStatements>::DELIVERED,
            "jobs",
            "jobs_finished",
        ),
        (
            <Pools as ThroughputStatements>::DEAD,
            "jobs",
            "jobs_dead_at",
        ),
        (
            <Pools as DeadLetterStatements>::CAUSES,
            "jobs",
            "jobs_dead_causes",
        ),
        (
            <Pools as DeadLetterStatements>::GROUPS,
            "jobs",
            "jobs_dead_causes",
        ),
        (
            <Pools as AttemptStatements>::RECENT,
            "attempts",
            "attempts_subscriber_started",
        ),
    ] {
        let mut query = explain();
        query.push(sql);
        let plan = plan(&store, query).await;
        let lines = reads(&plan, table, table);
        assert!(!lines.is_empty(), "{sql}: {plan:?}");
        assert!(
            lines.iter().all(|line| uses_an_index(line)),
            "{sql}: {plan:?}"
        );
        assert!(
            lines.iter().any(|line| line.contains(index)),
            "{sql}: {plan:?}"
        );
    }
}

/// The claim and outcome statements are driven by the batch or by each subscriber's
/// due jobs: every read of `jobs` or `attempts` searches an index (a scan would cost
/// the whole backlog, or every job in flight times the batch, per claim or write), and
/// an `UPDATE … FROM` the batch (`json_each`) loops over the batch, not over the table.
#[tokio::test]
async fn claims_and_outcomes_read_by_index_driven_by_the_batch() {
    use super::claims::{CLAIM_CANDIDATES, MARK_IN_FLIGHT, START_ATTEMPTS};
    let store = store().await;
    for sql in [
        CLAIM_CANDIDATES,
        MARK_IN_FLIGHT,
        START_ATTEMPTS,
        crate::store::sqlite::outcomes::FINISH_ATTEMPTS,
        crate::store::sqlite::outcomes::APPLY_TRANSITIONS,
    ] {
        let mut query = explain();
        query.push(sql);
        let plan = plan(&store, query).await;
        for (table, alias) in [
            ("jobs", "j"),
            ("jobs", "d"),
            ("jobs", "o"),
            ("attempts", "r"),
        ] {
            let lines = reads(&plan, table, alias);
            assert!(
                lines.iter().all(|line| uses_an_index(line)),
                "{sql}: {plan:?}"
            );
        }
        // An `UPDATE … FROM` the batch: the batch is the outer loop (an `IN` list is
        // built once whatever the line order).
        if sql.contains("FROM (SELECT json_extract") {
            let first = plan.iter().position(|l| l.contains("json_each"));
            let jobs = plan
                .iter()
                .position(|l| l.starts_with("SEARCH jobs") || l.starts_with("SEARCH attempts"));
            assert!(first < jobs, "the batch drives: {sql}: {plan:?}");
        }
    }
}

/// Guards the checks above: a query that must scan is caught.
#[tokio::test]
async fn a_full_scan_is_caught() {
    let store = store().await;
    let mut query = explain();
    query.push("SELECT j.id FROM jobs j WHERE j.payload = 'x'");
    let plan = plan(&store, query).await;
    let lines = reads(&plan, "jobs", "j");
    assert_eq!(lines.len(), 1, "{plan:?}");
    assert!(!uses_an_index(lines[0]), "{plan:?}");
}

/// Deleting a subscriber reads its jobs and attempts by index (a scan would read every
/// job and attempt of every subscriber in each batch of the move), finds the deletions
/// to finish by index, and
/// retention finds the old audit entries and tombstones by index.
#[tokio::test]
async fn deletions_and_audit_retention_read_through_indexes() {
    type D = Pools;
    let store = store().await;
    for (sql, table, alias) in [
        (<D as DeletionStatements>::KILL_JOBS, "jobs", "jobs"),
        (
            <D as DeletionStatements>::ABANDON_ATTEMPTS,
            "attempts",
            "attempts",
        ),
        (<D as DeletionStatements>::MOVE_JOBS, "jobs", "jobs"),
        (
            <D as DeletionStatements>::MOVE_ATTEMPTS,
            "attempts",
            "attempts",
        ),
        (<D as DeletionStatements>::DELETE, "jobs", "jobs"),
        (<D as DeletionStatements>::DELETE, "attempts", "attempts"),
        (
            <D as DeletionStatements>::IN_PROGRESS,
            "subscribers",
            "subscribers",
        ),
        (<D as AuditStatements>::PURGE, "audit", "audit"),
        (
            <D as DeletionStatements>::PURGE_TOMBSTONES,
            "subscribers",
            "s",
        ),
        (<D as DeletionStatements>::PURGE_TOMBSTONES, "jobs", "j"),
    ] {
        let mut query = explain();
        query.push(sql);
        let plan = plan(&store, query).await;
        let lines = reads(&plan, table, alias);
        assert!(!lines.is_empty(), "{sql}: {plan:?}");
        assert!(
            lines.iter().all(|line| uses_an_index(line)),
            "{sql}: {plan:?}"
        );
    }
}
