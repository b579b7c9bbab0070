//! Flags of the operator commands (`jobs`, `replay`, `destinations`, `subscribers`,
//! `audit`; `events` and `schedules` have files of their own), which talk to a running
//! server over its HTTP API.

use std::fmt;

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args, Subcommand};
use url::Url;

/// The job states a listing can filter on (docs/DESIGN.md §2).
pub const JOB_STATES: [&str; 6] = [
    "scheduled",
    "in_flight",
    "retrying",
    "delivered",
    "dead",
    "cancelled",
];

/// The waiting reasons a listing can filter on (docs/DESIGN.md §3.2 and §5.4): those
/// the job's row decides; the others depend on load at the instant.
pub const FILTERABLE_WAITING_REASONS: [&str; 4] =
    ["scheduled", "backing_off", "subscriber_paused", "in_flight"];

/// The classes of a failed attempt (`last_error.class`, docs/DESIGN.md §3).
pub const ERROR_CLASSES: [&str; 9] = [
    "timeout",
    "connect",
    "http_3xx",
    "http_4xx",
    "http_429",
    "http_5xx",
    "protocol",
    "blocked",
    "secret_unreadable",
];

/// A comma-separated list of job states (`retrying,dead`), each one of
/// [`JOB_STATES`], no empty item; passed on as written.
fn parse_states(raw: &str) -> Result<String, String> {
    for item in raw.split(',') {
        if !JOB_STATES.contains(&item) {
            return Err(format!(
                "`{item}` is not a state; give a comma-separated list of {}",
                JOB_STATES.join(", ")
            ));
        }
    }
    Ok(raw.to_owned())
}

/// The `--help` section of the options every operator command shares.
const SERVER_HEADING: &str = "Server options";

/// How an operator command reaches the server and prints its answers.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Base URL of the running deferhook server.
    #[arg(
        long,
        env = "DEFERHOOK_SERVER",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL",
        value_parser = Quiet(parse_server),
        global = true,
        help_heading = SERVER_HEADING
    )]
    pub server: Url,
    /// API token, sent as `Authorization: Bearer`; prefer the environment variable,
    /// since a flag is visible in the process list.
    #[arg(
        long,
        env = "DEFERHOOK_API_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = Quiet(parse_token),
        global = true,
        help_heading = SERVER_HEADING
    )]
    pub token: Option<Token>,
    /// Print the server's JSON instead of tables.
    #[arg(long, global = true, help_heading = SERVER_HEADING)]
    pub json: bool,
}

/// An API token. Its `Debug` form hides it, so it never reaches a log or a panic message.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The secret itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl ClientArgs {
    /// The token to send, if any: an empty one (e.g. `DEFERHOOK_API_TOKEN=`) is none.
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref().filter(|t| !t.0.is_empty())
    }
}

/// A value parser whose errors never repeat the value (clap's own do): a token or a URL
/// with a password must not end up on a terminal or in a CI log.
#[derive(Clone, Copy)]
struct Quiet<T>(fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Quiet<T> {
    type Value = T;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let name = arg.map_or_else(|| "a value".to_owned(), |arg| format!("--{}", arg.get_id()));
        let refuse = |message: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid {name} (its value is not shown): {message}\n"),
            )
            .with_cmd(command)
        };
        let text = value
            .to_str()
            .ok_or_else(|| refuse("it is not valid UTF-8".into()))?;
        (self.0)(text).map_err(refuse)
    }
}

fn parse_token(raw: &str) -> Result<Token, String> {
    let token = raw.trim();
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err("the token contains spaces or control characters".into());
    }
    Ok(Token(token.to_owned()))
}

fn parse_server(raw: &str) -> Result<Url, String> {
    let url =
        Url::parse(raw).map_err(|e| format!("not a URL ({e}); e.g. http://127.0.0.1:8080"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("must be an http:// or https:// URL with a host".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or a fragment".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "must not carry a user name or password; give the API token with \
                    --token or DEFERHOOK_API_TOKEN"
                .into(),
        );
    }
    Ok(url)
}

/// Checks that `raw` is an RFC 3339 timestamp with an offset; it is sent as written.
pub(crate) fn parse_time(raw: &str) -> Result<String, String> {
    time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        .map(|_| raw.to_owned())
        .map_err(|_| {
            "must be an RFC 3339 timestamp with an offset, e.g. 2026-11-30T12:00:00Z".into()
        })
}

/// `deferhook jobs …`: read jobs of a running server, or retry one now.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// The `jobs` subcommands.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Show one job and its attempt history.
    Get(GetJobArgs),
    /// List jobs, newest first.
    List(Box<ListJobsArgs>),
    /// Make a `retrying` job due now instead of at its next_attempt_at
    /// (`POST /v1/jobs/{id}/retry`; refused for a job in any other state).
    Retry(GetJobArgs),
}

