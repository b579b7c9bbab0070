//! One run: a fresh database, the servers, the receiver, the scenario's load, the wait
//! for deliveries, then the servers' usage and the clean-up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;

use super::args::{Args, Backend, Scenario};
use super::clock::{format_ms, now_ms};
use super::database::Database;
use super::db_usage;
use super::load::{Api, Created, drive};
use super::receiver::{Arrival, Receiver};
use super::server::{self, Server, Usage};

/// The subscriber of `burst`, `steady` and `backlog` when there is one (`bench-NNNN`
/// when `--subscribers` asks for more).
const SUBSCRIBER: &str = "bench";
/// Its `max_in_flight` (the API's largest), so the subscriber limit does not cap the
/// figures.
const WIDE_OPEN: u32 = 10_000;
/// How long the receiver keeps listening after the last expected arrival, so late
/// duplicates are counted.
pub const SETTLE: Duration = Duration::from_secs(1);
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
    /// The CPU seconds PostgreSQL spent from the load's start until every job arrived
    /// (all its processes, [`db_usage`]); `None` on SQLite, whose work is the server's.
    pub database_cpu_seconds: Option<f64>,
    /// `fanout --payload-bytes`: what one large payload cost.
    pub large_payload: Option<LargePayload>,
}

/// What one event with a large payload (`fanout --payload-bytes`, C-21) cost.
#[derive(Debug, Clone, Copy)]
pub struct LargePayload {
    /// The payload's size in bytes.
    pub bytes: u64,
    /// The hash of its bytes ([`super::receiver::body_hash`]).
    pub hash: u64,
    /// How much the store grew from just before the event until every job arrived, in
    /// bytes (PostgreSQL: `pg_database_size`; SQLite: the file and its WAL).
    pub store_growth_bytes: i64,
    /// The servers' resident memory just before the event, in KiB (summed).
    pub rss_before_kib: u64,
}

/// Runs `args.scenario` and cleans up the servers and the database, whatever happens.
pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let (mut outcome, usage) = with_servers(args, async |api: &Api| load(args, api).await).await?;
    outcome.usage = usage;
    Ok(outcome)
}

/// Starts `args.instances` servers on a fresh database, runs `work` against their API,
/// then stops them (reading each one's usage first) and removes the database, whatever
/// `work` did. Returns what `work` returned and the servers' usage.
pub async fn with_servers<T>(
    args: &Args,
    work: impl AsyncFnOnce(&Api) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<Usage>)> {
    let binary = server::binary(&args.server_binary)?;
    let database = Database::create(args).await?;
    let mut servers = Vec::new();
    let mut outcome = start_then(args, &binary, &database.url, &mut servers, work).await;
    let mut usage = Vec::new();
    for server in servers {
        match server.stop() {
            Ok(used) => usage.push(used),
            Err(error) if outcome.is_ok() => outcome = Err(error),
            Err(_) => {}
        }
    }
    database.remove().await.context("removing the database")?;
    Ok((outcome?, usage))
}

/// Starts the servers into `servers` (so the caller stops them even on an error), then
/// runs `work`.
async fn start_then<T>(
    args: &Args,
    binary: &std::path::PathBuf,
    database_url: &str,
    servers: &mut Vec<Server>,
    work: impl AsyncFnOnce(&Api) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    for _ in 0..args.instances {
        servers.push(Server::start(binary, database_url, &args.server_flags())?);
    }
    let api = Api::new(servers.iter().map(|s| s.base.clone()).collect())?
        .with_run(servers.iter().map(Server::pid).collect(), database_url);
    work(&api).await
}

