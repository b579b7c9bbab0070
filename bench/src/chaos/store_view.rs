//! The store as the API shows it once the soak has drained: every job, each job's
//! attempt history and every instance's job gauges, the audit's other input.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::super::clock::{now_ms, parse_ms};
use super::super::server::TOKEN;
use super::history::Ms;

/// Jobs per page of `GET /v1/jobs` (the API's maximum).
const PAGE: usize = 1_000;
/// Attempt histories read at once.
const AT_ONCE: usize = 16;
/// Tries of one request that fails with a 5xx or no answer.
const TRIES: u32 = 5;
/// Pause between two tries.
const RETRY_PAUSE: Duration = Duration::from_millis(300);

/// One job as `GET /v1/jobs` lists it (times in Unix ms).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredJob {
    pub id: Uuid,
    pub subscriber_id: String,
    pub event_id: String,
    /// One of the six states, as read (an expired lease reads `retrying`).
    pub state: String,
    /// Attempts started.
    pub attempts: u32,
    pub max_attempts: Option<u32>,
    pub deliver_at_ms: Ms,
    pub next_attempt_at_ms: Option<Ms>,
    pub deadline_ms: Ms,
    pub delivered_at_ms: Option<Ms>,
    pub dead_at_ms: Option<Ms>,
    pub dead_reason: Option<String>,
    pub waiting_reason: Option<String>,
    /// For a job dead at its deadline, what held it then (`subscriber_paused`,
    /// `destination_paused`, `destination_circuit_open`).
    pub dead_detail: Option<String>,
}

/// One row of a job's attempt history (`GET /v1/jobs/{id}/attempts`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredAttempt {
    /// 1-based.
    pub number: u32,
    pub started_at_ms: Ms,
    pub finished_at_ms: Option<Ms>,
    /// `in_progress`, `delivered`, `retryable`, `terminal`, `unknown` or `blocked`.
    pub outcome: String,
    pub status: Option<u16>,
    pub error_class: Option<String>,
    pub reason: Option<String>,
    pub lease_owner: Option<String>,
    pub possible_duplicate: bool,
}

/// One instance's `deferhook_jobs{state}` and `deferhook_dead_jobs{reason}` gauges.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Gauges {
    /// The instance's fleet index.
    pub instance: usize,
    /// Jobs per state label.
    pub jobs: BTreeMap<String, u64>,
    /// Dead jobs per reason label.
    pub dead_jobs: BTreeMap<String, u64>,
}

/// The whole store, read after the drain.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreView {
    pub jobs: Vec<StoredJob>,
    /// Each job's attempts, oldest first.
    pub attempts: HashMap<Uuid, Vec<StoredAttempt>>,
    pub gauges: Vec<Gauges>,
    /// When the listing began (Unix ms).
    pub read_at_ms: Ms,
}

/// Every job (`GET /v1/jobs`, limit 1000, all pages), each job's attempts (`GET
/// /v1/jobs/{id}/attempts`, 16 at once), via `bases[0]`; then `/metrics` of every
/// base. `bases` are `(fleet index, "http://addr")`. Retries a request a few times on
/// a 5xx or a connection error; any other failure (4xx, malformed JSON) is an error.
pub async fn read(bases: &[(usize, String)]) -> anyhow::Result<StoreView> {
    let (_, base) = bases
        .first()
        .context("no instance to read the store from")?;
    let client = client()?;
    let read_at_ms = now_ms();
    let jobs = list(&client, base, None).await?;
    let mut attempts = HashMap::with_capacity(jobs.len());
    for chunk in jobs.chunks(AT_ONCE) {
        let mut set = JoinSet::new();
        for job in chunk {
            let (client, id) = (client.clone(), job.id);
            let url = format!("{base}/v1/jobs/{id}/attempts");
            set.spawn(async move { (id, get(&client, &url).await) });
        }
        while let Some(joined) = set.join_next().await {
            let (id, body) = joined?;
            let body: Value = serde_json::from_slice(&body?)?;
            let rows = items(&body)?
                .iter()
                .map(attempt)
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("attempts of job {id}"))?;
            attempts.insert(id, rows);
        }
    }
    let gauges = gauges(bases).await?;
    Ok(StoreView {
        jobs,
        attempts,
        gauges,
        read_at_ms,
    })
}

/// The store-derived gauges (`deferhook_jobs`, `deferhook_dead_jobs`) of each of
/// `bases` (`(fleet index, http://addr)`), from its `/metrics`.
pub async fn gauges(bases: &[(usize, String)]) -> anyhow::Result<Vec<Gauges>> {
    let client = client()?;
    let mut gauges = Vec::with_capacity(bases.len());
    for (instance, base) in bases {
        let text = get(&client, &format!("{base}/metrics")).await?;
        gauges.push(parse_gauges(*instance, &String::from_utf8_lossy(&text)));
    }
    Ok(gauges)
}

