//! `deferhook jobs get | list | retry` against a real server, and how every operator command
//! reports errors: problem details, an unreachable server, usage errors, the token.

use serde_json::Value;

use crate::operator_support::{
    FakeServer, clean_command, cli, refusing_receiver, row, run, served,
};

#[test]
fn jobs_get_shows_a_dead_job_and_its_attempt_history() {
    let served = served(true);
    served.subscriber("billing", &refusing_receiver());
    let id = served.job("billing", "invoice.paid:1", 0);
    served.wait_state(&id, "dead");

    let ran = cli(Some(&served.base_url), &["jobs", "get", &id]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert_eq!(row(text, "id")[1], id);
    assert_eq!(row(text, "state")[1..], ["dead"]);
    assert_eq!(row(text, "subscriber")[1..], ["billing"]);
    assert_eq!(row(text, "event")[1..], ["invoice.paid:1"]);
    assert_eq!(row(text, "dead_reason")[1..], ["non_retryable_response"]);
    assert_eq!(row(text, "waiting_reason")[1..], ["-"]);
    assert_eq!(row(text, "dead_detail")[1..], ["-"]);
    assert_eq!(
        row(text, "retry_advice")[1],
        "no:",
        "a 400 is not worth retrying: {text}"
    );
    assert_eq!(
        row(text, "last_error")[1..3],
        ["http_4xx", "400:"],
        "{text}"
    );
    assert!(text.contains("Attempts (1):"), "{text}");
    let attempt = row(text, "1");
    assert_eq!(attempt[2..5], ["terminal", "400", "http_4xx"], "{text}");

    let ran = cli(Some(&served.base_url), &["jobs", "get", &id, "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let printed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(printed["job"]["id"], id.as_str());
    assert_eq!(printed["job"]["state"], "dead");
    assert_eq!(printed["attempts"][0]["number"], 1);
    assert_eq!(printed["attempts"][0]["status"], 400);
}

#[test]
fn jobs_get_of_a_job_without_attempts_says_so() {
    let served = served(false);
    served.subscriber("s", "http://127.0.0.1:9/never");
    let id = served.job("s", "later", 3_600_000);
    let ran = cli(Some(&served.base_url), &["jobs", "get", &id]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(row(&ran.stdout, "state")[1..], ["scheduled"]);
    assert_eq!(row(&ran.stdout, "waiting_reason")[1..], ["scheduled"]);
    assert!(ran.stdout.contains("No attempts yet."), "{}", ran.stdout);
}

#[test]
fn an_unknown_job_is_a_one_line_404_and_exit_1() {
    let served = served(false);
    let missing = "01a22db5-0000-7000-8000-000000000000";
    let ran = cli(Some(&served.base_url), &["jobs", "get", missing]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr.trim_end(),
        format!("deferhook: Not Found (404): job {missing} does not exist")
    );
}

#[test]
fn a_422_names_each_invalid_field() {
    let served = served(false);
    let ran = cli(Some(&served.base_url), &["jobs", "list", "--limit", "5000"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.lines().collect::<Vec<_>>(),
        [
            "deferhook: Unprocessable Entity (422)",
            "  limit: must be an integer from 1 to 1000"
        ],
        "{}",
        ran.stderr
    );
    let ran = cli(Some(&served.base_url), &["jobs", "get", "not-a-uuid"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains("  job_id: must be a UUID"),
        "{}",
        ran.stderr
    );
}

/// The rows of a job table, without its header.
fn list_rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|line| line.starts_with('|'))
        .map(|line| line.trim_matches(|c| c == '|' || c == ' '))
        .filter(|line| !line.starts_with("id "))
        .map(|line| line.split_whitespace().collect())
        .collect()
}

#[test]
fn jobs_list_filters_pages_and_follows_cursors() {
    let served = served(false);
    served.subscriber("a", "http://127.0.0.1:9/a");
    served.subscriber("b", "http://127.0.0.1:9/b");
    let a: Vec<String> = (1..=3)
        .map(|n| served.job("a", &format!("evt-{n}"), 3_600_000))
        .collect();
    let b = served.job("b", "evt-1", 3_600_000);
    let base = Some(served.base_url.as_str());

    let first = cli(base, &["jobs", "list", "--subscriber", "a", "--limit", "2"]);
    assert_eq!(first.code, Some(0), "{first:?}");
    let rows = list_rows(&first.stdout);
    assert_eq!(rows.len(), 2, "{}", first.stdout);
    // Newest first.
    assert_eq!(
        rows[0][..5],
        [a[2].as_str(), "a", "evt-3", "scheduled", "0"]
    );
    assert_eq!(rows[1][0], a[1]);
    let cursor = first
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("More jobs: add --cursor "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no cursor in:\n{}", first.stdout));

    let second = cli(
        base,
        &[
            "jobs",
            "list",
            "--subscriber",
            "a",
            "--limit",
            "2",
            "--cursor",
            cursor,
        ],
    );
    assert_eq!(second.code, Some(0), "{second:?}");
    let rows = list_rows(&second.stdout);
    assert_eq!(rows.len(), 1, "{}", second.stdout);
    assert_eq!(rows[0][0], a[0]);
    assert!(!second.stdout.contains("More jobs"), "{}", second.stdout);

    let all = cli(
        base,
        &["jobs", "list", "--subscriber", "a", "--limit", "1", "--all"],
    );
    assert_eq!(all.code, Some(0), "{all:?}");
    let ids: Vec<&str> = list_rows(&all.stdout).iter().map(|r| r[0]).collect();
    assert_eq!(ids, [a[2].as_str(), a[1].as_str(), a[0].as_str()]);
    assert!(!all.stdout.contains("More jobs"), "{}", all.stdout);

    let events = cli(base, &["jobs", "list", "--event", "evt-1"]);
    let ids: Vec<&str> = list_rows(&events.stdout).iter().map(|r| r[0]).collect();
    assert_eq!(ids, [b.as_str(), a[0].as_str()], "{}", events.stdout);

    let none = cli(base, &["jobs", "list", "--state", "dead"]);
    assert_eq!(none.code, Some(0), "{none:?}");
    assert_eq!(none.stdout, "No jobs match.\n");

    let json = cli(base, &["jobs", "list", "--subscriber", "b", "--json"]);
    assert_eq!(json.code, Some(0), "{json:?}");
    let page: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["id"], b.as_str());
    assert_eq!(page["next_cursor"], Value::Null);
}

#[test]
fn jobs_list_finds_dead_letters_by_reason_and_time() {
    let served = served(true);
    served.subscriber("billing", &refusing_receiver());
    let dead = served.job("billing", "invoice.paid:1", 0);
    served.wait_state(&dead, "dead");
    let live = served.job("billing", "invoice.paid:2", 3_600_000);
    let base = Some(served.base_url.as_str());
    let ids = |args: &[&str]| {
        let ran = cli(base, args);
        assert_eq!(ran.code, Some(0), "{ran:?}");
        list_rows(&ran.stdout)
            .iter()
            .map(|r| r[0].to_owned())
            .collect::<Vec<_>>()
    };
    let by_reason = ids(&["jobs", "list", "--dead-reason", "non_retryable_response"]);
    assert_eq!(by_reason, [dead.as_str()]);
    assert!(ids(&["jobs", "list", "--dead-reason", "deadline_exceeded"]).is_empty());
    let since = ids(&["jobs", "list", "--dead-after", "2000-01-01T00:00:00Z"]);
    assert_eq!(since, [dead.as_str()]);
    assert!(ids(&["jobs", "list", "--dead-before", "2000-01-01T00:00:00Z"]).is_empty());
    let created = ids(&["jobs", "list", "--created-after", "2000-01-01T00:00:00Z"]);
    assert_eq!(created, [live.clone(), dead.clone()]);

    // The on-call filters: a list of states, the last error's class and status, the
    // waiting reason; the table shows the last error.
    let states = ids(&["jobs", "list", "--state", "retrying,dead,scheduled"]);
    assert_eq!(states, [live.clone(), dead.clone()]);
    let by_class = &[
        "jobs",
        "list",
        "--error-class",
        "http_4xx",
        "--last-status",
        "400",
    ];
    assert_eq!(ids(by_class), [dead.as_str()]);
    assert!(ids(&["jobs", "list", "--last-status", "500"]).is_empty());
    assert_eq!(
        ids(&["jobs", "list", "--waiting-reason", "scheduled"]),
        [live.as_str()]
    );
    let table = cli(base, &["jobs", "list", "--state", "dead,dead"]);
    assert_eq!(table.code, Some(0), "{table:?}");
    let header = table.stdout.lines().find(|l| l.contains(" id ")).unwrap();
    assert!(header.contains(" last_error "), "{}", table.stdout);
    let row = table.stdout.lines().find(|l| l.contains(&dead)).unwrap();
    let cells: Vec<&str> = row.split("   ").map(str::trim).collect();
    assert!(cells.contains(&"http_4xx 400"), "{}", table.stdout);
}

#[test]
fn jobs_list_sends_each_filter_under_its_api_name() {
    let fake = FakeServer::start(
        "200 OK",
        "application/json",
        r#"{"items":[],"next_cursor":null}"#,
    );
    let ran = cli(
        Some(&fake.base),
        &[
            "jobs",
            "list",
            "--state",
            "retrying,dead",
            "--subscriber",
            "billing",
            "--event",
            "e&1",
            "--dead-reason",
            "deadline_exceeded",
            "--created-after",
            "2026-11-01T00:00:00Z",
            "--created-before",
            "2026-11-02T00:00:00Z",
            "--dead-after",
            "2026-11-03T00:00:00+01:00",
            "--dead-before",
            "2026-11-04T00:00:00Z",
            "--waiting-reason",
            "backing_off",
            "--error-class",
            "http_5xx",
            "--last-status",
            "503",
            "--limit",
            "7",
            "--cursor",
            "abc",
        ],
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let line = requests[0].lines().next().unwrap();
    assert_eq!(
        line,
        "GET /v1/jobs?state=retrying%2Cdead&subscriber_id=billing&event_id=e%261\
         &dead_reason=deadline_exceeded&created_after=2026-11-01T00%3A00%3A00Z\
         &created_before=2026-11-02T00%3A00%3A00Z&dead_after=2026-11-03T00%3A00%3A00%2B01%3A00\
         &dead_before=2026-11-04T00%3A00%3A00Z&waiting_reason=backing_off\
         &error_class=http_5xx&last_status=503&limit=7&cursor=abc HTTP/1.1"
    );
}

#[test]
fn an_unreachable_server_is_named_with_a_hint() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    for args in [&["jobs", "list"][..], &["replay", "status", "r1"]] {
        let ran = cli(Some(&server), args);
        assert_eq!(ran.code, Some(1), "{ran:?}");
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        assert!(
            ran.stderr.starts_with(&format!(
                "deferhook: cannot reach the deferhook server at {server} ("
            )),
            "{}",
            ran.stderr
        );
        assert!(ran.stderr.contains("--server URL"), "{}", ran.stderr);
    }
}

#[test]
fn the_server_defaults_to_the_environment_variable() {
    let fake = FakeServer::start(
        "200 OK",
        "application/json",
        r#"{"items":[],"next_cursor":null}"#,
    );
    let ran = run(clean_command()
        .env("DEFERHOOK_SERVER", &fake.base)
        .args(["jobs", "list"]));
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn the_token_is_sent_as_a_bearer_and_never_printed() {
    let fake = FakeServer::start(
        "401 Unauthorized",
        "application/problem+json",
        r#"{"type":"about:blank","title":"Unauthorized","status":401,"detail":"a valid bearer token is required"}"#,
    );
    let secret = "tok-Zq81-very-secret";
    let ran = run(clean_command()
        .env("DEFERHOOK_API_TOKEN", secret)
        .args(["jobs", "list", "--server", &fake.base]));
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        "deferhook: Unauthorized (401): a valid bearer token is required\n  give the token \
         with --token or DEFERHOOK_API_TOKEN (singular: the server's DEFERHOOK_API_TOKENS \
         is not read by this command)"
    );
    let ran = cli(
        Some(&fake.base),
        &["replay", "cancel", "r1", "--token", secret],
    );
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(!format!("{ran:?}").contains(secret));
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    for head in &requests {
        let auth = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
            .unwrap_or_else(|| panic!("no authorization header in:\n{head}"));
        assert_eq!(
            auth.split_once(':').unwrap().1.trim(),
            format!("Bearer {secret}")
        );
    }
    assert!(
        requests[1].starts_with("POST /v1/replays/r1/cancel "),
        "{}",
        requests[1]
    );

    // An empty variable means no token: no header, rather than a usage error.
    let ran = run(clean_command()
        .env("DEFERHOOK_API_TOKEN", "")
        .args(["jobs", "list", "--server", &fake.base]));
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !requests[2].to_ascii_lowercase().contains("authorization:"),
        "{}",
        requests[2]
    );

    let help = run(clean_command()
        .env("DEFERHOOK_API_TOKEN", secret)
        .args(["jobs", "list", "--help"]));
    assert_eq!(help.code, Some(0));
    assert!(
        help.stdout.contains("DEFERHOOK_API_TOKEN"),
        "{}",
        help.stdout
    );
    assert!(!help.stdout.contains(secret), "{}", help.stdout);
    // The global --log-format is under its own heading, after the filters and the
    // server options, not among the filters (issue #15).
    let filters_end = help.stdout.find("Server options:").expect("server options");
    let logging = help.stdout.find("Logging:").expect("a logging heading");
    let log_format = help.stdout.find("--log-format").expect("--log-format");
    assert!(
        filters_end < logging && logging < log_format,
        "{}",
        help.stdout
    );
}

#[test]
fn a_bare_error_answer_shows_its_status() {
    let fake = FakeServer::start("502 Bad Gateway", "text/html", "<h1>upstream down</h1>");
    let ran = cli(Some(&fake.base), &["jobs", "get", "x"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        "deferhook: the server answered 502 Bad Gateway: <h1>upstream down</h1>"
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let fake = FakeServer::start(
        "200 OK",
        "application/json",
        r#"{"items":[],"next_cursor":null}"#,
    );
    let mut child = clean_command()
        .args(["jobs", "list", "--json", "--server", &fake.base])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Closed long before the answer arrives (`deferhook jobs list | head -0`).
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["jobs", "list", "--state", "bogus"][..],
        &["jobs", "list", "--state", "retrying,"],
        &["jobs", "list", "--state", "retrying,bogus"],
        &["jobs", "list", "--waiting-reason", "subscriber_at_limit"],
        &["jobs", "list", "--error-class", "http_500"],
        &["jobs", "list", "--last-status", "600"],
        &["jobs", "list", "--last-status", "99"],
        &["jobs", "list", "--created-after", "yesterday"],
        &["jobs", "list", "--limit", "0"],
        &["jobs", "get"],
        &["jobs", "list", "--server", "ftp://127.0.0.1"],
        &["replay", "create", "--rate", "1", "--max-jobs", "1"],
        &[
            "replay",
            "create",
            "--all",
            "--subscriber",
            "s",
            "--rate",
            "1",
            "--max-jobs",
            "1",
        ],
        &["replay", "create", "--all", "--max-jobs", "1"],
        &[
            "replay",
            "create",
            "--all",
            "--rate",
            "1",
            "--max-jobs",
            "1",
            "--dry-run",
            "--watch",
        ],
        &["replay", "status"],
    ] {
        let ran = cli(None, args);
        assert_eq!(ran.code, Some(2), "{args:?}: {ran:?}");
    }
}

#[test]
fn a_refused_token_or_server_is_never_echoed() {
    let with_password = run(clean_command().args([
        "jobs",
        "list",
        "--server",
        "http://user:s3cretpw@127.0.0.1:1/",
    ]));
    assert_eq!(with_password.code, Some(2), "{with_password:?}");
    assert!(
        with_password.stderr.contains("user name or password"),
        "{with_password:?}"
    );
    assert!(
        !with_password.stderr.contains("s3cretpw"),
        "{with_password:?}"
    );

    let bad_token = run(clean_command()
        .env("DEFERHOOK_API_TOKEN", "s3cret part2")
        .args(["jobs", "list"]));
    assert_eq!(bad_token.code, Some(2), "{bad_token:?}");
    assert!(bad_token.stderr.contains("--token"), "{bad_token:?}");
    assert!(!bad_token.stderr.contains("s3cret"), "{bad_token:?}");
}

/// Claims the due job of `served` and records its attempt as a 503 retried in an hour.
fn fail_for_an_hour(served: &crate::app::BlockingApp) {
    use deferhook::domain::JobEvent;
    use deferhook::domain::attempt::AttemptOutcome;
    use deferhook::domain::job::transition;
    use deferhook::domain::policy::ErrorClass;
    use deferhook::store::{AttemptResult, LeaseRef, OutcomeRecord};
    let app = served.app();
    served.block_on(async {
        let claimed = app.claim().await.remove(0);
        let now = app.now();
        let event = JobEvent::RetryableFailure {
            retry_at: now.plus_ms(3_600_000),
        };
        let record = OutcomeRecord {
            lease: LeaseRef {
                job_id: claimed.job_id,
                token: claimed.lease_token,
            },
            subscriber_id: claimed.subscriber_id.clone(),
            attempt: claimed.attempt,
            started_at: now,
            finished_at: now,
            attempt_timeout_ms: 10_000,
            result: AttemptResult {
                outcome: AttemptOutcome::Retryable,
                status: Some(503),
                error_class: Some(ErrorClass::Http5xx),
                reason: Some("503 Service Unavailable".into()),
                body_excerpt: None,
                resent: false,
            },
            retry_after: None,
            transition: transition(&claimed.snapshot, event, now).unwrap(),
            pause_subscriber: false,
        };
        app.store.record_outcomes(&[record], now).await.unwrap();
    });
}

#[test]
fn jobs_retry_brings_a_retrying_job_forward_and_refuses_any_other() {
    use deferhook::domain::Timestamp;
    let served = served(false);
    served.subscriber("s", "http://127.0.0.1:9/never");
    let id = served.job("s", "failing", 0);
    fail_for_an_hour(&served);
    let before = served.wait_state(&id, "retrying");
    let later = Timestamp::parse_rfc3339(before["next_attempt_at"].as_str().unwrap()).unwrap();

    let ran = cli(Some(&served.base_url), &["jobs", "retry", &id]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(row(&ran.stdout, "id")[1], id);
    assert_eq!(row(&ran.stdout, "state")[1..], ["retrying"]);
    let next = Timestamp::parse_rfc3339(row(&ran.stdout, "next_attempt_at")[1]).unwrap();
    assert!(next < later, "brought forward from {later:?} to {next:?}");
    assert!(next <= served.app().now(), "due now: {next:?}");

    let scheduled = served.job("s", "later", 3_600_000);
    let ran = cli(
        Some(&served.base_url),
        &["jobs", "retry", &scheduled, "--json"],
    );
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "deferhook: Conflict (409): job {scheduled} is scheduled: only retrying jobs can be retried"
        )
    );
}
