//! Secrets never reach the log (issue #7): the real binary runs with verbose logging
//! while a subscriber's secret and the API token pass through every path that logs —
//! requests, a failed attempt whose response body echoes them, retries, a refused
//! token, an invalid secret — and the captured log holds none of them. Attempt and
//! dead-letter lines name their subscriber.

use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::receiver::{Receiver, Reply};

const TOKEN: &str = "log-test-token-5b1f0c9e7d";
const WRONG_TOKEN: &str = "wrong-token-9a8b7c6d5e4f";
/// `whsec_` + base64 of 32 bytes.
const SECRET: &str = "whsec_c2VjcmV0LWJ5dGVzLWZvci10aGUtbG9nLXRlc3QtMDE=";
const BAD_SECRET: &str = "whsec_not*base64*at-all-31337";
/// An event id that would forge fields in a text log line printed unquoted.
const FORGED_EVENT: &str = r#""e2"outcome=delivered"#;

struct Logged {
    child: Child,
    log: std::path::PathBuf,
    base: String,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(dir: &std::path::Path) -> Logged {
    let log = dir.join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_deferhook"))
        .args(["serve", "--listen", "127.0.0.1:0", "--api-token", TOKEN])
        .arg("--allow-private-targets")
        .args(["--backoff-base-ms", "100", "--backoff-max-ms", "200"])
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.join("d.db").display()))
        .env("RUST_LOG", "info,deferhook=trace")
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let base = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(at) = text.find("local_addr=") {
            let addr = text[at + "local_addr=".len()..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned();
            break format!("http://{addr}");
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            panic!("the server did not start: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Logged { child, log, base }
}

/// `method` on `url` with the token (and `body` as JSON); the answer's JSON.
async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    let request = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(TOKEN);
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// Creates the job `body` and waits (at most 20 s) until it is in `state`; its id.
async fn create_and_wait(base: &str, body: Value, state: &str) -> String {
    let created = call(
        reqwest::Method::POST,
        &format!("{base}/v1/jobs"),
        Some(body),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let job = call(reqwest::Method::GET, &format!("{base}/v1/jobs/{id}"), None).await;
        if job["state"] == state {
            return id;
        }
        assert!(Instant::now() < deadline, "not {state}: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_log_holds_no_secret_nor_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let echo = format!("{{\"secret\":\"{SECRET}\",\"token\":\"{TOKEN}\"}}");
    let receiver = Receiver::start(vec![Reply::status(500).body(&echo), Reply::status(200)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = spawn(dir.path());
    let client = reqwest::Client::new();
    let base = server.base.clone();

    let subscriber = json!({"url": receiver.url("/hook"), "secret": SECRET});
    call(
        reqwest::Method::PUT,
        &format!("{base}/v1/subscribers/s"),
        Some(subscriber),
    )
    .await;
    let bad = client
        .put(format!("{base}/v1/subscribers/t"))
        .bearer_auth(TOKEN)
        .json(&json!({"url": receiver.url("/hook"), "secret": BAD_SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    assert!(!bad.text().await.unwrap().contains(BAD_SECRET), "echoed");
    let refused = client
        .get(format!("{base}/v1/jobs"))
        .bearer_auth(WRONG_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let delivered = create_and_wait(
        &base,
        json!({"subscriber_id": "s", "event_id": "e1", "payload": {"secret": "no"}}),
        "delivered",
    )
    .await;
    // The stored excerpt of the 500's body is redacted too.
    let attempts = call(
        reqwest::Method::GET,
        &format!("{base}/v1/jobs/{delivered}/attempts"),
        None,
    )
    .await;
    assert!(!attempts.to_string().contains(SECRET), "{attempts}");
    // A dead letter: nothing listens on port 1, and one attempt is allowed.
    let gone = json!({"url": "http://127.0.0.1:1/hook", "secret": SECRET});
    call(
        reqwest::Method::PUT,
        &format!("{base}/v1/subscribers/gone"),
        Some(gone),
    )
    .await;
    create_and_wait(
        &base,
        json!({"subscriber_id": "gone", "event_id": FORGED_EVENT, "payload": 1, "max_attempts": 1}),
        "dead",
    )
    .await;
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    let _ = server.child.wait();

    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains("/v1/jobs"), "the log was captured: {log}");
    assert!(log.contains("attempt"), "attempts were logged: {log}");
    // Which subscriber an attempt or a dead letter belongs to is on its line (issue #15).
    let attempts: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("attempt finished"))
        .collect();
    assert!(attempts.len() >= 3, "{log}");
    for line in &attempts {
        assert!(
            line.contains("subscriber_id=s ") || line.contains("subscriber_id=gone "),
            "{line}"
        );
    }
    let dead_letter = log.lines().find(|l| l.contains("job is a dead letter"));
    let dead_letter = dead_letter.unwrap_or_else(|| panic!("no dead-letter line:\n{log}"));
    assert!(dead_letter.contains("subscriber_id=gone"), "{dead_letter}");
    // A producer's event id is quoted and escaped, so it cannot forge the fields after
    // it (issue #34 part 4.9).
    let quoted = r#"event_id="\"e2\"outcome=delivered""#;
    for line in [
        Some(dead_letter),
        attempts
            .iter()
            .copied()
            .find(|l| l.contains("subscriber_id=gone")),
    ] {
        let line = line.unwrap_or_else(|| panic!("no line of the forged event:\n{log}"));
        assert!(line.contains(quoted), "{line}");
    }
    assert!(
        !log.contains(r#"event_id="e2"#),
        "an unquoted event id:\n{log}"
    );
    for secret in [TOKEN, WRONG_TOKEN, SECRET, &SECRET[6..], BAD_SECRET] {
        assert!(!log.contains(secret), "`{secret}` is in the log:\n{log}");
    }
}
