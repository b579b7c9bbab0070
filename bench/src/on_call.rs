//! `--scenario on-call` (issue #16): the incident an on-call engineer meets, then their
//! questions, each answered by one API call, timed and checked against what the run
//! set up. [`EVENTS`] events go to `--jobs` subscribers, all on one `host:port` (a
//! shared receiver platform, issue #33), told apart by path: `--slow` of them answer
//! after `--slow-ms` (beyond the attempt timeout, so their attempts time out and their
//! own endpoint circuits open), `--failing` answer 500 until they recover, `--gone`
//! answer 410 (so they are paused), the rest answer 200 at once.
//!
//! Once the incident has developed (the healthy jobs delivered, the failing ones dead
//! after [`MAX_ATTEMPTS`], the gone ones dead and their subscribers paused, no attempt
//! open), with `--hold-seconds` the run prints how to reach the server and waits, so a
//! person can walk the incident with the CLI (README, "On call"). Then it asks:
//! which events are affected, which subscribers fail, what each event's summary
//! advises; the failing receiver recovers and their dead letters are replayed by one
//! call at `--replay-rate`; the gone subscribers are resumed by one call.

use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use super::args::Args;
use super::clock::{format_ms, now_ms};
use super::load::Api;
use super::on_call_report::{Asked, OnCallReport, ReplayFigures};
use super::receiver::Receiver;
use super::scenario::with_servers;
use super::server::TOKEN;

/// Events fanned out to every subscriber.
pub const EVENTS: usize = 3;
/// Each job's attempts: the failing subscribers' jobs are dead letters after these.
pub const MAX_ATTEMPTS: u32 = 3;
/// How often the run reads the events while the incident develops.
const POLL: Duration = Duration::from_millis(500);

/// The subscriber ids of each group.
pub struct Groups {
    /// Answer 200 at once.
    pub healthy: Vec<String>,
    /// Answer after `--slow-ms`.
    pub slow: Vec<String>,
    /// Answer 500 until the receiver recovers.
    pub failing: Vec<String>,
    /// Answer 410.
    pub gone: Vec<String>,
}

impl Groups {
    /// The groups `--jobs`, `--slow`, `--failing` and `--gone` ask for.
    pub fn of(args: &Args) -> Self {
        let ids = |prefix: &str, n: u64| (0..n).map(|i| format!("{prefix}{i:05}")).collect();
        let healthy = args.jobs() - args.slow - args.failing - args.gone;
        Groups {
            healthy: ids("ok", healthy),
            slow: ids("slow", args.slow),
            failing: ids("failing", args.failing),
            gone: ids("gone", args.gone),
        }
    }

    fn len(&self) -> usize {
        self.healthy.len() + self.slow.len() + self.failing.len() + self.gone.len()
    }
}

/// The event id of event `n` (from 0): `order-1` … `order-3`.
pub fn event_id(n: usize) -> String {
    format!("order-{}", n + 1)
}

/// Runs the incident and the questions on fresh servers; prints the answers and
/// writes `--json`. Fails when an answer's figures are not what the run set up.
pub async fn run(args: &Args) -> anyhow::Result<()> {
    let groups = Groups::of(args);
    let ((asked, replay), usage) =
        with_servers(args, async |api: &Api| incident(args, api, &groups).await).await?;
    let report = OnCallReport::new(args, &groups, asked, replay, usage);
    super::report::publish(args, report.text(), report.json(), report.failure())
}

/// The receivers of an incident's groups; they answer while kept.
pub struct Receivers {
    /// Answers 500 until it recovers.
    pub failing: Receiver,
}

/// Starts the receivers, registers every subscriber of `groups` at its group's
/// receiver, and fans `events` events out to all of them (each job with
/// [`MAX_ATTEMPTS`] attempts).
pub async fn start_incident(
    args: &Args,
    api: &Api,
    groups: &Groups,
    events: usize,
) -> anyhow::Result<Receivers> {
    // One receiver, one port: every group on one destination.
    let shared = Receiver::start(args.slow_ms()).await?;
    let (fast, slow, failing, gone) = (&shared, &shared, &shared, &shared);
    let mut subscribers: Vec<(String, String)> = Vec::with_capacity(groups.len());
    subscribers.extend(
        groups
            .slow
            .iter()
            .map(|id| (id.clone(), slow.url(id, true))),
    );
    subscribers.extend(
        groups
            .failing
            .iter()
            .map(|id| (id.clone(), failing.url_answering(id, 500))),
    );
    subscribers.extend(
        groups
            .gone
            .iter()
            .map(|id| (id.clone(), gone.url_answering(id, 410))),
    );
    subscribers.extend(
        groups
            .healthy
            .iter()
            .map(|id| (id.clone(), fast.url(id, false))),
    );
    let ids: Vec<String> = subscribers.iter().map(|(id, _)| id.clone()).collect();
    api.put_subscribers(args.concurrency, subscribers, None)
        .await?;

    for n in 0..events {
        let body = json!({
            "event_id": event_id(n),
            "payload": {"order": n + 1, "status": "shipped"},
            "subscriber_ids": ids,
            "max_attempts": MAX_ATTEMPTS,
        });
        api.call(n as u64, Method::POST, "/v1/events", Some(&body))
            .await?;
    }
    Ok(Receivers { failing: shared })
}

