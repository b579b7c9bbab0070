//! Ended console sessions in PostgreSQL: the statements (see [`crate::store::sessions`]).

use sqlx::PgPool;

use crate::store::sessions::SessionStatements;

impl SessionStatements for PgPool {
    /// Records an ended session.
    const END: &'static str = "INSERT INTO console_sessions_ended (id, expires_at) VALUES ($1, $2) \
        ON CONFLICT (id) DO NOTHING";
    /// Forgets the sessions expired before `$1`.
    const FORGET: &'static str = "DELETE FROM console_sessions_ended WHERE expires_at < $1";
    /// Whether session `$1` has ended.
    const ENDED: &'static str = "SELECT 1 AS one FROM console_sessions_ended WHERE id = $1";
}
