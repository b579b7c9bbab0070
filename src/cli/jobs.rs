//! `deferhook jobs get`, `deferhook jobs list` and `deferhook jobs retry`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{GetJobArgs, JobsArgs, JobsCommand, ListJobsArgs};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::pages;
use super::render::{self, or_none};

/// A job as the API shows it (the fields these commands print).
#[derive(Debug, Deserialize)]
pub struct Job {
    /// UUIDv7.
    pub id: String,
    /// The producer's event id.
    pub event_id: String,
    /// The event type it was created for, if any.
    #[serde(default)]
    pub event_type: Option<String>,
    /// The recurring schedule that created it, if any.
    #[serde(default)]
    pub schedule_id: Option<String>,
    /// The subscriber it is delivered to.
    pub subscriber_id: String,
    /// Where it is in its life.
    pub state: String,
    /// Attempts started so far.
    pub attempts: u32,
    /// Most attempts, if bounded.
    pub max_attempts: Option<u32>,
    /// When it first becomes eligible.
    pub deliver_at: String,
    /// When the next attempt may start.
    pub next_attempt_at: Option<String>,
    /// After it no attempt starts.
    pub deadline: String,
    /// When it was accepted.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// When it was delivered.
    pub delivered_at: Option<String>,
    /// When it became a dead letter.
    pub dead_at: Option<String>,
    /// Why it is dead.
    pub dead_reason: Option<String>,
    /// Why it had waited when it died at its deadline.
    #[serde(default)]
    pub dead_detail: Option<String>,
    /// Whether a retry now can change its outcome.
    #[serde(default)]
    pub retry_advice: Option<RetryAdvice>,
    /// Why it is not delivered yet.
    pub waiting_reason: Option<String>,
    /// The worker's lease, while in flight.
    pub lease: Option<Lease>,
    /// The last failure.
    pub last_error: Option<LastError>,
}

/// Whether a retry now can change a job's outcome, and why.
#[derive(Debug, Deserialize)]
pub struct RetryAdvice {
    /// `yes`, `no`, `after_resume`, `not_before` or `replay`.
    pub verdict: String,
    /// Why.
    pub reason: String,
    /// From when, if known.
    pub at: Option<String>,
}

impl RetryAdvice {
    /// `yes (at …): reason`.
    fn describe(&self) -> String {
        match &self.at {
            Some(at) => format!("{} (at {at}): {}", self.verdict, self.reason),
            None => format!("{}: {}", self.verdict, self.reason),
        }
    }
}

/// The lease of an in-flight job.
#[derive(Debug, Deserialize)]
pub struct Lease {
    /// The worker holding it.
    pub owner: String,
    /// When it expires unless renewed.
    pub expires_at: String,
}

/// A job's last failure.
#[derive(Debug, Deserialize)]
pub struct LastError {
    /// The failure class.
    pub class: String,
    /// The HTTP status, if the receiver answered.
    pub status: Option<u16>,
    /// A short account.
    pub reason: Option<String>,
}

/// One attempt of a job.
#[derive(Debug, Deserialize)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// When it started.
    pub started_at: String,
    /// What it came to.
    pub outcome: String,
    /// The HTTP status.
    pub status: Option<u16>,
    /// The failure class.
    pub error_class: Option<String>,
    /// A short account.
    pub reason: Option<String>,
    /// The worker that made it.
    pub lease_owner: String,
    /// How long it took.
    pub duration_ms: Option<i64>,
    /// Whether the receiver may have seen this event before.
    #[serde(default)]
    pub possible_duplicate: bool,
}

#[derive(Debug, Deserialize)]
struct AttemptList {
    items: Vec<Value>,
}

