//! The secret key file kept beside an SQLite database (docs/DESIGN.md §4.2, issue #34
//! part 4.11): `deferhook.db.key` for `deferhook.db`, holding 32 random bytes in
//! standard base64 and a newline, the format `--secret-key-file` reads. `serve` makes it
//! at its first start on a database without sealed secrets, so subscriber secrets are
//! sealed by default, and reads it at every later start.
//!
//! The file is made readable by its owner only (0600) and never replaces one: the key
//! is written and synced under a temporary name in the same directory, then linked to
//! the final name, which fails if that exists. So the key file never exists half
//! written (a crash leaves at most the temporary file), and of two servers starting at
//! once on a new database, one key wins and both use it.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::ChaCha20Poly1305;
use chacha20poly1305::aead::{Generate, Key};
use zeroize::{Zeroize, Zeroizing};

/// The key file of the database in `database_file`: its path with `.key` appended.
pub fn beside(database_file: &Path) -> PathBuf {
    let mut name = database_file.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// A fresh key as the file holds it: 32 random bytes (the OS generator) in standard
/// base64, then a newline.
pub fn generate() -> Zeroizing<String> {
    let mut key = Key::<ChaCha20Poly1305>::generate();
    let text = Zeroizing::new(format!("{}\n", STANDARD.encode(key.as_slice())));
    key.zeroize();
    text
}

/// The text of the key file at `path`; `None` when there is none. A file that others
/// may read is logged (its path and mode, never its content).
pub fn read(path: &Path) -> std::io::Result<Option<Zeroizing<String>>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            warn_if_shared(path);
            Ok(Some(Zeroizing::new(text)))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes `text` to a new file at `path`, readable by its owner only, unless a file is
/// there already: `Ok(true)` when this call made it, `Ok(false)` when one existed (it
/// is left as it is).
pub fn create(path: &Path, text: &str) -> std::io::Result<bool> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = directory.join(format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = write_private(&temporary, text);
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => {
            sync_directory(&directory);
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

/// Creates `path` (which must not exist) with mode 0600 and `text`, synced to disk.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// Makes a new name in `directory` durable (best effort: not every file system can).
fn sync_directory(directory: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = std::fs::File::open(directory) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = directory;
}

/// Logs a key file that other users may read (`chmod 600` it).
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode());
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the secret key file is open to other users; restrict it (chmod 600)"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_is_named_after_the_database() {
        assert_eq!(
            beside(Path::new("deferhook.db")),
            PathBuf::from("deferhook.db.key")
        );
        assert_eq!(
            beside(Path::new("/var/lib/deferhook/d.db")),
            PathBuf::from("/var/lib/deferhook/d.db.key")
        );
    }

    #[test]
    fn a_generated_key_is_one_a_key_file_may_hold() {
        let text = generate();
        assert!(text.ends_with('\n'));
        let sealer = crate::store::Sealer::from_base64_key(&text).unwrap();
        assert!(sealer.is_sealing());
        assert_ne!(*generate(), *text);
    }

    #[test]
    fn a_key_file_is_made_private_once_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db.key");
        assert!(read(&path).unwrap().is_none());
        assert!(create(&path, "first\n").unwrap());
        assert!(!create(&path, "second\n").unwrap(), "kept");
        assert_eq!(
            read(&path).unwrap().as_deref().map(String::as_str),
            Some("first\n")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
    }
}
