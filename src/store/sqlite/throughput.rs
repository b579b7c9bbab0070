//! Jobs per minute in SQLite: the statements (see [`crate::store::throughput`]). The
//! partial indexes are named with `INDEXED BY`, their predicates repeated word for word.

use super::Pools;
use crate::store::throughput::ThroughputStatements;

impl ThroughputStatements for Pools {
    /// Jobs with an id in [`?1`, `?2`): a range of the primary key's index alone.
    const ACCEPTED: &'static str = "SELECT COUNT(*) AS n FROM jobs WHERE id >= ?1 AND id < ?2";
    /// Jobs delivered since `?1`, per minute: a range of `jobs_finished (state,
    /// updated_at)` alone (a delivered job is last updated when it is delivered).
    const DELIVERED: &'static str = "SELECT updated_at / 60000 AS minute, COUNT(*) AS n \
        FROM jobs INDEXED BY jobs_finished \
        WHERE state IN ('delivered', 'cancelled', 'dead') AND state = 'delivered' \
          AND updated_at >= ?1 GROUP BY minute";
    /// Jobs dead since `?1`, per minute: a range of `jobs_dead_at`.
    const DEAD: &'static str = "SELECT dead_at / 60000 AS minute, COUNT(*) AS n \
        FROM jobs INDEXED BY jobs_dead_at \
        WHERE state = 'dead' AND dead_at >= ?1 GROUP BY minute";
}
