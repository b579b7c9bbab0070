//! The job listing: [`crate::store::jobs::JOB_COLUMNS`] matching a filter, newest
//! first (descending id), one page at a time.

use uuid::Uuid;

use super::{Dialect, Statement, Value};
use crate::domain::{JobState, Timestamp};
use crate::store::jobs::JOB_COLUMNS;
use crate::store::records::{JobFilter, PageRequest, uuid_v7_floor};

/// Which `in_flight` rows a listing reads, by their lease at an instant: a job whose
/// lease has expired reads as `retrying` (docs/DESIGN.md §2.2). A lease expires at the
/// job's due time while it is in flight (`due_at`, which the claim and renewals set
/// to the lease's expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseCondition {
    /// Rows whose lease is live at the instant (`due_at` after it).
    Live(Timestamp),
    /// Rows whose lease expired at or before the instant (`due_at` at or before it).
    Expired(Timestamp),
}

/// The listings whose rows together are the jobs `filter` matches as read at `now`,
/// each newest first, strictly older than `page.after` and at most `page.limit`: one
/// statement, except for `state = retrying`, which is the stored `retrying` jobs and
/// the `in_flight` ones whose lease has expired — two statements, each read in id
/// order through the state's index (one `OR` would sort every retrying job), which
/// the caller merges by id. `state = in_flight` reads only live leases.
pub fn job_listings(
    dialect: Dialect,
    filter: &JobFilter,
    page: &PageRequest<Uuid>,
    now: Timestamp,
) -> Vec<Statement> {
    let listing = |filter: &JobFilter, lease: Option<LeaseCondition>| {
        let mut query = Statement::new(dialect, "");
        push_job_listing(&mut query, filter, page, lease);
        query
    };
    match filter.state {
        Some(JobState::InFlight) => vec![listing(filter, Some(LeaseCondition::Live(now)))],
        Some(JobState::Retrying) => {
            let expired = JobFilter {
                state: Some(JobState::InFlight),
                ..filter.clone()
            };
            vec![
                listing(filter, None),
                listing(&expired, Some(LeaseCondition::Expired(now))),
            ]
        }
        _ => vec![listing(filter, None)],
    }
}

/// The index SQLite must use for `filter`: its planner has no statistics and, given a
/// state, prefers `jobs_state` — walking every dead job even when the listing names
/// one subscriber or event. The most selective condition's index is named instead
/// (each keeps the listing's id order, except a `dead_at` range). PostgreSQL plans from
/// statistics.
fn listing_index(filter: &JobFilter) -> Option<&'static str> {
    if filter.event_id.is_some() {
        Some("jobs_event_id")
    } else if filter.subscriber_id.is_some() {
        Some("jobs_subscriber_id")
    } else if filter.dead_reason.is_some() {
        Some("jobs_dead_reason")
    } else if filter.dead_after.is_some() || filter.dead_before.is_some() {
        Some("jobs_dead_at")
    } else {
        None
    }
}

/// Appends one listing of [`job_listings`] to `query` (e.g. after `EXPLAIN QUERY
/// PLAN`): the rows `filter` matches as stored (its `state` is the stored state), and
/// with `lease` (given with `state = in_flight`), only those whose lease is live, or
/// expired.
///
/// Each filter is written so an index serves it: a state as a literal (SQLite uses a
/// partial index only when the query's text implies its predicate), `dead_reason`
/// through `jobs_dead_reason (dead_reason, id)`, `dead_at` bounds through
/// `jobs_dead_at`, and creation bounds as bounds on the UUIDv7 id (the primary key and
/// the `(…, id)` indexes); the lease is a condition on the rows read.
pub fn push_job_listing(
    query: &mut Statement,
    filter: &JobFilter,
    page: &PageRequest<Uuid>,
    lease: Option<LeaseCondition>,
) {
    let hint = listing_index(filter)
        .map(|index| query.dialect().index_hint(index))
        .unwrap_or_default();
    query.push(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs j{hint} JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE 1 = 1"
    ));
    push_job_conditions(query, filter);
    match lease {
        Some(LeaseCondition::Live(now)) => {
            query
                .push(" AND j.due_at > ")
                .bind(Value::Int(now.as_millis()));
        }
        Some(LeaseCondition::Expired(now)) => {
            query
                .push(" AND j.due_at <= ")
                .bind(Value::Int(now.as_millis()));
        }
        None => {}
    }
    if let Some(after) = page.after {
        query
            .push(" AND j.id < ")
            .bind(Value::Text(after.to_string()));
    }
    query
        .push(" ORDER BY j.id DESC LIMIT ")
        .bind(Value::Int(i64::from(page.limit)));
}

/// Appends ` AND …` for each condition of `filter` on `jobs j` (after a `WHERE`), each
/// written so an index serves it (see [`push_job_listing`]).
pub fn push_job_conditions(query: &mut Statement, filter: &JobFilter) {
    if let Some(event_id) = &filter.event_id {
        query
            .push(" AND j.event_id = ")
            .bind(Value::Text(event_id.clone()));
    }
    if let Some(subscriber_id) = &filter.subscriber_id {
        query
            .push(" AND j.subscriber_id = ")
            .bind(Value::Text(subscriber_id.clone()));
    }
    // A fixed name, never input: safe to write as a literal.
    let mut states: Vec<&'static str> = filter.state.iter().map(|s| s.as_str()).collect();
    if filter.implies_dead() && filter.state != Some(JobState::Dead) {
        states.push(JobState::Dead.as_str());
    }
    for state in states {
        query.push(&format!(" AND j.state = '{state}'"));
    }
    if let Some(reason) = filter.dead_reason {
        query
            .push(" AND j.dead_reason = ")
            .bind(Value::Text(reason.as_str().to_owned()));
    }
    if let Some(after) = filter.dead_after {
        query
            .push(" AND j.dead_at >= ")
            .bind(Value::Int(after.as_millis()));
    }
    if let Some(before) = filter.dead_before {
        query
            .push(" AND j.dead_at < ")
            .bind(Value::Int(before.as_millis()));
    }
    if let Some(after) = filter.created_after {
        query
            .push(" AND j.id >= ")
            .bind(Value::Text(uuid_v7_floor(after).to_string()));
    }
    if let Some(before) = filter.created_before {
        query
            .push(" AND j.id < ")
            .bind(Value::Text(uuid_v7_floor(before).to_string()));
    }
}
