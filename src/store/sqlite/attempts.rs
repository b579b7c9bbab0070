//! Attempt history in SQLite: the statement (see [`crate::store::attempts`]).

use super::Pools;
use crate::store::attempts::AttemptStatements;

/// Job `?1`'s attempts, oldest first.
const LIST: &str = "SELECT number, started_at, finished_at, outcome, status, error_class, \
    reason, body_excerpt, lease_owner, lease_token, possible_duplicate \
    FROM attempts WHERE job_id = ?1 ORDER BY number";

impl AttemptStatements for Pools {
    const LIST: &'static str = LIST;
}
