//! Ended console sessions in SQLite: the statements (see [`crate::store::sessions`]).

use super::Pools;
use crate::store::sessions::SessionStatements;

/// Records an ended session.
const END: &str = "INSERT INTO console_sessions_ended (id, expires_at) VALUES (?1, ?2) \
    ON CONFLICT (id) DO NOTHING";

/// Forgets the sessions expired before `?1`.
const FORGET: &str = "DELETE FROM console_sessions_ended WHERE expires_at < ?1";

/// Whether session `?1` has ended.
const ENDED: &str = "SELECT 1 AS one FROM console_sessions_ended WHERE id = ?1";

impl SessionStatements for Pools {
    const END: &'static str = END;
    const FORGET: &'static str = FORGET;
    const ENDED: &'static str = ENDED;
}
