//! `deferhook events show .` / `..`: `.` and `..` are event ids (1–256 visible ASCII
//! characters), but no HTTP client can send them as a path segment (RFC 3986
//! dot-segments, encoded or not: `/v1/events/..` is `/v1/events`). The command refuses
//! them as a usage error naming the listing that shows their jobs, instead of printing
//! another resource (found by a review of issue #16).

use serde_json::json;

use crate::operator_support::{cli, served};

#[test]
fn events_show_refuses_a_dot_segment_and_names_the_way_to_its_jobs() {
    let served = served(true);
    served.subscriber("acme", "http://127.0.0.1:9/never");
    for event in ["..", "."] {
        let (status, created) = served.call(
            "POST",
            "/v1/jobs",
            Some(json!({"subscriber_id": "acme", "event_id": event, "payload": {}})),
        );
        assert_eq!(status, 201, "{created}");
    }
    let base = Some(served.base_url.as_str());
    for event in ["..", "."] {
        let ran = cli(base, &["events", "show", event, "--json"]);
        assert_eq!(ran.code, Some(2), "{event}: {ran:?}");
        assert!(ran.stdout.is_empty(), "nothing else printed: {ran:?}");
        assert!(
            ran.stderr
                .contains(&format!("deferhook jobs list --event {event} --all")),
            "{ran:?}"
        );
        let listed = cli(base, &["jobs", "list", "--event", event, "--json"]);
        assert_eq!(listed.code, Some(0), "{listed:?}");
        let page: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
        assert_eq!(page["items"][0]["event_id"], event, "{page}");
    }
}
