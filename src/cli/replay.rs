//! `deferhook replay create | list | status | cancel`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::args::{
    CreateReplayArgs, ListReplaysArgs, ReplayArgs, ReplayCommand, ReplayIdArgs, ReplayStatusArgs,
};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::render::{self, or_none};
use super::{pages, progress};

/// A replay as the API shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Replay {
    /// Its id.
    pub id: String,
    /// `running`, `done` or `cancelled`.
    pub state: String,
    /// `dead` or `retrying` (absent from an older server: `dead`).
    #[serde(default)]
    pub selects: Option<String>,
    /// Which jobs it selected.
    #[serde(default)]
    pub filter: Value,
    /// Most jobs it may match.
    pub max_jobs: Option<u64>,
    /// Most jobs requeued per second.
    pub rate_per_second: Option<u64>,
    /// Time each requeued job gets before its new deadline.
    pub ttl_ms: Option<u64>,
    /// Jobs it selected.
    pub matched: u64,
    /// Jobs released so far (dead ones requeued, retrying ones made due).
    pub requeued: u64,
    /// Matched jobs no longer in the selected state when their turn came.
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

    /// `dead` or `retrying`.
    pub fn selects(&self) -> &str {
        self.selects.as_deref().unwrap_or("dead")
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
        ReplayCommand::List(list) => list_replays(&client, &list, json).await,
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

/// `GET /v1/replays`: one page (every page with `--all`), as a table or JSON.
async fn list_replays(
    client: &ApiClient,
    args: &ListReplaysArgs,
    json: bool,
) -> Result<(), CliError> {
    let query: Vec<(&'static str, String)> = [("state", args.state.clone())]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect();
    let listed = pages::read(
        client,
        &["v1", "replays"],
        &query,
        &args.page,
        "the replay list",
    )
    .await?;
    if json {
        return render::emit(&listed.json());
    }
    let replays: Vec<Replay> = listed
        .items
        .iter()
        .map(|r| decode(r, "a replay"))
        .collect::<Result<_, _>>()?;
    let mut text = if replays.is_empty() {
        "No replays.\n".to_owned()
    } else {
        format!("{}\n", replay_table(&replays))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!("More replays: add --cursor {next} (or --all)\n"));
    }
    render::emit(&text)
}

/// Replays as a table, one row each, in the server's order (newest first).
pub fn replay_table(replays: &[Replay]) -> String {
    let rows = replays.iter().map(|r| {
        vec![
            r.id.clone(),
            r.state.clone(),
            r.selects().to_owned(),
            format!("{}/{}", r.done(), r.matched),
            r.requeued.to_string(),
            r.skipped.to_string(),
            or_none(r.rate_per_second.map(|n| format!("{n}/s"))),
            or_none(r.created_at.as_ref()),
            render::filter(&r.filter),
        ]
    });
    render::table(
        &[
            "id",
            "state",
            "selects",
            "done",
            "requeued",
            "skipped",
            "rate",
            "created_at",
            "filter",
        ],
        rows,
    )
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
        let jobs = args.select.as_deref().unwrap_or("dead");
        return render::line(format!(
            "{} {jobs} jobs match (dry run: nothing was changed)",
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
        ("selects", &args.select),
        ("subscriber_id", &args.subscriber),
        ("event_id", &args.event),
        ("error_class", &args.error_class),
        ("dead_reason", &args.dead_reason),
        ("dead_after", &args.dead_after),
        ("dead_before", &args.dead_before),
    ];
    for (name, value) in texts {
        if let Some(value) = value {
            body.insert(name.into(), json!(value));
        }
    }
    if let Some(ids) = &args.subscribers {
        body.insert("subscriber_ids".into(), json!(ids));
    }
    if let Some(status) = args.last_status {
        body.insert("last_status".into(), json!(status));
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
        ("selects", replay.selects().to_owned()),
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
    fn a_slice_sends_its_list_class_status_and_selection() {
        let args = create_args(&[
            "--subscribers",
            "a,b,c",
            "--error-class",
            "http_5xx",
            "--last-status",
            "503",
            "--select",
            "retrying",
            "--rate",
            "20",
            "--max-jobs",
            "1000",
        ]);
        assert_eq!(
            create_body(&args),
            json!({"selects": "retrying", "error_class": "http_5xx",
                   "subscriber_ids": ["a", "b", "c"], "last_status": 503,
                   "max_jobs": 1000, "rate_per_second": 20})
        );
        let status_alone = create_args(&["--last-status", "410", "--rate", "1", "--max-jobs", "1"]);
        assert_eq!(create_body(&status_alone)["last_status"], 410);
        for argv in [
            &[
                "--subscribers",
                "a",
                "--subscriber",
                "b",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ][..],
            &[
                "--all",
                "--subscribers",
                "a",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ],
            &[
                "--all",
                "--error-class",
                "timeout",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ],
            &[
                "--error-class",
                "http_500",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ],
            &["--last-status", "600", "--rate", "1", "--max-jobs", "1"],
            &[
                "--all",
                "--select",
                "zombie",
                "--rate",
                "1",
                "--max-jobs",
                "1",
            ],
        ] {
            let full = ["deferhook", "replay", "create"].iter().chain(argv);
            assert!(Cli::try_parse_from(full).is_err(), "{argv:?}");
        }
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
        assert_eq!(replay.selects(), "dead", "an older server's replay");
    }
}
