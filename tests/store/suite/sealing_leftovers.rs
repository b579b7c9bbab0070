//! Sealing leaves no plaintext behind (issue #15): secrets written without a key — the
//! current ones, a previous one, and ones that rotations have already dropped — are
//! gone from the database's files once a store with a key has sealed them at start:
//! SQLite's file and its write-ahead log, PostgreSQL's table file. The SQLite files are
//! readable by their owner only.

use deferhook::domain::secret::SigningSecret;
use deferhook::store::sealing::SEALED_PREFIX;
use deferhook::store::{Sealer, SharedStore};
use sqlx::Connection;

use super::sealing::rotate;
use crate::support::{Backend, add_subscriber};

const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Subscribers written without a key.
const SUBSCRIBERS: usize = 60;

/// Every secret the store held in plaintext: each subscriber's, and those its
/// rotations replaced (a rotation with a grace period moves the secret to
/// `previous_secret`, one without drops it), which only replaced row versions, free
/// space and the write-ahead log still hold. The last subscriber is left in a grace
/// period, so its previous secret is sealed too.
async fn write_plaintext_secrets(store: &SharedStore) -> Vec<SigningSecret> {
    let mut written = Vec::new();
    for n in 0..SUBSCRIBERS {
        let id = format!("subscriber-{n}");
        written.push(add_subscriber(store, &id).await);
        for _ in 0..3 {
            written.push(rotate(store, &id, 60_000, 1_000).await);
            written.push(rotate(store, &id, 0, 1_000).await);
        }
    }
    written.push(
        rotate(
            store,
            &format!("subscriber-{}", SUBSCRIBERS - 1),
            60_000,
            1_000,
        )
        .await,
    );
    written
}

/// The stored secret columns, all sealed.
async fn assert_columns_sealed(backend: &Backend) {
    let rows: Vec<(String, Option<String>)> = if backend.url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(&backend.url).await.unwrap();
        sqlx::query_as("SELECT secret, previous_secret FROM subscribers")
            .fetch_all(&mut connection)
            .await
            .unwrap()
    } else {
        let mut connection = sqlx::PgConnection::connect(&backend.url).await.unwrap();
        sqlx::query_as("SELECT secret, previous_secret FROM subscribers")
            .fetch_all(&mut connection)
            .await
            .unwrap()
    };
    assert_eq!(rows.len(), SUBSCRIBERS);
    for (secret, previous) in &rows {
        assert!(secret.starts_with(SEALED_PREFIX), "{secret}");
        assert!(
            previous
                .as_ref()
                .is_none_or(|p| p.starts_with(SEALED_PREFIX))
        );
    }
    assert_eq!(rows.iter().filter(|(_, p)| p.is_some()).count(), 1);
}

/// The bytes that may hold a stored value: SQLite's file and write-ahead log, or the
/// PostgreSQL table's file (read by the server, after a checkpoint wrote it out).
async fn stored_bytes(backend: &Backend) -> Vec<(String, Vec<u8>)> {
    if let Some(path) = backend.url.strip_prefix("sqlite://") {
        let mut files = Vec::new();
        for name in [path.to_owned(), format!("{path}-wal")] {
            if let Ok(bytes) = std::fs::read(&name) {
                files.push((name, bytes));
            }
        }
        return files;
    }
    let mut connection = sqlx::PgConnection::connect(&backend.url).await.unwrap();
    sqlx::query("CHECKPOINT")
        .execute(&mut connection)
        .await
        .unwrap();
    let (bytes,): (Vec<u8>,) =
        sqlx::query_as("SELECT pg_read_binary_file(pg_relation_filepath('subscribers'))")
            .fetch_one(&mut connection)
            .await
            .unwrap();
    vec![("the subscribers table's file".to_owned(), bytes)]
}

/// None of `written` is in the bytes that may hold a stored value (and there are some).
async fn assert_no_plaintext(backend: &Backend, written: &[SigningSecret]) {
    let files = stored_bytes(backend).await;
    assert!(!files.is_empty());
    for (name, bytes) in &files {
        for secret in written {
            let encoded = secret.expose().strip_prefix("whsec_").unwrap();
            let found = bytes
                .windows(encoded.len())
                .any(|window| window == encoded.as_bytes());
            assert!(!found, "a plaintext secret is left in {name}");
        }
    }
}

/// The SQLite file and its -wal and -shm (those that exist) have mode 0600.
#[cfg(unix)]
fn assert_owner_only(path: &str) {
    use std::os::unix::fs::PermissionsExt;
    assert!(std::path::Path::new(path).exists(), "{path}");
    for name in [
        path.to_owned(),
        format!("{path}-wal"),
        format!("{path}-shm"),
    ] {
        if let Ok(metadata) = std::fs::metadata(&name) {
            let mode = metadata.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name} has mode {mode:o}");
        }
    }
}

store_case!(
    sealing_leaves_no_plaintext_in_the_files,
    async |backend: Backend| {
        let written = write_plaintext_secrets(&backend.store).await;
        let sealer = Sealer::from_base64_key(KEY).unwrap();
        let _sealed = deferhook::store::open_with_sealer(&backend.url, sealer)
            .await
            .expect("a store with a key opens and seals");
        assert_columns_sealed(&backend).await;

        assert_no_plaintext(&backend, &written).await;
        #[cfg(unix)]
        if let Some(path) = backend.url.strip_prefix("sqlite://") {
            assert_owner_only(path);
        }
    }
);

store_case!(
    a_log_kept_by_a_reader_at_sealing_is_truncated_at_the_next_start,
    async |backend: Backend| {
        // SQLite only: PostgreSQL's write-ahead log is its server's own.
        let Some(path) = backend.url.strip_prefix("sqlite://").map(str::to_owned) else {
            return;
        };
        let written = write_plaintext_secrets(&backend.store).await;
        // Another program (a second instance, a backup) reads the file in a long
        // transaction while the server seals: the checkpoint that truncates the log is
        // busy, so the log keeps the plaintext. That used to stay until some later
        // sealing, which never came (review of issue #15): every start with a key
        // truncates it now.
        let mut reader = sqlx::SqliteConnection::connect(&backend.url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut reader).await.unwrap();
        let _: Vec<(String,)> = sqlx::query_as("SELECT id FROM subscribers")
            .fetch_all(&mut reader)
            .await
            .unwrap();
        let key = || Sealer::from_base64_key(KEY).unwrap();
        let _sealed = deferhook::store::open_with_sealer(&backend.url, key())
            .await
            .expect("a store with a key opens and seals");
        let wal = || std::fs::metadata(format!("{path}-wal")).map_or(0, |m| m.len());
        assert!(wal() > 0, "the reader kept the log");
        sqlx::query("COMMIT").execute(&mut reader).await.unwrap();
        drop(reader);

        let _restarted = deferhook::store::open_with_sealer(&backend.url, key())
            .await
            .expect("a store with a key opens");
        assert_eq!(wal(), 0, "the write-ahead log was not truncated");
        assert_no_plaintext(&backend, &written).await;
    }
);
