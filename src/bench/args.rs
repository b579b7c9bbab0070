//! The benchmark's flags.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// deferhook-bench: load a real deferhook process and measure it.
#[derive(Debug, Parser)]
#[command(name = "deferhook-bench")]
pub struct Args {
    /// What load to apply.
    #[arg(long, value_enum, default_value_t = Scenario::Burst)]
    pub scenario: Scenario,
    /// Which database the server uses (a fresh one per run).
    #[arg(long, value_enum, default_value_t = Backend::Sqlite)]
    pub backend: Backend,
    /// Servers sharing the database (PostgreSQL only); the load is spread over them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub instances: u32,
    /// Jobs to create (`burst`, `backlog`), or subscribers of the event (`fanout`).
    #[arg(long)]
    pub jobs: Option<u64>,
    /// Jobs per second (`steady`).
    #[arg(long, default_value_t = 1_000)]
    pub rate: u64,
    /// How long the load lasts, in seconds (`steady`).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// API requests in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Subscribers of the `fanout` event that answer slowly.
    #[arg(long, default_value_t = 300)]
    pub slow: u64,
    /// How long a slow subscriber takes to answer, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    pub slow_ms: u64,
    /// Longest wait for every job to arrive, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// The `deferhook` binary to start (default: the one next to this executable).
    #[arg(long, value_name = "PATH")]
    pub server_binary: Option<PathBuf>,
    /// PostgreSQL server URL whose `postgres` database is used to create and drop the
    /// benchmark's database.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub postgres_url: String,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// The load shapes of issue #8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// `--jobs` jobs, all due now.
    Burst,
    /// `--rate` jobs/s for `--seconds` s, each due 1–5 s after it is created.
    Steady,
    /// `--jobs` jobs due in an hour: memory and API latency while they wait.
    Backlog,
    /// One event to `--jobs` subscribers, `--slow` of them slow.
    Fanout,
    /// No server: the database's own ceilings (single-row commits/s, claimed rows/s).
    Ceilings,
}

/// The server's database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// A new file in a temporary directory.
    Sqlite,
    /// A new database on `--postgres-url`'s server, dropped afterwards.
    Postgres,
}

impl Args {
    /// Rejects combinations the flags cannot express.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.instances > 1 && self.backend != Backend::Postgres {
            anyhow::bail!("--instances above 1 needs --backend postgres");
        }
        if self.scenario == Scenario::Fanout && self.slow > self.jobs() {
            anyhow::bail!("--slow must not exceed --jobs (the subscribers)");
        }
        Ok(())
    }

    /// `--jobs`, or the scenario's default size.
    pub fn jobs(&self) -> u64 {
        self.jobs.unwrap_or(match self.scenario {
            Scenario::Burst => 10_000,
            Scenario::Steady | Scenario::Ceilings => 0,
            Scenario::Backlog => 100_000,
            Scenario::Fanout => 2_000,
        })
    }
}
