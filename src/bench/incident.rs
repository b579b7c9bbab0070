//! `--scenario incident` (issue #14): the shipment update fanned out to `--jobs`
//! subscribers, `--slow` of which share one destination that answers after `--slow-ms`
//! (8 s by default), [`FANOUTS`] times in a row, on default server flags and the API's
//! default subscriber limit. Then the control: the same run without the slow group, on
//! a fresh database and servers. Each run waits for its healthy deliveries only (plus a
//! settle period), never for the slow ones.
//!
//! The two groups are two destinations: the slow subscribers' URLs point at a receiver
//! of their own (its own port), the healthy ones' at another. In every event the slow
//! subscribers come first, as in `fanout`.

use std::collections::HashSet;
use std::time::Duration;

use super::args::Args;
use super::incident_report::IncidentReport;
use super::load::{Api, Created};
use super::receiver::{Arrival, Receiver};
use super::scenario::{wait_for, with_servers};
use super::server::Usage;

/// Events posted one after another, each as soon as the previous one was answered.
pub const FANOUTS: usize = 4;

/// What one run (the incident or its control) observed.
pub struct Run {
    /// Subscribers on the slow destination (0 in the control).
    pub slow_subscribers: u64,
    /// Subscribers on the healthy destination.
    pub healthy_subscribers: u64,
    /// The healthy subscribers' jobs, every fan-out's.
    pub healthy_jobs: Vec<Created>,
    /// How many jobs the slow subscribers got.
    pub slow_jobs: usize,
    /// Every request the healthy destination got.
    pub healthy_arrivals: Vec<Arrival>,
    /// Requests the slow destination got until the run stopped waiting, retries
    /// included.
    pub slow_received: usize,
    /// The most requests the slow destination had open at once until then.
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
    let incident = run_once(args, args.slow).await?;
    let control = run_once(args, 0).await?;
    let report = IncidentReport::new(args, &incident, &control);
    super::report::publish(args, report.text(), report.json(), report.failure())
}

/// One run with `slow` slow subscribers, on a fresh database and servers.
async fn run_once(args: &Args, slow: u64) -> anyhow::Result<Run> {
    let (mut run, usage) =
        with_servers(args, async |api: &Api| fan_out(args, api, slow).await).await?;
    run.usage = usage;
    Ok(run)
}

/// Sets up the receivers and subscribers, posts the events, waits for the healthy
/// deliveries.
async fn fan_out(args: &Args, api: &Api, slow: u64) -> anyhow::Result<Run> {
    let healthy = args.jobs() - args.slow;
    let fast = Receiver::start(args.slow_ms()).await?;
    let slow_receiver = match slow {
        0 => None,
        _ => Some(Receiver::start(args.slow_ms()).await?),
    };
    let slow_ids: Vec<String> = (0..slow).map(|n| format!("slow{n:05}")).collect();
    let healthy_ids: Vec<String> = (0..healthy).map(|n| format!("ok{n:05}")).collect();
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
    let ids: Vec<String> = subscribers.iter().map(|(id, _)| id.clone()).collect();
    api.put_subscribers(args.concurrency, subscribers, None)
        .await?;

    let mut created = Vec::new();
    let mut post_latency_ms = Vec::new();
    for n in 0..FANOUTS {
        let jobs = api.post_event(n as u64, &event_id(n), &ids).await?;
        post_latency_ms.extend(jobs.first().map(|job| job.latency_ms));
        created.extend(jobs);
    }
    let slow_set: HashSet<&String> = slow_ids.iter().collect();
    let (slow_jobs, healthy_jobs): (Vec<Created>, Vec<Created>) = created
        .into_iter()
        .partition(|job| slow_set.contains(&job.subscriber));
    let timeout = Duration::from_secs(args.timeout);
    wait_for(&fast, healthy_jobs.len(), timeout).await;
    Ok(Run {
        slow_subscribers: slow,
        healthy_subscribers: healthy,
        healthy_jobs,
        slow_jobs: slow_jobs.len(),
        healthy_arrivals: fast.arrivals(),
        slow_received: slow_receiver.as_ref().map_or(0, Receiver::count),
        slow_peak_open: slow_receiver.as_ref().map_or(0, Receiver::peak_open),
        post_latency_ms,
        usage: Vec::new(),
    })
}
