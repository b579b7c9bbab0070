//! `deferhook subscribers delete` and `deferhook audit list` against a real server.

use serde_json::Value;

use crate::operator_support::{cli, row, served};

#[test]
fn a_subscriber_is_deleted_and_the_deletion_is_in_the_audit_trail() {
    let served = served(false);
    served.subscriber("acme", "http://127.0.0.1:9/a");
    let job = served.job("acme", "evt-1", 60_000);
    let base = Some(served.base_url.as_str());

    let ran = cli(base, &["subscribers", "delete", "acme"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.starts_with("Deleted subscriber acme at ")
            && ran
                .stdout
                .contains(": 1 waiting job(s) now dead (subscriber_deleted)."),
        "{}",
        ran.stdout
    );
    let (status, read) = served.call("GET", &format!("/v1/jobs/{job}"), None);
    assert_eq!(status, 200);
    assert_eq!(read["dead_reason"], "subscriber_deleted");

    // A second deletion is the server's 404: one message, exit 1.
    let ran = cli(base, &["subscribers", "delete", "acme"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("deferhook: Not Found (404): subscriber `acme` does not exist"),
        "{}",
        ran.stderr
    );
    // A usage error never reaches the server.
    let ran = cli(base, &["subscribers", "delete"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");

    let ran = cli(base, &["audit", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let header = row(&ran.stdout, "at");
    assert_eq!(
        header,
        [
            "at",
            "action",
            "target",
            "actor",
            "status",
            "request_id",
            "server_request_id",
            "parameters"
        ]
    );
    let line = ran
        .stdout
        .lines()
        .find(|line| line.contains("subscriber.delete"))
        .unwrap_or_else(|| panic!("no deletion in:\n{}", ran.stdout));
    let cells: Vec<&str> = line
        .trim_matches(|c| c == '|' || c == ' ')
        .split_whitespace()
        .collect();
    assert_eq!(cells[1..5], ["subscriber.delete", "acme", "local", "200"]);
    // The CLI sends no `x-request-id`: both ids are the server's.
    assert!(uuid::Uuid::parse_str(cells[5]).is_ok(), "{line}");
    assert_eq!(cells[6], cells[5], "{line}");
    assert_eq!(cells[7], "-");
    let ran = cli(
        base,
        &["audit", "list", "--action", "subscriber.delete", "--json"],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["target"], "acme");
    assert_eq!(items[0]["actor"], Value::Null, "no tokens");
    assert_eq!(items[0]["server_request_id"], cells[6]);
}
