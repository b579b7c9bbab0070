//! Replays end to end (C-11): a receiver that has just recovered gets its dead letters
//! back at the replay's pace, with their original `webhook-id` and body, while live
//! jobs stay on time; another subscriber's dead letters stay dead; running the replay
//! again resends nothing; a replay interrupted by a restart finishes afterwards.
//!
//! The worker is stepped every [`STEP_MS`] of a manual clock; a request's time is the
//! clock's time at the step that sent it, so the pace is measured on the clock the
//! replay's token bucket reads.

use std::collections::HashMap;

use deferhook::domain::Timestamp;
use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Recorded};
use crate::setup::{instance, instance_on};

/// The clock's step between two runs of the worker.
const STEP_MS: i64 = 100;

/// Registers `id` at `url`, paused, so its jobs wait and die at their deadline without
/// an attempt.
async fn paused_subscriber(app: &TestApp, id: &str, url: &str) {
    app.put_subscriber(id, &json!({ "url": url, "enabled": false }))
        .await;
}

async fn resume(app: &TestApp, id: &str) {
    let path = format!("/v1/subscribers/{id}");
    let url = app.get_json(&path).await["url"].clone();
    let reply = app
        .put_json(&path, &json!({ "enabled": true, "url": url }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// Creates `n` jobs `{prefix}-{i}` with payload `{"n": i, "prefix": …}` and a 300 ms
/// ttl; returns them.
async fn short_lived_jobs(app: &TestApp, subscriber: &str, prefix: &str, n: usize) -> Vec<Value> {
    let mut jobs = Vec::new();
    for i in 0..n {
        let body = format!(
            r#"{{"subscriber_id":"{subscriber}","event_id":"{prefix}-{i}","payload":{{"n": {i},"prefix":"{prefix}"}},"ttl_ms":300}}"#
        );
        jobs.push(app.job_raw(&body).await);
    }
    jobs
}

/// Moves the clock to the jobs' deadline and runs the sweep: dead letters.
async fn let_die(app: &TestApp, jobs: &[Value]) {
    app.advance(300);
    app.run_pending().await;
    for job in jobs {
        let dead = app.job_now(job).await;
        assert_eq!(dead["state"], "dead", "{dead}");
        assert_eq!(dead["dead_reason"], "deadline_exceeded");
    }
}

async fn post_replay(app: &TestApp, body: Value) -> (u16, Value) {
    let reply = app.post_json("/v1/replays", &body).await;
    (reply.status, reply.json())
}

/// The requests of one receiver, each with the clock's time of the step that sent it.
struct Sent<'a> {
    receiver: &'a Receiver,
    at: Vec<(i64, Recorded)>,
}

impl<'a> Sent<'a> {
    fn new(receiver: &'a Receiver) -> Self {
        Sent {
            receiver,
            at: Vec::new(),
        }
    }

    /// Runs each instance's worker once (the instances share one clock), notes what
    /// they sent, and moves the clock on by [`STEP_MS`].
    async fn step(&mut self, apps: &[&TestApp]) {
        for app in apps {
            app.run_pending().await;
            let now = app.now().as_millis();
            let requests = self.receiver.requests();
            self.at
                .extend(requests[self.at.len()..].iter().map(|r| (now, r.clone())));
        }
        apps[0].advance(STEP_MS);
    }

    /// Steps until `done` holds, at most `steps` times.
    async fn step_until(&mut self, apps: &[&TestApp], steps: usize, done: impl Fn(&Self) -> bool) {
        for _ in 0..steps {
            if done(self) {
                return;
            }
            self.step(apps).await;
        }
        assert!(done(self), "not done after {steps} steps");
    }

    /// The times of the requests whose `webhook-id` starts with `prefix`.
    fn times(&self, prefix: &str) -> Vec<i64> {
        self.at
            .iter()
            .filter(|(_, r)| r.header("webhook-id").starts_with(prefix))
            .map(|(at, _)| *at)
            .collect()
    }
}

/// The most of `times` (ms) that fall in any 1 s window.
fn busiest_second(times: &[i64]) -> usize {
    let mut times = times.to_vec();
    times.sort();
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| **t - times[i] < 1_000)
                .count()
        })
        .max()
        .unwrap_or(0)
}