/// `deferhook jobs get` and `deferhook jobs retry`: one job.
#[derive(Debug, Args)]
pub struct GetJobArgs {
    /// The job's id (a UUID).
    pub job_id: String,
}

/// `deferhook jobs list`: all given filters must match.
#[derive(Debug, Args)]
pub struct ListJobsArgs {
    /// Only jobs in one of these states, comma-separated (e.g. `retrying,dead`): scheduled,
    /// in_flight, retrying, delivered, dead, cancelled.
    #[arg(long, value_name = "STATES", value_parser = parse_states)]
    pub state: Option<String>,
    /// Only jobs of this subscriber.
    #[arg(long, value_name = "ID")]
    pub subscriber: Option<String>,
    /// Only jobs waiting for this reason now.
    #[arg(long, value_parser = PossibleValuesParser::new(FILTERABLE_WAITING_REASONS))]
    pub waiting_reason: Option<String>,
    /// Only jobs whose last error has this class.
    #[arg(long, value_parser = PossibleValuesParser::new(ERROR_CLASSES))]
    pub error_class: Option<String>,
    /// Only jobs whose last error has this HTTP status (100–599).
    #[arg(long, value_name = "STATUS", value_parser = clap::value_parser!(u16).range(100..=599))]
    pub last_status: Option<u16>,
    /// Only jobs of this event.
    #[arg(long, value_name = "ID")]
    pub event: Option<String>,
    /// Only jobs of this event type (exactly; no wildcard).
    #[arg(long, value_name = "TYPE")]
    pub event_type: Option<String>,
    /// Only jobs created by this recurring schedule.
    #[arg(long, value_name = "ID")]
    pub schedule_id: Option<String>,
    /// Only dead jobs with this reason (e.g. `deadline_exceeded`, `non_retryable_response`).
    #[arg(long, value_name = "REASON")]
    pub dead_reason: Option<String>,
    /// Only jobs created at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub created_after: Option<String>,
    /// Only jobs created before this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub created_before: Option<String>,
    /// Only jobs that died at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub dead_after: Option<String>,
    /// Only jobs that died before this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub dead_before: Option<String>,
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// `deferhook replay …`: move dead jobs back to `scheduled` at a bounded rate.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: ReplayCommand,
}

/// The `replay` subcommands.
#[derive(Debug, Subcommand)]
pub enum ReplayCommand {
    /// Start a replay of the dead jobs that match, or bring the retrying ones forward
    /// with --select retrying (or count them with --dry-run).
    Create(CreateReplayArgs),
    /// List replays, newest first.
    List(ListReplaysArgs),
    /// Show a replay's progress.
    Status(ReplayStatusArgs),
    /// Stop a running replay; jobs already requeued stay requeued.
    Cancel(ReplayIdArgs),
}

/// What a replay takes (`--select`).
pub const REPLAY_SELECTIONS: [&str; 2] = ["dead", "retrying"];

/// The states a replay listing can filter on.
pub const REPLAY_STATES: [&str; 3] = ["running", "done", "cancelled"];

/// `deferhook replay create`: at least one filter, or `--all`.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("selection")
        .required(true)
        .multiple(true)
        .args(["subscriber", "subscribers", "event", "error_class", "last_status",
               "dead_reason", "dead_after", "dead_before", "all"])
))]
pub struct CreateReplayArgs {
    /// `dead` (the default) requeues dead jobs; `retrying` makes retrying jobs due at
    /// the replay's pace instead of at their next_attempt_at (no attempt spent, their
    /// deadline kept; not with --dead-*, --ttl-ms).
    #[arg(long, value_name = "JOBS", value_parser = PossibleValuesParser::new(REPLAY_SELECTIONS))]
    pub select: Option<String>,
    /// Only jobs of this subscriber.
    #[arg(long, value_name = "ID", conflicts_with = "subscribers")]
    pub subscriber: Option<String>,
    /// Only jobs of these subscribers, comma-separated (at most 1000; an id that names
    /// no subscriber matches nothing).
    #[arg(long, value_name = "IDS", value_delimiter = ',', num_args = 1)]
    pub subscribers: Option<Vec<String>>,
    /// Only jobs whose last error has this class.
    #[arg(long, value_parser = PossibleValuesParser::new(ERROR_CLASSES))]
    pub error_class: Option<String>,
    /// Only jobs whose last error has this HTTP status (100–599).
    #[arg(long, value_name = "STATUS", value_parser = clap::value_parser!(u16).range(100..=599))]
    pub last_status: Option<u16>,
    /// Only dead jobs of this event.
    #[arg(long, value_name = "ID")]
    pub event: Option<String>,
    /// Only dead jobs with this reason (e.g. `deadline_exceeded`).
    #[arg(long, value_name = "REASON")]
    pub dead_reason: Option<String>,
    /// Only jobs that died at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub dead_after: Option<String>,
    /// Only jobs that died before this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub dead_before: Option<String>,
    /// Every job selected (instead of filters).
    #[arg(long, conflicts_with_all = ["subscriber", "subscribers", "event", "error_class",
        "last_status", "dead_reason", "dead_after", "dead_before"])]
    pub all: bool,
    /// Most jobs requeued per second, across all instances (at most the server's
    /// `--max-replay-rate`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: u32,
    /// Most jobs the replay takes, oldest dead (or oldest retrying) first (1 to 100000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_jobs: u32,
    /// Each requeued job's new deadline is its requeue time plus this, in
    /// milliseconds (the server's `--default-ttl-ms` when absent).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: Option<u64>,
    /// Only count the matching jobs; nothing changes.
    #[arg(long)]
    pub dry_run: bool,
    /// Follow the replay's progress until it ends.
    #[arg(long, conflicts_with = "dry_run")]
    pub watch: bool,
}