/// How many jobs are not terminal (`GET /v1/jobs?state=scheduled,in_flight,retrying`,
/// all pages), for the drain.
pub async fn unsettled(base: &str) -> anyhow::Result<Vec<StoredJob>> {
    let client = client()?;
    list(&client, base, Some("scheduled,in_flight,retrying")).await
}

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// Every page of `GET /v1/jobs`, with `state` when given.
async fn list(
    client: &reqwest::Client,
    base: &str,
    state: Option<&str>,
) -> anyhow::Result<Vec<StoredJob>> {
    let mut jobs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", PAGE.to_string())];
        if let Some(state) = state {
            query.push(("state", state.to_owned()));
        }
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.clone()));
        }
        let url = format!("{base}/v1/jobs?{}", serde_urlencoded::to_string(&query)?);
        let body: Value = serde_json::from_slice(&get(client, &url).await?)?;
        for item in items(&body)? {
            jobs.push(job(item)?);
        }
        match body.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(jobs),
        }
    }
}

/// `GET url` with the bearer token; the body of a 2xx. Retries 5xx answers and
/// connection errors [`TRIES`] times.
async fn get(client: &reqwest::Client, url: &str) -> anyhow::Result<Vec<u8>> {
    let mut tries = 0;
    loop {
        tries += 1;
        let failure = match client.get(url).bearer_auth(TOKEN).send().await {
            Ok(response) if response.status().is_success() => {
                return Ok(response.bytes().await?.to_vec());
            }
            Ok(response) if response.status().is_server_error() => {
                anyhow::anyhow!("GET {url}: {}", response.status())
            }
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                anyhow::bail!("GET {url}: {status}: {body}");
            }
            Err(error) => anyhow::Error::new(error).context(format!("GET {url}")),
        };
        if tries >= TRIES {
            return Err(failure);
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

fn items(body: &Value) -> anyhow::Result<&Vec<Value>> {
    body.get("items")
        .and_then(Value::as_array)
        .context("an answer without `items`")
}

fn text(item: &Value, field: &str) -> Option<String> {
    item.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn required(item: &Value, field: &str) -> anyhow::Result<String> {
    text(item, field).with_context(|| format!("no `{field}` in {item}"))
}

fn time(item: &Value, field: &str) -> anyhow::Result<Option<Ms>> {
    text(item, field).map(|at| parse_ms(&at)).transpose()
}

fn number(item: &Value, field: &str) -> Option<u64> {
    item.get(field).and_then(Value::as_u64)
}

/// A job object of the API.
fn job(item: &Value) -> anyhow::Result<StoredJob> {
    let needed = |field: &str| -> anyhow::Result<Ms> {
        time(item, field)?.with_context(|| format!("no `{field}` in {item}"))
    };
    Ok(StoredJob {
        id: required(item, "id")?.parse()?,
        subscriber_id: required(item, "subscriber_id")?,
        event_id: required(item, "event_id")?,
        state: required(item, "state")?,
        attempts: number(item, "attempts").context("no `attempts`")? as u32,
        max_attempts: number(item, "max_attempts").map(|n| n as u32),
        deliver_at_ms: needed("deliver_at")?,
        next_attempt_at_ms: time(item, "next_attempt_at")?,
        deadline_ms: needed("deadline")?,
        delivered_at_ms: time(item, "delivered_at")?,
        dead_at_ms: time(item, "dead_at")?,
        dead_reason: text(item, "dead_reason"),
        waiting_reason: text(item, "waiting_reason"),
        dead_detail: text(item, "dead_detail"),
    })
}

/// An attempt row of the API.
fn attempt(item: &Value) -> anyhow::Result<StoredAttempt> {
    Ok(StoredAttempt {
        number: number(item, "number").context("no `number`")? as u32,
        started_at_ms: time(item, "started_at")?.context("no `started_at`")?,
        finished_at_ms: time(item, "finished_at")?,
        outcome: required(item, "outcome")?,
        status: number(item, "status").map(|s| s as u16),
        error_class: text(item, "error_class"),
        reason: text(item, "reason"),
        lease_owner: text(item, "lease_owner"),
        possible_duplicate: item
            .get("possible_duplicate")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// The `deferhook_jobs{state="…"}` and `deferhook_dead_jobs{reason="…"}` samples of a
/// Prometheus text exposition.
pub fn parse_gauges(instance: usize, exposition: &str) -> Gauges {
    let mut gauges = Gauges {
        instance,
        ..Gauges::default()
    };
    for line in exposition.lines() {
        let sample = |name: &str, label: &str| -> Option<(String, u64)> {
            let rest = line.strip_prefix(name)?.strip_prefix('{')?;
            let rest = rest.strip_prefix(label)?.strip_prefix("=\"")?;
            let (value_label, rest) = rest.split_once('"')?;
            let value = rest.strip_prefix('}')?.split_whitespace().next()?;
            Some((value_label.to_owned(), value.parse::<f64>().ok()? as u64))
        };
        if let Some((state, n)) = sample("deferhook_jobs", "state") {
            gauges.jobs.insert(state, n);
        } else if let Some((reason, n)) = sample("deferhook_dead_jobs", "reason") {
            gauges.dead_jobs.insert(reason, n);
        }
    }
    gauges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_read_from_the_exposition() {
        let text = "# TYPE deferhook_jobs gauge\n\
            deferhook_jobs{state=\"dead\"} 3\n\
            deferhook_jobs{state=\"delivered\"} 10\n\
            deferhook_jobs_accepted_total 13\n\
            deferhook_dead_jobs{reason=\"max_attempts\"} 2\n\
            deferhook_dead_jobs{reason=\"deadline_exceeded\"} 1\n";
        let gauges = parse_gauges(2, text);
        assert_eq!(gauges.instance, 2);
        assert_eq!(gauges.jobs.len(), 2);
        assert_eq!(gauges.jobs["delivered"], 10);
        assert_eq!(gauges.dead_jobs.values().sum::<u64>(), 3);
    }

    #[test]
    fn a_job_object_is_read() {
        let item = serde_json::json!({
            "id": "0192f5d0-0000-7000-8000-000000000001", "event_id": "e1",
            "subscriber_id": "fast-0", "state": "dead", "attempts": 2, "max_attempts": 2,
            "deliver_at": "2026-11-30T12:00:00.250Z", "next_attempt_at": null,
            "deadline": "2026-11-30T12:00:10Z", "delivered_at": null,
            "dead_at": "2026-11-30T12:00:01Z", "dead_reason": "max_attempts",
            "waiting_reason": null
        });
        let job = job(&item).expect("a job");
        assert_eq!(job.attempts, 2);
        assert_eq!(job.max_attempts, Some(2));
        assert_eq!(job.deadline_ms - job.deliver_at_ms, 9_750);
        assert_eq!(job.dead_reason.as_deref(), Some("max_attempts"));
        assert!(job.next_attempt_at_ms.is_none());
    }

    /// Reads a real server's store (`cargo build --bin deferhook` first): run with
    /// `cargo test --bin deferhook-bench store_view -- --ignored`.
    #[tokio::test]
    #[ignore = "starts target/debug/deferhook"]
    async fn a_real_store_is_read() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let binary =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug/deferhook");
        let dir = std::env::temp_dir().join(format!("store_view_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let url = format!("sqlite://{}", dir.join("db").display());
        let server =
            super::super::super::server::Server::start(&binary, &url, &[]).expect("server");
        let api = super::super::super::load::Api::new(vec![server.base.clone()]).expect("api");
        // Nothing listens on port 9: its jobs fail to connect and retry.
        api.put_subscriber("fast-0", "http://127.0.0.1:9/fast-0", None)
            .await
            .expect("subscriber");
        let later = super::super::super::clock::format_ms(now_ms() + 600_000).expect("time");
        for n in 0..3 {
            let at = (n == 0).then(|| later.clone());
            api.create_job(n, "fast-0", at).await.expect("create");
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let view = read(&[(0, server.base.clone()), (1, server.base.clone())])
            .await
            .expect("read");
        assert_eq!(view.jobs.len(), 3);
        assert_eq!(view.gauges.len(), 2);
        assert_eq!(
            view.gauges[0].jobs.values().sum::<u64>(),
            3,
            "{:?}",
            view.gauges
        );
        let delayed = view.jobs.iter().find(|j| j.event_id == "e0").expect("e0");
        assert_eq!(delayed.state, "scheduled");
        assert!(view.attempts[&delayed.id].is_empty());
        let tried = view.jobs.iter().find(|j| j.event_id == "e1").expect("e1");
        assert!(tried.attempts >= 1, "{tried:?}");
        assert_eq!(view.attempts[&tried.id].len() as u32, tried.attempts);
        assert_eq!(
            view.attempts[&tried.id][0].error_class.as_deref(),
            Some("connect")
        );
        assert_eq!(unsettled(&server.base).await.expect("unsettled").len(), 3);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
