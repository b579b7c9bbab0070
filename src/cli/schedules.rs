//! `deferhook schedules list | show | put | delete | run`: recurring schedules
//! (docs/DESIGN.md §5.14), whose every period becomes one job per target.

use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::jobs::{Job, job_table};
use super::pages;
use super::render::{self, or_none};
use super::schedule_args::{
    ListSchedulesArgs, PutScheduleArgs, ScheduleIdArg, SchedulesArgs, SchedulesCommand,
};

/// A schedule as the API shows it.
#[derive(Debug, Deserialize)]
pub struct Schedule {
    /// Its id.
    pub id: String,
    /// Its subscriber, for a schedule of one.
    pub subscriber_id: Option<String>,
    /// Its event type, for a schedule of one.
    pub event_type: Option<String>,
    /// Its cron pattern.
    pub cron: Option<String>,
    /// The time zone of its cron pattern.
    pub time_zone: Option<String>,
    /// Milliseconds between periods, for an interval.
    pub every_ms: Option<u64>,
    /// One period's start, for an interval.
    pub anchor: Option<String>,
    /// The event id template.
    pub event_id: String,
    /// The payload.
    pub payload: Value,
    /// Each job's TTL; none: the server's.
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts.
    pub max_attempts: Option<u32>,
    /// `latest` or `none`.
    pub catch_up: String,
    /// False while disabled.
    pub enabled: bool,
    /// When it was created.
    pub created_at: String,
    /// When its definition last changed.
    pub updated_at: String,
    /// Its next periods' starts.
    #[serde(default)]
    pub next_periods: Vec<String>,
    /// The last period whose jobs were created.
    pub last_run: Option<LastRun>,
    /// Why the last period reached created no job.
    pub last_error: Option<String>,
}

/// The last period of a schedule whose jobs were created.
#[derive(Debug, Deserialize)]
pub struct LastRun {
    /// The period's start.
    pub period_start: String,
    /// Its event id.
    pub event_id: String,
    /// How many jobs it has.
    pub jobs: u32,
    /// Its first job, as it stands (only when one schedule is read).
    pub job: Option<Job>,
}

/// What `POST /v1/schedules/{id}/run` answers.
#[derive(Debug, Deserialize)]
pub struct PeriodJobs {
    /// The period's start.
    pub period_start: String,
    /// Its event id.
    pub event_id: String,
    /// Its jobs.
    pub items: Vec<Job>,
}

impl Schedule {
    /// The subscriber, or `type:<event type>`.
    pub fn target(&self) -> String {
        match (&self.subscriber_id, &self.event_type) {
            (Some(subscriber), _) => subscriber.clone(),
            (None, Some(event_type)) => format!("type:{event_type}"),
            (None, None) => render::NONE.to_owned(),
        }
    }

    /// `0 9 * * 1-5 (Europe/Berlin)`, or `every 1h from 2026-01-01T00:00:00.000Z`.
    pub fn when(&self) -> String {
        match (&self.cron, self.every_ms) {
            (Some(cron), _) => match &self.time_zone {
                Some(zone) => format!("{cron} ({zone})"),
                None => cron.clone(),
            },
            (None, Some(every_ms)) => {
                let mut text = format!("every {}", duration(every_ms));
                if let Some(anchor) = &self.anchor {
                    text.push_str(&format!(" from {anchor}"));
                }
                text
            }
            (None, None) => render::NONE.to_owned(),
        }
    }
}

impl LastRun {
    /// `2026-01-01T00:00:00.000Z (1 job)`.
    fn summary(&self) -> String {
        format!("{} ({})", self.period_start, jobs(self.jobs as usize))
    }
}

/// `1 job`, `3 jobs`.
fn jobs(n: usize) -> String {
    if n == 1 {
        "1 job".to_owned()
    } else {
        format!("{n} jobs")
    }
}

