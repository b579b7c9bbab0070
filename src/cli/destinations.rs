//! `deferhook destinations list | show | set`: the `host:port` destinations subscribers
//! share, and an operator's limit, pause and circuit override (docs/DESIGN.md §15).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::args::{
    DestinationArg, DestinationsArgs, DestinationsCommand, ListDestinationsArgs, SetDestinationArgs,
};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::pages;
use super::render::{self, or_none};

/// A destination as the API shows it (the fields these commands print).
#[derive(Debug, Deserialize)]
pub struct Destination {
    /// `host:port`.
    pub destination: String,
    /// Subscribers whose URL sends there.
    pub subscribers: u64,
    /// Requests open to it now.
    pub in_flight: u64,
    /// The limit in force.
    pub max_in_flight: u32,
    /// `default` or `operator`.
    pub max_in_flight_source: String,
    /// Held by an operator.
    pub paused: bool,
    /// Its circuit breaker.
    pub circuit: Circuit,
    /// The latest host failure.
    pub last_error: Option<HostError>,
    /// When it was first seen.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
}

/// A destination's circuit breaker.
#[derive(Debug, Deserialize)]
pub struct Circuit {
    /// `closed`, `open` or `half_open`.
    pub state: String,
    /// The operator's override, if any.
    pub forced: Option<String>,
    /// Consecutive host failures.
    pub consecutive_failures: u32,
    /// When it last opened.
    pub opened_at: Option<String>,
    /// When the probe may go.
    pub retry_at: Option<String>,
    /// The current cool-down, in milliseconds.
    pub cooldown_ms: u64,
}

/// The latest host failure at a destination.
#[derive(Debug, Deserialize)]
pub struct HostError {
    /// When the attempt ended.
    pub at: String,
    /// The failure class.
    pub class: String,
    /// The HTTP status, if any.
    pub status: Option<u16>,
    /// A short account.
    pub reason: Option<String>,
}

impl Destination {
    /// `128 (default)` or `4 (operator)`.
    fn limit(&self) -> String {
        format!("{} ({})", self.max_in_flight, self.max_in_flight_source)
    }

    /// `closed`, or `open (forced)` for an operator's override.
    fn circuit(&self) -> String {
        match self.circuit.forced {
            Some(_) => format!("{} (forced)", self.circuit.state),
            None => self.circuit.state.clone(),
        }
    }

    /// `timeout at …`, `http_5xx 503 at …: reason`.
    fn last_error(&self) -> Option<String> {
        self.last_error.as_ref().map(|e| {
            let mut text = e.class.clone();
            if let Some(status) = e.status {
                text.push_str(&format!(" {status}"));
            }
            text.push_str(&format!(" at {}", e.at));
            if let Some(reason) = &e.reason {
                text.push_str(&format!(": {reason}"));
            }
            text
        })
    }
}

/// Runs a `destinations` subcommand.
pub async fn run(args: DestinationsArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        DestinationsCommand::List(list) => list_destinations(&client, &list, json).await?,
        DestinationsCommand::Show(show) => show_destination(&client, &show, json).await?,
        DestinationsCommand::Set(set) => set_destination(&client, &set, json).await?,
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The text `destinations list` prints.
async fn list_destinations(
    client: &ApiClient,
    args: &ListDestinationsArgs,
    json: bool,
) -> Result<String, CliError> {
    let segments = ["v1", "destinations"];
    let listed = pages::read(client, &segments, &[], &args.page, "the destinations").await?;
    if json {
        return Ok(listed.json());
    }
    let destinations: Vec<Destination> = listed
        .items
        .iter()
        .map(|d| decode(d, "a destination"))
        .collect::<Result<_, _>>()?;
    let mut text = if destinations.is_empty() {
        "No destinations yet (a subscriber's URL makes one).\n".to_owned()
    } else {
        format!("{}\n", destination_table(&destinations))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!(
            "More destinations: add --cursor {next} (or --all)\n"
        ));
    }
    Ok(text)
}

/// The text `destinations show` prints.
async fn show_destination(
    client: &ApiClient,
    args: &DestinationArg,
    json: bool,
) -> Result<String, CliError> {
    let value = client
        .get(&["v1", "destinations", &args.destination], &[])
        .await?;
    shown(&value, json)
}

