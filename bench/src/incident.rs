//! `--scenario incident`: the shipment update fanned out to `--jobs` subscribers, some
//! of them unwell, several times in a row, on default server flags and the API's
//! default subscriber limit. Then the control on a fresh database and servers. Each
//! run waits for its healthy deliveries only (plus a settle period), never for the
//! others. Two shapes:
//!
//! - Issue #14's (default): `--slow` subscribers share one destination of their own (a
//!   receiver on its own port) that answers after `--slow-ms` (8 s); the healthy ones
//!   are on another. [`FANOUTS`] fan-outs, ttl 30 s. The control has no slow group.
//! - Issue #33's (`--shared-host`): every subscriber on one `host:port`, told apart by
//!   path: `--slow` on `/slow/…` (8 s, beyond the servers' 5 s attempt timeout),
//!   `--failing` on `/status/500/…`, `--gone` on `/status/410/…`, the rest on `/fast/…`.
//!   [`SHARED_HOST_FANOUTS`] fan-outs, ttl 90 s. In the control every path answers 200
//!   at once; the healthy group is the same subscribers in both.
//!
//! In every event the unwell subscribers come first, as in `fanout`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::args::Args;
use super::incident_report::IncidentReport;
use super::load::{Api, Created};
use super::receiver::{Arrival, Receiver};
use super::scenario::{SETTLE, wait_for, with_servers};
use super::server::Usage;

/// Events posted one after another in issue #14's shape, each as soon as the previous
/// one was answered.
pub const FANOUTS: usize = 4;

/// Events posted one after another in the shared-host shape (issue #33).
pub const SHARED_HOST_FANOUTS: usize = 3;

/// The fan-outs of the run's shape.
pub fn fanouts(args: &Args) -> usize {
    if args.shared_host {
        SHARED_HOST_FANOUTS
    } else {
        FANOUTS
    }
}

/// What one run (the incident or its control) observed.
pub struct Run {
    /// Fan-outs posted.
    pub fanouts: usize,
    /// Subscribers that answer slowly (0 in issue #14's control; in the shared-host
    /// control they answer 200 at once but are still counted here).
    pub slow_subscribers: u64,
    /// Subscribers answering 500 (shared host only).
    pub failing_subscribers: u64,
    /// Subscribers answering 410 (shared host only).
    pub gone_subscribers: u64,
    /// Subscribers that answer 200 at once in both runs.
    pub healthy_subscribers: u64,
    /// The healthy subscribers' jobs, every fan-out's.
    pub healthy_jobs: Vec<Created>,
    /// How many jobs the unwell subscribers got.
    pub slow_jobs: usize,
    /// Every request the healthy subscribers got.
    pub healthy_arrivals: Vec<Arrival>,
    /// Requests the slow subscribers got until the run stopped waiting, retries
    /// included.
    pub slow_received: usize,
    /// The most requests open at once until then at the slow destination (issue #14's
    /// shape), or at the one shared host.
    pub slow_peak_open: usize,
    /// Each fan-out's `POST /v1/events` latency, in milliseconds.
    pub post_latency_ms: Vec<f64>,
    /// Each server's usage, read before it was stopped.
    pub usage: Vec<Usage>,
}

/// The event id of fan-out `n` (from 0): `incident-1` … `incident-4`.
pub fn event_id(n: usize) -> String {
    format!("incident-{}", n + 1)
}

/// Runs the incident, then the control; prints both and writes `--json`. Fails when a
/// run broke an invariant (a healthy job not delivered within `--timeout`, a duplicate
/// or unexpected request); a missed target is reported, not an error.
pub async fn run(args: &Args) -> anyhow::Result<()> {
    let incident = run_once(args, false).await?;
    let control = run_once(args, true).await?;
    let report = IncidentReport::new(args, &incident, &control);
    super::report::publish(args, report.text(), report.json(), report.failure())
}

/// One run, the control or not, on a fresh database and servers.
async fn run_once(args: &Args, control: bool) -> anyhow::Result<Run> {
    let (mut run, usage) = with_servers(args, async |api: &Api| {
        if args.shared_host {
            shared_host(args, api, control).await
        } else {
            across_hosts(args, api, control).await
        }
    })
    .await?;
    run.usage = usage;
    Ok(run)
}

