//! `deferhook replay create | status | cancel`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::args::{CreateReplayArgs, ReplayArgs, ReplayCommand, ReplayIdArgs, ReplayStatusArgs};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::progress;
use super::render::{self, or_none};

/// A replay as the API shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Replay {
    /// Its id.
    pub id: String,
    /// `running`, `done` or `cancelled`.
    pub state: String,
    /// Which dead jobs it selected.
    #[serde(default)]
    pub filter: Value,
    /// Most jobs it may match.
    pub max_jobs: Option<u64>,
    /// Most jobs requeued per second.
    pub rate_per_second: Option<u64>,
    /// Time each requeued job gets before its new deadline.
    pub ttl_ms: Option<u64>,
    /// Dead jobs it selected.
    pub matched: u64,
    /// Jobs moved back to `scheduled` so far.
    pub requeued: u64,
    /// Matched jobs that were no longer dead when their turn came.
    #[serde(default)]
    pub skipped: u64,
    /// When it was created.
    pub created_at: Option<String>,
    /// When it last changed.
    pub updated_at: Option<String>,
    /// When it ended.
    pub finished_at: Option<String>,
}

impl Replay {
    /// Jobs it has dealt with: requeued or skipped.
    pub fn done(&self) -> u64 {
        self.requeued + self.skipped
    }

    /// Whether it is still moving jobs.
    pub fn is_running(&self) -> bool {
        self.state == "running"
    }

    /// One line: its id, state and counts.
    pub fn summary(&self) -> String {
        format!(
            "replay {}: {}, {} requeued and {} skipped of {} matched",
            self.id, self.state, self.requeued, self.skipped, self.matched
        )
    }
}

/// Runs a `replay` subcommand.
pub async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let result = match args.command {
        ReplayCommand::Create(create) => create_replay(&client, &create, json).await,
        ReplayCommand::Status(status) => replay_status(&client, &status, json).await,
        ReplayCommand::Cancel(cancel) => cancel_replay(&client, &cancel, json).await,
    };
    Ok(quiet_when_closed(result)?)
}

/// `GET /v1/replays/{id}`: its fields, or its progress until it ends.
async fn replay_status(
    client: &ApiClient,
    args: &ReplayStatusArgs,
    json: bool,
) -> Result<(), CliError> {
    let value = client.get(&["v1", "replays", &args.replay_id], &[]).await?;
    if args.watch {
        progress::watch(client, value, json).await?;
        Ok(())
    } else if json {
        render::line(render::json(&value))
    } else {
        let replay: Replay = decode(&value, "the replay")?;
        render::line(replay_fields(&replay))
    }
}

/// `POST /v1/replays/{id}/cancel`: the resulting state.
async fn cancel_replay(
    client: &ApiClient,
    args: &ReplayIdArgs,
    json: bool,
) -> Result<(), CliError> {
    let value = client
        .post(&["v1", "replays", &args.replay_id, "cancel"], None)
        .await?;
    if json {
        render::line(render::json(&value))
    } else {
        let replay: Replay = decode(&value, "the replay")?;
        render::line(replay.summary())
    }
}