/// The text `destinations set` prints: the destination as it then stands.
async fn set_destination(
    client: &ApiClient,
    args: &SetDestinationArgs,
    json: bool,
) -> Result<String, CliError> {
    let path = ["v1", "destinations", args.destination.destination.as_str()];
    let value = client.put(&path, &set_body(args)).await?;
    shown(&value, json)
}

fn shown(value: &Value, json: bool) -> Result<String, CliError> {
    if json {
        return Ok(format!("{}\n", render::json(value)));
    }
    let destination: Destination = decode(value, "the destination")?;
    Ok(format!("{}\n", destination_fields(&destination)))
}

/// The body of `PUT /v1/destinations/{destination}`: only the changes asked for.
fn set_body(args: &SetDestinationArgs) -> Value {
    let mut body = Map::new();
    if let Some(n) = args.max_in_flight {
        body.insert("max_in_flight".into(), json!(n));
    } else if args.default_limit {
        body.insert("max_in_flight".into(), Value::Null);
    }
    if args.pause || args.resume {
        body.insert("paused".into(), json!(args.pause));
    }
    if let Some(circuit) = &args.circuit {
        body.insert("circuit".into(), json!(circuit));
    }
    Value::Object(body)
}

/// A destination as a table of its fields.
pub fn destination_fields(d: &Destination) -> String {
    let c = &d.circuit;
    render::fields(&[
        ("destination", d.destination.clone()),
        ("subscribers", d.subscribers.to_string()),
        ("in_flight", d.in_flight.to_string()),
        ("max_in_flight", d.limit()),
        ("paused", d.paused.to_string()),
        ("circuit", d.circuit()),
        ("consecutive_failures", c.consecutive_failures.to_string()),
        ("opened_at", or_none(c.opened_at.as_ref())),
        ("retry_at", or_none(c.retry_at.as_ref())),
        ("cooldown_ms", c.cooldown_ms.to_string()),
        ("last_error", or_none(d.last_error())),
        ("created_at", d.created_at.clone()),
        ("updated_at", d.updated_at.clone()),
    ])
}

/// Destinations as a table, one row each.
pub fn destination_table(destinations: &[Destination]) -> String {
    let rows = destinations.iter().map(|d| {
        vec![
            d.destination.clone(),
            d.subscribers.to_string(),
            d.in_flight.to_string(),
            d.limit(),
            d.paused.to_string(),
            d.circuit(),
            or_none(d.last_error.as_ref().map(|e| e.class.clone())),
        ]
    });
    render::table(
        &[
            "destination",
            "subscribers",
            "in_flight",
            "max_in_flight",
            "paused",
            "circuit",
            "last_error",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::{Cli, Command};
    use clap::Parser;

    fn parse(argv: &[&str]) -> Result<SetDestinationArgs, clap::Error> {
        let argv = ["deferhook", "destinations", "set", "h.example:443"]
            .iter()
            .chain(argv);
        let Command::Destinations(destinations) = Cli::try_parse_from(argv)?.command else {
            panic!("expected destinations")
        };
        let DestinationsCommand::Set(set) = destinations.command else {
            panic!("expected set")
        };
        Ok(set)
    }

    #[test]
    fn the_body_carries_only_the_changes_asked_for() {
        for (argv, body) in [
            (&["--max-in-flight", "4"][..], json!({"max_in_flight": 4})),
            (&["--default-limit"], json!({"max_in_flight": null})),
            (&["--pause"], json!({"paused": true})),
            (
                &["--resume", "--circuit", "auto"],
                json!({"paused": false, "circuit": "auto"}),
            ),
        ] {
            assert_eq!(set_body(&parse(argv).unwrap()), body, "{argv:?}");
        }
    }

    #[test]
    fn a_change_is_required_and_opposites_exclude_each_other() {
        for argv in [
            &[][..],
            &["--pause", "--resume"],
            &["--max-in-flight", "4", "--default-limit"],
            &["--max-in-flight", "0"],
            &["--max-in-flight", "10001"],
            &["--circuit", "sideways"],
        ] {
            assert!(parse(argv).is_err(), "{argv:?}");
        }
    }
}
