//! `deferhook events list | show` against a real server: an event fanned out to a
//! subscriber whose receiver refuses it (dead at once) and to a paused one (held back).

use serde_json::{Value, json};

use crate::operator_support::{cli, refusing_receiver, row, served};

#[test]
fn events_are_listed_and_summed_up() {
    let served = served(true);
    served.subscriber("billing", &refusing_receiver());
    served.subscriber("paused", "http://127.0.0.1:9/never");
    let (status, _) = served.call(
        "PATCH",
        "/v1/subscribers/paused",
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 200);
    let fan_out = json!({
        "event_id": "invoice.paid:7",
        "payload": {"n": 7},
        "subscriber_ids": ["paused", "billing"],
    });
    let (status, created) = served.call("POST", "/v1/events", Some(fan_out));
    assert_eq!(status, 201, "{created}");
    let billing = created["items"][1]["id"].as_str().unwrap().to_owned();
    served.wait_state(&billing, "dead");
    let base = Some(served.base_url.as_str());

    let ran = cli(base, &["events", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let event = row(&ran.stdout, "invoice.paid:7");
    // event, affected, then scheduled, in_flight, retrying, delivered, dead, cancelled.
    assert_eq!(
        event[1..8],
        ["2", "1", "0", "0", "0", "1", "0"],
        "{}",
        ran.stdout
    );

    let ran = cli(base, &["events", "list", "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(listed["items"][0]["event_id"], "invoice.paid:7");
    assert_eq!(listed["items"][0]["affected"], 2);

    let ran = cli(
        base,
        &["events", "list", "--affected-since", "2999-01-01T00:00:00Z"],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let event = row(&ran.stdout, "invoice.paid:7");
    assert_eq!(event[1], "1", "the dead letter is older: {}", ran.stdout);

    let ran = cli(base, &["events", "show", "invoice.paid:7"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..7],
        [
            "event: invoice.paid:7",
            "jobs: 1 scheduled, 0 in_flight, 0 retrying, 0 delivered, 1 dead, 0 cancelled",
            "waiting: subscriber_paused 1",
            "dead: non_retryable_response 1",
            "errors: http_4xx 1",
            "retry advice: after_resume 1, no 1",
            "Failing subscribers (2):",
        ],
        "{text}"
    );
    assert_eq!(
        row(text, "billing")[1..5],
        ["dead", "non_retryable_response", "http_4xx", "400"],
        "{text}"
    );
    assert_eq!(row(text, "billing")[5], "no", "{text}");
    assert_eq!(
        row(text, "paused")[1..5],
        ["scheduled", "subscriber_paused", "-", "after_resume"],
        "{text}"
    );

    let ran = cli(base, &["events", "show", "invoice.paid:7", "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(shown["failing_subscribers"]["total"], 2);
}

#[test]
fn unknown_events_and_bad_instants_are_refused() {
    let served = served(false);
    let base = Some(served.base_url.as_str());
    let ran = cli(base, &["events", "show", "never-sent"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        "deferhook: Not Found (404): no job has event id never-sent"
    );
    let ran = cli(base, &["events", "list", "--affected-since", "yesterday"]);
    assert_eq!(ran.code, Some(2), "a usage error: {ran:?}");
    assert!(ran.stderr.contains("--affected-since"), "{}", ran.stderr);
    let ran = cli(base, &["events", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.starts_with("No affected events"),
        "{}",
        ran.stdout
    );
}
