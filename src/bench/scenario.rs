//! One run: a fresh database, the servers, the receiver, the scenario's load, the wait
//! for deliveries, then the servers' usage and the clean-up.

use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use super::args::{Args, Scenario};
use super::clock::{format_ms, now_ms};
use super::database::Database;
use super::load::{Api, Created, drive, due_ms};
use super::receiver::{Arrival, Receiver};
use super::server::{self, Server, Usage};

/// The one subscriber of `burst`, `steady` and `backlog`.
const SUBSCRIBER: &str = "bench";
/// Its `max_in_flight` (the API's largest), so the subscriber limit does not cap the
/// figures.
const WIDE_OPEN: u32 = 10_000;
/// How long the receiver keeps listening after the last expected arrival, so late
/// duplicates are counted.
const SETTLE: Duration = Duration::from_secs(1);
/// API calls the `backlog` scenario times while the jobs wait.
const PROBES: u64 = 200;

/// What a run observed.
pub struct Outcome {
    /// The jobs the API accepted.
    pub created: Vec<Created>,
    /// Unix milliseconds when the load began.
    pub load_started_ms: i64,
    /// Every request the receiver got.
    pub arrivals: Vec<Arrival>,
    /// Whether every job was expected to arrive during the run (not `backlog`).
    pub expects_delivery: bool,
    /// Latencies of the API calls `backlog` timed while its jobs waited, in ms.
    pub probe_latencies_ms: Vec<f64>,
    /// Each server's usage, read before it was stopped.
    pub usage: Vec<Usage>,
}

/// Runs `args.scenario` and cleans up the servers and the database, whatever happens.
pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let binary = server::binary(&args.server_binary)?;
    let database = Database::create(args).await?;
    let mut servers = Vec::new();
    let mut outcome = start_and_load(args, &binary, &database.url, &mut servers).await;
    let mut usage = Vec::new();
    for server in servers {
        match server.stop() {
            Ok(used) => usage.push(used),
            Err(error) if outcome.is_ok() => outcome = Err(error),
            Err(_) => {}
        }
    }
    database.remove().await.context("removing the database")?;
    let mut outcome = outcome?;
    outcome.usage = usage;
    Ok(outcome)
}

async fn start_and_load(
    args: &Args,
    binary: &std::path::PathBuf,
    database_url: &str,
    servers: &mut Vec<Server>,
) -> anyhow::Result<Outcome> {
    for _ in 0..args.instances {
        servers.push(Server::start(binary, database_url)?);
    }
    let receiver = Receiver::start(args.slow_ms).await?;
    let api = Api::new(servers.iter().map(|s| s.base.clone()).collect())?;
    let (load_started_ms, created) = match args.scenario {
        Scenario::Burst => burst(args, &api, &receiver).await?,
        Scenario::Steady => steady(args, &api, &receiver).await?,
        Scenario::Backlog => burst_due_in(args, &api, &receiver, Some(3_600_000)).await?,
        Scenario::Fanout => fanout(args, &api, &receiver).await?,
        Scenario::Ceilings => anyhow::bail!("`ceilings` starts no server"),
    };
    let expects_delivery = args.scenario != Scenario::Backlog;
    let mut probe_latencies_ms = Vec::new();
    if expects_delivery {
        wait_for(&receiver, created.len(), Duration::from_secs(args.timeout)).await;
    } else {
        probe_latencies_ms = probe(&api, args.jobs()).await?;
    }
    Ok(Outcome {
        created,
        load_started_ms,
        arrivals: receiver.arrivals(),
        expects_delivery,
        probe_latencies_ms,
        usage: Vec::new(),
    })
}

/// When the job-creating requests began (after the subscribers were set up), in Unix
/// milliseconds, and the jobs the API accepted.
type Load = (i64, Vec<Created>);

async fn burst(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    burst_due_in(args, api, receiver, None).await
}

