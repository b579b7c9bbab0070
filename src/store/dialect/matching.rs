//! The jobs a replay filter matches (dead ones oldest dead first, retrying ones oldest
//! first): counted for a dry run, snapshotted into `replay_jobs` when a replay is
//! created.

use super::listing::push_job_conditions;
use super::{Dialect, Statement, Value};
use crate::domain::JobState;
use crate::domain::replay::{ReplayFilter, ReplaySelection};
use crate::store::records::{JobFilter, NewReplay};

/// Keeps out the jobs of deleted subscribers (their tombstones, docs/DESIGN.md §5.3):
/// a replay never requeues them. A lookup by primary key per matched job.
pub const NOT_DELETED: &str = " AND NOT EXISTS (SELECT 1 FROM subscribers ds \
    WHERE ds.id = j.subscriber_id AND ds.deleted_at IS NOT NULL)";

/// The listing filter that selects the jobs `filter` matches (all but
/// `subscriber_ids`, which [`push_matching`] adds).
pub fn job_filter(filter: &ReplayFilter) -> JobFilter {
    let state = match filter.selects {
        ReplaySelection::Dead => JobState::Dead,
        ReplaySelection::Retrying => JobState::Retrying,
    };
    JobFilter {
        states: vec![state],
        subscriber_id: filter.subscriber_id.clone(),
        event_id: filter.event_id.clone(),
        dead_reason: filter.dead_reason,
        dead_after: filter.dead_after,
        dead_before: filter.dead_before,
        error_class: filter.error_class,
        last_status: filter.last_status,
        ..JobFilter::default()
    }
}

/// The index that serves `filter` best: the most selective condition given.
pub fn matching_index(filter: &ReplayFilter) -> &'static str {
    let dead = filter.selects == ReplaySelection::Dead;
    if filter.event_id.is_some() {
        "jobs_event_id"
    } else if filter.subscriber_id.is_some() || !filter.subscriber_ids.is_empty() {
        "jobs_subscriber_state"
    } else if dead && filter.dead_reason.is_some() {
        "jobs_dead_reason"
    } else if dead {
        "jobs_dead_at"
    } else {
        "jobs_state"
    }
}

/// The order of the match: dead jobs in the order they died, retrying ones in the
/// order they were created (UUIDv7 ids).
fn order(filter: &ReplayFilter) -> &'static str {
    match filter.selects {
        ReplaySelection::Dead => "j.dead_at, j.id",
        ReplaySelection::Retrying => "j.id",
    }
}

/// Pushes ` FROM jobs j WHERE …` selecting the jobs `filter` matches in its order
/// (dead ones oldest dead first, retrying ones oldest first), at most `max_jobs`, onto
/// `query` (which has begun a `SELECT` that may name `j.*`). Index-backed by
/// [`matching_index`], which SQLite's statement names (its planner has no statistics).
/// Only jobs stored in the selected state match: a job read as `retrying` because its
/// lease expired is already due.
pub fn push_matching(query: &mut Statement, filter: &ReplayFilter, max_jobs: u32) {
    // The state is a literal so SQLite may use the partial indexes on dead jobs.
    let hint = query.dialect().index_hint(matching_index(filter));
    query.push(&format!(" FROM jobs j{hint} WHERE 1 = 1"));
    push_job_conditions(query, &job_filter(filter));
    if let Some((first, rest)) = filter.subscriber_ids.split_first() {
        query
            .push(" AND j.subscriber_id IN (")
            .bind(Value::Text(first.clone()));
        for id in rest {
            query.push(", ").bind(Value::Text(id.clone()));
        }
        query.push(")");
    }
    // A deleted subscriber's jobs are history: nothing would deliver them.
    query.push(NOT_DELETED);
    query
        .push(&format!(" ORDER BY {}", order(filter)))
        .limit(i64::from(max_jobs));
}

/// How many jobs `filter` matches, at most `max_jobs` (a dry run): one column `n`.
pub fn count_matching(dialect: Dialect, filter: &ReplayFilter, max_jobs: u32) -> Statement {
    let mut query = Statement::new(dialect, "SELECT COUNT(*) AS n FROM (SELECT j.id");
    push_matching(&mut query, filter, max_jobs);
    query.push(") m");
    query
}

/// Snapshots the jobs `replay` matches into `replay_jobs`, positions from 0 in the
/// match's order; rows affected = matched.
pub fn snapshot_matching(dialect: Dialect, replay: &NewReplay) -> Statement {
    let mut query = Statement::new(
        dialect,
        "INSERT INTO replay_jobs (replay_id, position, job_id) SELECT ",
    );
    query
        .bind(Value::Text(replay.id.to_string()))
        .push(&format!(
            ", ROW_NUMBER() OVER (ORDER BY {}) - 1, j.id",
            order(&replay.filter)
        ));
    push_matching(&mut query, &replay.filter, replay.max_jobs);
    query
}
