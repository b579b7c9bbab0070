//! The start-up check of stored secrets in PostgreSQL, and the scrub after sealing.

use sqlx::PgPool;

use crate::store::StoreError;
use crate::store::secrets::SecretStatements;

/// How long the scrub waits for its table lock before giving up (it is logged).
const LOCK_TIMEOUT: &str = "SET lock_timeout = '5s'";

/// Rewrites the table into a new file, without the dead row versions that hold the
/// replaced values; the old file is removed.
const VACUUM_FULL: &str = "VACUUM FULL subscribers";

/// Undoes [`LOCK_TIMEOUT`] before the connection returns to the pool.
const RESET_LOCK_TIMEOUT: &str = "RESET lock_timeout";

impl SecretStatements for PgPool {
    /// Every live subscriber's stored secrets (a tombstone has none).
    const STORED: &'static str = "SELECT id, secret, previous_secret FROM subscribers WHERE deleted_at IS NULL \
        ORDER BY id";
    /// Writes subscriber `$1`'s secrets sealed, if its secret is still `$4`.
    const RESEAL: &'static str = "UPDATE subscribers SET secret = $2, \
        previous_secret = COALESCE($3, previous_secret) \
        WHERE id = $1 AND secret = $4";

    /// `VACUUM FULL subscribers`: the table's live file no longer holds the replaced
    /// values. It takes the table's exclusive lock for as long as it copies the
    /// subscribers (milliseconds for thousands), once, when a server first seals them;
    /// another instance's claims wait meanwhile. Beyond reach: the server's write-ahead
    /// log and its archives, replicas, backups and the file system's freed blocks keep
    /// the old values as long as they keep them (docs/DESIGN.md §4.2: rotate).
    async fn scrub(&self) -> Result<(), StoreError> {
        let mut connection = self.acquire().await?;
        sqlx::query(LOCK_TIMEOUT).execute(&mut *connection).await?;
        let vacuumed = sqlx::query(VACUUM_FULL).execute(&mut *connection).await;
        sqlx::query(RESET_LOCK_TIMEOUT)
            .execute(&mut *connection)
            .await?;
        vacuumed?;
        Ok(())
    }

    /// Nothing: PostgreSQL's write-ahead log is the server's own, beyond reach.
    async fn settle_log(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
