//! `deferhook replay` against the real server: jobs die at a receiver on 127.0.0.1 that
//! refuses every webhook (400, so one attempt each), then are replayed.

use std::time::Duration;

use serde_json::Value;

use crate::app::BlockingApp;
use crate::operator_support::{cli, cli_within, refusing_receiver, served};

/// How long a `--watch` may take: the replays here need well under a second.
const WATCH_LIMIT: Duration = Duration::from_secs(20);

/// Creates `count` jobs for `subscriber`, due now, and waits until each is dead.
fn dead_jobs(served: &BlockingApp, subscriber: &str, count: usize) -> Vec<String> {
    let ids: Vec<String> = (0..count)
        .map(|n| served.job(subscriber, &format!("{subscriber}-evt-{n}"), 0))
        .collect();
    for id in &ids {
        served.wait_state(id, "dead");
    }
    ids
}

/// The replay id in `replay <id>: …`.
fn replay_id(line: &str) -> String {
    line.strip_prefix("replay ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("not a replay line: {line}"))
}

/// The value in the fields table row named `name`.
fn field(text: &str, name: &str) -> String {
    text.lines()
        .map(|l| l.trim_matches(|c| c == '|' || c == ' '))
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .map(|value| value.trim().to_owned())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn a_replay_requeues_what_it_matched_and_watch_follows_it_to_the_end() {
    let served = served(true);
    let receiver = refusing_receiver();
    served.subscriber("billing", &receiver);
    served.subscriber("search", &receiver);
    let billing = dead_jobs(&served, "billing", 3);
    let search = dead_jobs(&served, "search", 1);
    let base = served.base_url.as_str();
    let selection = [
        "replay",
        "create",
        "--subscriber",
        "billing",
        "--dead-reason",
        "non_retryable_response",
        "--rate",
        "50",
        "--max-jobs",
        "100",
    ];

    let dry = cli(Some(base), &[&selection[..], &["--dry-run"]].concat());
    assert_eq!(dry.code, Some(0), "{dry:?}");
    assert_eq!(
        dry.stdout,
        "3 dead jobs match (dry run: nothing was changed)\n"
    );
    let (_, job) = served.call("GET", &format!("/v1/jobs/{}", billing[0]), None);
    assert_eq!(job["state"], "dead", "a dry run changes nothing");

    let ran = cli_within(base, &[&selection[..], &["--watch"]].concat(), WATCH_LIMIT);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let id = replay_id(lines[0]);
    assert_eq!(
        lines[0],
        format!("replay {id}: running, 0 requeued and 0 skipped of 3 matched")
    );
    assert_eq!(
        lines[lines.len() - 2],
        "done: 3/3 (3 requeued, 0 skipped)",
        "{}",
        ran.stdout
    );
    assert_eq!(
        lines[lines.len() - 1],
        format!("replay {id}: done, 3 requeued and 0 skipped of 3 matched")
    );

    let status = cli(Some(base), &["replay", "status", &id]);
    assert_eq!(status.code, Some(0), "{status:?}");
    assert_eq!(field(&status.stdout, "state"), "done");
    assert_eq!(field(&status.stdout, "requeued"), "3");
    assert_eq!(
        field(&status.stdout, "filter"),
        "subscriber_id=billing, dead_reason=non_retryable_response"
    );
    assert_eq!(field(&status.stdout, "rate_per_second"), "50");

    let json = cli(Some(base), &["replay", "status", &id, "--json"]);
    let view: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(view["id"], id.as_str());
    assert_eq!(view["matched"], 3);

    // The other subscriber's dead job was not selected.
    let (_, job) = served.call("GET", &format!("/v1/jobs/{}", search[0]), None);
    assert_eq!(
        (job["state"].as_str(), job["attempts"].as_u64()),
        (Some("dead"), Some(1))
    );
}

#[test]
fn cancel_stops_a_running_replay() {
    let served = served(true);
    served.subscriber("billing", &refusing_receiver());
    dead_jobs(&served, "billing", 6);
    let base = Some(served.base_url.as_str());

    // One job a second: six take five seconds, far longer than the cancel below.
    let created = cli(
        base,
        &[
            "replay",
            "create",
            "--all",
            "--rate",
            "1",
            "--max-jobs",
            "100",
        ],
    );
    assert_eq!(created.code, Some(0), "{created:?}");
    let id = replay_id(created.stdout.trim_end());

    let cancelled = cli(base, &["replay", "cancel", &id]);
    assert_eq!(cancelled.code, Some(0), "{cancelled:?}");
    let line = cancelled.stdout.trim_end();
    assert!(
        line.starts_with(&format!("replay {id}: cancelled, ")),
        "{line}"
    );
    assert!(line.ends_with(" skipped of 6 matched"), "{line}");

    // Watching a replay that has ended prints it once and returns at once.
    let watched = cli_within(
        &served.base_url,
        &["replay", "status", &id, "--watch"],
        WATCH_LIMIT,
    );
    assert_eq!(watched.code, Some(0), "{watched:?}");
    assert_eq!(
        watched.stdout.lines().last(),
        Some(line),
        "{}",
        watched.stdout
    );
}

#[test]
fn the_real_server_errors_are_rendered() {
    let served = served(false);
    let base = Some(served.base_url.as_str());

    let too_fast = cli(
        base,
        &[
            "replay",
            "create",
            "--all",
            "--rate",
            "100000",
            "--max-jobs",
            "1",
        ],
    );
    assert_eq!(too_fast.code, Some(1), "{too_fast:?}");
    assert_eq!(
        too_fast.stderr.lines().collect::<Vec<_>>(),
        [
            "deferhook: Unprocessable Entity (422)",
            "  rate_per_second: must be from 1 to 100 (the server's --max-replay-rate)",
        ]
    );

    let missing = "01a22dbd-0000-7000-8000-000000000000";
    for command in ["status", "cancel"] {
        let ran = cli(base, &["replay", command, missing]);
        assert_eq!(ran.code, Some(1), "{ran:?}");
        assert_eq!(
            ran.stderr.trim_end(),
            format!("deferhook: Not Found (404): replay {missing} does not exist")
        );
    }

    let nothing = cli(
        base,
        &[
            "replay",
            "create",
            "--all",
            "--rate",
            "1",
            "--max-jobs",
            "1",
        ],
    );
    assert_eq!(nothing.code, Some(0), "{nothing:?}");
    assert!(
        nothing
            .stdout
            .ends_with(": done, 0 requeued and 0 skipped of 0 matched\n"),
        "{}",
        nothing.stdout
    );
}