async fn replay_state(app: &TestApp, id: &str) -> Value {
    app.get_json(&format!("/v1/replays/{id}")).await
}

async fn c11_a_replay_does_not_flood_a_recovered_receiver(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    paused_subscriber(&app, "s1", &receiver.url("/s1")).await;
    paused_subscriber(&app, "s2", &receiver.url("/s2")).await;
    let dead_s1 = short_lived_jobs(&app, "s1", "dead-s1", 100).await;
    let dead_s2 = short_lived_jobs(&app, "s2", "dead-s2", 10).await;
    let_die(&app, &dead_s1).await;
    let_die(&app, &dead_s2).await;
    resume(&app, "s1").await;

    let replay_body = json!({"subscriber_id": "s1", "max_jobs": 1000, "rate_per_second": 5});
    let (status, replay) = post_replay(&app, replay_body.clone()).await;
    assert_eq!(status, 202, "{replay}");
    assert_eq!(replay["matched"], 100);
    let id = replay["id"].as_str().unwrap();
    // Live S1 jobs keep arriving at 1/s while the replay runs (100 at 5/s: 20 s).
    let mut sent = Sent::new(&receiver);
    let mut live = Vec::new();
    for i in 0..25 {
        let body = json!({"subscriber_id": "s1", "event_id": format!("live-{i}"),
                          "payload": {"live": i}});
        live.push(app.create_job(&body).await);
        for _ in 0..1_000 / STEP_MS {
            sent.step(&[&app]).await;
        }
    }
    let done = replay_state(&app, id).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        (done["requeued"].as_u64(), done["skipped"].as_u64()),
        (Some(100), Some(0))
    );
    assert_eq!(receiver.requests().len(), 125);

    let replayed: Vec<&Recorded> = sent
        .at
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.header("webhook-id").starts_with("dead-s1-"))
        .collect();
    assert_eq!(replayed.len(), 100);
    let busiest = busiest_second(&sent.times("dead-s1-"));
    assert!(
        busiest <= 6,
        "{busiest} replayed requests within 1 s at 5/s"
    );
    // Each replayed request keeps its webhook-id and body, exactly as first sent.
    for request in &replayed {
        let event = request.header("webhook-id");
        let i: usize = event.trim_start_matches("dead-s1-").parse().unwrap();
        let expected = format!(r#"{{"n": {i},"prefix":"dead-s1"}}"#);
        assert_eq!(std::str::from_utf8(&request.body).unwrap(), expected);
        assert_eq!(request.path, "/s1");
    }
    // S2's dead letters stay dead, and were never sent.
    for job in &dead_s2 {
        assert_eq!(app.job_now(job).await["state"], "dead");
    }
    assert!(sent.at.iter().all(|(_, r)| r.path != "/s2"));
    // Live jobs on time: each delivered within 1 s of its due time.
    let arrivals: HashMap<&str, i64> = sent
        .at
        .iter()
        .map(|(at, r)| (r.header("webhook-id"), *at))
        .collect();
    for job in &live {
        let event = job["event_id"].as_str().unwrap();
        let due = Timestamp::parse_rfc3339(job["deliver_at"].as_str().unwrap())
            .unwrap()
            .as_millis();
        let late = arrivals[event] - due;
        assert!(late < 1_000, "live job {event} was {late} ms late");
    }
    // The same replay again resends nothing already delivered.
    let (status, again) = post_replay(&app, replay_body).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(
        (again["matched"].as_u64(), again["state"].as_str()),
        (Some(0), Some("done"))
    );
    app.advance(3_600_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 125);
    assert!(counts.values().all(|&n| n == 1), "a duplicate was sent");
}

