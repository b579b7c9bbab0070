//! The dead letters' groups in SQLite: the statement (see
//! [`crate::store::dead_letters`]).

use super::Pools;
use crate::store::dead_letters::DeadLetterStatements;

/// The groups, read from the covering partial index `jobs_dead_groups`.
pub(super) const GROUPS: &str = "SELECT dead_reason, subscriber_id, COUNT(*) AS n, \
    MIN(dead_at) AS first_dead_at, MAX(dead_at) AS last_dead_at \
    FROM jobs INDEXED BY jobs_dead_groups WHERE state = 'dead' \
    GROUP BY dead_reason, subscriber_id \
    ORDER BY n DESC, dead_reason, subscriber_id LIMIT CAST(?1 AS INTEGER)";

impl DeadLetterStatements for Pools {
    const GROUPS: &'static str = GROUPS;
}
