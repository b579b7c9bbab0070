//! Server keys in PostgreSQL: the statements (see [`crate::store::server_keys`]).

use crate::store::server_keys::ServerKeyStatements;
use sqlx::PgPool;

impl ServerKeyStatements for PgPool {
    /// Stores a key unless one of its name exists (a concurrent offer waits for the first
    /// to commit, then stores nothing).
    const OFFER: &'static str = "INSERT INTO server_keys (name, key, created_at) VALUES ($1, $2, $3) \
        ON CONFLICT (name) DO NOTHING";
    /// The key named `$1`.
    const GET: &'static str = "SELECT key FROM server_keys WHERE name = $1";
}
