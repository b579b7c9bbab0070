//! Flags of `deferhook schedules list | show | put | delete | run`.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args, Subcommand};
use serde_json::value::RawValue;

use super::args::{ClientArgs, PageArgs, parse_time};

/// What a missed period becomes after downtime (`--catch-up`).
pub const CATCH_UP: [&str; 2] = ["latest", "none"];

/// `deferhook schedules …`: recurring schedules, each period one job per target.
#[derive(Debug, Args)]
pub struct SchedulesArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: SchedulesCommand,
}

/// The `schedules` subcommands.
#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// List schedules in id order: their target, when their periods start, the next
    /// one and the last run.
    List(ListSchedulesArgs),
    /// Show one schedule: its definition, its next five periods, its last run and its
    /// job, its last error.
    Show(ScheduleIdArg),
    /// Create a schedule, or replace one's definition (`--anchor` and `--enabled` keep
    /// their stored value when left out); prints it as stored.
    Put(Box<PutScheduleArgs>),
    /// Delete a schedule: no period starts after this; the jobs it created stay (with
    /// --json, prints `{"deleted": ID}`: the server answers 204 without a body).
    Delete(ScheduleIdArg),
    /// Create the current period's jobs now (the period that started last), unless
    /// they exist; works while the schedule is disabled. Prints the period and its
    /// jobs.
    Run(ScheduleIdArg),
}

/// `deferhook schedules list`.
#[derive(Debug, Args)]
pub struct ListSchedulesArgs {
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// A command naming one schedule.
#[derive(Debug, Args)]
pub struct ScheduleIdArg {
    /// The schedule's id (1–128 of A-Z a-z 0-9 . _ : -).
    #[arg(value_name = "ID", value_parser = addressable_id)]
    pub schedule_id: String,
}

/// `deferhook schedules put`: one target (`--subscriber` or `--event-type`) and one
/// timing (`--cron` or `--every-ms`).
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("target").required(true).args(["subscriber", "event_type"])),
    group(ArgGroup::new("timing").required(true).args(["cron", "every_ms"]))
)]
pub struct PutScheduleArgs {
    /// Which schedule.
    #[command(flatten)]
    pub schedule: ScheduleIdArg,
    /// Deliver each period to this subscriber (it must exist).
    #[arg(long, value_name = "ID")]
    pub subscriber: Option<String>,
    /// Deliver each period to every subscriber whose event types match this type when
    /// the period's jobs are created.
    #[arg(long, value_name = "TYPE")]
    pub event_type: Option<String>,
    /// A cron pattern of 5 fields (minute hour day-of-month month day-of-week) or 6
    /// (seconds first), e.g. `0 9 * * 1-5`; `@hourly`, `@daily`, … too.
    #[arg(long, value_name = "PATTERN")]
    pub cron: Option<String>,
    /// With --cron: the IANA time zone its wall clock is read in (the server's default:
    /// UTC).
    #[arg(
        long,
        value_name = "ZONE",
        requires = "cron",
        conflicts_with = "every_ms"
    )]
    pub time_zone: Option<String>,
    /// Milliseconds between periods (at least 1000), counted from --anchor.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1000..))]
    pub every_ms: Option<u64>,
    /// With --every-ms: one period's start (RFC 3339); default: when the schedule was
    /// created, or its stored anchor on update.
    #[arg(
        long,
        value_name = "TIME",
        value_parser = parse_time,
        requires = "every_ms",
        conflicts_with = "cron"
    )]
    pub anchor: Option<String>,
    /// The event id of each period's jobs; must contain `{period_start}`, replaced by
    /// the period's start in UTC (e.g. `cleanup:{period_start}`).
    #[arg(long, value_name = "TEMPLATE")]
    pub event_id: String,
    /// The payload every period's jobs send: JSON text, or `@FILE` to read it from a
    /// file; sent as written.
    #[arg(long, value_name = "JSON|@FILE", value_parser = parse_payload)]
    pub payload: Payload,
    /// Each job's deadline after its period's start, in milliseconds (the server's
    /// TTL when absent).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts (1 to 10000); absent: only the deadline bounds them.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_attempts: Option<u32>,
    /// After downtime: `latest` (the server's default) creates the most recent missed
    /// period's jobs, `none` creates none.
    #[arg(long, value_name = "WHICH", value_parser = PossibleValuesParser::new(CATCH_UP))]
    pub catch_up: Option<String>,
    /// `false` creates no period's jobs until set `true` again (a run still does);
    /// kept as stored when absent on update (new schedules: true).
    #[arg(long, value_name = "BOOL", value_parser = clap::value_parser!(bool))]
    pub enabled: Option<bool>,
}

/// Where `--payload` comes from.
#[derive(Debug, Clone)]
pub enum Payload {
    /// JSON text given on the command line (checked to be JSON).
    Text(Box<RawValue>),
    /// A file to read it from (`@FILE`).
    File(PathBuf),
}

impl Payload {
    /// The payload's JSON text: as given, or the file's content (which must be JSON).
    pub fn read(&self) -> anyhow::Result<Box<RawValue>> {
        match self {
            Payload::Text(raw) => Ok(raw.clone()),
            Payload::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!("cannot read the payload file {}: {e}", path.display())
                })?;
                json_text(text.trim_end().to_owned()).map_err(|e| {
                    anyhow::anyhow!("the payload file {} is not JSON: {e}", path.display())
                })
            }
        }
    }
}

fn parse_payload(raw: &str) -> Result<Payload, String> {
    if let Some(path) = raw.strip_prefix('@') {
        if path.is_empty() {
            return Err("give a file after `@`, e.g. @payload.json".into());
        }
        return Ok(Payload::File(PathBuf::from(path)));
    }
    json_text(raw.to_owned())
        .map(Payload::Text)
        .map_err(|e| format!("not JSON ({e}); give JSON text, or @FILE to read it from a file"))
}

/// `text` if it is one JSON value.
fn json_text(text: String) -> Result<Box<RawValue>, serde_json::Error> {
    RawValue::from_string(text)
}

/// A schedule id that can be a URL path segment: `.` and `..` are resolved away by
/// every HTTP client (and are no schedule's id).
fn addressable_id(id: &str) -> Result<String, String> {
    if id == "." || id == ".." {
        return Err(format!("`{id}` is not a schedule id"));
    }
    Ok(id.to_owned())
}