/// Milliseconds as days, hours, minutes, seconds and milliseconds, leaving out the
/// zero ones: `1h`, `1h30m`, `1d12h`, `2s500ms`.
pub fn duration(ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    let mut left = ms;
    let mut text = String::new();
    for (size, unit) in UNITS {
        let n = left / size;
        left %= size;
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    if text.is_empty() {
        "0ms".to_owned()
    } else {
        text
    }
}

/// Runs a `schedules` subcommand.
pub async fn run(args: SchedulesArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        SchedulesCommand::List(list) => list_schedules(&client, &list, json).await?,
        SchedulesCommand::Show(show) => show_schedule(&client, &show, json).await?,
        SchedulesCommand::Put(put) => {
            let body = put_body(&put)?;
            put_schedule(&client, &put.schedule, body, json).await?
        }
        SchedulesCommand::Delete(delete) => delete_schedule(&client, &delete, json).await?,
        SchedulesCommand::Run(run) => run_schedule(&client, &run, json).await?,
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The text `schedules list` prints.
async fn list_schedules(
    client: &ApiClient,
    args: &ListSchedulesArgs,
    json: bool,
) -> Result<String, CliError> {
    let segments = ["v1", "schedules"];
    let listed = pages::read(client, &segments, &[], &args.page, "the schedules").await?;
    if json {
        return Ok(listed.json());
    }
    let schedules: Vec<Schedule> = listed
        .items
        .iter()
        .map(|s| decode(s, "a schedule"))
        .collect::<Result<_, _>>()?;
    let mut text = if schedules.is_empty() {
        "No schedules yet.\n".to_owned()
    } else {
        format!("{}\n", schedule_table(&schedules))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!("More schedules: add --cursor {next} (or --all)\n"));
    }
    Ok(text)
}

/// Schedules as a table, one row each.
pub fn schedule_table(schedules: &[Schedule]) -> String {
    let rows = schedules.iter().map(|s| {
        vec![
            s.id.clone(),
            s.target(),
            s.when(),
            s.enabled.to_string(),
            or_none(s.next_periods.first()),
            or_none(s.last_run.as_ref().map(LastRun::summary)),
            or_none(s.last_error.as_ref()),
        ]
    });
    render::table(
        &[
            "id",
            "target",
            "when",
            "enabled",
            "next_period",
            "last_run",
            "last_error",
        ],
        rows,
    )
}

/// The text `schedules show` prints.
async fn show_schedule(
    client: &ApiClient,
    args: &ScheduleIdArg,
    json: bool,
) -> Result<String, CliError> {
    let value = client
        .get(&["v1", "schedules", &args.schedule_id], &[])
        .await?;
    shown(&value, json)
}

fn shown(value: &Value, json: bool) -> Result<String, CliError> {
    if json {
        return Ok(format!("{}\n", render::json(value)));
    }
    let schedule: Schedule = decode(value, "the schedule")?;
    Ok(schedule_text(&schedule))
}

/// A schedule: its definition's fields, its next periods, its last run.
pub fn schedule_text(s: &Schedule) -> String {
    let mut fields = vec![("id", s.id.clone())];
    match (&s.subscriber_id, &s.event_type) {
        (_, Some(event_type)) => fields.push(("event_type", event_type.clone())),
        (subscriber, None) => fields.push(("subscriber", or_none(subscriber.as_ref()))),
    }
    if let Some(every_ms) = s.every_ms {
        fields.push(("every", format!("{} ({every_ms} ms)", duration(every_ms))));
        fields.push(("anchor", or_none(s.anchor.as_ref())));
    } else {
        fields.push(("cron", or_none(s.cron.as_ref())));
        fields.push(("time_zone", or_none(s.time_zone.as_ref())));
    }
    fields.extend([
        ("event_id", s.event_id.clone()),
        ("payload", s.payload.to_string()),
        ("ttl_ms", or_none(s.ttl_ms)),
        ("max_attempts", or_none(s.max_attempts)),
        ("catch_up", s.catch_up.clone()),
        ("enabled", s.enabled.to_string()),
        ("last_error", or_none(s.last_error.as_ref())),
        ("created_at", s.created_at.clone()),
        ("updated_at", s.updated_at.clone()),
    ]);
    let mut text = format!("{}\n\n", render::fields(&fields));
    if s.next_periods.is_empty() {
        let why = if s.enabled {
            "no period starts after now"
        } else {
            "the schedule is disabled"
        };
        text.push_str(&format!("No next periods ({why}).\n"));
    } else {
        text.push_str("Next periods:\n");
        for start in &s.next_periods {
            text.push_str(&format!("  {start}\n"));
        }
    }
    text.push('\n');
    match &s.last_run {
        None => text.push_str("No run yet.\n"),
        Some(run) => {
            let job = run.job.as_ref();
            let last = render::fields(&[
                ("period", run.period_start.clone()),
                ("event", run.event_id.clone()),
                ("jobs", run.jobs.to_string()),
                ("job", or_none(job.map(|j| j.id.clone()))),
                ("job_state", or_none(job.map(|j| j.state.clone()))),
            ]);
            text.push_str(&format!("Last run:\n{last}\n"));
        }
    }
    text
}

/// The body of `PUT /v1/schedules/{id}`: only the flags given, the payload as written.
#[derive(Debug, Serialize)]
struct PutBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    subscriber_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_zone: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anchor: Option<&'a str>,
    event_id: &'a str,
    payload: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    catch_up: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
}

