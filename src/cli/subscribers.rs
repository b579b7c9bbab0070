//! `deferhook subscribers list | pause | resume`: which subscribers fail and why (the
//! causes first), pausing them in bulk and resuming the paused ones (docs/DESIGN.md
//! §5.3).

use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{
    ListSubscribersArgs, PauseSubscribersArgs, ResumeSubscribersArgs, SubscribersArgs,
    SubscribersCommand,
};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::pages;
use super::render::{self, or_none};

/// A subscriber as the API shows it (the fields `list` prints).
#[derive(Debug, Deserialize)]
pub struct Subscriber {
    /// Its id.
    pub id: String,
    /// Its health.
    pub health: Health,
}

/// A subscriber's health.
#[derive(Debug, Deserialize)]
pub struct Health {
    /// `healthy`, `failing` or `paused`.
    pub status: String,
    /// When it entered that status.
    pub since: Option<String>,
    /// Its latest failed attempt.
    pub last_error: Option<HealthError>,
    /// Its non-terminal jobs.
    pub jobs: HealthJobs,
    /// Its jobs dead in the last hour.
    pub dead_last_hour: u64,
    /// Retrying plus dead in the last hour.
    pub failing_jobs: u64,
    /// Why it is paused.
    pub paused_reason: Option<String>,
    /// Whether a retry would help.
    pub retry_advice: Option<Advice>,
}

/// A subscriber's latest failed attempt.
#[derive(Debug, Deserialize)]
pub struct HealthError {
    /// Its class.
    pub class: Option<String>,
    /// Its HTTP status.
    pub status: Option<u16>,
}

/// A subscriber's non-terminal jobs.
#[derive(Debug, Deserialize)]
pub struct HealthJobs {
    /// `retrying` jobs.
    pub retrying: u64,
}

/// Whether a retry would help.
#[derive(Debug, Deserialize)]
pub struct Advice {
    /// `yes`, `no`, `after_resume`, `not_before` or `replay`.
    pub verdict: String,
}

impl Subscriber {
    /// `failing`, or `paused (gone)`.
    fn status(&self) -> String {
        match &self.health.paused_reason {
            Some(reason) => format!("{} ({reason})", self.health.status),
            None => self.health.status.clone(),
        }
    }

    /// `http_5xx/503`, `timeout`.
    fn last_error(&self) -> Option<String> {
        self.health.last_error.as_ref().map(|e| {
            let class = e.class.clone().unwrap_or_else(|| "-".into());
            match e.status {
                Some(status) => format!("{class}/{status}"),
                None => class,
            }
        })
    }
}

/// Runs a `subscribers` subcommand.
pub async fn run(args: SubscribersArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        SubscribersCommand::List(list) => list_subscribers(&client, &list, json).await?,
        SubscribersCommand::Resume(resume) => resume_subscribers(&client, &resume, json).await?,
        SubscribersCommand::Pause(pause) => pause_subscribers(&client, &pause, json).await?,
        SubscribersCommand::Delete(delete) => {
            super::subscriber_delete::delete_subscriber(&client, &delete, json).await?
        }
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The text `subscribers list` prints.
async fn list_subscribers(
    client: &ApiClient,
    args: &ListSubscribersArgs,
    json: bool,
) -> Result<String, CliError> {
    let mut query = Vec::new();
    if let Some(health) = &args.health {
        query.push(("health", health.clone()));
    }
    let segments = ["v1", "subscribers"];
    let listed = pages::read(client, &segments, &query, &args.page, "the subscribers").await?;
    if json {
        return Ok(listed.json());
    }
    let subscribers: Vec<Subscriber> = listed
        .items
        .iter()
        .map(|s| decode(s, "a subscriber"))
        .collect::<Result<_, _>>()?;
    let causes: Vec<CauseRow> = match &listed.causes {
        Some(causes) => decode(causes, "the causes")?,
        None => Vec::new(),
    };
    let mut text = if causes.is_empty() {
        String::new()
    } else {
        format!("Causes, most jobs first:\n{}\n\n", cause_table(&causes))
    };
    if subscribers.is_empty() {
        match &args.health {
            Some(health) => text.push_str(&format!("No {health} subscribers.\n")),
            None => text.push_str("No subscribers yet.\n"),
        }
    } else {
        text.push_str(&format!("{}\n", subscriber_table(&subscribers)));
    }
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!(
            "More subscribers: add --cursor {next} (or --all)\n"
        ));
    }
    Ok(text)
}