/// The receiver, the scenario's load, then the wait for deliveries or the probes.
async fn load(args: &Args, api: &Api) -> anyhow::Result<Outcome> {
    let receiver = Receiver::start_on(args.destinations() as usize, args.slow_ms()).await?;
    let postgres = args.backend == Backend::Postgres;
    let database_before = postgres.then(db_usage::postgres_cpu_seconds).transpose()?;
    let mut large_payload = None;
    let (load_started_ms, created) = match args.scenario {
        Scenario::Burst => burst(args, api, &receiver).await?,
        Scenario::Steady => steady(args, api, &receiver).await?,
        Scenario::Backlog => burst_due_in(args, api, &receiver, Some(3_600_000)).await?,
        Scenario::Fanout if args.payload_bytes > 0 => {
            let (load, before) = fanout_large(args, api, &receiver).await?;
            large_payload = Some(before);
            load
        }
        Scenario::Fanout => fanout(args, api, &receiver).await?,
        Scenario::Ceilings
        | Scenario::Incident
        | Scenario::OnCall
        | Scenario::Chaos
        | Scenario::Console => {
            anyhow::bail!("`{:?}` has its own run", args.scenario)
        }
    };
    let expects_delivery = args.scenario != Scenario::Backlog;
    let mut probe_latencies_ms = Vec::new();
    if expects_delivery {
        wait_for(&receiver, created.len(), Duration::from_secs(args.timeout)).await;
    } else {
        probe_latencies_ms = probe(api, args.jobs(), &subscribers(args)[0]).await?;
    }
    if let Some(large) = &mut large_payload {
        large.store_growth_bytes =
            store_bytes(api.database_url()).await? - large.store_growth_bytes;
    }
    let database_cpu_seconds = match database_before {
        Some(before) => Some(db_usage::postgres_cpu_seconds()? - before),
        None => None,
    };
    Ok(Outcome {
        created,
        load_started_ms,
        arrivals: receiver.arrivals(),
        expects_delivery,
        probe_latencies_ms,
        usage: Vec::new(),
        database_cpu_seconds,
        large_payload,
    })
}

/// A JSON object of about `bytes` bytes (at least 32), with escapes and non-ASCII
/// text that a re-serialisation would change, filled with letters and digits of a
/// fixed pseudo-random sequence: text PostgreSQL's TOAST compression cannot shrink
/// much, as real payloads (ids, hashes, base64) mostly are not (a repeated letter
/// compressed 2.5 GB of copies into 65 MiB and hid them).
pub fn large_payload(bytes: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let head = r#"{"n":12345678901234567890,"s":"\u00e9 é "#;
    let tail = r#""}"#;
    let fill = (bytes as usize).saturating_sub(head.len() + tail.len());
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let text: String = (0..fill)
        .map(|_| {
            // xorshift64: the same sequence on every run.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
        })
        .collect();
    format!("{head}{text}{tail}")
}

/// One event with a payload of `--payload-bytes` to `--jobs` subscribers (C-21), after
/// reading the store's size and the servers' memory; the returned [`LargePayload`]
/// holds the store's size before in `store_growth_bytes` until the caller reads it
/// again.
async fn fanout_large(
    args: &Args,
    api: &Api,
    receiver: &Receiver,
) -> anyhow::Result<(Load, LargePayload)> {
    let ids: Vec<String> = (0..args.jobs()).map(|n| format!("s{n:05}")).collect();
    let subscribers = ids
        .iter()
        .map(|id| (id.clone(), receiver.url(id, false)))
        .collect();
    api.put_subscribers(args.concurrency, subscribers, Some(16))
        .await?;
    let text = large_payload(args.payload_bytes);
    let payload: serde_json::Value = serde_json::from_str(&text)?;
    // As the server sends it: its exact text (serde_json keeps the escapes and order).
    let sent = serde_json::to_string(&payload)?;
    let mut rss_before_kib = 0;
    for &pid in api.pids() {
        rss_before_kib += server::rss_kib(pid)?;
    }
    let before = LargePayload {
        bytes: sent.len() as u64,
        hash: super::receiver::body_hash(sent.as_bytes()),
        store_growth_bytes: store_bytes(api.database_url()).await?,
        rss_before_kib,
    };
    let started_ms = now_ms();
    let created = api.post_event_with(0, "large", &ids, None, payload).await?;
    Ok(((started_ms, created), before))
}

/// The store's size in bytes: PostgreSQL's `pg_database_size`, or the SQLite file
/// and its WAL.
async fn store_bytes(database_url: &str) -> anyhow::Result<i64> {
    if let Some(path) = database_url.strip_prefix("sqlite://") {
        let size = |p: String| std::fs::metadata(p).map(|m| m.len() as i64).unwrap_or(0);
        return Ok(size(path.to_owned()) + size(format!("{path}-wal")));
    }
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(database_url).await?;
    let size: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(&mut db)
        .await?;
    db.close().await?;
    Ok(size)
}