async fn incident(
    args: &Args,
    api: &Api,
    groups: &Groups,
) -> anyhow::Result<(Vec<Asked>, ReplayFigures)> {
    let since = format_ms(now_ms() - 1_000)?;
    let receivers = start_incident(args, api, groups, EVENTS).await?;
    let failing = &receivers.failing;
    develop(args, api, groups, EVENTS).await?;
    if args.hold_seconds > 0 {
        hold(api, args.hold_seconds, &since).await;
    }

    let mut asked = Vec::new();
    asked.push(
        ask(
            api,
            "which events are affected",
            &format!("/v1/events?affected_since={since}&limit=100"),
            None,
        )
        .await?,
    );
    asked.push(
        ask(
            api,
            "which subscribers fail, and why",
            "/v1/subscribers?health=failing&limit=1000",
            None,
        )
        .await?,
    );
    asked.push(
        ask(
            api,
            "would a retry help (one event)",
            &format!("/v1/events/{}", event_id(0)),
            None,
        )
        .await?,
    );

    failing.recover();
    // One receiver for every group: the replay's arrivals are the failing group's.
    let of_failing = |arrivals: Vec<super::receiver::Arrival>| -> Vec<i64> {
        arrivals
            .into_iter()
            .filter(|a| groups.failing.binary_search(&a.subscriber).is_ok())
            .map(|a| a.at_ms)
            .collect()
    };
    let before = failing.count();
    let replay_body = json!({
        "subscriber_ids": groups.failing,
        "rate_per_second": args.replay_rate,
        "max_jobs": 100_000,
    });
    let replay = ask(
        api,
        "replay the recovered subscribers' dead letters",
        "/v1/replays",
        Some(&replay_body),
    )
    .await?;
    let matched = replay.answer["matched"].as_u64().unwrap_or(0) as usize;
    asked.push(replay);
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    while of_failing(failing.arrivals()[before..].to_vec()).len() < matched
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(super::scenario::SETTLE).await;
    let replayed = of_failing(failing.arrivals()[before..].to_vec());

    asked.push(
        ask(
            api,
            "re-enable the paused subscribers",
            "/v1/subscribers/resume",
            Some(&json!({"paused_reason": "gone"})),
        )
        .await?,
    );
    Ok((asked, ReplayFigures::of(matched, &replayed)))
}

/// Waits until every event shows the incident developed: the healthy jobs delivered,
/// the failing ones dead after their attempts (advised `replay`), the gone ones dead on a 410 or waiting
/// on their paused subscriber, the slow ones' first attempts timed out (their
/// attempts open at most one each: an endpoint circuit's probe); at most `--timeout`.
pub async fn develop(args: &Args, api: &Api, groups: &Groups, events: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    loop {
        let (mut developed, mut open, mut timeouts) = (true, 0, 0);
        for n in 0..events {
            let (summary, _) = api
                .call(0, Method::GET, &format!("/v1/events/{}", event_id(n)), None)
                .await?;
            let gone = count(&summary["dead_reasons"]["non_retryable_response"])
                + count(&summary["waiting_reasons"]["subscriber_paused"]);
            // The failing ones are dead after transient failures (`replay`); the slow
            // ones may die after theirs too, but their advice is `no` (timed out
            // every time, issue #33).
            developed &= count(&summary["jobs"]["delivered"]) == groups.healthy.len() as u64
                && count(&summary["retry_advice"]["replay"]) == groups.failing.len() as u64
                && gone == groups.gone.len() as u64;
            open += count(&summary["jobs"]["in_flight"]);
            timeouts += count(&summary["error_classes"]["timeout"]);
        }
        let probes = groups.slow.len() as u64;
        if developed && open <= probes && (groups.slow.is_empty() || timeouts > 0) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the incident did not develop within --timeout {} s",
            args.timeout
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Prints how to reach the server, then waits `seconds` or until a line arrives on
/// standard input (Enter). Not Ctrl-C: that would stop the servers too.
async fn hold(api: &Api, seconds: u64, since: &str) {
    println!(
        "the incident has developed; walk it from another terminal (README, \"On call\"):\n\
         \n  export DEFERHOOK_SERVER={} DEFERHOOK_API_TOKEN={TOKEN}\n  \
         deferhook events list --affected-since {since}\n\
         \nor open {}/console/ in a browser and log in with that token\n\
         \nwaiting {seconds} s (press Enter to go on with the timed questions)",
        api.base(),
        api.base()
    );
    // A thread of its own, left behind if the time runs out first: a blocked read of
    // standard input would keep a runtime's blocking pool from shutting down.
    let (entered, enter) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if matches!(std::io::stdin().read_line(&mut line), Ok(n) if n > 0) {
            let _ = entered.send(());
        }
    });
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
        Ok(()) = enter => {}
    }
}

/// One call: `GET path`, or `POST path` with `body`; its answer and latency.
async fn ask(
    api: &Api,
    question: &'static str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Asked> {
    let method = if body.is_some() {
        Method::POST
    } else {
        Method::GET
    };
    let call = format!("{method} {path}");
    let (answer, latency_ms) = api
        .call(0, method, path, body)
        .await
        .with_context(|| format!("asking {question}"))?;
    Ok(Asked {
        question,
        call,
        latency_ms,
        answer,
    })
}
