//! Ended console sessions in SQLite: the statements (see [`crate::store::sessions`]).

use super::Pools;
use crate::store::sessions::SessionStatements;

impl SessionStatements for Pools {
    /// Records an ended session.
    const END: &'static str = "INSERT INTO console_sessions_ended (id, expires_at) VALUES (?1, ?2) \
        ON CONFLICT (id) DO NOTHING";
    /// Forgets the sessions expired before `?1`.
    const FORGET: &'static str = "DELETE FROM console_sessions_ended WHERE expires_at < ?1";
    /// Whether session `?1` has ended.
    const ENDED: &'static str = "SELECT 1 AS one FROM console_sessions_ended WHERE id = ?1";
}