/// One cause of `GET /v1/subscribers?health=failing`.
#[derive(Debug, Deserialize)]
pub struct CauseRow {
    /// The latest failed attempt's class.
    pub error_class: Option<String>,
    /// Its HTTP status.
    pub status: Option<u16>,
    /// `gone` for the subscribers paused after a 410.
    pub paused_reason: Option<String>,
    /// How many subscribers.
    pub subscribers: u64,
    /// The jobs they hold.
    pub failing_jobs: u64,
    /// Those holding the most.
    pub top: Vec<CauseSubscriber>,
}

/// A subscriber of a cause.
#[derive(Debug, Deserialize)]
pub struct CauseSubscriber {
    /// Its id.
    pub id: String,
}

/// The causes as a table: `http_5xx/500`, `http_4xx/410 (paused: gone)`, with the
/// subscribers, their jobs and the first few ids.
pub fn cause_table(causes: &[CauseRow]) -> String {
    let rows = causes.iter().map(|c| {
        let class = c.error_class.clone().unwrap_or_else(|| "-".into());
        let mut cause = match c.status {
            Some(status) => format!("{class}/{status}"),
            None => class,
        };
        if let Some(reason) = &c.paused_reason {
            cause.push_str(&format!(" (paused: {reason})"));
        }
        let mut first: Vec<&str> = c.top.iter().take(3).map(|s| s.id.as_str()).collect();
        if c.subscribers > first.len() as u64 {
            first.push("…");
        }
        vec![
            cause,
            c.subscribers.to_string(),
            c.failing_jobs.to_string(),
            first.join(", "),
        ]
    });
    render::table(
        &["cause", "subscribers", "failing_jobs", "most jobs held by"],
        rows,
    )
}

/// Subscribers as a table, one row each.
pub fn subscriber_table(subscribers: &[Subscriber]) -> String {
    let rows = subscribers.iter().map(|s| {
        let h = &s.health;
        vec![
            s.id.clone(),
            s.status(),
            h.failing_jobs.to_string(),
            h.jobs.retrying.to_string(),
            h.dead_last_hour.to_string(),
            or_none(s.last_error()),
            or_none(h.since.as_ref()),
            or_none(h.retry_advice.as_ref().map(|a| a.verdict.clone())),
        ]
    });
    render::table(
        &[
            "id",
            "status",
            "failing_jobs",
            "retrying",
            "dead_last_hour",
            "last_error",
            "since",
            "advice",
        ],
        rows,
    )
}

/// The body of `POST /v1/subscribers/pause`: the one selection given.
fn pause_body(args: &PauseSubscribersArgs) -> Value {
    if !args.failing {
        return json!({ "subscriber_ids": args.ids });
    }
    let mut body = json!({ "health": "failing" });
    if let Some(class) = &args.error_class {
        body["error_class"] = json!(class);
    }
    if let Some(status) = args.status {
        body["status"] = json!(status);
    }
    body
}

