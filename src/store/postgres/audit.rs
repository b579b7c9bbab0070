//! The audit trail in PostgreSQL: the statements (see [`crate::store::audit`]).

use sqlx::PgPool;

use crate::store::audit::AuditStatements;

impl AuditStatements for PgPool {
    /// Records an entry.
    const INSERT: &'static str = "INSERT INTO audit (id, at, action, target, parameters, actor, status, \
        request_id, server_request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    /// Settles begun entry `$1`: status `$2`, target `$3` unless NULL, at `$4`.
    const SETTLE: &'static str = "UPDATE audit SET status = $2, target = COALESCE($3, target), at = $4 \
        WHERE id = $1 AND status = 0";
    /// Deletes entry `$1` while it is begun.
    const WITHDRAW: &'static str = "DELETE FROM audit WHERE id = $1 AND status = 0";
    /// Entries older than `$1`, of action `$2` and target `$3` (any when NULL), newest
    /// first, at most `$4`.
    const LIST: &'static str = "SELECT id, at, action, target, parameters, actor, status, request_id, \
        server_request_id FROM audit WHERE ($1::text IS NULL OR id < $1) AND ($2::text IS NULL OR action = $2) \
          AND ($3::text IS NULL OR target = $3) \
        ORDER BY id DESC LIMIT $4";
    /// Up to `$2` entries recorded before `$1`, oldest first.
    const PURGE: &'static str = "DELETE FROM audit WHERE id IN ( \
        SELECT id FROM audit WHERE at < $1 ORDER BY at LIMIT $2)";
}
