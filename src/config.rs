//! Settings from command-line flags, each with a `DEFERHOOK_*` environment variable
//! (DESIGN §6).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::api::ApiSettings;
use crate::api::job_input::JobLimits;

/// deferhook: schedules and delivers delayed, signed webhooks.
#[derive(Debug, Parser)]
#[command(name = "deferhook", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format: `text` for people, `json` for log shippers.
    #[arg(long, env = "DEFERHOOK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API (and, in a later version, the delivery workers).
    Serve(ServeArgs),
    /// Bring the database schema up to date, then exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document (JSON) to standard output.
    Openapi,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Which database to use.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` (created when missing).
    #[arg(
        long,
        env = "DEFERHOOK_DATABASE_URL",
        default_value = "sqlite://deferhook.db"
    )]
    pub database_url: String,
}

/// Settings of `deferhook serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The database.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Address the API listens on (port 0 picks a free port).
    #[arg(long, env = "DEFERHOOK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Most bytes of a job's payload (larger ones get 413).
    #[arg(long, env = "DEFERHOOK_MAX_PAYLOAD_BYTES", default_value_t = 262_144,
          value_parser = clap::value_parser!(u64).range(1..=16 * 1024 * 1024))]
    pub max_payload_bytes: u64,
    /// Deadline after `deliver_at` for jobs that name none, in milliseconds.
    #[arg(long, env = "DEFERHOOK_DEFAULT_TTL_MS", default_value_t = 86_400_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub default_ttl_ms: u64,
    /// Longest an API request may take before it is answered 408, in milliseconds.
    #[arg(long, env = "DEFERHOOK_REQUEST_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// On SIGTERM/SIGINT, how long open requests may finish, in milliseconds.
    #[arg(long, env = "DEFERHOOK_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
}

impl ServeArgs {
    /// The API's settings.
    pub fn api_settings(&self) -> ApiSettings {
        ApiSettings {
            job_limits: JobLimits {
                max_payload_bytes: usize::try_from(self.max_payload_bytes).unwrap_or(usize::MAX),
                default_ttl_ms: self.default_ttl_ms,
            },
            request_timeout: Duration::from_millis(self.request_timeout_ms),
        }
    }

    /// The shutdown grace period.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_defaults_match_the_design() {
        let cli = Cli::try_parse_from(["deferhook", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(args.database.database_url, "sqlite://deferhook.db");
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(args.max_payload_bytes, 262_144);
        assert_eq!(args.default_ttl_ms, 86_400_000);
        assert_eq!(args.shutdown_grace_ms, 10_000);
    }

    #[test]
    fn bad_values_are_refused() {
        for args in [
            ["deferhook", "serve", "--listen", "nowhere"],
            ["deferhook", "serve", "--max-payload-bytes", "0"],
            ["deferhook", "serve", "--default-ttl-ms", "-5"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }
}
