//! The job listing: [`crate::store::jobs::JOB_COLUMNS`] matching a filter, newest
//! first (descending id), one page at a time.

use uuid::Uuid;

use super::{Dialect, Statement, Value};
use crate::domain::waiting::WaitingReason;
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
/// each newest first, strictly older than `page.after` and at most `page.limit`, which
/// the caller merges by id: one statement per state of
/// [`JobFilter::matching_states`] (one with no state condition when any state
/// matches), each read in id order through the state's index (one `IN` or `OR` would
/// sort every job of those states). Read states are not stored states: `retrying` is
/// the stored `retrying` jobs and the `in_flight` ones whose lease has expired, and
/// `in_flight` only the live leases; when both are asked for, the stored `in_flight`
/// rows are read once, whatever their lease. The stored states of the statements are
/// distinct, so no job is read twice. No statement when nothing can match (a
/// `waiting_reason` that is not [`WaitingReason::filterable`]).
pub fn job_listings(
    dialect: Dialect,
    filter: &JobFilter,
    page: &PageRequest<Uuid>,
    now: Timestamp,
) -> Vec<Statement> {
    let listing = |state: Option<JobState>, lease: Option<LeaseCondition>| {
        let one = JobFilter {
            states: state.into_iter().collect(),
            ..filter.clone()
        };
        let mut query = Statement::new(dialect, "");
        push_job_listing(&mut query, &one, page, lease, now);
        query
    };
    if filter
        .waiting_reason
        .is_some_and(|reason| !reason.filterable())
    {
        return Vec::new();
    }
    let Some(states) = filter.matching_states() else {
        return vec![listing(None, None)];
    };
    let mut listings = Vec::new();
    for &state in &states {
        match state {
            JobState::InFlight if states.contains(&JobState::Retrying) => {
                listings.push(listing(Some(JobState::InFlight), None));
            }
            JobState::InFlight => {
                listings.push(listing(Some(state), Some(LeaseCondition::Live(now))));
            }
            JobState::Retrying => {
                listings.push(listing(Some(state), None));
                if !states.contains(&JobState::InFlight) {
                    let expired = Some(LeaseCondition::Expired(now));
                    listings.push(listing(Some(JobState::InFlight), expired));
                }
            }
            _ => listings.push(listing(Some(state), None)),
        }
    }
    listings
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
    } else if filter.schedule_id.is_some() {
        Some("jobs_schedule_id")
    } else if filter.event_type.is_some() {
        Some("jobs_event_type")
    } else if filter.dead_reason.is_some() {
        Some("jobs_dead_reason")
    } else if filter.dead_after.is_some() || filter.dead_before.is_some() {
        Some("jobs_dead_at")
    } else {
        None
    }
}

/// Appends one listing of [`job_listings`] to `query` (e.g. after `EXPLAIN QUERY
/// PLAN`): the rows `filter` matches as stored (its `states`, at most one, is the
/// stored state), and with `lease` (given with `in_flight`), only those whose lease
/// is live, or expired; with a `waiting_reason`, only those with that reason at `now`
/// (see [`push_waiting_condition`]).
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
    now: Timestamp,
) {
    let hint = listing_index(filter)
        .map(|index| query.dialect().index_hint(index))
        .unwrap_or_default();
    query.push(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs j{hint} JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE 1 = 1"
    ));
    push_job_conditions(query, filter);
    if filter.subscriber_id.is_some() {
        // The current subscriber of that id: not one whose deletion is still moving
        // its jobs to the tombstone (docs/DESIGN.md §5.3.1).
        query.push(" AND s.deleted_at IS NULL");
    }
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
    if let Some(reason) = filter.waiting_reason {
        push_waiting_condition(query, reason, now);
    }
    if let Some(after) = page.after {
        query
            .push(" AND j.id < ")
            .bind(Value::Text(after.to_string()));
    }
    query
        .push(" ORDER BY j.id DESC")
        .limit(i64::from(page.limit));
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
    // Fixed names, never input: safe to write as literals. One state is written as an
    // equality, which SQLite needs to use a partial index.
    if let Some(states) = filter.stored_states() {
        let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
        match names.as_slice() {
            [] => query.push(" AND 1 = 0"),
            [one] => query.push(&format!(" AND j.state = {one}")),
            many => query.push(&format!(" AND j.state IN ({})", many.join(", "))),
        };
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
    if let Some(class) = filter.error_class {
        query
            .push(" AND j.last_error_class = ")
            .bind(Value::Text(class.as_str().to_owned()));
    }
    if let Some(status) = filter.last_status {
        query
            .push(" AND j.last_error_status = ")
            .bind(Value::Int(i64::from(status)));
    }
    if let Some(event_type) = &filter.event_type {
        query
            .push(" AND j.event_type = ")
            .bind(Value::Text(event_type.clone()));
    }
    if let Some(schedule_id) = &filter.schedule_id {
        query
            .push(" AND j.schedule_id = ")
            .bind(Value::Text(schedule_id.clone()));
    }
}

/// Appends ` AND …` selecting, among rows of `jobs j JOIN subscribers s` already
/// limited to the reason's states, those whose `waiting_reason` at `now` is `reason`,
/// by the rules of [`crate::domain::waiting::waiting_reason`]: `scheduled` and
/// `backing_off` are not yet due (the stored `retrying` rows; an expired lease is
/// due); `in_flight` is the live lease the listing already selects; a due job of a
/// disabled subscriber is `subscriber_paused` (stored `scheduled` or `retrying`, or an
/// expired lease). Reasons that are not [`WaitingReason::filterable`] never get here.
fn push_waiting_condition(query: &mut Statement, reason: WaitingReason, now: Timestamp) {
    let now = Value::Int(now.as_millis());
    match reason {
        WaitingReason::Scheduled | WaitingReason::BackingOff => {
            query
                .push(" AND (j.due_at IS NULL OR j.due_at > ")
                .bind(now)
                .push(")");
        }
        WaitingReason::SubscriberPaused => {
            query.push(" AND NOT s.enabled AND j.due_at <= ").bind(now);
        }
        _ => {}
    }
}
