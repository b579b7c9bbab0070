//! The instances' heartbeats in PostgreSQL: the statements (see
//! [`crate::store::instances`]).

use sqlx::PgPool;

use crate::store::instances::InstanceStatements;

impl InstanceStatements for PgPool {
    /// Inserts or replaces an instance's row.
    const UPSERT: &'static str = "INSERT INTO instances \
        (id, version, started_at, seen_at, worker_slots, slots_in_use) \
        VALUES ($1, $2, $3, $4, $5, $6) \
        ON CONFLICT (id) DO UPDATE SET version = excluded.version, \
          started_at = excluded.started_at, seen_at = excluded.seen_at, \
          worker_slots = excluded.worker_slots, slots_in_use = excluded.slots_in_use";
    /// Deletes the rows last seen before `$1`.
    const FORGET: &'static str = "DELETE FROM instances WHERE seen_at < $1";
    /// Deletes one row.
    const DELETE: &'static str = "DELETE FROM instances WHERE id = $1";
    /// The rows seen at or after `$1`.
    const LIVE: &'static str = "SELECT id, version, started_at, seen_at, worker_slots, \
        slots_in_use FROM instances WHERE seen_at >= $1 ORDER BY id";
}