/// `deferhook replay list`.
#[derive(Debug, Args)]
pub struct ListReplaysArgs {
    /// Only replays in this state.
    #[arg(long, value_parser = PossibleValuesParser::new(REPLAY_STATES))]
    pub state: Option<String>,
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// `deferhook replay status`.
#[derive(Debug, Args)]
pub struct ReplayStatusArgs {
    /// The replay's id.
    pub replay_id: String,
    /// Refresh until the replay is no longer running.
    #[arg(long)]
    pub watch: bool,
}

/// A command naming one replay.
#[derive(Debug, Args)]
pub struct ReplayIdArgs {
    /// The replay's id.
    pub replay_id: String,
}

/// `deferhook destinations …`: the `host:port` destinations subscribers share.
#[derive(Debug, Args)]
pub struct DestinationsArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: DestinationsCommand,
}

/// The `destinations` subcommands.
#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// List destinations in host:port order.
    List(ListDestinationsArgs),
    /// Show one destination: its limit, pause, circuit breaker and last host error.
    Show(DestinationArg),
    /// Change a destination's limit, pause or circuit (the flags combine, at least one);
    /// prints it as it then stands.
    Set(SetDestinationArgs),
}

/// The paging flags of a listing (docs/DESIGN.md §5.1: cursor pages).
#[derive(Debug, Args)]
pub struct PageArgs {
    /// Items per page (the server's default when absent; it takes 1 to 1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Start at this page: the cursor a previous listing printed.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Follow the cursors and list every item.
    #[arg(long)]
    pub all: bool,
}

/// `deferhook destinations list`.
#[derive(Debug, Args)]
pub struct ListDestinationsArgs {
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// A command naming one destination.
#[derive(Debug, Args)]
pub struct DestinationArg {
    /// `host:port`, e.g. `hooks.example.com:443` or `[2001:db8::1]:8443`.
    #[arg(value_name = "HOST:PORT")]
    pub destination: String,
}

/// `deferhook destinations set`: at least one change.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["max_in_flight", "default_limit", "pause", "resume", "circuit"])
))]
pub struct SetDestinationArgs {
    /// Which destination.
    #[command(flatten)]
    pub destination: DestinationArg,
    /// Most requests open to it at once, across all instances (1 to 10000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_in_flight: Option<u32>,
    /// Return its limit to the server's --destination-max-in-flight.
    #[arg(long, conflicts_with = "max_in_flight")]
    pub default_limit: bool,
    /// Hold its deliveries (jobs wait within their deadlines).
    #[arg(long)]
    pub pause: bool,
    /// Let its deliveries go again.
    #[arg(long, conflicts_with = "pause")]
    pub resume: bool,
    /// Hold its circuit `open` or `closed`, or hand it back to the breaker (`auto`,
    /// which starts closed).
    #[arg(long, value_name = "STATE", value_parser = PossibleValuesParser::new(["open", "closed", "auto"]))]
    pub circuit: Option<String>,
}

/// A command naming one subscriber.
#[derive(Debug, Args)]
pub struct SubscriberArg {
    /// The subscriber's id.
    #[arg(value_name = "ID")]
    pub subscriber_id: String,
}

/// `deferhook audit …`: the trail of operator actions.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: AuditCommand,
}

/// The `audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List operator actions, newest first.
    List(ListAuditArgs),
}

/// `deferhook audit list`.
#[derive(Debug, Args)]
pub struct ListAuditArgs {
    /// Only this action (e.g. `job.cancel`, `subscriber.delete`).
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
    /// Only actions on this target (a job, subscriber or replay id, a destination).
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_never_shows_in_debug_output() {
        let token = parse_token("s3cret-value").unwrap();
        assert_eq!(token.expose(), "s3cret-value");
        assert!(!format!("{token:?}").contains("s3cret"));
        assert!(parse_token("with space").is_err());
    }