/// The JSON text `schedules put` sends (the payload file read, if one is named).
fn put_body(args: &PutScheduleArgs) -> anyhow::Result<String> {
    let body = PutBody {
        subscriber_id: args.subscriber.as_deref(),
        event_type: args.event_type.as_deref(),
        cron: args.cron.as_deref(),
        time_zone: args.time_zone.as_deref(),
        every_ms: args.every_ms,
        anchor: args.anchor.as_deref(),
        event_id: &args.event_id,
        payload: args.payload.read()?,
        ttl_ms: args.ttl_ms,
        max_attempts: args.max_attempts,
        catch_up: args.catch_up.as_deref(),
        enabled: args.enabled,
    };
    Ok(serde_json::to_string(&body)?)
}

/// `PUT /v1/schedules/{id}`: whether it was created or updated, then the schedule as
/// stored.
async fn put_schedule(
    client: &ApiClient,
    args: &ScheduleIdArg,
    body: String,
    json: bool,
) -> Result<String, CliError> {
    let segments = ["v1", "schedules", args.schedule_id.as_str()];
    let answer = client.call(Method::PUT, &segments, Some(body)).await?;
    let value = answer.body.ok_or_else(|| no_body("the schedule"))?;
    if json {
        return shown(&value, true);
    }
    let verb = if answer.status == StatusCode::CREATED {
        "Created"
    } else {
        "Updated"
    };
    let schedule: Schedule = decode(&value, "the schedule")?;
    Ok(format!(
        "{verb} schedule {}.\n{}",
        schedule.id,
        schedule_text(&schedule)
    ))
}

/// `DELETE /v1/schedules/{id}`: a sentence, or `{"deleted": id}` with `--json` (the
/// server answers 204 without a body).
async fn delete_schedule(
    client: &ApiClient,
    args: &ScheduleIdArg,
    json: bool,
) -> Result<String, CliError> {
    let id = args.schedule_id.as_str();
    client
        .call(Method::DELETE, &["v1", "schedules", id], None)
        .await?;
    if json {
        let deleted = serde_json::json!({ "deleted": id });
        return Ok(format!("{}\n", render::json(&deleted)));
    }
    Ok(format!(
        "Deleted schedule {id}: no period starts after this; the jobs it created stay.\n"
    ))
}

/// `POST /v1/schedules/{id}/run`: the period, its event id and its jobs.
async fn run_schedule(
    client: &ApiClient,
    args: &ScheduleIdArg,
    json: bool,
) -> Result<String, CliError> {
    let segments = ["v1", "schedules", args.schedule_id.as_str(), "run"];
    let answer = client.call(Method::POST, &segments, None).await?;
    let value = answer.body.ok_or_else(|| no_body("the period's jobs"))?;
    if json {
        return Ok(format!("{}\n", render::json(&value)));
    }
    let period: PeriodJobs = decode(&value, "the period's jobs")?;
    Ok(period_text(&period, answer.status == StatusCode::CREATED))
}

