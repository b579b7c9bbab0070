//! Attempt history in SQLite: the statements (see [`crate::store::attempts`]).

use super::Pools;
use crate::store::attempts::AttemptStatements;

impl AttemptStatements for Pools {
    /// Job `?1`'s attempts, oldest first.
    const LIST: &'static str = "SELECT number, started_at, finished_at, outcome, status, error_class, \
        reason, body_excerpt, lease_owner, lease_token, possible_duplicate \
        FROM attempts WHERE job_id = ?1 ORDER BY number";
    /// Job `?1`'s state, due time and fencing token.
    const LEASE: &'static str = "SELECT state, due_at, lease_token FROM jobs WHERE id = ?1";
    /// Subscriber `?1`'s latest `?2` attempts, latest started first, with their jobs' event
    /// ids: a backward range of `attempts_subscriber_started`, one job read by id each.
    const RECENT: &'static str = "SELECT attempts.job_id, jobs.event_id, attempts.number, \
        attempts.started_at, attempts.finished_at, attempts.outcome, attempts.status, \
        attempts.error_class, attempts.reason, attempts.body_excerpt, attempts.lease_owner, \
        attempts.lease_token, attempts.possible_duplicate \
        FROM attempts JOIN jobs ON jobs.id = attempts.job_id \
        WHERE attempts.subscriber_id = ?1 ORDER BY attempts.started_at DESC LIMIT CAST(?2 AS INTEGER)";
}
