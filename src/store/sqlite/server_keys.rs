//! Server keys in SQLite: the statements (see [`crate::store::server_keys`]).

use super::Pools;
use crate::store::server_keys::ServerKeyStatements;

impl ServerKeyStatements for Pools {
    /// Stores a key unless one of its name exists.
    const OFFER: &'static str = "INSERT INTO server_keys (name, key, created_at) VALUES (?1, ?2, ?3) \
        ON CONFLICT (name) DO NOTHING";
    /// The key named `?1`.
    const GET: &'static str = "SELECT key FROM server_keys WHERE name = ?1";
}