/// `POST /v1/replays`, then the count (dry run), the new replay, or its progress.
async fn create_replay(
    client: &ApiClient,
    args: &CreateReplayArgs,
    json: bool,
) -> Result<(), CliError> {
    let value = client
        .post(&["v1", "replays"], Some(&create_body(args)))
        .await?;
    if args.dry_run {
        if json {
            return render::line(render::json(&value));
        }
        let count: DryRun = decode(&value, "the dry run")?;
        return render::line(format!(
            "{} dead jobs match (dry run: nothing was changed)",
            count.matched
        ));
    }
    if !json {
        let replay: Replay = decode(&value, "the replay")?;
        render::line(replay.summary())?;
    }
    if args.watch {
        progress::watch(client, value, json).await?;
        Ok(())
    } else if json {
        render::line(render::json(&value))
    } else {
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
struct DryRun {
    matched: u64,
}

/// The body of `POST /v1/replays`: only the fields that were given.
fn create_body(args: &CreateReplayArgs) -> Value {
    let mut body = Map::new();
    let texts = [
        ("subscriber_id", &args.subscriber),
        ("event_id", &args.event),
        ("dead_reason", &args.dead_reason),
        ("dead_after", &args.dead_after),
        ("dead_before", &args.dead_before),
    ];
    for (name, value) in texts {
        if let Some(value) = value {
            body.insert(name.into(), json!(value));
        }
    }
    if args.all {
        body.insert("all".into(), json!(true));
    }
    body.insert("max_jobs".into(), json!(args.max_jobs));
    body.insert("rate_per_second".into(), json!(args.rate));
    if let Some(ttl_ms) = args.ttl_ms {
        body.insert("ttl_ms".into(), json!(ttl_ms));
    }
    if args.dry_run {
        body.insert("dry_run".into(), json!(true));
    }
    Value::Object(body)
}

/// A replay as a table of its fields.
pub fn replay_fields(replay: &Replay) -> String {
    render::fields(&[
        ("id", replay.id.clone()),
        ("state", replay.state.clone()),
        ("filter", render::filter(&replay.filter)),
        ("matched", replay.matched.to_string()),
        ("requeued", replay.requeued.to_string()),
        ("skipped", replay.skipped.to_string()),
        ("max_jobs", or_none(replay.max_jobs)),
        ("rate_per_second", or_none(replay.rate_per_second)),
        ("ttl_ms", or_none(replay.ttl_ms)),
        ("created_at", or_none(replay.created_at.as_ref())),
        ("updated_at", or_none(replay.updated_at.as_ref())),
        ("finished_at", or_none(replay.finished_at.as_ref())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::{Cli, Command};
    use clap::Parser;

    fn create_args(argv: &[&str]) -> CreateReplayArgs {
        let argv = ["deferhook", "replay", "create"].iter().chain(argv);
        let Command::Replay(replay) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("expected replay")
        };
        let ReplayCommand::Create(create) = replay.command else {
            panic!("expected create")
        };
        create
    }

    #[test]
    fn the_body_carries_only_the_given_fields() {
        let args = create_args(&[
            "--subscriber",
            "billing",
            "--dead-after",
            "2026-11-30T00:00:00Z",
            "--rate",
            "5",
            "--max-jobs",
            "100",
        ]);
        assert_eq!(
            create_body(&args),
            json!({"subscriber_id": "billing", "dead_after": "2026-11-30T00:00:00Z",
                   "max_jobs": 100, "rate_per_second": 5})
        );
        let args = create_args(&[
            "--all",
            "--rate",
            "1",
            "--max-jobs",
            "1",
            "--dry-run",
            "--ttl-ms",
            "60000",
        ]);
        assert_eq!(
            create_body(&args),
            json!({"all": true, "max_jobs": 1, "rate_per_second": 1, "ttl_ms": 60000, "dry_run": true})
        );
    }

    #[test]
    fn a_selection_is_required_and_all_excludes_filters() {
        for argv in [
            &["--rate", "1", "--max-jobs", "1"][..],
            &[
                "--all",
                "--subscriber",
                "s",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ],
            &["--all", "--max-jobs", "1"],
            &["--all", "--rate", "0", "--max-jobs", "1"],
            &["--all", "--rate", "1", "--max-jobs", "100001"],
            &[
                "--all",
                "--rate",
                "1",
                "--max-jobs",
                "1",
                "--dry-run",
                "--watch",
            ],
        ] {
            let full = ["deferhook", "replay", "create"].iter().chain(argv);
            assert!(Cli::try_parse_from(full).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn a_summary_names_the_counts() {
        let replay: Replay = serde_json::from_value(json!({
            "id": "r1", "state": "running", "filter": {"all": true}, "matched": 10,
            "requeued": 3, "skipped": 1, "created_at": "2026-11-30T12:00:00.000Z"
        }))
        .unwrap();
        assert_eq!(replay.done(), 4);
        assert_eq!(
            replay.summary(),
            "replay r1: running, 3 requeued and 1 skipped of 10 matched"
        );
        let table = replay_fields(&replay);
        assert!(table.contains("all"), "{table}");
        assert!(table.contains("finished_at"), "{table}");
    }
}
