//! A private, throwaway PostgreSQL cluster for the soak's `PostgresRestart` fault: the
//! installed server's `initdb` in a new temporary directory, started on a free
//! 127.0.0.1 port, so stopping it disturbs nobody (never the shared server at :5432).
//! The server tools run as `postgres` (through `runuser`) when this process is root,
//! since `initdb` refuses root.
//!
//! [`Cluster::stop`] and [`Cluster::start`] run `pg_ctl` and wait for it (`start`: up
//! to [`START_SECONDS`], WAL recovery included); from async code, call them in
//! `tokio::task::spawn_blocking` when that wait matters.
//!
//! The file stands alone (no `crate::` paths): `tests/delivery/pg_restart.rs`
//! includes it too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// Where Debian and Ubuntu install the server's versions (`<version>/bin/initdb`).
const INSTALLS: &str = "/usr/lib/postgresql";
/// Longest `pg_ctl start -w` waits for the server to accept connections, in seconds.
const START_SECONDS: u32 = 30;

/// A running (or stopped) private cluster; dropping it stops the server at once and
/// removes its directory.
pub struct Cluster {
    /// The server's `bin` directory (`initdb`, `pg_ctl`, `pg_isready`).
    bin: PathBuf,
    /// The temporary directory: `data` (the cluster), `log` (the server's log) and
    /// the Unix socket.
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// `initdb` in a new temp dir and start on a free 127.0.0.1 port (trust
    /// authentication, superuser `postgres`, `max_connections=300`). The error names
    /// what is missing: no `/usr/lib/postgresql/*/bin/initdb`, or `initdb` or the
    /// start failed (with their output).
    pub fn create() -> anyhow::Result<Cluster> {
        let bin = server_bin()?;
        // Unique within the process too: clusters created in the same millisecond.
        static CREATED: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "deferhook-chaos-pg-{}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis()),
            CREATED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // From here on, Drop removes the directory (and stops a started server).
        let mut cluster = Cluster { bin, dir, port: 0 };
        if is_root() {
            run(Command::new("chown").arg("postgres").arg(&cluster.dir))
                .context("handing the cluster's directory to user postgres")?;
        }
        cluster.port = free_port()?;
        run(as_postgres(cluster.bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(cluster.data()))
        .context("initdb failed")?;
        cluster.start()?;
        Ok(cluster)
    }

    /// The server's port on 127.0.0.1.
    #[cfg(test)]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Creates database `name` (if missing) and returns
    /// `postgres://postgres@127.0.0.1:{port}/{name}`. `name` is a lowercase SQL
    /// identifier (`[a-z_][a-z0-9_]*`); anything else is an error.
    pub async fn database(&self, name: &str) -> anyhow::Result<String> {
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        anyhow::ensure!(plain, "not a plain database name: {name:?}");
        let admin_url = self.url("postgres");
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .with_context(|| format!("connecting to {admin_url}"))?;
        let exists: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
                .bind(name)
                .fetch_optional(&mut admin)
                .await?;
        if exists.is_none() {
            sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await
                .with_context(|| format!("creating database {name}"))?;
        }
        admin.close().await?;
        Ok(self.url(name))
    }

    /// `pg_ctl stop -m immediate`: the server processes end at once, without a
    /// checkpoint (as in a crash); the next start recovers from the WAL.
    pub fn stop(&self) -> anyhow::Result<()> {
        run(self.pg_ctl().args(["-m", "immediate", "stop"]))
            .context("pg_ctl stop -m immediate failed")
    }

    /// `pg_ctl start -w` on the same port and directory; waits until the server
    /// accepts connections (at most [`START_SECONDS`]). The error carries `pg_ctl`'s
    /// output and the end of the server's log.
    pub fn start(&self) -> anyhow::Result<()> {
        // fsync=off: the faults stop the server processes, never the machine, so the
        // page cache keeps what was written (as in .ci/postgres.sh).
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let timeout = START_SECONDS.to_string();
        let started = run(self
            .pg_ctl()
            .args(["-w", "-t", &timeout, "-o", &options, "start"]));
        started.map_err(|error| {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            error.context(format!(
                "pg_ctl start failed; the server's log ends:\n{}",
                tail.join("\n")
            ))
        })
    }

    /// Whether the server accepts connections now (`pg_isready`, 2 s at most).
    pub fn is_up(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-q", "-t", "2", "-h", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .status()
            .is_ok_and(|status| status.success())
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg_ctl(&self) -> Command {
        let mut command = as_postgres(self.bin.join("pg_ctl"));
        command
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"));
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            let _ = self.pg_ctl().args(["-m", "immediate", "stop"]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest installed server's `bin` directory.
fn server_bin() -> anyhow::Result<PathBuf> {
    let missing = || {
        format!(
            "no {INSTALLS}/*/bin/initdb: the PostgreSQL server is not installed \
             (Debian: apt-get install postgresql)"
        )
    };
    let versions = std::fs::read_dir(INSTALLS).with_context(missing)?;
    versions
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        // Numeric order: "9.6" < "16".
        .max_by_key(|bin| version_key(bin))
        .with_context(missing)
}

/// `/usr/lib/postgresql/16/bin` → `[16]`; `9.6` → `[9, 6]`.
fn version_key(bin: &Path) -> Vec<u32> {
    let version = bin
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    version.split('.').filter_map(|n| n.parse().ok()).collect()
}

/// A port that was free a moment ago (bound to 0, then released).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `program` as user `postgres` when this process is root, else as is.
fn as_postgres(program: PathBuf) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `command` to its end; an error with its output unless it succeeded.
fn run(command: &mut Command) -> anyhow::Result<()> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        anyhow::bail!(
            "{program} {:?}: {}\n{}{}",
            command.get_args().collect::<Vec<_>>(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// The cluster, or `None` (said in one line) where the server is not installed;
/// under `CI=true` its absence fails the test.
#[cfg(test)]
pub fn cluster_or_skip(test: &str) -> Option<Cluster> {
    match Cluster::create() {
        Ok(cluster) => Some(cluster),
        Err(error) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{error:#}")
        }
        Err(error) if server_bin().is_err() => {
            eprintln!("skipping {test}: {error:#}");
            None
        }
        Err(error) => panic!("{error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cluster_stops_and_starts_again_with_its_data() {
        let Some(cluster) = cluster_or_skip("the private cluster test") else {
            return;
        };
        assert_ne!(cluster.port(), 5432);
        assert!(cluster.is_up());
        let url = cluster.database("chaos_test").await.unwrap();
        assert_eq!(url, cluster.database("chaos_test").await.unwrap());
        let mut db = PgConnection::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE t (n INT)")
            .execute(&mut db)
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES (7)")
            .execute(&mut db)
            .await
            .unwrap();
        drop(db);

        cluster.stop().unwrap();
        assert!(!cluster.is_up());
        assert!(PgConnection::connect(&url).await.is_err());
        cluster.start().unwrap();
        assert!(cluster.is_up());
        let mut db = PgConnection::connect(&url).await.unwrap();
        let n: i32 = sqlx::query_scalar("SELECT n FROM t")
            .fetch_one(&mut db)
            .await
            .unwrap();
        assert_eq!(n, 7);
        db.close().await.unwrap();

        assert!(cluster.database("Bad-Name").await.is_err());
        let dir = cluster.dir.clone();
        drop(cluster);
        assert!(!dir.exists());
    }
}
