//! A batch of attempt outcomes as both stores write it: one JSON array, read by two
//! set-based statements (finish the attempts; apply the transitions whose lease still
//! holds), so a batch costs two statements whatever its size.

use std::collections::HashSet;

use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::StoreError;
use crate::store::records::{Fenced, OutcomeRecord};

/// Refuses a batch holding a transition into `in_flight` (only a claim may start one).
pub fn check(records: &[OutcomeRecord]) -> Result<(), StoreError> {
    match records
        .iter()
        .find(|r| r.transition.to == JobState::InFlight)
    {
        Some(bad) => Err(StoreError::Internal(format!(
            "an outcome must move job {} out of in_flight",
            bad.lease.job_id
        ))),
        None => Ok(()),
    }
}

/// The batch as a JSON array of objects with the keys `id`, `token`, `number`,
/// `finished_at` (ms), `outcome`, `status`, `error_class`, `reason`, `body_excerpt`,
/// `state`, `due_at` (ms), `attempts`, `dead_reason`, `deadline` (ms),
/// `possible_duplicate` and `now` (ms). Only the first record of a lease is written: a
/// set-based update given two rows for one target applies either, so a repeat (which
/// [`fenced_in_order`] answers `Late`) is left out.
pub fn to_json(records: &[OutcomeRecord], now: Timestamp) -> String {
    let mut seen = HashSet::new();
    let first = records
        .iter()
        .filter(|r| seen.insert((r.lease.job_id, r.lease.token)));
    let rows = first.map(|record| {
        let (result, transition) = (&record.result, &record.transition);
        serde_json::json!({
            "id": record.lease.job_id.to_string(),
            "token": record.lease.token,
            "number": record.attempt,
            "finished_at": record.finished_at.as_millis(),
            "outcome": result.outcome.as_str(),
            "status": result.status,
            "error_class": result.error_class.map(|c| c.as_str()),
            "reason": result.reason,
            "body_excerpt": result.body_excerpt,
            "state": transition.to.as_str(),
            "due_at": transition.due_at.map(Timestamp::as_millis),
            "attempts": transition.attempts,
            "dead_reason": transition.dead_reason.map(DeadReason::as_str),
            "deadline": transition.deadline.as_millis(),
            "possible_duplicate": transition.possible_duplicate,
            "now": now.as_millis(),
        })
    });
    serde_json::Value::Array(rows.collect()).to_string()
}

/// Each record's result, given the (job id, token) pairs whose transition applied: as
/// if written one by one, the same lease twice in a batch applies once, first.
pub fn fenced_in_order(
    records: &[OutcomeRecord],
    mut applied: HashSet<(String, i64)>,
) -> Vec<Fenced> {
    records
        .iter()
        .map(|r| {
            if applied.remove(&(r.lease.job_id.to_string(), r.lease.token)) {
                Fenced::Applied
            } else {
                Fenced::Late
            }
        })
        .collect()
}
