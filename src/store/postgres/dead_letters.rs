//! The dead letters' groups in PostgreSQL: the statement (see
//! [`crate::store::dead_letters`]).

use sqlx::PgPool;

use crate::store::dead_letters::DeadLetterStatements;

/// The groups, read from the covering partial index `jobs_dead_groups`.
const GROUPS: &str = "SELECT dead_reason, subscriber_id, COUNT(*) AS n, \
    MIN(dead_at) AS first_dead_at, MAX(dead_at) AS last_dead_at \
    FROM jobs WHERE state = 'dead' \
    GROUP BY dead_reason, subscriber_id \
    ORDER BY n DESC, dead_reason, subscriber_id LIMIT $1";

impl DeadLetterStatements for PgPool {
    const GROUPS: &'static str = GROUPS;
}