    #[test]
    fn an_empty_token_is_no_token() {
        use crate::cli::command::{Cli, Command};
        use clap::Parser;
        for (argv, expected) in [
            (&["deferhook", "jobs", "list", "--token", ""][..], None),
            (
                &["deferhook", "jobs", "list", "--token", " t1 "],
                Some("t1"),
            ),
        ] {
            let Command::Jobs(jobs) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("expected jobs")
            };
            assert_eq!(jobs.client.token().map(Token::expose), expected, "{argv:?}");
        }
    }

    #[test]
    fn servers_must_be_http_urls() {
        assert!(parse_server("http://127.0.0.1:8080").is_ok());
        assert!(parse_server("https://deferhook.internal/prefix/").is_ok());
        for bad in ["127.0.0.1:8080", "ftp://host", "http://h/?q=1", "nonsense"] {
            assert!(parse_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_error_classes_offered_are_the_servers() {
        let server: Vec<&str> = crate::domain::policy::ErrorClass::ALL
            .iter()
            .map(|class| class.as_str())
            .collect();
        assert_eq!(ERROR_CLASSES.to_vec(), server);
    }

    #[test]
    fn times_need_an_offset() {
        assert!(parse_time("2026-11-30T12:00:00Z").is_ok());
        assert!(parse_time("2026-11-30T12:00:00+02:00").is_ok());
        assert!(parse_time("2026-11-30T12:00:00").is_err());
        assert!(parse_time("yesterday").is_err());
    }
}

// --- subscribers (issue #16 parts 3 and 8) ---

/// The health statuses a subscriber listing can filter on.
pub const HEALTH_STATUSES: [&str; 3] = ["failing", "paused", "healthy"];

/// `deferhook subscribers …`: subscribers' health, resuming paused ones, deleting one.
#[derive(Debug, Args)]
pub struct SubscribersArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: SubscribersCommand,
}

/// The `subscribers` subcommands.
#[derive(Debug, Subcommand)]
pub enum SubscribersCommand {
    /// List subscribers with their health: in id order, or with --health those of one
    /// status, most failing jobs first.
    List(ListSubscribersArgs),
    /// Resume paused subscribers, by id or by why they were paused; prints how many
    /// were resumed.
    Resume(ResumeSubscribersArgs),
    /// Pause subscribers (reason `operator`), by id or every failing one of a cause;
    /// prints how many were paused and which were selected (resume them by these ids).
    Pause(PauseSubscribersArgs),
    /// Delete a subscriber: its waiting jobs end dead (`subscriber_deleted`), its
    /// history stays readable by job and event id, and its id may be registered again
    /// as a new subscriber.
    Delete(SubscriberArg),
}

/// `deferhook subscribers list`.
#[derive(Debug, Args)]
pub struct ListSubscribersArgs {
    /// Only subscribers with this health, most failing jobs (retrying plus dead in the
    /// last hour) first.
    #[arg(long, value_parser = PossibleValuesParser::new(HEALTH_STATUSES))]
    pub health: Option<String>,
    /// `--limit`, `--cursor`, `--all`.
    #[command(flatten)]
    pub page: PageArgs,
}

/// `deferhook subscribers pause`: exactly one selection.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("selection")
        .required(true)
        .args(["ids", "failing"])
))]
pub struct PauseSubscribersArgs {
    /// These subscribers, comma-separated (1 to 1000, all registered; those already
    /// paused are left as they are).
    #[arg(long, value_name = "IDS", value_delimiter = ',', num_args = 1)]
    pub ids: Vec<String>,
    /// Every failing subscriber (at most 10,000), narrowed by --error-class and
    /// --status: a cause of `subscribers list --health failing`.
    #[arg(long)]
    pub failing: bool,
    /// With --failing: only those whose latest failed attempt has this class
    /// (`timeout`, `connect`, `http_5xx`, …).
    #[arg(long, requires = "failing", conflicts_with = "ids")]
    pub error_class: Option<String>,
    /// With --failing: only those whose latest failed attempt answered this status.
    #[arg(long, requires = "failing", conflicts_with = "ids")]
    pub status: Option<u16>,
}

/// `deferhook subscribers resume`: exactly one selection.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("selection")
        .required(true)
        .args(["ids", "paused_reason"])
))]
pub struct ResumeSubscribersArgs {
    /// These subscribers, comma-separated (1 to 1000, all registered; those not paused
    /// are left as they are).
    #[arg(long, value_name = "IDS", value_delimiter = ',', num_args = 1)]
    pub ids: Vec<String>,
    /// Every subscriber paused for this reason: `gone` (its receiver answered 410) or
    /// `operator`.
    #[arg(long, value_parser = PossibleValuesParser::new(["gone", "operator"]))]
    pub paused_reason: Option<String>,
}
