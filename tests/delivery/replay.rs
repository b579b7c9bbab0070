//! Replays end to end (C-11): a receiver that has just recovered gets its dead letters
//! back at the replay's pace, with their original `webhook-id` and body, while live
//! jobs stay on time; another subscriber's dead letters stay dead; running the replay
//! again resends nothing; a replay interrupted by a restart finishes afterwards.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::app::{App, Db};
use crate::receiver::{Receiver, Recorded};

/// Registers `id` at `url`, paused, so its jobs wait and die at their deadline without
/// an attempt: dead letters in milliseconds.
async fn paused_subscriber(app: &App, id: &str, url: &str) {
    let response = app
        .client
        .put(format!("{}/v1/subscribers/{id}", app.base))
        .json(&json!({ "url": url, "enabled": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
}

async fn resume(app: &App, id: &str) {
    let url = app.get(&format!("/v1/subscribers/{id}")).await["url"].clone();
    let response = app
        .client
        .put(format!("{}/v1/subscribers/{id}", app.base))
        .json(&json!({ "enabled": true, "url": url }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// Creates `n` jobs `{prefix}-{i}` with payload `{"n": i, "prefix": …}` and a 300 ms
/// ttl; returns them.
async fn short_lived_jobs(app: &App, subscriber: &str, prefix: &str, n: usize) -> Vec<Value> {
    let mut jobs = Vec::new();
    for i in 0..n {
        let body = format!(
            r#"{{"subscriber_id":"{subscriber}","event_id":"{prefix}-{i}","payload":{{"n": {i},"prefix":"{prefix}"}},"ttl_ms":300}}"#
        );
        jobs.push(app.job_raw(&body).await);
    }
    jobs
}

async fn wait_all_dead(app: &App, jobs: &[Value]) {
    for job in jobs {
        let dead = app.wait_state(job, "dead", Duration::from_secs(10)).await;
        assert_eq!(dead["dead_reason"], "deadline_exceeded");
    }
}

async fn post_replay(app: &App, body: Value) -> (u16, Value) {
    let response = app
        .client
        .post(format!("{}/v1/replays", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn wait_replay(app: &App, id: &str, state: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let replay = app.get(&format!("/v1/replays/{id}")).await;
        if replay["state"] == state {
            return replay;
        }
        assert!(
            Instant::now() < deadline,
            "replay not {state} within {within:?}: {replay}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The most requests among `requests` whose arrival falls in any 1 s window.
fn busiest_second(requests: &[&Recorded]) -> usize {
    let mut times: Vec<Instant> = requests.iter().map(|r| r.at).collect();
    times.sort();
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| t.duration_since(times[i]) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn millis(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn c11_a_replay_does_not_flood_a_recovered_receiver(db: Db) {
    let receiver = Receiver::ok().await;
    let app = App::start(db, &[]).await;
    paused_subscriber(&app, "s1", &receiver.url("/s1")).await;
    paused_subscriber(&app, "s2", &receiver.url("/s2")).await;
    let dead_s1 = short_lived_jobs(&app, "s1", "dead-s1", 100).await;
    let dead_s2 = short_lived_jobs(&app, "s2", "dead-s2", 10).await;
    wait_all_dead(&app, &dead_s1).await;
    wait_all_dead(&app, &dead_s2).await;
    resume(&app, "s1").await;

    // Live S1 jobs keep arriving at 1/s while the replay runs.
    let live = {
        let (base, client) = (app.base.clone(), app.client.clone());
        tokio::spawn(async move {
            let mut created = Vec::new();
            for i in 0..25 {
                let body = json!({"subscriber_id": "s1", "event_id": format!("live-{i}"),
                                  "payload": {"live": i}});
                let response = client
                    .post(format!("{base}/v1/jobs"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 201);
                created.push(response.json::<Value>().await.unwrap());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            created
        })
    };
    let replay_body = json!({"subscriber_id": "s1", "max_jobs": 1000, "rate_per_second": 5});
    let (status, replay) = post_replay(&app, replay_body.clone()).await;
    assert_eq!(status, 202, "{replay}");
    assert_eq!(replay["matched"], 100);
    let id = replay["id"].as_str().unwrap();
    let done = wait_replay(&app, id, "done", Duration::from_secs(40)).await;
    assert_eq!(
        (done["requeued"].as_u64(), done["skipped"].as_u64()),
        (Some(100), Some(0))
    );
    let live = live.await.unwrap();
    receiver.wait_for(125, Duration::from_secs(10)).await;

    let requests = receiver.requests();
    let replayed: Vec<&Recorded> = requests
        .iter()
        .filter(|r| r.header("webhook-id").starts_with("dead-s1-"))
        .collect();
    assert_eq!(replayed.len(), 100);
    let busiest = busiest_second(&replayed);
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
        let id = job["id"].as_str().unwrap();
        assert_eq!(app.get(&format!("/v1/jobs/{id}")).await["state"], "dead");
    }
    assert!(requests.iter().all(|r| r.path != "/s2"));
    // Live jobs on time: each delivered within 1 s of its due time.
    let arrivals: HashMap<&str, SystemTime> = requests
        .iter()
        .map(|r| (r.header("webhook-id"), r.wall))
        .collect();
    for job in &live {
        let event = job["event_id"].as_str().unwrap();
        let due = deferhook::domain::Timestamp::parse_rfc3339(job["deliver_at"].as_str().unwrap())
            .unwrap()
            .as_millis();
        let late = millis(arrivals[event]) - due;
        assert!(late < 1_000, "live job {event} was {late} ms late");
    }
    // The same replay again resends nothing already delivered.
    let (status, again) = post_replay(&app, replay_body).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(
        (again["matched"].as_u64(), again["state"].as_str()),
        (Some(0), Some("done"))
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 125);
    assert!(counts.values().all(|&n| n == 1), "a duplicate was sent");
}

async fn a_replay_interrupted_by_a_restart_finishes_afterwards(db: Db) {
    let receiver = Receiver::ok().await;
    let mut first = App::start(db, &[]).await;
    paused_subscriber(&first, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&first, "s", "dead", 10).await;
    wait_all_dead(&first, &dead).await;
    resume(&first, "s").await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 2});
    let (status, replay) = post_replay(&first, body).await;
    assert_eq!(status, 202, "{replay}");
    let id = replay["id"].as_str().unwrap().to_owned();
    receiver.wait_for(3, Duration::from_secs(10)).await;
    let database = first.keep_database();
    let url = first.database_url.clone();
    first.stop().await;

    let second = App::on(&url, &[]).await;
    let stopped_at = second.get(&format!("/v1/replays/{id}")).await;
    let requeued = stopped_at["requeued"].as_u64().unwrap();
    assert!((3..10).contains(&requeued), "{stopped_at}");
    let done = wait_replay(&second, &id, "done", Duration::from_secs(20)).await;
    assert_eq!(done["requeued"], 10);
    receiver.wait_for(10, Duration::from_secs(10)).await;
    for job in &dead {
        second
            .wait_state(job, "delivered", Duration::from_secs(10))
            .await;
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
    let app = App::start(db, &[]).await;
    paused_subscriber(&app, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&app, "s", "dead", 12).await;
    wait_all_dead(&app, &dead).await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 4});
    let (status, replay) = post_replay(&app, body).await;
    assert_eq!(status, 202, "{replay}");
    let id = replay["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let held = app.get(&format!("/v1/replays/{id}")).await;
    assert_eq!(
        held["requeued"], 1,
        "held behind the paused subscriber: {held}"
    );
    resume(&app, "s").await;
    let requests = receiver.wait_for(12, Duration::from_secs(15)).await;
    let all: Vec<&Recorded> = requests.iter().collect();
    let busiest = busiest_second(&all);
    assert!(
        busiest <= 5,
        "{busiest} replayed requests within 1 s at 4/s"
    );
    wait_replay(&app, id, "done", Duration::from_secs(10)).await;
}

on_both_backends!(
    c11_a_replay_does_not_flood_a_recovered_receiver,
    a_replay_interrupted_by_a_restart_finishes_afterwards,
    a_paused_subscriber_gets_the_replay_at_its_pace_once_resumed,
);

/// Two instances share one PostgreSQL: the replay's token bucket is one row, so the
/// pace holds whichever instance takes each burst.
#[tokio::test]
async fn a_replay_keeps_its_pace_across_two_instances() {
    if !crate::pg::reachable().await {
        return;
    }
    let receiver = Receiver::ok().await;
    let first = App::start(Db::Postgres, &[]).await;
    let second = App::on(&first.database_url, &[]).await;
    paused_subscriber(&first, "s", &receiver.url("/")).await;
    let dead = short_lived_jobs(&first, "s", "dead", 20).await;
    wait_all_dead(&first, &dead).await;
    resume(&first, "s").await;
    let body = json!({"subscriber_id": "s", "max_jobs": 100, "rate_per_second": 5});
    let (status, replay) = post_replay(&second, body).await;
    assert_eq!(status, 202, "{replay}");
    let requests = receiver.wait_for(20, Duration::from_secs(15)).await;
    let all: Vec<&Recorded> = requests.iter().collect();
    let busiest = busiest_second(&all);
    assert!(
        busiest <= 6,
        "{busiest} replayed requests within 1 s at 5/s"
    );
    let span = all.last().unwrap().at - all[0].at;
    assert!(
        span >= Duration::from_millis(3_500),
        "20 jobs at 5/s took {span:?}"
    );
    drop(second);
}
