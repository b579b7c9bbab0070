//! Which key seals subscriber secrets at rest, as `serve` chooses it (docs/DESIGN.md
//! §4.2, issue #34 part 4.11): sealed by default.
//!
//! - `--secret-key` or `--secret-key-file`: that key, whatever the database.
//! - `--plaintext-secrets`: none; secrets in plaintext, with a warning at start.
//! - SQLite, file: the key file beside the database ([`crate::store::key_file`]),
//!   generated at the first start, unless the database already holds sealed secrets
//!   (then its key is missing, and the start is refused naming the file).
//! - SQLite, in memory: a key made for this process (the database lives no longer).
//! - PostgreSQL: none, with a warning: the instances sharing the database could not
//!   share a key generated on one machine, so the operator gives them one.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::config::ServeArgs;
use crate::store::{Sealer, key_file, sqlite};

/// How subscriber secrets are kept, as [`choose`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// Sealed with the key of `--secret-key` or `--secret-key-file`.
    GivenKey,
    /// Sealed with the key in the file `path` beside the SQLite database; `created` at
    /// this start.
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// Whether this start generated it.
        created: bool,
    },
    /// Sealed with a key made for this process (an in-memory database).
    ProcessKey,
    /// In plaintext: `--plaintext-secrets`.
    PlaintextChosen,
    /// In plaintext: a PostgreSQL database and no key given.
    PlaintextShared,
}

/// The sealer `serve` uses, and how it came.
#[derive(Clone, Debug)]
pub struct ChosenKey {
    /// Seals and opens the secrets.
    pub sealer: Sealer,
    /// Where its key comes from.
    pub keeping: Keeping,
}

impl ChosenKey {
    /// Says at start how secrets are kept: a warning when in plaintext (naming
    /// `--secret-key-file`), a note when a key file was generated (back it up).
    pub fn log(&self) {
        match &self.keeping {
            Keeping::GivenKey | Keeping::ProcessKey => {}
            Keeping::KeyFile {
                path,
                created: true,
            } => tracing::info!(
                path = %path.display(),
                "generated a secret key file (mode 0600) beside the database: subscriber \
                 signing secrets are stored encrypted with it. Back it up with the \
                 database: without it the stored secrets cannot be read"
            ),
            Keeping::KeyFile {
                path,
                created: false,
            } => tracing::info!(
                path = %path.display(),
                "subscriber signing secrets are stored encrypted with the key file \
                 beside the database"
            ),
            Keeping::PlaintextChosen => tracing::warn!(
                "--plaintext-secrets: subscriber signing secrets are stored in plaintext in \
                 the database; to encrypt them at rest, start without it (SQLite: a key \
                 file is generated beside the database), or with --secret-key-file PATH or \
                 DEFERHOOK_SECRET_KEY set to 32 random bytes in base64 \
                 (openssl rand -base64 32)"
            ),
            Keeping::PlaintextShared => tracing::warn!(
                "subscriber signing secrets are stored in plaintext in the database: no key \
                 is generated for PostgreSQL, whose instances could not share a file made \
                 on one machine. To encrypt them at rest, give every instance the same key \
                 with --secret-key-file PATH or DEFERHOOK_SECRET_KEY set to 32 random bytes \
                 in base64 (openssl rand -base64 32)"
            ),
        }
    }
}

/// Chooses the sealer of `serve` from its flags and its database (see the module's
/// documentation). Generates the key file of a new SQLite database; fails when the
/// flags' key is unusable, when the database holds sealed secrets and its key file is
/// missing, or when the key file cannot be read or made. Errors name the file and the
/// flags, never a key.
pub async fn choose(args: &ServeArgs) -> anyhow::Result<ChosenKey> {
    let chosen = |sealer, keeping| Ok(ChosenKey { sealer, keeping });
    if let Some(sealer) = args.given_sealer()? {
        return chosen(sealer, Keeping::GivenKey);
    }
    if args.plaintext_secrets {
        return chosen(Sealer::plaintext(), Keeping::PlaintextChosen);
    }
    let url = &args.database.database_url;
    if !url.starts_with("sqlite:") {
        return chosen(Sealer::plaintext(), Keeping::PlaintextShared);
    }
    match sqlite::database_file(url)? {
        None => chosen(
            Sealer::from_base64_key(&key_file::generate())?,
            Keeping::ProcessKey,
        ),
        Some(database) => beside(url, &database).await,
    }
}

/// The sealer of the key file beside the SQLite database in `database` (at `url`),
/// generated when there is none and the database holds no sealed secret.
async fn beside(url: &str, database: &Path) -> anyhow::Result<ChosenKey> {
    let path = key_file::beside(database);
    let directory = match database.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !directory.is_dir() {
        anyhow::bail!(
            "cannot open {url}: the directory {} does not exist",
            directory.display()
        );
    }
    let (text, created) = match read(&path)? {
        Some(text) => (text, false),
        None => {
            if sqlite::holds_sealed_secrets(database).await? {
                anyhow::bail!(
                    "the database {} holds encrypted signing secrets, but its secret key file \
                     {} is missing: restore that file, or start with --secret-key-file PATH \
                     (DEFERHOOK_SECRET_KEY_FILE) or DEFERHOOK_SECRET_KEY holding the key that \
                     encrypted them (a new key would not open them)",
                    database.display(),
                    path.display()
                );
            }
            let text = key_file::generate();
            let created = key_file::create(&path, &text).with_context(|| {
                format!(
                    "cannot create the secret key file {}; give a key with \
                     --secret-key-file PATH, or keep secrets in plaintext with \
                     --plaintext-secrets",
                    path.display()
                )
            })?;
            if created {
                (text, true)
            } else {
                // Another instance made it meanwhile: its key is the database's.
                let text = read(&path)?.context("the secret key file vanished")?;
                (text, false)
            }
        }
    };
    let sealer = Sealer::from_base64_key(&text).with_context(|| {
        format!(
            "the secret key file {}: the key is not usable",
            path.display()
        )
    })?;
    Ok(ChosenKey {
        sealer,
        keeping: Keeping::KeyFile { path, created },
    })
}

/// The key file's text, if there is one; an error names the file.
fn read(path: &Path) -> anyhow::Result<Option<zeroize::Zeroizing<String>>> {
    key_file::read(path)
        .with_context(|| format!("cannot read the secret key file {}", path.display()))
}
