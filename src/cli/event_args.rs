//! Flags of `deferhook events list | show`.

use clap::{Args, Subcommand};

use super::args::{ClientArgs, PageArgs, parse_time};

/// `deferhook events …`: which events are affected, and one event's summary.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: EventsCommand,
}

/// The `events` subcommands.
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List the events with jobs not delivered (retrying, dead since --affected-since,
    /// or due and held back), newest first, with their jobs per state.
    List(ListEventsArgs),
    /// Show one event: its jobs by state, waiting reason, dead reason, last error class
    /// and retry advice, and its failing subscribers.
    Show(ShowEventArgs),
}

/// `deferhook events list`.
#[derive(Debug, Args)]
pub struct ListEventsArgs {
    /// Count dead jobs from this instant (RFC 3339 with an offset); default: the last
    /// hour.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub affected_since: Option<String>,
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// `deferhook events show`.
#[derive(Debug, Args)]
pub struct ShowEventArgs {
    /// The producer's event id.
    #[arg(value_parser = addressable_event_id)]
    pub event_id: String,
}

/// An event id that can be a URL path segment: `.` and `..` are event ids, but every
/// HTTP client resolves them away (RFC 3986 §5.2.4, encoded or not), so
/// `GET /v1/events/..` would read another resource. Their jobs are listed with
/// `deferhook jobs list --event ..`.
fn addressable_event_id(id: &str) -> Result<String, String> {
    if id == "." || id == ".." {
        return Err(format!(
            "`{id}` cannot be sent as a URL path segment; list its jobs with \
             `deferhook jobs list --event {id} --all`"
        ));
    }
    Ok(id.to_owned())
}
