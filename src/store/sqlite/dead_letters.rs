//! The dead letters' causes and groups in SQLite: the statements (see
//! [`crate::store::dead_letters`]).

use super::Pools;
use crate::store::dead_letters::DeadLetterStatements;

impl DeadLetterStatements for Pools {
    /// Every cause of the dead letters (see [`DeadLetterStatements::CAUSES`]).
    const CAUSES: &'static str = "SELECT dead_reason, last_error_class AS error_class, \
        last_error_status AS status, COUNT(*) AS n, COUNT(DISTINCT subscriber_id) AS subscribers \
        FROM jobs INDEXED BY jobs_dead_causes WHERE state = 'dead' \
        GROUP BY dead_reason, last_error_class, last_error_status \
        ORDER BY n DESC, dead_reason, COALESCE(last_error_class, ''), \
          COALESCE(last_error_status, 0)";
    /// A page of the groups by cause and subscriber (see
    /// [`DeadLetterStatements::GROUPS`]).
    const GROUPS: &'static str = "WITH g AS (SELECT dead_reason, last_error_class AS error_class, \
          last_error_status AS status, subscriber_id, COUNT(*) AS n, \
          MIN(dead_at) AS first_dead_at, MAX(dead_at) AS last_dead_at \
          FROM jobs INDEXED BY jobs_dead_causes WHERE state = 'dead' \
          GROUP BY dead_reason, last_error_class, last_error_status, subscriber_id) \
        SELECT dead_reason, error_class, status, subscriber_id, n, first_dead_at, last_dead_at, \
          COUNT(*) OVER () AS total FROM (SELECT g.*, SUM(n) OVER (PARTITION BY dead_reason, \
            error_class, status) AS cause_jobs FROM g) c \
        ORDER BY cause_jobs DESC, dead_reason, COALESCE(error_class, ''), COALESCE(status, 0), \
          n DESC, subscriber_id LIMIT CAST(?1 AS INTEGER) OFFSET CAST(?2 AS INTEGER)";
}
