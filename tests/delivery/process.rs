//! The real binary killed mid-attempt: SIGKILL loses nothing (the lease expires and
//! the job is delivered later), SIGTERM releases the lease at once (CASES C-02).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::app::Db;
use crate::receiver::{Receiver, Reply};

/// A `deferhook serve` process, killed when dropped.
pub struct Process {
    pub child: Child,
    /// `http://addr` of its API.
    pub base: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `serve` on `database_url` with `flags` and waits for its API address.
pub fn spawn(database_url: &str, flags: &[&str]) -> Process {
    spawn_until(database_url, flags, "local_addr=")
}

/// Starts `serve` and waits for a log line containing `marker`; with `local_addr=` the
/// API's address is read from it.
fn spawn_until(database_url: &str, flags: &[&str], marker: &str) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            // The receivers listen on 127.0.0.1 (CASES C-08 refuses it by default).
            "--allow-private-targets",
        ])
        .args(flags)
        .env("RUST_LOG", "info");
    let (child, after) = crate::log_wait::spawn_until(command, marker);
    let base = format!(
        "http://{}",
        after.split_whitespace().next().unwrap_or_default()
    );
    Process { child, base }
}

fn signal(process: &Process, name: &str) {
    let pid = process.child.id().to_string();
    assert!(
        Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success()
    );
}

async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> Value {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

async fn wait_delivered(base: &str, id: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let job = call(reqwest::Method::GET, format!("{base}/v1/jobs/{id}"), None).await;
        if job["state"] == "delivered" {
            return job;
        }
        assert!(Instant::now() < deadline, "not delivered in time: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a subscriber and a job on `process`; returns the job id.
async fn schedule(process: &Process, receiver: &Receiver, event: &str) -> String {
    let url = receiver.url("/");
    call(
        reqwest::Method::PUT,
        format!("{}/v1/subscribers/s", process.base),
        Some(json!({ "url": url })),
    )
    .await;
    let job = call(
        reqwest::Method::POST,
        format!("{}/v1/jobs", process.base),
        Some(json!({ "subscriber_id": "s", "event_id": event, "payload": {"k": "v"} })),
    )
    .await;
    job["id"].as_str().unwrap().to_owned()
}

const FLAGS: &[&str] = &[
    "--lease-ms",
    "2000",
    "--attempt-timeout-ms",
    "1500",
    "--shutdown-grace-ms",
    "500",
    "--backoff-base-ms",
    "100",
];

async fn killed_mid_attempt(db: Db, signal_name: &str, event: &str) -> (Vec<Value>, Duration) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let receiver = Receiver::start(vec![
        Reply::status(200).after(Duration::from_secs(30)),
        Reply::status(200),
    ])
    .await;
    let database = db.database().await;
    let url = database.url.clone();
    let first = spawn(&url, FLAGS);
    let id = schedule(&first, &receiver, event).await;
    receiver.wait_for(1, Duration::from_secs(5)).await;
    let mut first = first;
    signal(&first, signal_name);
    let stopping = Instant::now();
    loop {
        if let Some(status) = first.child.try_wait().unwrap() {
            if signal_name == "-TERM" {
                assert!(status.success(), "SIGTERM exit status {status}");
            }
            break;
        }
        assert!(stopping.elapsed() < Duration::from_secs(5), "did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first);
    let restarted = Instant::now();
    let second = spawn(&url, FLAGS);
    let job = wait_delivered(&second.base, &id, Duration::from_secs(10)).await;
    let took = restarted.elapsed();
    assert_eq!(job["attempts"], 2);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("webhook-id"), event);
    assert_eq!(requests[1].header("webhook-id"), event);
    assert_eq!(requests[0].body, requests[1].body);
    let attempts = call(
        reqwest::Method::GET,
        format!("{}/v1/jobs/{id}/attempts", second.base),
        None,
    )
    .await;
    (attempts["items"].as_array().unwrap().clone(), took)
}

async fn sigkill_mid_attempt_loses_nothing(db: Db) {
    let (attempts, _) = killed_mid_attempt(db, "-KILL", "evt-kill9").await;
    assert_eq!(attempts[0]["outcome"], "unknown");
    assert_eq!(attempts[1]["outcome"], "delivered");
    assert_eq!(attempts[1]["possible_duplicate"], true);
}

async fn c02_sigterm_mid_attempt_releases_the_job_for_the_next_instance(db: Db) {
    let (attempts, took) = killed_mid_attempt(db, "-TERM", "evt-sigterm").await;
    assert_eq!(attempts[0]["outcome"], "unknown");
    assert!(
        attempts[0]["reason"].as_str().unwrap().contains("shutdown"),
        "{}",
        attempts[0]
    );
    assert_eq!(attempts[1]["outcome"], "delivered");
    assert_eq!(attempts[1]["possible_duplicate"], true);
    // Released at shutdown: no wait for the 2 s lease to expire.
    assert!(took < Duration::from_millis(1800), "took {took:?}");
}

async fn a_worker_only_instance_delivers_what_an_api_only_instance_accepted(db: Db) {
    let receiver = Receiver::ok().await;
    // The system clock: the worker process reads the real time.
    let api = crate::setup::instance(db)
        .system_clock()
        .no_worker()
        .start()
        .await;
    api.subscriber("s", &receiver.url("/"), None).await;
    let job = api.job("s", "evt-split", json!({})).await;
    let _worker = spawn_until(&api.database_url, &["--no-api"], "delivery worker started");
    let done = api
        .wait_state(&job, "delivered", Duration::from_secs(5))
        .await;
    assert_eq!(done["attempts"], 1);
    assert_eq!(receiver.requests().len(), 1);
}

crate::on_both_backends!(
    sigkill_mid_attempt_loses_nothing,
    c02_sigterm_mid_attempt_releases_the_job_for_the_next_instance,
    a_worker_only_instance_delivers_what_an_api_only_instance_accepted,
);
