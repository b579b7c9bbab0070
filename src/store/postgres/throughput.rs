//! Jobs per minute in PostgreSQL: the statements (see [`crate::store::throughput`]).

use sqlx::PgPool;

use crate::store::throughput::ThroughputStatements;

impl ThroughputStatements for PgPool {
    /// Jobs with an id in [`$1`, `$2`): a range of the primary key's index.
    const ACCEPTED: &'static str = "SELECT COUNT(*) AS n FROM jobs WHERE id >= $1 AND id < $2";
    /// Jobs delivered since `$1`, per minute: a range of `jobs_finished (state,
    /// updated_at)` (a delivered job is last updated when it is delivered).
    const DELIVERED: &'static str = "SELECT updated_at / 60000 AS minute, COUNT(*) AS n \
        FROM jobs \
        WHERE state IN ('delivered', 'cancelled', 'dead') AND state = 'delivered' \
          AND updated_at >= $1 GROUP BY minute";
    /// Jobs dead since `$1`, per minute: a range of `jobs_dead_at`.
    const DEAD: &'static str = "SELECT dead_at / 60000 AS minute, COUNT(*) AS n \
        FROM jobs \
        WHERE state = 'dead' AND dead_at >= $1 GROUP BY minute";
}
