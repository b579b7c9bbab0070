//! The producer: a steady, seeded stream of API operations (creates, fan-outs,
//! cancels, reschedules, replays, resumes) against whichever instances are live, each
//! recorded with its answer as a [`Op`] for the audit.
//!
//! Every operation runs in a task of its own, at most [`IN_FLIGHT`] sending at once,
//! so a stopped instance (whose requests hang until the client's timeout) never slows
//! the pace; the rest of the driver's state (the jobs it may cancel or reschedule) is
//! learnt from the answers as they come.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::super::clock::now_ms;
use super::super::load::request;
use super::history::{Op, ReceiverKind};
use super::load_jobs::Known;
use super::load_ops::{self, Prepared, Timing};
use super::load_schedule::{Mix, Schedule, Step};
use super::load_send::{client, send};

/// Live instances: (fleet index, `http://addr`). Supplied by the coordinator (the
/// fleet's `live()`).
pub type Targets = Arc<dyn Fn() -> Vec<(usize, String)> + Send + Sync>;

/// Most operations sending at once; the others wait for a slot (not the driver).
const IN_FLIGHT: usize = 64;
/// How long `drive` waits, once stopped, for the answers still out (above the
/// client's 5 s timeout).
const DRAIN: Duration = Duration::from_secs(6);

/// PUT every subscriber `(id, url)` through `base` (`max_in_flight` default, `enabled`
/// true); an error names the subscriber and the answer (or the failure).
pub async fn register(base: &str, subscribers: &[(String, String)]) -> anyhow::Result<()> {
    let client = client()?;
    for (id, url) in subscribers {
        let body = json!({ "url": url, "enabled": true });
        let path = format!("/v1/subscribers/{id}");
        let response = request(&client, base, reqwest::Method::PUT, &path, Some(&body))?
            .send()
            .await
            .with_context(|| format!("PUT subscriber {id} at {base}"))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            anyhow::bail!("PUT subscriber {id} at {base}: {status}: {text}");
        }
    }
    Ok(())
}

/// Drives the load until `stop` is cancelled, then waits (≤ 6 s) for the ops in
/// flight; returns every op sent, in send order.
///
/// `rate` jobs per second overall: lone creates, plus a fan-out every ~5 s; cancels
/// and reschedules ~1/s, a replay (of the `Flaky`, `Closing` and `Hanging`
/// subscribers) every ~15 s and a resume (of the `Gone` ones) every ~20 s. Each op goes
/// to a random live target; none live, the op is skipped. Seeded by `seed` (the
/// answers, which decide what can be cancelled, are not). Panics when the HTTP
/// client cannot be built (no rustls crypto provider installed).
pub async fn drive(
    targets: Targets,
    subscribers: Vec<(String, ReceiverKind)>,
    seed: u64,
    rate: u64,
    stop: CancellationToken,
) -> Vec<Op> {
    drive_with(targets, subscribers, seed, rate, Mix::SOAK, stop).await
}

/// What the driver knows: the subscribers, by role, and the acknowledged jobs.
struct Driver {
    rng: StdRng,
    seed: u64,
    /// Every subscriber id, for creates and fan-outs.
    all: Vec<String>,
    /// The `Flaky`, `Closing` and `Hanging` subscribers (replays).
    replayed: Vec<String>,
    /// The `Gone` subscribers (resumes).
    resumed: Vec<String>,
    events: u64,
    known: Known,
}

