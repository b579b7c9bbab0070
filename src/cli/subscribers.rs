//! `deferhook subscribers list | resume`: which subscribers fail and why, and resuming
//! the paused ones (docs/DESIGN.md §5.3).

use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{
    ListSubscribersArgs, ResumeSubscribersArgs, SubscribersArgs, SubscribersCommand,
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
    let mut text = if subscribers.is_empty() {
        match &args.health {
            Some(health) => format!("No {health} subscribers.\n"),
            None => "No subscribers yet.\n".to_owned(),
        }
    } else {
        format!("{}\n", subscriber_table(&subscribers))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!(
            "More subscribers: add --cursor {next} (or --all)\n"
        ));
    }
    Ok(text)
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
