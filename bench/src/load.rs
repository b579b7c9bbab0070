//! The load generator: API calls with the bench's token, `concurrency` of them in
//! flight at once, optionally paced to a rate.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::{Method, header};
use serde_json::{Value, json};

use super::clock::{now_ms, parse_ms};
use super::server::TOKEN;

/// A job the API accepted.
#[derive(Debug, Clone)]
pub struct Created {
    /// Its subscriber.
    pub subscriber: String,
    /// Its event id, which arrives as `webhook-id`.
    pub event_id: String,
    /// Its `deliver_at` as the server answered it, in Unix milliseconds.
    pub due_ms: i64,
    /// When the 2xx arrived, in Unix milliseconds.
    pub accepted_ms: i64,
    /// How long the request took, in milliseconds.
    pub latency_ms: f64,
}

/// A client of the servers' APIs; request `n` goes to server `n % servers`.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    bases: Arc<Vec<String>>,
    /// The servers' process ids and their database's URL, for figures read beside
    /// the API (memory, the store's size).
    run: Arc<(Vec<u32>, String)>,
}

impl Api {
    /// A keep-alive client for `bases` (`http://addr` each).
    pub fn new(bases: Vec<String>) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Api {
            client,
            bases: Arc::new(bases),
            run: Arc::new((Vec::new(), String::new())),
        })
    }

    /// The same client, knowing the servers' process ids and their database's URL.
    pub fn with_run(mut self, pids: Vec<u32>, database_url: &str) -> Self {
        self.run = Arc::new((pids, database_url.to_owned()));
        self
    }

    /// The servers' process ids ([`Self::with_run`]).
    pub fn pids(&self) -> &[u32] {
        &self.run.0
    }

    /// The servers' database URL ([`Self::with_run`]).
    pub fn database_url(&self) -> &str {
        &self.run.1
    }

    /// The first server's base URL (`http://addr`).
    pub fn base(&self) -> &str {
        &self.bases[0]
    }

    /// Sends one request to server `n % servers`; returns the JSON answer and the
    /// latency in milliseconds. Anything but a 2xx is an error.
    pub async fn call(
        &self,
        n: u64,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(Value, f64)> {
        let base = &self.bases[(n % self.bases.len() as u64) as usize];
        let request = request(&self.client, base, method, path, body)?;
        let started = Instant::now();
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        let latency_ms = started.elapsed().as_secs_f64() * 1_000.0;
        if !status.is_success() {
            anyhow::bail!("{path}: {status}: {}", String::from_utf8_lossy(&bytes));
        }
        Ok((serde_json::from_slice(&bytes)?, latency_ms))
    }

    /// Creates or updates a subscriber that may have `max_in_flight` attempts open
    /// (`None`: the API's default).
    pub async fn put_subscriber(
        &self,
        id: &str,
        url: &str,
        max_in_flight: Option<u32>,
    ) -> anyhow::Result<()> {
        let mut body = json!({ "url": url });
        if let Some(limit) = max_in_flight {
            body["max_in_flight"] = json!(limit);
        }
        self.call(
            0,
            Method::PUT,
            &format!("/v1/subscribers/{id}"),
            Some(&body),
        )
        .await?;
        Ok(())
    }

    /// Creates or updates each `(id, url)` subscriber with `max_in_flight` (`None`: the
    /// API's default), `concurrency` requests at a time.
    pub async fn put_subscribers(
        &self,
        concurrency: u64,
        subscribers: Vec<(String, String)>,
        max_in_flight: Option<u32>,
    ) -> anyhow::Result<()> {
        let (api, subscribers) = (self.clone(), Arc::new(subscribers));
        let count = subscribers.len() as u64;
        drive(concurrency, count, None, move |n| {
            let (api, subscribers) = (api.clone(), subscribers.clone());
            async move {
                let (id, url) = &subscribers[n as usize];
                api.put_subscriber(id, url, max_in_flight).await
            }
        })
        .await?;
        Ok(())
    }

    /// Creates job `n` for `subscriber`, due at `deliver_at` (RFC 3339) or now.
    pub async fn create_job(
        &self,
        n: u64,
        subscriber: &str,
        deliver_at: Option<String>,
    ) -> anyhow::Result<Created> {
        let event_id = format!("e{n}");
        let mut body = json!({
            "subscriber_id": subscriber,
            "event_id": event_id,
            "payload": { "n": n },
        });
        if let Some(at) = deliver_at {
            body["deliver_at"] = Value::String(at);
        }
        let (job, latency_ms) = self.call(n, Method::POST, "/v1/jobs", Some(&body)).await?;
        Ok(Created {
            subscriber: subscriber.to_owned(),
            event_id,
            due_ms: due_ms(&job)?,
            accepted_ms: now_ms(),
            latency_ms,
        })
    }

    /// Posts event `event_id` for `subscribers` to server `n % servers`, with the jobs'
    /// `ttl_ms` when given (else the server's default); returns the jobs it created (all
    /// with the request's latency and the time its 2xx arrived).
    pub async fn post_event(
        &self,
        n: u64,
        event_id: &str,
        subscribers: &[String],
        ttl_ms: Option<u64>,
    ) -> anyhow::Result<Vec<Created>> {
        self.post_event_with(n, event_id, subscribers, ttl_ms, json!({ "fan": "out" }))
            .await
    }

    /// [`Self::post_event`] with `payload`.
    pub async fn post_event_with(
        &self,
        n: u64,
        event_id: &str,
        subscribers: &[String],
        ttl_ms: Option<u64>,
        payload: Value,
    ) -> anyhow::Result<Vec<Created>> {
        let mut body = json!({
            "event_id": event_id,
            "payload": payload,
            "subscriber_ids": subscribers,
        });
        if let Some(ttl) = ttl_ms {
            body["ttl_ms"] = json!(ttl);
        }
        let (answer, latency_ms) = self
            .call(n, Method::POST, "/v1/events", Some(&body))
            .await?;
        let accepted_ms = now_ms();
        let jobs = match &answer {
            Value::Array(jobs) => jobs,
            other => other["jobs"]
                .as_array()
                .or_else(|| other["items"].as_array())
                .context("the fan-out answer lists no jobs")?,
        };
        jobs.iter()
            .map(|job| {
                Ok(Created {
                    subscriber: job["subscriber_id"].as_str().unwrap_or_default().to_owned(),
                    event_id: event_id.to_owned(),
                    due_ms: due_ms(job)?,
                    accepted_ms,
                    latency_ms,
                })
            })
            .collect()
    }
}

