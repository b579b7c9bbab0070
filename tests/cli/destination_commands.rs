//! `deferhook destinations list | show | set` against a real server.

use serde_json::Value;

use crate::operator_support::{cli, row, served};

#[test]
fn destinations_are_listed_shown_and_set() {
    let served = served(false);
    served.subscriber("a", "http://127.0.0.1:9/a");
    served.subscriber("b", "http://127.0.0.1:9/b");
    served.subscriber("c", "http://[::1]:9/c");
    let base = Some(served.base_url.as_str());

    let default =
        deferhook::domain::destination_state::DEFAULT_DESTINATION_MAX_IN_FLIGHT.to_string();
    let ran = cli(base, &["destinations", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let shared = row(&ran.stdout, "127.0.0.1:9");
    assert_eq!(
        shared[1..],
        ["2", "0", &default, "(default)", "false", "closed", "-"]
    );
    assert_eq!(row(&ran.stdout, "[::1]:9")[1], "1", "{}", ran.stdout);

    let ran = cli(
        base,
        &[
            "destinations",
            "set",
            "[::1]:9",
            "--max-in-flight",
            "4",
            "--pause",
            "--circuit",
            "open",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert_eq!(row(text, "destination")[1..], ["[::1]:9"]);
    assert_eq!(row(text, "max_in_flight")[1..], ["4", "(operator)"]);
    assert_eq!(row(text, "paused")[1..], ["true"]);
    assert_eq!(row(text, "circuit")[1..], ["open", "(forced)"]);

    let ran = cli(base, &["destinations", "show", "[::1]:9", "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let shown: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(shown["max_in_flight"], 4);
    assert_eq!(shown["paused"], true);
    assert_eq!(shown["circuit"]["forced"], "open");

    let ran = cli(
        base,
        &[
            "destinations",
            "set",
            "[::1]:9",
            "--default-limit",
            "--resume",
            "--circuit",
            "auto",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        row(&ran.stdout, "max_in_flight")[1..],
        [default.as_str(), "(default)"]
    );
    assert_eq!(row(&ran.stdout, "paused")[1..], ["false"]);
    assert_eq!(row(&ran.stdout, "circuit")[1..], ["closed"]);

    // Errors are the server's, one message and exit 1.
    let ran = cli(base, &["destinations", "show", "127.0.0.1:10"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("deferhook: Not Found (404): destination `127.0.0.1:10`"),
        "{}",
        ran.stderr
    );
    let ran = cli(base, &["destinations", "set", "no-port", "--pause"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains("\n  destination: must name the port"),
        "{}",
        ran.stderr
    );
    // A usage error never reaches the server.
    let ran = cli(base, &["destinations", "set", "127.0.0.1:9"]);
    assert_eq!(ran.code, Some(2), "{ran:?}");
}
