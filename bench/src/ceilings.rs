//! `--scenario ceilings`: the store's raw ceilings on this machine, without deferhook
//! in the way (issue #8): how many single-row insert+commit transactions per second
//! the database takes, and how many rows per second a batched claim (select the oldest
//! due rows, mark them, commit) moves. Both run on deferhook's own `jobs` table (the
//! migrations are applied first), so the figures bound what the server can reach.
//!
//! SQLite runs in WAL mode with `synchronous = FULL` (what the server uses: a commit is
//! on disk) and, for reference, `NORMAL` (a commit may be lost on power failure).
//! PostgreSQL runs with one connection and with `--concurrency` connections (up to 16),
//! since it flushes concurrent commits together.

use std::str::FromStr;
use std::time::{Duration, Instant};

use comfy_table::Table;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, Executor, PgConnection, SqliteConnection};

use super::args::{Args, Backend};
use super::database::Database;

/// Single-row commits per measurement.
const COMMITS: u64 = 5_000;
/// Due rows a claim measurement starts with.
const CLAIM_ROWS: u64 = 50_000;
/// Rows per claim.
const CLAIM_BATCH: u64 = 100;

/// One measured ceiling.
#[derive(Debug, serde::Serialize)]
pub struct Ceiling {
    /// What was measured.
    pub what: String,
    /// Operations (commits or claimed rows) per second.
    pub per_second: f64,
}

/// Measures the ceilings of `args.backend`, prints a table and writes `--json`.
pub async fn run(args: &Args) -> anyhow::Result<()> {
    let database = Database::create(args).await?;
    // The server's schema, through the server's own migrations.
    drop(deferhook::store::open(&database.url).await?);
    let ceilings = match args.backend {
        Backend::Sqlite => sqlite(&database.url).await,
        Backend::Postgres => postgres(&database.url, args.concurrency.min(16)).await,
    };
    database.remove().await?;
    let ceilings = ceilings?;
    let mut table = Table::new();
    table.load_style(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header(["ceiling", "per second"]);
    for ceiling in &ceilings {
        table.add_row([ceiling.what.clone(), format!("{:.0}", ceiling.per_second)]);
    }
    println!("{table}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&ceilings)?)?;
        println!("JSON written to {}", path.display());
    }
    Ok(())
}

fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// An `INSERT` of one due job; `$n` placeholders work in both databases.
fn insert_job(n: u64) -> String {
    format!(
        "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, deliver_at, \
         deadline, due_at, created_at, updated_at) VALUES ('{}', 'bench', 'e{n}', \
         '{{\"n\":{n}}}', 'scheduled', {n}, 9000000000000, {n}, 0, 0)",
        uuid::Uuid::now_v7()
    )
}

const SUBSCRIBER: &str = "INSERT INTO subscribers (id, url, secret, max_in_flight, \
    enabled, created_at, updated_at) VALUES ('bench', 'http://127.0.0.1:9/', 'k', 16, \
    TRUE, 0, 0)";

async fn sqlite(url: &str) -> anyhow::Result<Vec<Ceiling>> {
    let mut ceilings = Vec::new();
    for (name, synchronous) in [
        ("FULL", SqliteSynchronous::Full),
        ("NORMAL", SqliteSynchronous::Normal),
    ] {
        let options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous);
        let mut conn = SqliteConnection::connect_with(&options).await?;
        conn.execute("DELETE FROM jobs").await?;
        conn.execute("DELETE FROM subscribers").await?;
        conn.execute(SUBSCRIBER).await?;
        let started = Instant::now();
        for n in 0..COMMITS {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
            tx.execute(sqlx::AssertSqlSafe(insert_job(n))).await?;
            tx.commit().await?;
        }
        ceilings.push(Ceiling {
            what: format!("SQLite WAL synchronous={name}: single-row insert + commit"),
            per_second: rate(COMMITS, started.elapsed()),
        });
        fill(&mut conn).await?;
        let started = Instant::now();
        let mut claimed = 0;
        loop {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
            let rows = sqlx::query(
                "UPDATE jobs SET state = 'in_flight', lease_token = lease_token + 1, due_at = 9100000000000 \
                 WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_due \
                   WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                     AND state = 'scheduled' AND due_at <= 9000000000000 \
                   ORDER BY due_at LIMIT ?1) RETURNING id",
            )
            .bind(CLAIM_BATCH as i64)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            if rows.is_empty() {
                break;
            }
            claimed += rows.len() as u64;
        }
        ceilings.push(Ceiling {
            what: format!(
                "SQLite WAL synchronous={name}: batched claim ({CLAIM_BATCH} rows per commit), rows"
            ),
            per_second: rate(claimed, started.elapsed()),
        });
        conn.close().await?;
    }
    Ok(ceilings)
}

