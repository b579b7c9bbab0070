//! A fresh database per run: a new SQLite file, or a new PostgreSQL database that is
//! dropped afterwards.

use std::path::PathBuf;

use anyhow::Context;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

use super::args::{Args, Backend};
use super::clock::now_ms;

/// The run's database; call [`Database::remove`] when the servers have stopped.
pub struct Database {
    /// What the servers get as `--database-url`.
    pub url: String,
    place: Place,
}

enum Place {
    Sqlite(PathBuf),
    Postgres { admin_url: String, name: String },
}

impl Database {
    /// Creates an empty database for `args.backend`.
    pub async fn create(args: &Args) -> anyhow::Result<Self> {
        let unique = format!("deferhook_bench_{}_{}", std::process::id(), now_ms());
        match args.backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(&unique);
                std::fs::create_dir_all(&dir)?;
                let file = dir.join("bench.db");
                Ok(Database {
                    url: format!("sqlite://{}", file.display()),
                    place: Place::Sqlite(dir),
                })
            }
            Backend::Postgres => {
                let admin_url = args.postgres_url.clone();
                let mut admin = PgConnection::connect(&admin_url)
                    .await
                    .with_context(|| format!("connecting to {admin_url}"))?;
                let create = format!("CREATE DATABASE {unique}");
                sqlx::raw_sql(AssertSqlSafe(create))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
                let url = match admin_url.rsplit_once('/') {
                    Some((server, _)) => format!("{server}/{unique}"),
                    None => anyhow::bail!("--postgres-url names no database: {admin_url}"),
                };
                Ok(Database {
                    url,
                    place: Place::Postgres {
                        admin_url,
                        name: unique,
                    },
                })
            }
        }
    }

    /// Deletes the file or drops the database.
    pub async fn remove(self) -> anyhow::Result<()> {
        match self.place {
            Place::Sqlite(dir) => std::fs::remove_dir_all(dir)?,
            Place::Postgres { admin_url, name } => {
                let mut admin = PgConnection::connect(&admin_url).await?;
                let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::raw_sql(AssertSqlSafe(drop))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
            }
        }
        Ok(())
    }
}