/// The text `subscribers pause` prints: how many were paused, and which were selected.
async fn pause_subscribers(
    client: &ApiClient,
    args: &PauseSubscribersArgs,
    json: bool,
) -> Result<String, CliError> {
    let answer = client
        .post(&["v1", "subscribers", "pause"], Some(&pause_body(args)))
        .await?;
    if json {
        return Ok(format!("{}\n", render::json(&answer)));
    }
    #[derive(Deserialize)]
    struct Paused {
        paused: u64,
        subscriber_ids: Vec<String>,
    }
    let paused: Paused = decode(&answer, "the pause")?;
    let mut text = format!(
        "Paused {} of {} subscriber(s) selected.\n",
        paused.paused,
        paused.subscriber_ids.len()
    );
    if !paused.subscriber_ids.is_empty() {
        text.push_str(&format!(
            "Undo: deferhook subscribers resume --ids {}\n",
            paused.subscriber_ids.join(",")
        ));
    }
    Ok(text)
}

/// The body of `POST /v1/subscribers/resume`: the one selection given.
fn resume_body(args: &ResumeSubscribersArgs) -> Value {
    match &args.paused_reason {
        Some(reason) => json!({ "paused_reason": reason }),
        None => json!({ "subscriber_ids": args.ids }),
    }
}

/// The text `subscribers resume` prints: how many were resumed.
async fn resume_subscribers(
    client: &ApiClient,
    args: &ResumeSubscribersArgs,
    json: bool,
) -> Result<String, CliError> {
    let answer = client
        .post(&["v1", "subscribers", "resume"], Some(&resume_body(args)))
        .await?;
    if json {
        return Ok(format!("{}\n", render::json(&answer)));
    }
    #[derive(Deserialize)]
    struct Resumed {
        resumed: u64,
    }
    let resumed: Resumed = decode(&answer, "the resume")?;
    Ok(format!("Resumed {} subscriber(s).\n", resumed.resumed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::{Cli, Command};
    use clap::Parser;

    fn parse(argv: &[&str]) -> Result<ResumeSubscribersArgs, clap::Error> {
        let argv = ["deferhook", "subscribers", "resume"].iter().chain(argv);
        let Command::Subscribers(subscribers) = Cli::try_parse_from(argv)?.command else {
            panic!("expected subscribers")
        };
        let SubscribersCommand::Resume(resume) = subscribers.command else {
            panic!("expected resume")
        };
        Ok(resume)
    }

    fn parse_pause(argv: &[&str]) -> Result<PauseSubscribersArgs, clap::Error> {
        let argv = ["deferhook", "subscribers", "pause"].iter().chain(argv);
        let Command::Subscribers(subscribers) = Cli::try_parse_from(argv)?.command else {
            panic!("expected subscribers")
        };
        let SubscribersCommand::Pause(pause) = subscribers.command else {
            panic!("expected pause")
        };
        Ok(pause)
    }

    #[test]
    fn pause_sends_exactly_one_selection() {
        assert_eq!(
            pause_body(&parse_pause(&["--ids", "a,b"]).unwrap()),
            json!({"subscriber_ids": ["a", "b"]})
        );
        assert_eq!(
            pause_body(&parse_pause(&["--failing", "--error-class", "timeout"]).unwrap()),
            json!({"health": "failing", "error_class": "timeout"})
        );
        assert_eq!(
            pause_body(&parse_pause(&["--failing", "--status", "503"]).unwrap()),
            json!({"health": "failing", "status": 503})
        );
        for argv in [
            &[][..],
            &["--ids", "a", "--failing"],
            &["--ids", "a", "--error-class", "timeout"],
        ] {
            assert!(parse_pause(argv).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn resume_sends_exactly_one_selection() {
        assert_eq!(
            resume_body(&parse(&["--ids", "a,b,c"]).unwrap()),
            json!({"subscriber_ids": ["a", "b", "c"]})
        );
        assert_eq!(
            resume_body(&parse(&["--paused-reason", "gone"]).unwrap()),
            json!({"paused_reason": "gone"})
        );
        for argv in [
            &[][..],
            &["--ids", "a", "--paused-reason", "gone"],
            &["--paused-reason", "tired"],
        ] {
            assert!(parse(argv).is_err(), "{argv:?}");
        }
    }
}