/// When the job-creating requests began (after the subscribers were set up), in Unix
/// milliseconds, and the jobs the API accepted.
type Load = (i64, Vec<Created>);

async fn burst(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    burst_due_in(args, api, receiver, None).await
}

/// The subscribers of `burst`, `steady` and `backlog`: [`SUBSCRIBER`] alone, or
/// `bench-0000`… for `--subscribers` above 1.
fn subscribers(args: &Args) -> Vec<String> {
    match args.subscribers {
        1 => vec![SUBSCRIBER.to_owned()],
        n => (0..n).map(|i| format!("{SUBSCRIBER}-{i:04}")).collect(),
    }
}

/// Puts [`subscribers`], spread round-robin over the receiver's ports (its
/// destinations), each wide open; returns their ids.
async fn put_spread(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Arc<[String]>> {
    let ids = subscribers(args);
    let urls = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), receiver.url_on(i, id, false)))
        .collect();
    api.put_subscribers(args.concurrency, urls, Some(WIDE_OPEN))
        .await?;
    Ok(ids.into())
}

/// `--jobs` jobs spread over the subscribers (job n to subscriber n mod N), due now or
/// `due_in_ms` after they are sent.
async fn burst_due_in(
    args: &Args,
    api: &Api,
    receiver: &Receiver,
    due_in_ms: Option<i64>,
) -> anyhow::Result<Load> {
    let ids = put_spread(args, api, receiver).await?;
    let api = api.clone();
    let started_ms = now_ms();
    let created = drive(args.concurrency, args.jobs(), None, move |n| {
        let (api, ids) = (api.clone(), ids.clone());
        async move {
            let at = match due_in_ms {
                Some(ms) => Some(format_ms(now_ms() + ms)?),
                None => None,
            };
            api.create_job(n, &ids[(n % ids.len() as u64) as usize], at)
                .await
        }
    })
    .await?;
    Ok((started_ms, created))
}

/// `--rate` jobs/s for `--seconds` s, job `n` due 1–5 s after it is sent (spread
/// evenly by a fixed stride, so runs are comparable).
async fn steady(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    let ids = put_spread(args, api, receiver).await?;
    let api = api.clone();
    let count = args.rate * args.seconds;
    let started_ms = now_ms();
    let created = drive(args.concurrency, count, Some(args.rate), move |n| {
        let (api, ids) = (api.clone(), ids.clone());
        async move {
            let delay_ms = 1_000 + (n * 7_919 % 4_001) as i64;
            let at = format_ms(now_ms() + delay_ms)?;
            api.create_job(n, &ids[(n % ids.len() as u64) as usize], Some(at))
                .await
        }
    })
    .await?;
    Ok((started_ms, created))
}

/// One event to `--jobs` subscribers, the first `--slow` of them slow.
async fn fanout(args: &Args, api: &Api, receiver: &Receiver) -> anyhow::Result<Load> {
    let ids: Vec<String> = (0..args.jobs()).map(|n| format!("s{n:05}")).collect();
    let subscribers = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (id.clone(), receiver.url(id, (n as u64) < args.slow)))
        .collect();
    api.put_subscribers(args.concurrency, subscribers, Some(16))
        .await?;
    let started_ms = now_ms();
    let created = api.post_event(0, "fanout", &ids, None).await?;
    Ok((started_ms, created))
}

/// Waits until `expected` requests arrived (or `timeout` passed), then a little longer
/// for duplicates.
pub async fn wait_for(receiver: &Receiver, expected: usize, timeout: Duration) {
    let started = Instant::now();
    while receiver.count() < expected && started.elapsed() < timeout {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(SETTLE).await;
}

/// While the backlog waits: times listing jobs and creating one more (due in an hour),
/// one call at a time.
async fn probe(api: &Api, jobs: u64, subscriber: &str) -> anyhow::Result<Vec<f64>> {
    let mut latencies = Vec::new();
    for n in 0..PROBES {
        let path = format!("/v1/jobs?subscriber_id={subscriber}&limit=10");
        latencies.push(api.call(n, Method::GET, &path, None).await?.1);
        let at = format_ms(now_ms() + 3_600_000)?;
        latencies.push(
            api.create_job(jobs + n, subscriber, Some(at))
                .await?
                .latency_ms,
        );
    }
    Ok(latencies)
}