/// `--jobs` jobs for one subscriber, due now or `due_in_ms` after they are sent.
async fn burst_due_in(
    args: &Args,
    api: &Api,
    receiver: &Receiver,
    due_in_ms: Option<i64>,
) -> anyhow::Result<Load> {
    api.put_subscriber(SUBSCRIBER, &receiver.url(SUBSCRIBER, false), WIDE_OPEN)
        .await?;
    let api = api.clone();
    let started_ms = now_ms();
    let created = drive(args.concurrency, args.jobs(), None, move |n| {
        let api = api.clone();
        async move {
            let at = match due_in_ms {
                Some(ms) => Some(format_ms(now_ms() + ms)?),
                None => None,
            };
            api.create_job(n, SUBSCRIBER, at).await
        }
    })
    .await?;
    Ok((started_ms, created))
}

/// `--rate` jobs/s for `--seconds` s, job `n` due 1–5 s after it is sent (spread
/// evenly by a fixed stride, so runs are comparable).
async fn steady(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    api.put_subscriber(SUBSCRIBER, &receiver.url(SUBSCRIBER, false), WIDE_OPEN)
        .await?;
    let api = api.clone();
    let count = args.rate * args.seconds;
    let started_ms = now_ms();
    let created = drive(args.concurrency, count, Some(args.rate), move |n| {
        let api = api.clone();
        async move {
            let delay_ms = 1_000 + (n * 7_919 % 4_001) as i64;
            let at = format_ms(now_ms() + delay_ms)?;
            api.create_job(n, SUBSCRIBER, Some(at)).await
        }
    })
    .await?;
    Ok((started_ms, created))
}

/// One event to `--jobs` subscribers, the first `--slow` of them slow.
async fn fanout(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    let subscribers = args.jobs();
    let ids: Vec<String> = (0..subscribers).map(|n| format!("s{n:05}")).collect();
    let urls: Vec<String> = (0..subscribers)
        .map(|n| receiver.url(&ids[n as usize], n < args.slow))
        .collect();
    let (put_api, put_ids) = (api.clone(), ids.clone());
    drive(args.concurrency, subscribers, None, move |n| {
        let (api, id, url) = (
            put_api.clone(),
            put_ids[n as usize].clone(),
            urls[n as usize].clone(),
        );
        async move { api.put_subscriber(&id, &url, 16).await }
    })
    .await?;
    let body = json!({ "event_id": "fanout", "payload": { "fan": "out" }, "subscriber_ids": ids });
    let started_ms = now_ms();
    let (answer, latency_ms) = api.call(0, Method::POST, "/v1/events", Some(&body)).await?;
    let accepted_ms = now_ms();
    let jobs = match &answer {
        Value::Array(jobs) => jobs,
        other => other["jobs"]
            .as_array()
            .or_else(|| other["items"].as_array())
            .context("the fan-out answer lists no jobs")?,
    };
    let created = jobs
        .iter()
        .map(|job| {
            Ok(Created {
                subscriber: job["subscriber_id"].as_str().unwrap_or_default().to_owned(),
                event_id: "fanout".to_owned(),
                due_ms: due_ms(job)?,
                accepted_ms,
                latency_ms,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((started_ms, created))
}

/// Waits until `expected` requests arrived (or `timeout`), then a little longer for
/// duplicates.
async fn wait_for(receiver: &Receiver, expected: usize, timeout: Duration) {
    let started = Instant::now();
    while receiver.count() < expected && started.elapsed() < timeout {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(SETTLE).await;
}

/// While the backlog waits: times listing jobs and creating one more (due in an hour),
/// one call at a time.
async fn probe(api: &Api, jobs: u64) -> anyhow::Result<Vec<f64>> {
    let mut latencies = Vec::new();
    for n in 0..PROBES {
        let path = format!("/v1/jobs?subscriber_id={SUBSCRIBER}&limit=10");
        latencies.push(api.call(n, Method::GET, &path, None).await?.1);
        let at = format_ms(now_ms() + 3_600_000)?;
        latencies.push(
            api.create_job(jobs + n, SUBSCRIBER, Some(at))
                .await?
                .latency_ms,
        );
    }
    Ok(latencies)
}
