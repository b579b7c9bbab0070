//! The root of the `deferhook` command line: the global flags and the subcommands
//! (`serve`, `migrate`, `openapi`, `jobs`, `replay`, `destinations`, `events`,
//! `subscribers`, `schedules`, `audit`).

use clap::{Parser, Subcommand};

use super::args::{AuditArgs, DestinationsArgs, JobsArgs, ReplayArgs, SubscribersArgs};
use super::event_args::EventsArgs;
use super::schedule_args::SchedulesArgs;
use crate::config::{DatabaseArgs, ServeArgs};
use crate::telemetry::LogFormat;

/// deferhook: schedules and delivers delayed, signed webhooks.
#[derive(Debug, Parser)]
#[command(name = "deferhook", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format: `text` for people, `json` for log shippers.
    // Global: under its own heading, not among a subcommand's filters.
    #[arg(
        long,
        env = "DEFERHOOK_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true,
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API and the delivery worker.
    Serve(ServeArgs),
    /// Bring the database schema up to date, then exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document (JSON) to standard output.
    Openapi,
    /// Show jobs of a running server, or send a retrying one now (`get`, `list`,
    /// `retry`).
    Jobs(JobsArgs),
    /// Replay dead jobs, or bring retrying ones forward, on a running server
    /// (`create`, `list`, `status`, `cancel`).
    Replay(ReplayArgs),
    /// Show destinations (host:port) of a running server and change their limit,
    /// pause or circuit (`list`, `show`, `set`).
    Destinations(DestinationsArgs),
    /// Show which events of a running server are affected, and one event's summary
    /// (`list`, `show`).
    Events(EventsArgs),
    /// Show subscribers' health on a running server (the causes of the failing ones
    /// first), pause many at once, resume paused ones, delete one (`list`, `pause`,
    /// `resume`, `delete`).
    Subscribers(SubscribersArgs),
    /// Define recurring schedules on a running server, show them, delete one, or
    /// create the current period's jobs now (`list`, `show`, `put`, `delete`, `run`).
    Schedules(SchedulesArgs),
    /// Show the trail of operator actions of a running server (`list`).
    Audit(AuditArgs),
}