/// A run's period and jobs; `created`: the server created some of them now.
pub fn period_text(period: &PeriodJobs, created: bool) -> String {
    let mut text = format!(
        "period_start: {}\nevent_id: {}\n",
        period.period_start, period.event_id
    );
    if period.items.is_empty() {
        text.push_str("jobs: 0 (no subscriber matches the schedule's event type)\n");
        return text;
    }
    let how = if created {
        "created now"
    } else {
        "all existed already"
    };
    text.push_str(&format!(
        "jobs: {} ({how})\n{}\n",
        period.items.len(),
        job_table(&period.items)
    ));
    text
}

fn no_body(what: &str) -> CliError {
    CliError::Unexpected {
        url: what.to_owned(),
        cause: "the answer has no body".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::{Cli, Command};
    use clap::Parser;
    use serde_json::json;

    fn parse(argv: &[&str]) -> Result<PutScheduleArgs, clap::Error> {
        let argv = ["deferhook", "schedules", "put", "nightly"]
            .iter()
            .chain(argv);
        let Command::Schedules(schedules) = Cli::try_parse_from(argv)?.command else {
            panic!("expected schedules")
        };
        let SchedulesCommand::Put(put) = schedules.command else {
            panic!("expected put")
        };
        Ok(*put)
    }

    fn body(argv: &[&str]) -> Value {
        serde_json::from_str(&put_body(&parse(argv).unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn the_body_carries_the_flags_given() {
        assert_eq!(
            body(&[
                "--subscriber",
                "billing",
                "--cron",
                "0 9 * * 1-5",
                "--time-zone",
                "Europe/Berlin",
                "--event-id",
                "report:{period_start}",
                "--payload",
                r#"{"b": 1, "a": [true]}"#,
            ]),
            json!({"subscriber_id": "billing", "cron": "0 9 * * 1-5",
                   "time_zone": "Europe/Berlin", "event_id": "report:{period_start}",
                   "payload": {"b": 1, "a": [true]}})
        );
        assert_eq!(
            body(&[
                "--event-type",
                "cleanup",
                "--every-ms",
                "3600000",
                "--anchor",
                "2026-01-01T00:00:00Z",
                "--event-id",
                "c:{period_start}",
                "--payload",
                "7",
                "--ttl-ms",
                "60000",
                "--max-attempts",
                "3",
                "--catch-up",
                "none",
                "--enabled",
                "false",
            ]),
            json!({"event_type": "cleanup", "every_ms": 3_600_000,
                   "anchor": "2026-01-01T00:00:00Z", "event_id": "c:{period_start}",
                   "payload": 7, "ttl_ms": 60000, "max_attempts": 3, "catch_up": "none",
                   "enabled": false})
        );
    }

    #[test]
    fn the_payload_is_sent_as_written() {
        let args = parse(&[
            "--subscriber",
            "s",
            "--cron",
            "@daily",
            "--event-id",
            "e:{period_start}",
            "--payload",
            r#"{"z":1,  "a":2}"#,
        ])
        .unwrap();
        let text = put_body(&args).unwrap();
        assert!(text.contains(r#""payload":{"z":1,  "a":2}"#), "{text}");
    }

    #[test]
    fn a_payload_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payload.json");
        std::fs::write(&path, "{\"from\": \"file\"}\n").unwrap();
        let at = format!("@{}", path.display());
        let base = [
            "--subscriber",
            "s",
            "--cron",
            "@daily",
            "--event-id",
            "e:{period_start}",
            "--payload",
        ];
        let argv: Vec<&str> = base.iter().copied().chain([at.as_str()]).collect();
        assert_eq!(body(&argv)["payload"], json!({"from": "file"}));

        std::fs::write(&path, "not json").unwrap();
        let error = put_body(&parse(&argv).unwrap()).unwrap_err().to_string();
        assert!(error.contains("is not JSON"), "{error}");
        let missing = format!("@{}", dir.path().join("missing.json").display());
        let argv: Vec<&str> = base.iter().copied().chain([missing.as_str()]).collect();
        let error = put_body(&parse(&argv).unwrap()).unwrap_err().to_string();
        assert!(error.contains("cannot read the payload file"), "{error}");
    }

    #[test]
    fn exactly_one_target_and_one_timing_are_required() {
        let rest = ["--event-id", "e:{period_start}", "--payload", "{}"];
        let with = |argv: &[&str]| -> Vec<String> {
            argv.iter()
                .chain(rest.iter())
                .map(|s| (*s).to_owned())
                .collect()
        };
        for argv in [
            with(&["--cron", "@daily"]),
            with(&["--subscriber", "s"]),
            with(&["--subscriber", "s", "--event-type", "t", "--cron", "@daily"]),
            with(&[
                "--subscriber",
                "s",
                "--cron",
                "@daily",
                "--every-ms",
                "1000",
            ]),
            with(&["--subscriber", "s", "--every-ms", "999"]),
            with(&[
                "--subscriber",
                "s",
                "--every-ms",
                "1000",
                "--time-zone",
                "UTC",
            ]),
            with(&[
                "--subscriber",
                "s",
                "--cron",
                "@daily",
                "--anchor",
                "2026-01-01T00:00:00Z",
            ]),
            with(&["--subscriber", "s", "--cron", "@daily", "--catch-up", "all"]),
            with(&[
                "--subscriber",
                "s",
                "--cron",
                "@daily",
                "--enabled",
                "maybe",
            ]),
            vec![
                "--subscriber".into(),
                "s".into(),
                "--cron".into(),
                "@daily".into(),
                "--event-id".into(),
                "e:{period_start}".into(),
                "--payload".into(),
                "{not json".into(),
            ],
        ] {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert!(parse(&argv).is_err(), "{argv:?}");
        }
        assert!(
            parse(
                &with(&["--subscriber", "s", "--every-ms", "1000"])
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
            .is_ok()
        );
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(duration(1000), "1s");
        assert_eq!(duration(1500), "1s500ms");
        assert_eq!(duration(90_000), "1m30s");
        assert_eq!(duration(3_600_000), "1h");
        assert_eq!(duration(5_400_000), "1h30m");
        assert_eq!(duration(86_400_000), "1d");
        assert_eq!(duration(129_600_000), "1d12h");
        assert_eq!(duration(0), "0ms");
    }

    fn schedule(value: Value) -> Schedule {
        let mut base = json!({
            "id": "s1", "subscriber_id": null, "event_type": null, "cron": null,
            "time_zone": null, "every_ms": null, "anchor": null,
            "event_id": "e:{period_start}", "payload": {"a": 1}, "ttl_ms": null,
            "max_attempts": null, "catch_up": "latest", "enabled": true,
            "created_at": "2026-11-30T12:00:00.000Z", "updated_at": "2026-11-30T12:00:00.000Z",
            "next_periods": [], "last_run": null, "last_error": null,
        });
        for (key, field) in value.as_object().unwrap() {
            base[key] = field.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn a_schedule_names_its_target_and_timing() {
        let cron = schedule(json!({"subscriber_id": "billing", "cron": "0 9 * * 1-5",
                                   "time_zone": "Europe/Berlin"}));
        assert_eq!(cron.target(), "billing");
        assert_eq!(cron.when(), "0 9 * * 1-5 (Europe/Berlin)");
        let every = schedule(json!({"event_type": "cleanup", "every_ms": 5_400_000,
                                    "anchor": "2026-01-01T00:00:00.000Z"}));
        assert_eq!(every.target(), "type:cleanup");
        assert_eq!(every.when(), "every 1h30m from 2026-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_disabled_schedule_says_why_it_has_no_next_period() {
        let text = schedule_text(&schedule(json!({"subscriber_id": "b", "cron": "@daily",
                                                  "time_zone": "UTC", "enabled": false})));
        assert!(
            text.contains("No next periods (the schedule is disabled).\n"),
            "{text}"
        );
        assert!(text.contains("No run yet.\n"), "{text}");
    }
}