async fn a_replay_interrupted_by_a_restart_finishes_afterwards(db: Db) {
    let receiver = Receiver::ok().await;
    let mut first = instance(db).start().await;
    paused_subscriber(&first, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&first, "s", "dead", 10).await;
    let_die(&first, &dead).await;
    resume(&first, "s").await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 2});
    let (status, replay) = post_replay(&first, body).await;
    assert_eq!(status, 202, "{replay}");
    let id = replay["id"].as_str().unwrap().to_owned();
    let mut sent = Sent::new(&receiver);
    sent.step_until(&[&first], 100, |sent| sent.at.len() >= 3)
        .await;
    let database = first.keep_database();
    let url = first.database_url.clone();
    let clock = first.manual_clock();
    first.stop().await;

    let second = instance_on(&url).shared_clock(clock).start().await;
    let stopped_at = replay_state(&second, &id).await;
    let requeued = stopped_at["requeued"].as_u64().unwrap();
    assert!((3..10).contains(&requeued), "{stopped_at}");
    sent.step_until(&[&second], 100, |sent| sent.at.len() >= 10)
        .await;
    let done = replay_state(&second, &id).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["requeued"], 10);
    for job in &dead {
        assert_eq!(second.job_now(job).await["state"], "delivered");
    }
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 10);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    drop(second);
    drop(database);
}

/// A replay started while its subscriber is paused holds instead of piling requeued
/// jobs up: when the subscriber resumes, the receiver still sees the replay's pace.
async fn a_paused_subscriber_gets_the_replay_at_its_pace_once_resumed(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    paused_subscriber(&app, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&app, "s", "dead", 12).await;
    let_die(&app, &dead).await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 4});
    let (status, replay) = post_replay(&app, body).await;
    assert_eq!(status, 202, "{replay}");
    let id = replay["id"].as_str().unwrap();
    let mut sent = Sent::new(&receiver);
    for _ in 0..1_500 / STEP_MS {
        sent.step(&[&app]).await;
    }
    let held = replay_state(&app, id).await;
    assert_eq!(
        held["requeued"], 1,
        "held behind the paused subscriber: {held}"
    );
    resume(&app, "s").await;
    sent.step_until(&[&app], 100, |sent| sent.at.len() >= 12)
        .await;
    let busiest = busiest_second(&sent.times(""));
    assert!(
        busiest <= 5,
        "{busiest} replayed requests within 1 s at 4/s"
    );
    sent.step(&[&app]).await;
    assert_eq!(replay_state(&app, id).await["state"], "done");
}

on_both_backends!(
    c11_a_replay_does_not_flood_a_recovered_receiver,
    a_replay_interrupted_by_a_restart_finishes_afterwards,
    a_paused_subscriber_gets_the_replay_at_its_pace_once_resumed,
);

/// Two instances share one PostgreSQL (and one clock): the replay's token bucket is one
/// row, so the pace holds whichever instance takes each burst.
#[tokio::test]
async fn a_replay_keeps_its_pace_across_two_instances() {
    if !crate::pg::reachable().await {
        return;
    }
    let receiver = Receiver::ok().await;
    let first = instance(Db::Postgres).start().await;
    let second = instance_on(&first.database_url)
        .shared_clock(first.manual_clock())
        .start()
        .await;
    paused_subscriber(&first, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&first, "s", "dead", 20).await;
    let_die(&first, &dead).await;
    resume(&first, "s").await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 5});
    let (status, replay) = post_replay(&second, body).await;
    assert_eq!(status, 202, "{replay}");
    let mut sent = Sent::new(&receiver);
    sent.step_until(&[&second, &first], 200, |sent| sent.at.len() >= 20)
        .await;
    let times = sent.times("");
    let busiest = busiest_second(&times);
    assert!(
        busiest <= 6,
        "{busiest} replayed requests within 1 s at 5/s"
    );
    let span = times.last().unwrap() - times[0];
    assert!(span >= 3_500, "20 jobs at 5/s took {span} ms");
    drop(second);
}