/// Runs a `jobs` subcommand.
pub async fn run(args: JobsArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        JobsCommand::Get(get) => get_job(&client, &get, json).await?,
        JobsCommand::List(list) => list_jobs(&client, &list, json).await?,
        JobsCommand::Retry(retry) => retry_job(&client, &retry, json).await?,
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The text `jobs get` prints.
async fn get_job(client: &ApiClient, args: &GetJobArgs, json: bool) -> Result<String, CliError> {
    let id = args.job_id.as_str();
    let job = client.get(&["v1", "jobs", id], &[]).await?;
    let attempts = client.get(&["v1", "jobs", id, "attempts"], &[]).await?;
    let attempts: AttemptList = decode(&attempts, "the attempt history")?;
    if json {
        let both = json!({ "job": job, "attempts": attempts.items });
        return Ok(format!("{}\n", render::json(&both)));
    }
    let job: Job = decode(&job, "the job")?;
    let attempts: Vec<Attempt> = attempts
        .items
        .iter()
        .map(|a| decode(a, "an attempt"))
        .collect::<Result<_, _>>()?;
    let mut text = format!("{}\n\n", job_fields(&job));
    if attempts.is_empty() {
        text.push_str("No attempts yet.\n");
    } else {
        text.push_str(&format!(
            "Attempts ({}):\n{}\n",
            attempts.len(),
            attempt_table(&attempts)
        ));
    }
    Ok(text)
}

/// `POST /v1/jobs/{id}/retry`: the text `jobs retry` prints, the job as it now is.
async fn retry_job(client: &ApiClient, args: &GetJobArgs, json: bool) -> Result<String, CliError> {
    let value = client
        .post(&["v1", "jobs", args.job_id.as_str(), "retry"], None)
        .await?;
    if json {
        return Ok(format!("{}\n", render::json(&value)));
    }
    let job: Job = decode(&value, "the job")?;
    Ok(format!("{}\n", job_fields(&job)))
}

/// A job as a table of its fields.
pub fn job_fields(job: &Job) -> String {
    let attempts = match job.max_attempts {
        Some(max) => format!("{} of at most {max}", job.attempts),
        None => job.attempts.to_string(),
    };
    let lease = job
        .lease
        .as_ref()
        .map(|l| format!("{} until {}", l.owner, l.expires_at));
    let last_error = job.last_error.as_ref().map(|e| {
        let mut text = e.class.clone();
        if let Some(status) = e.status {
            text.push_str(&format!(" {status}"));
        }
        if let Some(reason) = &e.reason {
            text.push_str(&format!(": {reason}"));
        }
        text
    });
    render::fields(&[
        ("id", job.id.clone()),
        ("subscriber", job.subscriber_id.clone()),
        ("event", job.event_id.clone()),
        ("event_type", or_none(job.event_type.as_ref())),
        ("schedule", or_none(job.schedule_id.as_ref())),
        ("state", job.state.clone()),
        ("attempts", attempts),
        ("waiting_reason", or_none(job.waiting_reason.as_ref())),
        ("dead_reason", or_none(job.dead_reason.as_ref())),
        ("dead_detail", or_none(job.dead_detail.as_ref())),
        ("last_error", or_none(last_error)),
        (
            "retry_advice",
            or_none(job.retry_advice.as_ref().map(RetryAdvice::describe)),
        ),
        ("deliver_at", job.deliver_at.clone()),
        ("next_attempt_at", or_none(job.next_attempt_at.as_ref())),
        ("deadline", job.deadline.clone()),
        ("lease", or_none(lease)),
        ("created_at", job.created_at.clone()),
        ("updated_at", job.updated_at.clone()),
        ("delivered_at", or_none(job.delivered_at.as_ref())),
        ("dead_at", or_none(job.dead_at.as_ref())),
    ])
}

/// Attempts as a table, oldest first.
pub fn attempt_table(attempts: &[Attempt]) -> String {
    let rows = attempts.iter().map(|a| {
        let mut reason = a.reason.clone().unwrap_or_default();
        if a.possible_duplicate {
            reason = format!("(possible duplicate) {reason}")
                .trim_end()
                .to_owned();
        }
        vec![
            a.number.to_string(),
            a.started_at.clone(),
            a.outcome.clone(),
            or_none(a.status),
            or_none(a.error_class.as_ref()),
            or_none(a.duration_ms.map(|ms| format!("{ms} ms"))),
            a.lease_owner.clone(),
            if reason.is_empty() {
                render::NONE.to_owned()
            } else {
                reason
            },
        ]
    });
    render::table(
        &[
            "#",
            "started_at",
            "outcome",
            "status",
            "error",
            "duration",
            "worker",
            "reason",
        ],
        rows,
    )
}

/// The query of `jobs list`: the API's parameter names for the given flags.
fn list_query(args: &ListJobsArgs) -> Vec<(&'static str, String)> {
    let params = [
        ("state", args.state.clone()),
        ("subscriber_id", args.subscriber.clone()),
        ("event_id", args.event.clone()),
        ("event_type", args.event_type.clone()),
        ("schedule_id", args.schedule_id.clone()),
        ("dead_reason", args.dead_reason.clone()),
        ("created_after", args.created_after.clone()),
        ("created_before", args.created_before.clone()),
        ("dead_after", args.dead_after.clone()),
        ("dead_before", args.dead_before.clone()),
        ("waiting_reason", args.waiting_reason.clone()),
        ("error_class", args.error_class.clone()),
        ("last_status", args.last_status.map(|n| n.to_string())),
    ];
    params
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect()
}

/// The text `jobs list` prints: one page, or every page with `--all`.
async fn list_jobs(
    client: &ApiClient,
    args: &ListJobsArgs,
    json: bool,
) -> Result<String, CliError> {
    let query = list_query(args);
    let listed = pages::read(client, &["v1", "jobs"], &query, &args.page, "the job list").await?;
    if json {
        return Ok(listed.json());
    }
    let jobs: Vec<Job> = listed
        .items
        .iter()
        .map(|j| decode(j, "a job"))
        .collect::<Result<_, _>>()?;
    let mut text = if jobs.is_empty() {
        "No jobs match.\n".to_owned()
    } else {
        format!("{}\n", job_table(&jobs))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!("More jobs: add --cursor {next} (or --all)\n"));
    }
    Ok(text)
}

/// Jobs as a table, one row each; `last_error` is its class and HTTP status, short
/// (`http_5xx 503`, `timeout`), or `-`.
pub fn job_table(jobs: &[Job]) -> String {
    let rows = jobs.iter().map(|job| {
        let reason = job.dead_reason.as_ref().or(job.waiting_reason.as_ref());
        let last_error = job.last_error.as_ref().map(|e| match e.status {
            Some(status) => format!("{} {status}", e.class),
            None => e.class.clone(),
        });
        vec![
            job.id.clone(),
            job.subscriber_id.clone(),
            job.event_id.clone(),
            job.state.clone(),
            job.attempts.to_string(),
            or_none(reason),
            or_none(last_error),
            job.updated_at.clone(),
        ]
    });
    render::table(
        &[
            "id",
            "subscriber",
            "event",
            "state",
            "attempts",
            "reason",
            "last_error",
            "updated_at",
        ],
        rows,
    )
}
