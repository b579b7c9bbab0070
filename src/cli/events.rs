//! `deferhook events list | show`: which events are affected, and one event's summary
//! with its failing subscribers and whether a retry would help (docs/DESIGN.md §5.10).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::event_args::{EventsArgs, EventsCommand, ListEventsArgs, ShowEventArgs};
use super::pages;
use super::render::{self, or_none};

/// Jobs per state, as the API shows them.
#[derive(Debug, Deserialize)]
pub struct JobCounts {
    scheduled: u64,
    in_flight: u64,
    retrying: u64,
    delivered: u64,
    dead: u64,
    cancelled: u64,
}

impl JobCounts {
    /// The counts in state order.
    fn cells(&self) -> [u64; 6] {
        [
            self.scheduled,
            self.in_flight,
            self.retrying,
            self.delivered,
            self.dead,
            self.cancelled,
        ]
    }
}

/// The states, in the order of [`JobCounts::cells`].
const STATES: [&str; 6] = [
    "scheduled",
    "in_flight",
    "retrying",
    "delivered",
    "dead",
    "cancelled",
];

/// An affected event as the API shows it.
#[derive(Debug, Deserialize)]
pub struct AffectedEvent {
    event_id: String,
    jobs: JobCounts,
    affected: u64,
    created_at: String,
}

/// An event's summary as the API shows it.
#[derive(Debug, Deserialize)]
pub struct EventSummary {
    event_id: String,
    jobs: JobCounts,
    waiting_reasons: Map<String, Value>,
    dead_reasons: Map<String, Value>,
    error_classes: Map<String, Value>,
    retry_advice: Map<String, Value>,
    failing_subscribers: FailingSubscribers,
}

/// The first failing subscribers and their number.
#[derive(Debug, Deserialize)]
pub struct FailingSubscribers {
    items: Vec<FailingSubscriber>,
    total: u64,
}

/// A failing subscriber.
#[derive(Debug, Deserialize)]
pub struct FailingSubscriber {
    subscriber_id: String,
    job_id: String,
    state: String,
    waiting_reason: Option<String>,
    dead_reason: Option<String>,
    last_error: Option<Failure>,
    retry_advice: Option<Advice>,
}

/// A job's last failure.
#[derive(Debug, Deserialize)]
pub struct Failure {
    class: String,
    status: Option<u16>,
}

/// A retry advice.
#[derive(Debug, Deserialize)]
pub struct Advice {
    verdict: String,
    at: Option<String>,
}

/// Runs an `events` subcommand.
pub async fn run(args: EventsArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        EventsCommand::List(list) => list_events(&client, &list, json).await?,
        EventsCommand::Show(show) => show_event(&client, &show, json).await?,
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The text `events list` prints.
async fn list_events(
    client: &ApiClient,
    args: &ListEventsArgs,
    json: bool,
) -> Result<String, CliError> {
    let mut query = Vec::new();
    if let Some(since) = &args.affected_since {
        query.push(("affected_since", since.clone()));
    }
    let segments = ["v1", "events"];
    let listed = pages::read(client, &segments, &query, &args.page, "the events").await?;
    if json {
        return Ok(listed.json());
    }
    let events: Vec<AffectedEvent> = listed
        .items
        .iter()
        .map(|e| decode(e, "an event"))
        .collect::<Result<_, _>>()?;
    let mut text = if events.is_empty() {
        let since = args.affected_since.as_deref().unwrap_or("the last hour");
        format!("No affected events (dead since {since}, retrying or held back).\n")
    } else {
        format!("{}\n", event_table(&events))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!("More events: add --cursor {next} (or --all)\n"));
    }
    Ok(text)
}

/// Affected events as a table, one row each.
pub fn event_table(events: &[AffectedEvent]) -> String {
    let mut header = vec!["event", "affected"];
    header.extend(STATES);
    header.push("created_at");
    let rows = events.iter().map(|e| {
        let mut row = vec![e.event_id.clone(), e.affected.to_string()];
        row.extend(e.jobs.cells().iter().map(u64::to_string));
        row.push(e.created_at.clone());
        row
    });
    render::table(&header, rows)
}

/// The text `events show` prints.
async fn show_event(
    client: &ApiClient,
    args: &ShowEventArgs,
    json: bool,
) -> Result<String, CliError> {
    let value = client.get(&["v1", "events", &args.event_id], &[]).await?;
    if json {
        return Ok(format!("{}\n", render::json(&value)));
    }
    let summary: EventSummary = decode(&value, "the event")?;
    Ok(summary_text(&summary))
}

/// An event's summary: its counts as short lines, then its failing subscribers.
pub fn summary_text(s: &EventSummary) -> String {
    let states: Vec<String> = STATES
        .iter()
        .zip(s.jobs.cells())
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    let mut text = format!("event: {}\n", s.event_id);
    text.push_str(&format!("jobs: {}\n", states.join(", ")));
    for (name, counts) in [
        ("waiting", &s.waiting_reasons),
        ("dead", &s.dead_reasons),
        ("errors", &s.error_classes),
        ("retry advice", &s.retry_advice),
    ] {
        text.push_str(&format!("{name}: {}\n", counted(counts)));
    }
    let failing = &s.failing_subscribers;
    if failing.total == 0 {
        text.push_str("No failing subscribers.\n");
        return text;
    }
    text.push_str(&format!("Failing subscribers ({}):\n", failing.total));
    text.push_str(&format!("{}\n", failing_table(&failing.items)));
    let shown = failing.items.len() as u64;
    if failing.total > shown {
        text.push_str(&format!(
            "{} more: deferhook jobs list --event {} --state retrying,dead --all\n",
            failing.total - shown,
            s.event_id
        ));
    }
    text
}

/// `name n, name n`, or `-` when empty.
fn counted(counts: &Map<String, Value>) -> String {
    if counts.is_empty() {
        return render::NONE.to_owned();
    }
    counts
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Failing subscribers as a table, one row each.
fn failing_table(items: &[FailingSubscriber]) -> String {
    let rows = items.iter().map(|f| {
        let error = f.last_error.as_ref().map(|e| match e.status {
            Some(status) => format!("{} {status}", e.class),
            None => e.class.clone(),
        });
        let advice = f.retry_advice.as_ref().map(|a| match &a.at {
            Some(at) => format!("{} (at {at})", a.verdict),
            None => a.verdict.clone(),
        });
        vec![
            f.subscriber_id.clone(),
            f.state.clone(),
            or_none(f.waiting_reason.as_ref().or(f.dead_reason.as_ref())),
            or_none(error),
            or_none(advice),
            f.job_id.clone(),
        ]
    });
    render::table(
        &[
            "subscriber",
            "state",
            "reason",
            "last_error",
            "retry",
            "job",
        ],
        rows,
    )
}
