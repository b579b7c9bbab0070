//! Attempt history in PostgreSQL: the statements (see [`crate::store::attempts`]).

use crate::store::attempts::AttemptStatements;
use sqlx::PgPool;

/// Job `$1`'s attempts, oldest first.
const LIST: &str = "SELECT number, started_at, finished_at, outcome, status, error_class, \
    reason, body_excerpt, lease_owner, lease_token, possible_duplicate \
    FROM attempts WHERE job_id = $1 ORDER BY number";

/// Job `$1`'s state, due time and fencing token.
const LEASE: &str = "SELECT state, due_at, lease_token FROM jobs WHERE id = $1";

impl AttemptStatements for PgPool {
    const LIST: &'static str = LIST;
    const LEASE: &'static str = LEASE;
}