impl Driver {
    /// The next operation of `step`, or `None` when there is nothing to do (no job to
    /// cancel yet, no subscriber of the kind).
    fn prepare(&mut self, step: Step) -> anyhow::Result<Option<Prepared>> {
        let now = now_ms();
        Ok(match step {
            Step::Create if !self.all.is_empty() => {
                let subscriber = self.rng.random_range(0..self.all.len());
                let timing = Timing::draw(&mut self.rng, now);
                let event_id = self.event_id();
                Some(load_ops::create(&self.all[subscriber], &event_id, timing)?)
            }
            Step::FanOut if !self.all.is_empty() => {
                let subscribers = load_ops::pick_fan_out(&mut self.rng, &self.all);
                let timing = Timing::draw(&mut self.rng, now);
                Some(load_ops::fan_out(subscribers, &self.event_id(), timing)?)
            }
            Step::Cancel => {
                let job = if self.rng.random_bool(0.25) {
                    let recent = self.known.recent_troubled(&mut self.rng);
                    recent.or_else(|| self.known.waiting(&mut self.rng, now))
                } else {
                    let waiting = self.known.waiting(&mut self.rng, now);
                    waiting.or_else(|| self.known.recent_troubled(&mut self.rng))
                };
                job.map(load_ops::cancel)
            }
            Step::Reschedule => match self.known.waiting(&mut self.rng, now) {
                Some(job) => {
                    let (at, deadline) = load_ops::draw_reschedule(&mut self.rng, now);
                    Some(load_ops::reschedule(job, at, deadline)?)
                }
                None => None,
            },
            Step::Replay if !self.replayed.is_empty() => {
                Some(load_ops::replay(self.replayed.clone()))
            }
            Step::Resume if !self.resumed.is_empty() => {
                Some(load_ops::resume(self.resumed.clone()))
            }
            _ => None,
        })
    }

    /// `chaos-{seed}-{n}`, a new `n` each time.
    fn event_id(&mut self) -> String {
        self.events += 1;
        format!("chaos-{}-{}", self.seed, self.events - 1)
    }
}

/// [`drive`] with the periods of `mix`.
async fn drive_with(
    targets: Targets,
    subscribers: Vec<(String, ReceiverKind)>,
    seed: u64,
    rate: u64,
    mix: Mix,
    stop: CancellationToken,
) -> Vec<Op> {
    let client = client().expect("the producer's HTTP client");
    let ids_of = |kinds: &[ReceiverKind]| -> Vec<String> {
        subscribers
            .iter()
            .filter(|(_, kind)| kinds.contains(kind))
            .map(|(id, _)| id.clone())
            .collect()
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut schedule = Schedule::new(mix, mix.create_period(rate, subscribers.len()), &mut rng);
    let mut driver = Driver {
        rng,
        seed,
        all: ids_of(&ReceiverKind::ALL),
        replayed: ids_of(&[
            ReceiverKind::Flaky,
            ReceiverKind::Closing,
            ReceiverKind::Hanging,
        ]),
        resumed: ids_of(&[ReceiverKind::Gone]),
        events: 0,
        known: Known::new(&subscribers),
    };
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tasks: JoinSet<Option<(u64, Op)>> = JoinSet::new();
    let mut ops: Vec<(u64, Op)> = Vec::new();
    let mut sequence = 0;
    loop {
        let (i, step, at) = schedule.next();
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(at) => {}
        }
        schedule.advance(i, &mut driver.rng);
        while let Some(done) = tasks.try_join_next() {
            keep(done, &mut driver.known, &mut ops);
        }
        let live = targets();
        if live.is_empty() {
            continue;
        }
        let (instance, base) = live[driver.rng.random_range(0..live.len())].clone();
        let prepared = match driver.prepare(step) {
            Ok(Some(prepared)) => prepared,
            Ok(None) => continue,
            Err(error) => {
                eprintln!("chaos load: an op could not be built: {error:#}");
                continue;
            }
        };
        let (client, permits, stop, n) = (client.clone(), permits.clone(), stop.clone(), sequence);
        sequence += 1;
        tasks.spawn(async move {
            // Once stopped, an op still waiting for a slot is not sent.
            let _permit = tokio::select! {
                biased;
                () = stop.cancelled() => return None,
                permit = permits.acquire_owned() => permit.ok()?,
            };
            Some((n, send(&client, instance, &base, prepared).await))
        });
    }
    let _ = tokio::time::timeout(DRAIN, async {
        while let Some(done) = tasks.join_next().await {
            keep(done, &mut driver.known, &mut ops);
        }
    })
    .await;
    tasks.abort_all();
    ops.sort_by_key(|(n, op)| (op.sent_ms, *n));
    ops.into_iter().map(|(_, op)| op).collect()
}

/// Keeps a finished task's op (if it was sent) and learns from it.
fn keep(
    done: Result<Option<(u64, Op)>, tokio::task::JoinError>,
    known: &mut Known,
    ops: &mut Vec<(u64, Op)>,
) {
    if let Ok(Some((n, op))) = done {
        known.learn(&op);
        ops.push((n, op));
    }
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
