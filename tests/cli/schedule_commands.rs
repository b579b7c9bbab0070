//! `deferhook schedules list | show | put | delete | run` and `deferhook jobs list
//! --schedule-id | --event-type` against a real server (no worker: the jobs a run
//! creates stay `scheduled`).

use serde_json::{Value, json};

use deferhook::domain::{Clock, SystemClock, Timestamp};

use crate::operator_support::{FakeServer, Ran, cli, row, served};

const HOUR_MS: i64 = 3_600_000;

/// The current year (UTC).
fn this_year() -> i32 {
    time::OffsetDateTime::now_utc().year()
}

/// The start of the hour `now` is in, and of the five after it, as the API shows them.
fn hours_from(now: Timestamp) -> Vec<String> {
    let start = now.as_millis().div_euclid(HOUR_MS) * HOUR_MS;
    (0..=5)
        .map(|k| Timestamp::from_millis(start + k * HOUR_MS).to_rfc3339())
        .collect()
}

/// Runs the CLI, and answers what it printed with the hours around it (before and
/// after: a test that crosses an hour accepts either).
fn timed(base: Option<&str>, args: &[&str]) -> (Ran, [Vec<String>; 2]) {
    let before = hours_from(SystemClock.now());
    let ran = cli(base, args);
    let after = hours_from(SystemClock.now());
    assert_eq!(ran.code, Some(0), "{args:?}: {ran:?}");
    (ran, [before, after])
}

/// The cells of the table row that contains `needle`.
fn row_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines()
        .find(|line| line.starts_with('|') && line.contains(needle))
        .unwrap_or_else(|| panic!("no row with `{needle}` in:\n{text}"))
        .trim_matches(|c| c == '|' || c == ' ')
        .split_whitespace()
        .collect()
}

/// The ids of the table rows of `text` (its lines between the header's `===` rule and
/// the closing rule).
fn table_ids(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|line| !line.starts_with("+="))
        .skip(1)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| line.trim_matches('|').split_whitespace().next())
        .collect()
}

