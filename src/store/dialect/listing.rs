//! The job listing: [`crate::store::jobs::JOB_COLUMNS`] matching a filter, newest
//! first (descending id), one page at a time.

use uuid::Uuid;

use super::{Dialect, Statement, Value};
use crate::domain::JobState;
use crate::store::jobs::JOB_COLUMNS;
use crate::store::records::{JobFilter, PageRequest, uuid_v7_floor};

/// The listing of jobs matching `filter`, newest first, strictly older than
/// `page.after`.
pub fn job_listing(dialect: Dialect, filter: &JobFilter, page: &PageRequest<Uuid>) -> Statement {
    let mut query = Statement::new(dialect, "");
    push_job_listing(&mut query, filter, page);
    query
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

/// Appends the [`job_listing`] query to `query` (e.g. after `EXPLAIN QUERY PLAN`).
///
/// Each filter is written so an index serves it: a state as a literal (SQLite uses a
/// partial index only when the query's text implies its predicate), `dead_reason`
/// through `jobs_dead_reason (dead_reason, id)`, `dead_at` bounds through
/// `jobs_dead_at`, and creation bounds as bounds on the UUIDv7 id (the primary key and
/// the `(…, id)` indexes).
pub fn push_job_listing(query: &mut Statement, filter: &JobFilter, page: &PageRequest<Uuid>) {
    let hint = listing_index(filter)
        .map(|index| query.dialect().index_hint(index))
        .unwrap_or_default();
    query.push(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs j{hint} JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE 1 = 1"
    ));
    push_job_conditions(query, filter);
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
