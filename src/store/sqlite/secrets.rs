//! The start-up check of stored secrets in SQLite, and the scrub after sealing.

use super::Pools;
use crate::store::StoreError;
use crate::store::secrets::SecretStatements;

/// Every live subscriber's stored secrets (a tombstone has none).
const STORED: &str = "SELECT id, secret, previous_secret FROM subscribers WHERE deleted_at IS NULL";

/// Writes subscriber `?1`'s secrets sealed, if its secret is still `?4`.
const RESEAL: &str = "UPDATE subscribers SET secret = ?2, \
    previous_secret = COALESCE(?3, previous_secret) \
    WHERE id = ?1 AND secret = ?4";

/// Rebuilds the file from its live rows: free pages and the unused space of pages
/// (where replaced values stay, sealing's and every earlier update's) are gone, and
/// the file shrinks to what it holds.
const VACUUM: &str = "VACUUM";

/// Copies the log into the file and truncates the log to zero bytes; answers `(busy,
/// log frames, frames copied)`, busy 1 when a reader kept it from finishing.
const CHECKPOINT: &str = "PRAGMA wal_checkpoint(TRUNCATE)";

impl SecretStatements for Pools {
    const STORED: &'static str = STORED;
    const RESEAL: &'static str = RESEAL;

    /// `VACUUM`, then a truncating checkpoint (VACUUM writes the new pages through the
    /// write-ahead log, whose older frames hold the plaintext rows): afterwards neither
    /// the file nor the log holds a replaced value. Costs one rewrite of the file, once,
    /// when a server first starts with a key; it needs free disk space of the file's
    /// size meanwhile. See [`SecretStatements::settle_log`] for a reader in the way.
    async fn scrub(&self) -> Result<(), StoreError> {
        let mut writer = self.writer.acquire().await?;
        sqlx::query(VACUUM).execute(&mut *writer).await?;
        drop(writer);
        self.settle_log().await
    }

    /// A truncating checkpoint. It waits the busy timeout (5 s) for readers of older
    /// log frames to let go; another program still reading the file then (a second
    /// instance in a long transaction, a backup) keeps the log, which is logged, and
    /// the next start with the key truncates it.
    async fn settle_log(&self) -> Result<(), StoreError> {
        let mut writer = self.writer.acquire().await?;
        let (busy, _, _): (i64, i64, i64) =
            sqlx::query_as(CHECKPOINT).fetch_one(&mut *writer).await?;
        if busy != 0 {
            tracing::warn!(
                "another connection kept the write-ahead log from being truncated: it may \
                 hold replaced plaintext secrets until a later start with the key \
                 truncates it (stop the other programs using the file, then restart); \
                 rotate the secrets created before the key"
            );
        }
        Ok(())
    }
}