/// Replaces the jobs with [`CLAIM_ROWS`] due ones (not measured).
async fn fill<C>(conn: &mut C) -> anyhow::Result<()>
where
    for<'c> &'c mut C: Executor<'c>,
{
    conn.execute("DELETE FROM jobs").await?;
    for chunk in 0..CLAIM_ROWS / 1_000 {
        let values: Vec<String> = (chunk * 1_000..(chunk + 1) * 1_000)
            .map(|n| {
                format!(
                    "('{}', 'bench', 'c{n}', '{{}}', 'scheduled', {n}, 9000000000000, {n}, 0, 0)",
                    uuid::Uuid::now_v7()
                )
            })
            .collect();
        let insert = format!(
            "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, deliver_at, \
             deadline, due_at, created_at, updated_at) VALUES {}",
            values.join(",")
        );
        conn.execute(sqlx::AssertSqlSafe(insert)).await?;
    }
    Ok(())
}

async fn postgres(url: &str, concurrency: u64) -> anyhow::Result<Vec<Ceiling>> {
    let mut setup = PgConnection::connect(url).await?;
    setup.execute(SUBSCRIBER).await?;
    let mut ceilings = Vec::new();
    for connections in [1, concurrency.max(1)] {
        setup.execute("DELETE FROM jobs").await?;
        let per_connection = COMMITS / connections;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..connections {
            let url = url.to_owned();
            tasks.spawn(async move {
                let mut conn = PgConnection::connect(&url).await?;
                for n in 0..per_connection {
                    let mut tx = conn.begin().await?;
                    tx.execute(sqlx::AssertSqlSafe(insert_job(c * per_connection + n)))
                        .await?;
                    tx.commit().await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        ceilings.push(Ceiling {
            what: format!("PostgreSQL, {connections} connection(s): single-row insert + commit"),
            per_second: rate(per_connection * connections, started.elapsed()),
        });
        fill(&mut setup).await?;
        setup.execute("ANALYZE jobs").await?;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let url = url.to_owned();
            tasks.spawn(async move {
                let mut conn = PgConnection::connect(&url).await?;
                let mut claimed = 0u64;
                loop {
                    let mut tx = conn.begin().await?;
                    let rows = sqlx::query(
                        "UPDATE jobs SET state = 'in_flight', lease_token = lease_token + 1, due_at = 9100000000000 \
                         WHERE id IN (SELECT id FROM jobs \
                           WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                             AND state = 'scheduled' AND due_at <= 9000000000000 \
                           ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING id",
                    )
                    .bind(CLAIM_BATCH as i64)
                    .fetch_all(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    if rows.is_empty() {
                        return anyhow::Ok(claimed);
                    }
                    claimed += rows.len() as u64;
                }
            });
        }
        let mut claimed = 0;
        while let Some(done) = tasks.join_next().await {
            claimed += done??;
        }
        ceilings.push(Ceiling {
            what: format!(
                "PostgreSQL, {connections} connection(s): batched claim ({CLAIM_BATCH} rows per commit, SKIP LOCKED), rows"
            ),
            per_second: rate(claimed, started.elapsed()),
        });
    }
    setup.close().await?;
    Ok(ceilings)
}