/// `n` subscriber ids `{prefix}{00000}`….
fn ids(prefix: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

/// Issue #14's shape: the slow group on a receiver of its own.
async fn across_hosts(args: &Args, api: &Api, control: bool) -> anyhow::Result<Run> {
    let slow = if control { 0 } else { args.slow };
    let healthy = args.jobs() - args.slow;
    let fast = Receiver::start(args.slow_ms()).await?;
    let slow_receiver = match slow {
        0 => None,
        _ => Some(Receiver::start(args.slow_ms()).await?),
    };
    let slow_ids = ids("slow", slow);
    let healthy_ids = ids("ok", healthy);
    let mut subscribers = Vec::new();
    if let Some(receiver) = &slow_receiver {
        subscribers.extend(
            slow_ids
                .iter()
                .map(|id| (id.clone(), receiver.url(id, true))),
        );
    }
    subscribers.extend(
        healthy_ids
            .iter()
            .map(|id| (id.clone(), fast.url(id, false))),
    );
    let (healthy_jobs, slow_jobs, post_latency_ms) =
        fan_out(args, api, subscribers, &healthy_ids).await?;
    wait_for(&fast, healthy_jobs.len(), Duration::from_secs(args.timeout)).await;
    Ok(Run {
        fanouts: FANOUTS,
        slow_subscribers: slow,
        failing_subscribers: 0,
        gone_subscribers: 0,
        healthy_subscribers: healthy,
        healthy_jobs,
        slow_jobs,
        healthy_arrivals: fast.arrivals(),
        slow_received: slow_receiver.as_ref().map_or(0, Receiver::count),
        slow_peak_open: slow_receiver.as_ref().map_or(0, Receiver::peak_open),
        post_latency_ms,
        usage: Vec::new(),
    })
}

/// Issue #33's shape: every group on one `host:port`, told apart by path; in the
/// control every path answers 200 at once.
async fn shared_host(args: &Args, api: &Api, control: bool) -> anyhow::Result<Run> {
    let healthy = args.jobs() - args.slow - args.failing - args.gone;
    let receiver = Receiver::start(args.slow_ms()).await?;
    let slow_ids = ids("slow", args.slow);
    let failing_ids = ids("fail", args.failing);
    let gone_ids = ids("gone", args.gone);
    let healthy_ids = ids("ok", healthy);
    let url = |id: &String, kind: Option<u16>| match (control, kind) {
        (true, _) | (false, None) => receiver.url(id, false),
        (false, Some(0)) => receiver.url(id, true),
        (false, Some(code)) => receiver.url_answering(id, code),
    };
    let mut subscribers = Vec::new();
    for (group, kind) in [
        (&slow_ids, Some(0)),
        (&failing_ids, Some(500)),
        (&gone_ids, Some(410)),
        (&healthy_ids, None),
    ] {
        subscribers.extend(group.iter().map(|id| (id.clone(), url(id, kind))));
    }
    let (healthy_jobs, slow_jobs, post_latency_ms) =
        fan_out(args, api, subscribers, &healthy_ids).await?;
    let healthy_set: HashSet<&str> = healthy_ids.iter().map(String::as_str).collect();
    let of_healthy = |arrivals: Vec<Arrival>| -> Vec<Arrival> {
        arrivals
            .into_iter()
            .filter(|a| healthy_set.contains(a.subscriber.as_str()))
            .collect()
    };
    let timeout = Duration::from_secs(args.timeout);
    let started = Instant::now();
    while of_healthy(receiver.arrivals()).len() < healthy_jobs.len() && started.elapsed() < timeout
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(SETTLE).await;
    let arrivals = receiver.arrivals();
    let slow_set: HashSet<&str> = slow_ids.iter().map(String::as_str).collect();
    Ok(Run {
        fanouts: SHARED_HOST_FANOUTS,
        slow_subscribers: args.slow,
        failing_subscribers: args.failing,
        gone_subscribers: args.gone,
        healthy_subscribers: healthy,
        healthy_jobs,
        slow_jobs,
        slow_received: arrivals
            .iter()
            .filter(|a| slow_set.contains(a.subscriber.as_str()))
            .count(),
        healthy_arrivals: of_healthy(arrivals),
        slow_peak_open: receiver.peak_open(),
        post_latency_ms,
        usage: Vec::new(),
    })
}

/// Creates `subscribers` (id, URL), posts the run's fan-outs to all of them (in that
/// order) with the run's ttl; returns the jobs of `healthy_ids`, how many the others
/// got, and each fan-out's `POST` latency.
async fn fan_out(
    args: &Args,
    api: &Api,
    subscribers: Vec<(String, String)>,
    healthy_ids: &[String],
) -> anyhow::Result<(Vec<Created>, usize, Vec<f64>)> {
    let ids: Vec<String> = subscribers.iter().map(|(id, _)| id.clone()).collect();
    api.put_subscribers(args.concurrency, subscribers, None)
        .await?;
    let mut created = Vec::new();
    let mut post_latency_ms = Vec::new();
    for n in 0..fanouts(args) {
        let jobs = api
            .post_event(n as u64, &event_id(n), &ids, args.ttl_ms())
            .await?;
        post_latency_ms.extend(jobs.first().map(|job| job.latency_ms));
        created.extend(jobs);
    }
    let healthy: HashSet<&String> = healthy_ids.iter().collect();
    let (healthy_jobs, others): (Vec<Created>, Vec<Created>) = created
        .into_iter()
        .partition(|job| healthy.contains(&job.subscriber));
    Ok((healthy_jobs, others.len(), post_latency_ms))
}
