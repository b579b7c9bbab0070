//! `deferhook replay create --subscribers … --error-class … --last-status … --select …`
//! and `deferhook replay list`: what they send and print, against a stand-in server
//! answering the replay API's shapes, then end to end against the real server.

use std::time::Duration;

use serde_json::{Value, json};

use crate::operator_support::{FakeServer, cli, cli_within, refusing_receiver, served};

/// The JSON body of a recorded request.
fn body_of(request: &str) -> Value {
    let (_, body) = request.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).expect("a JSON body")
}

/// A replay view as the server answers it.
fn replay(id: &str, state: &str, selects: &str, filter: Value, counts: (u64, u64, u64)) -> Value {
    let (matched, requeued, skipped) = counts;
    json!({
        "id": id, "state": state, "selects": selects, "filter": filter,
        "max_jobs": 1000, "rate_per_second": 20, "ttl_ms": 3_600_000,
        "matched": matched, "requeued": requeued, "skipped": skipped,
        "created_at": "2026-11-30T12:00:00.000Z", "updated_at": "2026-11-30T12:00:01.000Z",
        "finished_at": null,
    })
}

#[test]
fn a_slice_is_sent_as_one_replay() {
    let fake = FakeServer::start("200 OK", "application/json", r#"{"matched": 97}"#);
    let ran = cli(
        Some(&fake.base),
        &[
            "replay",
            "create",
            "--subscribers",
            "a,b,c",
            "--error-class",
            "http_5xx",
            "--last-status",
            "503",
            "--rate",
            "20",
            "--max-jobs",
            "1000",
            "--dry-run",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "97 dead jobs match (dry run: nothing was changed)\n"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].starts_with("POST /v1/replays HTTP/1.1"));
    assert_eq!(
        body_of(&requests[0]),
        json!({"subscriber_ids": ["a", "b", "c"], "error_class": "http_5xx",
               "last_status": 503, "max_jobs": 1000, "rate_per_second": 20, "dry_run": true})
    );
}

#[test]
fn select_retrying_brings_retrying_jobs_forward() {
    let filter = json!({"subscriber_id": "billing", "all": false});
    let body = replay("r2", "running", "retrying", filter, (4, 0, 0));
    let fake = FakeServer::start("202 Accepted", "application/json", &body.to_string());
    let ran = cli(
        Some(&fake.base),
        &[
            "replay",
            "create",
            "--select",
            "retrying",
            "--subscriber",
            "billing",
            "--rate",
            "5",
            "--max-jobs",
            "10",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "replay r2: running, 0 requeued and 0 skipped of 4 matched\n"
    );
    assert_eq!(
        body_of(&fake.requests()[0]),
        json!({"selects": "retrying", "subscriber_id": "billing", "max_jobs": 10,
               "rate_per_second": 5})
    );
    let counted = FakeServer::start("200 OK", "application/json", r#"{"matched": 4}"#);
    let ran = cli(
        Some(&counted.base),
        &[
            "replay",
            "create",
            "--select",
            "retrying",
            "--all",
            "--rate",
            "5",
            "--max-jobs",
            "10",
            "--dry-run",
        ],
    );
    assert_eq!(
        ran.stdout,
        "4 retrying jobs match (dry run: nothing was changed)\n"
    );
}

#[test]
fn list_prints_a_table_newest_first_and_the_next_cursor() {
    let ids: Vec<String> = (1..=8).map(|n| format!("s{n}")).collect();
    let page = json!({
        "items": [
            replay("r3", "running", "dead",
                json!({"subscriber_ids": ids, "last_status": 503, "all": false}), (100, 40, 2)),
            replay("r2", "done", "retrying", json!({"all": true}), (3, 3, 0)),
        ],
        "next_cursor": "cjI",
    });
    let fake = FakeServer::start("200 OK", "application/json", &page.to_string());
    let ran = cli(
        Some(&fake.base),
        &["replay", "list", "--state", "running", "--limit", "2"],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let request = &fake.requests()[0];
    assert!(
        request.starts_with("GET /v1/replays?state=running&limit=2 HTTP/1.1"),
        "{request}"
    );
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let header = lines.iter().position(|l| l.contains("selects")).unwrap();
    let r3 = lines.iter().position(|l| l.contains("r3")).unwrap();
    let r2 = lines.iter().position(|l| l.contains("r2")).unwrap();
    assert!(header < r3 && r3 < r2, "{}", ran.stdout);
    for text in [
        "running",
        "42/100",
        "20/s",
        "subscriber_ids=s1,s2,s3,s4,s5 (+3 more)",
        "last_status=503",
    ] {
        assert!(lines[r3].contains(text), "{text}: {}", lines[r3]);
    }
    for text in ["done", "retrying", "3/3", "all"] {
        assert!(lines[r2].contains(text), "{text}: {}", lines[r2]);
    }
    assert_eq!(
        lines.last(),
        Some(&"More replays: add --cursor cjI (or --all)")
    );

    let json_run = cli(Some(&fake.base), &["replay", "list", "--json"]);
    assert_eq!(json_run.code, Some(0), "{json_run:?}");
    let printed: Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(printed["items"][1]["id"], "r2");
    assert_eq!(printed["next_cursor"], "cjI");

    let empty = FakeServer::start(
        "200 OK",
        "application/json",
        r#"{"items":[],"next_cursor":null}"#,
    );
    let ran = cli(Some(&empty.base), &["replay", "list"]);
    assert_eq!(ran.stdout, "No replays.\n");
    let bad = cli(Some(&empty.base), &["replay", "list", "--state", "paused"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
}

#[test]
fn a_slice_replays_on_the_real_server_and_is_listed() {
    let served = served(true);
    let receiver = refusing_receiver();
    let mut dead = Vec::new();
    for s in ["a", "b", "c"] {
        served.subscriber(s, &receiver);
        let id = served.job(s, &format!("{s}-evt"), 0);
        served.wait_state(&id, "dead");
        dead.push(id);
    }
    let base = served.base_url.as_str();
    // The receiver answers 400 to everything: each job died on an http_4xx 400.
    let slice = [
        "replay",
        "create",
        "--subscribers",
        "a,b,ghost",
        "--error-class",
        "http_4xx",
        "--last-status",
        "400",
        "--rate",
        "50",
        "--max-jobs",
        "100",
    ];
    let ran = cli_within(
        base,
        &[&slice[..], &["--watch"]].concat(),
        Duration::from_secs(20),
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let last = ran.stdout.lines().last().unwrap_or_default().to_owned();
    assert!(
        last.ends_with(": done, 2 requeued and 0 skipped of 2 matched"),
        "{}",
        ran.stdout
    );
    let (_, c) = served.call("GET", &format!("/v1/jobs/{}", dead[2]), None);
    assert_eq!(
        (c["state"].as_str(), c["attempts"].as_u64()),
        (Some("dead"), Some(1)),
        "c was not in the slice"
    );
    let none = cli(
        Some(base),
        &[
            "replay",
            "create",
            "--subscribers",
            "a,b",
            "--last-status",
            "503",
            "--rate",
            "1",
            "--max-jobs",
            "1",
            "--dry-run",
        ],
    );
    assert_eq!(
        none.stdout,
        "0 dead jobs match (dry run: nothing was changed)\n"
    );

    let listed = cli(Some(base), &["replay", "list", "--state", "done"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let row = listed
        .stdout
        .lines()
        .find(|l| l.contains("subscriber_ids="))
        .unwrap_or_else(|| panic!("{}", listed.stdout));
    for text in [
        "done",
        "dead",
        "2/2",
        "50/s",
        "subscriber_ids=a,b,ghost, error_class=http_4xx, last_status=400",
    ] {
        assert!(row.contains(text), "{text}: {row}");
    }
    let running = cli(Some(base), &["replay", "list", "--state", "running"]);
    assert_eq!(running.stdout, "No replays.\n");
    let refused = cli(
        Some(base),
        &[
            "replay",
            "create",
            "--select",
            "retrying",
            "--subscriber",
            "a",
            "--ttl-ms",
            "60000",
            "--rate",
            "1",
            "--max-jobs",
            "1",
        ],
    );
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("ttl_ms"), "{}", refused.stderr);
}
