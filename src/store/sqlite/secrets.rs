//! The start-up check of stored secrets in SQLite, and the scrub after sealing.

use std::path::Path;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

use super::{BUSY_TIMEOUT, Pools};
use crate::store::StoreError;
use crate::store::secrets::SecretStatements;

/// Rebuilds the file from its live rows: free pages and the unused space of pages
/// (where replaced values stay, sealing's and every earlier update's) are gone, and
/// the file shrinks to what it holds.
const VACUUM: &str = "VACUUM";

/// Copies the log into the file and truncates the log to zero bytes; answers `(busy,
/// log frames, frames copied)`, busy 1 when a reader kept it from finishing.
const CHECKPOINT: &str = "PRAGMA wal_checkpoint(TRUNCATE)";

impl SecretStatements for Pools {
    /// Every live subscriber's stored secrets (a tombstone has none).
    const STORED: &'static str =
        "SELECT id, secret, previous_secret FROM subscribers WHERE deleted_at IS NULL";
    /// Writes subscriber `?1`'s secrets sealed, if its secret is still `?4`.
    const RESEAL: &'static str = "UPDATE subscribers SET secret = ?2, \
        previous_secret = COALESCE(?3, previous_secret) \
        WHERE id = ?1 AND secret = ?4";

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

/// Whether a subscriber's current secret is sealed (a schema before migration 0004,
/// which added `previous_secret`).
const SEALED_CURRENT: &str =
    "SELECT EXISTS (SELECT 1 FROM subscribers WHERE substr(secret, 1, 4) = 'enc:')";
/// Whether a subscriber's current or previous secret is sealed.
const SEALED_CURRENT_OR_PREVIOUS: &str = "SELECT EXISTS (SELECT 1 FROM subscribers \
    WHERE substr(secret, 1, 4) = 'enc:' OR substr(previous_secret, 1, 4) = 'enc:')";

/// Whether the SQLite database in `path` holds a sealed (`enc:`) secret, current or
/// previous, read before the store opens it (docs/DESIGN.md §4.2): a server without a
/// key of its own must not generate one for such a database, which only the key that
/// sealed them opens. A missing file, or one without a `subscribers` table, holds none.
/// Reads whatever schema version the file has (no migration has run yet).
pub async fn holds_sealed_secrets(path: &Path) -> Result<bool, StoreError> {
    if !path.exists() {
        return Ok(false);
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .busy_timeout(BUSY_TIMEOUT);
    let mut connection = SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", path.display())))?;
    let columns: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pragma_table_info('subscribers')")
            .fetch_all(&mut connection)
            .await?;
    let has = |column: &str| columns.iter().any(|name| name == column);
    let query = match (has("secret"), has("previous_secret")) {
        (true, true) => SEALED_CURRENT_OR_PREVIOUS,
        (true, false) => SEALED_CURRENT,
        _ => return Ok(false),
    };
    let found: bool = sqlx::query_scalar(query).fetch_one(&mut connection).await?;
    connection.close().await.ok();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is missing, empty (created, never migrated) or without subscribers'
    /// secrets holds none; an `enc:` value, current or previous, is found.
    #[tokio::test]
    async fn sealed_secrets_are_found_in_any_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        assert!(!holds_sealed_secrets(&path).await.unwrap());
        std::fs::File::create(&path).unwrap();
        assert!(!holds_sealed_secrets(&path).await.unwrap());

        let options = SqliteConnectOptions::new().filename(&path);
        let mut connection = SqliteConnection::connect_with(&options).await.unwrap();
        let run = async |connection: &mut SqliteConnection, sql: &'static str| {
            sqlx::query(sql).execute(connection).await.unwrap();
        };
        run(
            &mut connection,
            "CREATE TABLE subscribers (id TEXT, secret TEXT)",
        )
        .await;
        run(
            &mut connection,
            "INSERT INTO subscribers VALUES ('a', 'whsec_x')",
        )
        .await;
        assert!(!holds_sealed_secrets(&path).await.unwrap());
        run(
            &mut connection,
            "ALTER TABLE subscribers ADD COLUMN previous_secret TEXT",
        )
        .await;
        run(
            &mut connection,
            "UPDATE subscribers SET previous_secret = 'enc:v1:AAAA'",
        )
        .await;
        assert!(holds_sealed_secrets(&path).await.unwrap());
        run(
            &mut connection,
            "UPDATE subscribers SET previous_secret = NULL, secret = 'enc:v1:A'",
        )
        .await;
        assert!(holds_sealed_secrets(&path).await.unwrap());
    }
}
