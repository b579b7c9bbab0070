//! `deferhook subscribers list [--health …] | resume …` against a real server.

use serde_json::{Value, json};

use crate::operator_support::{cli, refusing_receiver, row, served};

#[test]
fn subscribers_are_listed_with_their_health_and_resumed() {
    let served = served(true);
    served.subscriber("bad", &refusing_receiver());
    served.subscriber("calm", "http://127.0.0.1:9/calm");
    let job = served.job("bad", "e1", 0);
    served.wait_state(&job, "dead");
    let base = Some(served.base_url.as_str());

    let ran = cli(base, &["subscribers", "list", "--health", "failing"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let bad = row(&ran.stdout, "bad");
    assert_eq!(
        bad[1..6],
        ["failing", "1", "0", "1", "http_4xx/400"],
        "{}",
        ran.stdout
    );
    assert_eq!(bad[7], "no", "a 400 is not worth retrying: {}", ran.stdout);
    assert!(!ran.stdout.contains("calm"), "{}", ran.stdout);
    // The causes come first, the one holding the most jobs first.
    assert!(
        ran.stdout.starts_with("Causes, most jobs first:\n"),
        "{}",
        ran.stdout
    );
    let cause = row(&ran.stdout, "http_4xx/400");
    assert_eq!(cause[1..], ["1", "1", "bad"], "{}", ran.stdout);

    let ran = cli(base, &["subscribers", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(row(&ran.stdout, "bad")[1], "failing");
    assert_eq!(
        row(&ran.stdout, "calm")[1..],
        ["healthy", "0", "0", "0", "-", "-", "-"]
    );

    let ran = cli(
        base,
        &["subscribers", "list", "--health", "failing", "--json"],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(listed["items"][0]["id"], "bad");
    assert_eq!(listed["items"][0]["health"]["failing_jobs"], 1);
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["causes"][0]["status"], 400, "{listed}");

    let (status, _) = served.call(
        "PATCH",
        "/v1/subscribers/calm",
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 200);
    let ran = cli(base, &["subscribers", "list", "--health", "paused"]);
    assert_eq!(row(&ran.stdout, "calm")[1..3], ["paused", "(operator)"]);

    let ran = cli(
        base,
        &["subscribers", "resume", "--paused-reason", "operator"],
    );
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (Some(0), "Resumed 1 subscriber(s).\n")
    );
    let ran = cli(base, &["subscribers", "resume", "--ids", "calm,bad"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (Some(0), "Resumed 0 subscriber(s).\n")
    );
    let ran = cli(base, &["subscribers", "resume", "--ids", "bad", "--json"]);
    let answer: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(answer, json!({"resumed": 0}));

    // The server's refusal is one message and exit 1; a bad flag is clap's, exit 2.
    let ran = cli(base, &["subscribers", "resume", "--ids", "nobody"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stderr.contains("(404)"), "{}", ran.stderr);
    assert!(ran.stderr.contains("nobody"), "{}", ran.stderr);
    let ran = cli(base, &["subscribers", "list", "--health", "sick"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
    let ran = cli(base, &["subscribers", "resume"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");

    // Pause in bulk: every failing subscriber of a cause, with the ids to undo it.
    let ran = cli(
        base,
        &[
            "subscribers",
            "pause",
            "--failing",
            "--error-class",
            "http_4xx",
        ],
    );
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (
            Some(0),
            "Paused 1 of 1 subscriber(s) selected.\nUndo: deferhook subscribers resume --ids bad\n"
        )
    );
    let ran = cli(base, &["subscribers", "list", "--health", "paused"]);
    assert_eq!(row(&ran.stdout, "bad")[1..3], ["paused", "(operator)"]);
    let ran = cli(base, &["subscribers", "pause", "--ids", "calm", "--json"]);
    let answer: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(answer, json!({"paused": 1, "subscriber_ids": ["calm"]}));
    let ran = cli(base, &["subscribers", "pause", "--ids", "a", "--failing"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
}