#[test]
fn schedules_are_put_shown_listed_run_and_deleted() {
    let served = served(false);
    served.subscriber("billing", "http://127.0.0.1:9/billing");
    let (status, cleaner) = served.call(
        "PUT",
        "/v1/subscribers/cleaner",
        Some(json!({"url": "http://127.0.0.1:9/cleaner", "event_types": ["cleanup.*"]})),
    );
    assert_eq!(status, 201, "{cleaner}");
    let base = Some(served.base_url.as_str());
    let year = this_year();

    // A yearly cron schedule: its periods are known in advance.
    let put_new_year = [
        "schedules",
        "put",
        "new-year",
        "--subscriber",
        "billing",
        "--cron",
        "0 0 1 1 *",
        "--event-id",
        "new-year:{period_start}",
        "--payload",
        r#"{"greeting": "hello", "amount": 1.50}"#,
        "--max-attempts",
        "3",
    ];
    let ran = cli(base, &put_new_year);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert!(text.starts_with("Created schedule new-year.\n"), "{text}");
    assert_eq!(row(text, "id")[1..], ["new-year"]);
    assert_eq!(row(text, "subscriber")[1..], ["billing"]);
    assert_eq!(row(text, "cron")[1..], ["0", "0", "1", "1", "*"]);
    assert_eq!(row(text, "time_zone")[1..], ["UTC"]);
    assert_eq!(row(text, "event_id")[1..], ["new-year:{period_start}"]);
    // The payload as the server stores it (numbers as written).
    assert_eq!(
        row(text, "payload")[1..],
        [r#"{"amount":1.50,"greeting":"hello"}"#]
    );
    assert_eq!(row(text, "ttl_ms")[1..], ["-"]);
    assert_eq!(row(text, "max_attempts")[1..], ["3"]);
    assert_eq!(row(text, "catch_up")[1..], ["latest"]);
    assert_eq!(row(text, "enabled")[1..], ["true"]);
    assert_eq!(row(text, "last_error")[1..], ["-"]);
    let next_years: String = (1..=5)
        .map(|k| format!("  {}-01-01T00:00:00.000Z\n", year + k))
        .collect();
    assert!(
        text.contains(&format!("\nNext periods:\n{next_years}\nNo run yet.\n")),
        "{text}"
    );

    // The same definition again: 200, said as an update.
    let ran = cli(base, &put_new_year);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.starts_with("Updated schedule new-year.\n"),
        "{}",
        ran.stdout
    );

    // An interval of an event type, its payload from a file.
    let dir = tempfile::tempdir().unwrap();
    let payload = dir.path().join("payload.json");
    std::fs::write(&payload, "{\"room\": 7}\n").unwrap();
    let at_payload = format!("@{}", payload.display());
    let (ran, hours) = timed(
        base,
        &[
            "schedules",
            "put",
            "hourly",
            "--event-type",
            "cleanup.run",
            "--every-ms",
            "3600000",
            "--anchor",
            "2026-01-01T00:00:00Z",
            "--event-id",
            "cleanup:{period_start}",
            "--payload",
            &at_payload,
            "--catch-up",
            "none",
        ],
    );
    let text = &ran.stdout;
    assert!(text.starts_with("Created schedule hourly.\n"), "{text}");
    assert_eq!(row(text, "event_type")[1..], ["cleanup.run"]);
    assert_eq!(row(text, "every")[1..], ["1h", "(3600000", "ms)"]);
    assert_eq!(row(text, "anchor")[1..], ["2026-01-01T00:00:00.000Z"]);
    assert_eq!(row(text, "payload")[1..], [r#"{"room":7}"#]);
    assert_eq!(row(text, "catch_up")[1..], ["none"]);
    assert!(
        hours.iter().any(|h| {
            let next: String = h[1..].iter().map(|t| format!("  {t}\n")).collect();
            text.contains(&format!("\nNext periods:\n{next}\n"))
        }),
        "{text}"
    );

    // The listing: id order, the target, the timing, the next period.
    let ran = cli(base, &["schedules", "list"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert_eq!(table_ids(text), ["hourly", "new-year"], "{text}");
    assert_eq!(
        row(text, "new-year")[1..],
        [
            "billing",
            "0",
            "0",
            "1",
            "1",
            "*",
            "(UTC)",
            "true",
            &format!("{}-01-01T00:00:00.000Z", year + 1),
            "-",
            "-"
        ]
    );
    let hourly = row(text, "hourly");
    assert_eq!(
        hourly[1..6],
        [
            "type:cleanup.run",
            "every",
            "1h",
            "from",
            "2026-01-01T00:00:00.000Z"
        ]
    );
    assert_eq!(hourly[6], "true");
    assert!(hours.iter().any(|h| hourly[7] == h[1]), "{text}");
    assert_eq!(hourly[8..], ["-", "-"]);
    // One page at a time, or every page.
    let ran = cli(base, &["schedules", "list", "--limit", "1"]);
    assert_eq!(table_ids(&ran.stdout), ["hourly"], "{ran:?}");
    assert!(
        ran.stdout.contains("More schedules: add --cursor "),
        "{}",
        ran.stdout
    );
    let ran = cli(base, &["schedules", "list", "--limit", "1", "--all"]);
    assert_eq!(table_ids(&ran.stdout), ["hourly", "new-year"], "{ran:?}");
    assert!(!ran.stdout.contains("More schedules"), "{}", ran.stdout);
    let ran = cli(base, &["schedules", "list", "--json"]);
    let listed: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(listed["items"][0]["id"], "hourly");
    assert_eq!(listed["items"][1]["cron"], "0 0 1 1 *");
    assert_eq!(listed["next_cursor"], Value::Null);

    // A run makes this year's period: its event id is the template filled.
    let period = format!("{year}-01-01T00:00:00.000Z");
    let event = format!("new-year:{year}-01-01T00:00:00Z");
    let ran = cli(base, &["schedules", "run", "new-year"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert!(
        text.starts_with(&format!(
            "period_start: {period}\nevent_id: {event}\njobs: 1 (created now)\n"
        )),
        "{text}"
    );
    let job = row_with(text, &event);
    assert_eq!(job[1..5], ["billing", &event, "scheduled", "0"], "{text}");
    let job_id = job[0].to_owned();
    // Again: the same job, already there.
    let ran = cli(base, &["schedules", "run", "new-year"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains("\njobs: 1 (all existed already)\n"),
        "{}",
        ran.stdout
    );
    assert_eq!(row_with(&ran.stdout, &event)[0], job_id);
    let ran = cli(base, &["schedules", "run", "new-year", "--json"]);
    let run: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(run["period_start"], period.as_str());
    assert_eq!(run["event_id"], event.as_str());
    assert_eq!(run["items"][0]["id"], job_id.as_str());
    assert_eq!(run["items"][0]["schedule_id"], "new-year");

    // The event type's run: one job for its one matching subscriber.
    let (ran, hours) = timed(base, &["schedules", "run", "hourly"]);
    let text = &ran.stdout;
    let ran_hour = hours
        .iter()
        .map(|h| h[0].clone())
        .find(|start| text.starts_with(&format!("period_start: {start}\n")))
        .unwrap_or_else(|| panic!("not the current hour: {text}"));
    let cleanup_event = format!("cleanup:{}Z", ran_hour.trim_end_matches(".000Z"));
    assert!(
        text.contains(&format!(
            "\nevent_id: {cleanup_event}\njobs: 1 (created now)\n"
        )),
        "{text}"
    );
    assert_eq!(
        row_with(text, &cleanup_event)[1..4],
        ["cleaner", &cleanup_event, "scheduled"]
    );

    // Show: the last run with its job.
    let ran = cli(base, &["schedules", "show", "new-year"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let text = &ran.stdout;
    assert!(
        text.contains(&format!("\nNext periods:\n{next_years}\nLast run:\n")),
        "{text}"
    );
    assert_eq!(row(text, "period")[1..], [period.as_str()]);
    assert_eq!(row(text, "event")[1..], [event.as_str()]);
    assert_eq!(row(text, "jobs")[1..], ["1"]);
    assert_eq!(row(text, "job")[1..], [job_id.as_str()]);
    assert_eq!(row(text, "job_state")[1..], ["scheduled"]);
    let ran = cli(base, &["schedules", "show", "new-year", "--json"]);
    let shown: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(shown["last_run"]["job"]["id"], job_id.as_str());
    assert_eq!(shown["next_periods"].as_array().map(Vec::len), Some(5));
    // The listing shows the last runs.
    let ran = cli(base, &["schedules", "list"]);
    assert_eq!(
        row(&ran.stdout, "new-year")[10..],
        [period.as_str(), "(1", "job)", "-"]
    );
    assert_eq!(
        row(&ran.stdout, "hourly")[8..],
        [ran_hour.as_str(), "(1", "job)", "-"]
    );

    // The jobs, by schedule and by event type.
    let ran = cli(base, &["jobs", "list", "--schedule-id", "new-year"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(table_ids(&ran.stdout), [job_id.as_str()], "{}", ran.stdout);
    let ran = cli(
        base,
        &["jobs", "list", "--event-type", "cleanup.run", "--json"],
    );
    let jobs: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let items = jobs["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{jobs}");
    assert_eq!(items[0]["event_id"], cleanup_event.as_str());
    assert_eq!(items[0]["schedule_id"], "hourly");
    let ran = cli(
        base,
        &[
            "jobs",
            "list",
            "--event-type",
            "cleanup.run",
            "--schedule-id",
            "new-year",
        ],
    );
    assert_eq!(ran.stdout, "No jobs match.\n", "{ran:?}");
    let ran = cli(base, &["jobs", "get", &job_id]);
    assert_eq!(row(&ran.stdout, "schedule")[1..], ["new-year"]);
    assert_eq!(row(&ran.stdout, "event_type")[1..], ["-"]);

    // Disabled: no next period; left out on update, it stays disabled.
    let mut disable = put_new_year.to_vec();
    disable.extend(["--enabled", "false"]);
    let ran = cli(base, &disable);
    assert!(
        ran.stdout.starts_with("Updated schedule new-year.\n"),
        "{ran:?}"
    );
    assert_eq!(row(&ran.stdout, "enabled")[1..], ["false"]);
    assert!(
        ran.stdout
            .contains("\nNo next periods (the schedule is disabled).\n"),
        "{}",
        ran.stdout
    );
    let ran = cli(base, &put_new_year);
    assert_eq!(row(&ran.stdout, "enabled")[1..], ["false"], "{ran:?}");

    // Delete: gone, its jobs stay.
    let ran = cli(base, &["schedules", "delete", "new-year"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        ran.stdout,
        "Deleted schedule new-year: no period starts after this; the jobs it created stay.\n"
    );
    let ran = cli(base, &["schedules", "show", "new-year"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "deferhook: Not Found (404): schedule `new-year` does not exist\n"
    );
    let ran = cli(base, &["schedules", "delete", "new-year"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "deferhook: Not Found (404): schedule `new-year` does not exist\n"
    );
    let ran = cli(base, &["schedules", "delete", "hourly", "--json"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let deleted: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(deleted, json!({"deleted": "hourly"}));
    let ran = cli(base, &["schedules", "list"]);
    assert_eq!(ran.stdout, "No schedules yet.\n", "{ran:?}");
    let ran = cli(base, &["jobs", "list", "--schedule-id", "new-year"]);
    assert_eq!(table_ids(&ran.stdout), [job_id.as_str()], "{}", ran.stdout);
}

#[test]
fn invalid_schedules_are_refused_with_their_fields() {
    let served = served(false);
    served.subscriber("billing", "http://127.0.0.1:9/billing");
    let base = Some(served.base_url.as_str());
    let put = |extra: &[&str]| {
        let mut args = vec!["schedules", "put", "bad", "--event-id", "x:{period_start}"];
        args.extend(extra);
        cli(base, &args)
    };

    // The server's 422, each field named.
    let ran = put(&[
        "--subscriber",
        "billing",
        "--cron",
        "61 * * * *",
        "--payload",
        "1",
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr,
        "deferhook: Unprocessable Entity (422)\n  cron: `61 * * * *` is not a cron pattern: \
         its minute field `61` is invalid (number out of bounds); it takes 0-59\n"
    );
    let ran = put(&[
        "--subscriber",
        "billing",
        "--cron",
        "0 * * * *",
        "--time-zone",
        "Mars/Olympus",
        "--payload",
        "null",
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("deferhook: Unprocessable Entity (422)\n"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("\n  time_zone: `Mars/Olympus` is not an IANA time zone name"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("\n  payload: must be a JSON value other than null\n"),
        "{}",
        ran.stderr
    );
    // A subscriber that does not exist.
    let ran = put(&[
        "--subscriber",
        "ghost",
        "--cron",
        "@daily",
        "--payload",
        "1",
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "deferhook: Not Found (404)\n  subscriber_id: subscriber `ghost` does not exist\n"
    );
    // Nothing was stored.
    let ran = cli(base, &["schedules", "list"]);
    assert_eq!(ran.stdout, "No schedules yet.\n", "{ran:?}");

    // Usage errors never reach the server (exit 2).
    for (extra, message) in [
        (
            &["--cron", "@daily", "--payload", "1"][..],
            "<--subscriber <ID>|--event-type <TYPE>>",
        ),
        (
            &["--subscriber", "billing", "--payload", "1"],
            "<--cron <PATTERN>|--every-ms <MS>>",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--event-type",
                "t",
                "--cron",
                "@daily",
                "--payload",
                "1",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--cron",
                "@daily",
                "--every-ms",
                "1000",
                "--payload",
                "1",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--every-ms",
                "1000",
                "--time-zone",
                "UTC",
                "--payload",
                "1",
            ],
            "the argument '--every-ms <MS>' cannot be used with '--time-zone <ZONE>'",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--cron",
                "@daily",
                "--anchor",
                "2026-01-01T00:00:00Z",
                "--payload",
                "1",
            ],
            "the argument '--cron <PATTERN>' cannot be used with '--anchor <TIME>'",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--time-zone",
                "UTC",
                "--payload",
                "1",
            ],
            "<--cron <PATTERN>|--every-ms <MS>>",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--every-ms",
                "999",
                "--payload",
                "1",
            ],
            "999 is not in 1000..",
        ),
        (
            &[
                "--subscriber",
                "billing",
                "--cron",
                "@daily",
                "--payload",
                "{oops",
            ],
            "not JSON",
        ),
    ] {
        let ran = put(extra);
        assert_eq!(ran.code, Some(2), "{extra:?}: {ran:?}");
        assert!(ran.stderr.contains(message), "{extra:?}: {}", ran.stderr);
    }
    // A payload file that cannot be read: one message, exit 1.
    let ran = put(&[
        "--subscriber",
        "billing",
        "--cron",
        "@daily",
        "--payload",
        "@/nonexistent/p.json",
    ]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("deferhook: cannot read the payload file /nonexistent/p.json: "),
        "{}",
        ran.stderr
    );
}

/// A run refused (409) shows the server's detail, as every command does.
#[test]
fn a_refused_run_shows_the_servers_reason() {
    let body = json!({"type": "about:blank", "title": "Conflict", "status": 409,
        "detail": "schedule `later` has no period that has started yet; the first starts at 2030-01-01T00:00:00Z"});
    let fake = FakeServer::start(
        "409 Conflict",
        "application/problem+json",
        &body.to_string(),
    );
    let ran = cli(Some(&fake.base), &["schedules", "run", "later"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "deferhook: Conflict (409): schedule `later` has no period that has started yet; \
         the first starts at 2030-01-01T00:00:00Z\n"
    );
    let requests = fake.requests();
    assert!(
        requests[0].starts_with("POST /v1/schedules/later/run HTTP/1.1"),
        "{}",
        requests[0]
    );
}