/// A job object's `deliver_at`, in Unix milliseconds.
pub fn due_ms(job: &Value) -> anyhow::Result<i64> {
    parse_ms(
        job["deliver_at"]
            .as_str()
            .context("a job without deliver_at")?,
    )
}

/// Runs `task(0..count)` with at most `concurrency` running at once; with `rate`, task
/// `n` does not start before `n / rate` seconds after the start. Returns every result
/// (in completion order) or the first error.
pub async fn drive<T, F, Fut>(
    concurrency: u64,
    count: u64,
    rate: Option<u64>,
    task: F,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let task = Arc::new(task);
    let start = tokio::time::Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(count.max(1)) {
        let (next, task) = (next.clone(), task.clone());
        workers.spawn(async move {
            let mut results = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= count {
                    return Ok::<_, anyhow::Error>(results);
                }
                if let Some(rate) = rate {
                    let offset = Duration::from_secs_f64(n as f64 / rate as f64);
                    tokio::time::sleep_until(start + offset).await;
                }
                results.push(task(n).await?);
            }
        });
    }
    let mut all = Vec::with_capacity(count as usize);
    while let Some(joined) = workers.join_next().await {
        all.extend(joined??);
    }
    Ok(all)
}

/// A request to `base` (`http://addr`) with the token and, when given, the JSON body.
pub fn request(
    client: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<reqwest::RequestBuilder> {
    let mut request = client
        .request(method, format!("{base}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request
            .header(header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body)?);
    }
    Ok(request)
}
