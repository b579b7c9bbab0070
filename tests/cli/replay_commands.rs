//! `deferhook replay create | status | cancel`: what they send and print, against a
//! stand-in server answering the replay API's shapes.

use serde_json::{Value, json};

use crate::operator_support::{Canned, FakeServer, cli};

fn view(state: &str, matched: u64, requeued: u64, skipped: u64) -> Canned {
    let body = json!({
        "id": "r1", "state": state,
        "filter": {"subscriber_id": "billing", "event_id": null, "dead_reason": "deadline_exceeded",
                   "dead_after": null, "dead_before": null, "all": false},
        "max_jobs": 100, "rate_per_second": 5, "ttl_ms": 3_600_000,
        "matched": matched, "requeued": requeued, "skipped": skipped,
        "created_at": "2026-11-30T12:00:00.000Z", "updated_at": "2026-11-30T12:00:01.000Z",
        "finished_at": if state == "running" { Value::Null } else { json!("2026-11-30T12:00:02.000Z") },
    });
    ("200 OK", "application/json", body.to_string())
}

/// The JSON body of a recorded request.
fn body_of(request: &str) -> Value {
    let (_, body) = request.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).expect("a JSON body")
}

#[test]
fn a_dry_run_sends_the_selection_and_prints_the_count() {
    let fake = FakeServer::start("200 OK", "application/json", r#"{"matched": 42}"#);
    let ran = cli(
        Some(&fake.base),
        &[
            "replay",
            "create",
            "--subscriber",
            "billing",
            "--dead-reason",
            "deadline_exceeded",
            "--dead-before",
            "2026-11-30T00:00:00Z",
            "--rate",
            "5",
            "--max-jobs",
            "100",
            "--dry-run",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "42 dead jobs match (dry run: nothing was changed)\n"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].starts_with("POST /v1/replays HTTP/1.1"),
        "{}",
        requests[0]
    );
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{}",
        requests[0]
    );
    assert_eq!(
        body_of(&requests[0]),
        json!({"subscriber_id": "billing", "dead_reason": "deadline_exceeded",
               "dead_before": "2026-11-30T00:00:00Z", "max_jobs": 100, "rate_per_second": 5,
               "dry_run": true})
    );
}

#[test]
fn create_prints_the_new_replay() {
    let (_, _, body) = view("running", 7, 0, 0);
    let fake = FakeServer::start("202 Accepted", "application/json", &body);
    let ran = cli(
        Some(&fake.base),
        &[
            "replay",
            "create",
            "--all",
            "--rate",
            "2",
            "--max-jobs",
            "10",
            "--ttl-ms",
            "60000",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "replay r1: running, 0 requeued and 0 skipped of 7 matched\n"
    );
    assert_eq!(
        body_of(&fake.requests()[0]),
        json!({"all": true, "max_jobs": 10, "rate_per_second": 2, "ttl_ms": 60000})
    );
}

#[test]
fn status_watch_without_a_tty_prints_a_line_per_change_until_the_end() {
    let fake = FakeServer::answering(vec![
        view("running", 3, 0, 0),
        view("running", 3, 0, 0),
        view("running", 3, 1, 1),
        view("done", 3, 2, 1),
    ]);
    let ran = cli(Some(&fake.base), &["replay", "status", "r1", "--watch"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout.lines().collect::<Vec<_>>(),
        [
            "running: 0/3 (0 requeued, 0 skipped)",
            "running: 2/3 (1 requeued, 1 skipped)",
            "done: 3/3 (2 requeued, 1 skipped)",
            "replay r1: done, 2 requeued and 1 skipped of 3 matched",
        ]
    );
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        4,
        "it stops polling once the replay is done"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.starts_with("GET /v1/replays/r1 "))
    );
}

#[test]
fn create_watch_json_prints_one_view_per_line() {
    let fake = FakeServer::answering(vec![
        (
            "202 Accepted",
            "application/json",
            view("running", 2, 0, 0).2,
        ),
        view("cancelled", 2, 1, 0),
    ]);
    let ran = cli(
        Some(&fake.base),
        &[
            "replay",
            "create",
            "--event",
            "e1",
            "--rate",
            "1",
            "--max-jobs",
            "5",
            "--watch",
            "--json",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let states: Vec<Value> = ran
        .stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("one JSON view per line")["state"].clone()
        })
        .collect();
    assert_eq!(states, ["running", "cancelled"]);
}

#[test]
fn status_prints_the_replay_as_fields() {
    let fake = FakeServer::answering(vec![view("done", 3, 2, 1)]);
    let ran = cli(Some(&fake.base), &["replay", "status", "r1"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    for (name, value) in [
        ("state", "done"),
        (
            "filter",
            "subscriber_id=billing, dead_reason=deadline_exceeded",
        ),
        ("matched", "3"),
        ("requeued", "2"),
        ("skipped", "1"),
        ("rate_per_second", "5"),
        ("finished_at", "2026-11-30T12:00:02.000Z"),
    ] {
        let line = text
            .lines()
            .find(|l| {
                l.trim_start_matches(['|', ' '])
                    .starts_with(&format!("{name} "))
            })
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"));
        assert!(line.contains(value), "{name}: {line}");
    }
}

#[test]
fn cancel_prints_the_resulting_state_and_a_404_is_an_error() {
    let fake = FakeServer::answering(vec![view("cancelled", 3, 1, 0)]);
    let ran = cli(Some(&fake.base), &["replay", "cancel", "r1"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "replay r1: cancelled, 1 requeued and 0 skipped of 3 matched\n"
    );
    assert!(fake.requests()[0].starts_with("POST /v1/replays/r1/cancel HTTP/1.1"));

    let missing = FakeServer::start(
        "404 Not Found",
        "application/problem+json",
        r#"{"type":"about:blank","title":"Not Found","status":404,"detail":"replay r9 does not exist"}"#,
    );
    let ran = cli(Some(&missing.base), &["replay", "cancel", "r9"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        "deferhook: Not Found (404): replay r9 does not exist"
    );
}

#[test]
fn watch_rides_out_a_transient_503() {
    let unavailable = (
        "503 Service Unavailable",
        "application/problem+json",
        r#"{"type":"about:blank","title":"Service Unavailable","status":503}"#.to_owned(),
    );
    let fake = FakeServer::answering(vec![
        view("running", 2, 0, 0),
        unavailable.clone(),
        unavailable,
        view("done", 2, 2, 0),
    ]);
    let ran = cli(Some(&fake.base), &["replay", "status", "r1", "--watch"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout.lines().last(),
        Some("replay r1: done, 2 requeued and 0 skipped of 2 matched")
    );
    assert_eq!(fake.requests().len(), 4);
}

#[test]
fn watch_gives_up_on_an_error_that_will_not_pass() {
    let fake = FakeServer::answering(vec![
        view("running", 2, 0, 0),
        (
            "404 Not Found",
            "application/problem+json",
            r#"{"type":"about:blank","title":"Not Found","status":404,"detail":"replay r1 does not exist"}"#.to_owned(),
        ),
    ]);
    let ran = cli(Some(&fake.base), &["replay", "status", "r1", "--watch"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        "deferhook: Not Found (404): replay r1 does not exist"
    );
    assert_eq!(fake.requests().len(), 2);
}
