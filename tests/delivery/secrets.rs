//! C-07 with a secret rotation, secrets sealed at rest, and secrets kept out of logs:
//!
//! - the secret is rotated between the attempts of a job: both requests carry the same
//!   `webhook-id` and the submitted bytes, the second one a signature for the new and
//!   for the old secret, and a delivery after the grace period only the new one;
//! - a secret sealed with another `--secret-key` is never sent: the attempt is
//!   retryable (`secret_unreadable`), names the subscriber, and the right key delivers;
//! - the real binary's log, through rotations and a retried delivery, never shows a
//!   secret or the key; with `--plaintext-secrets` it warns that secrets are stored in
//!   plaintext;
//!   a malformed key stops it with exit code 1 without echoing the key.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use deferhook::domain::Timestamp;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Recorded, Reply};
use crate::setup::{instance, instance_on, next_due};

const C07_PAYLOAD: &str = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;
/// A secret key (32 bytes, base64).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const OTHER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

/// Whether `signature` (`v1,<base64>`) is the HMAC-SHA256 with `secret` of the request
/// as received, computed here independently of deferhook's signing code.
fn signed_by(secret: &str, request: &Recorded, signature: &str) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let Some(expected) = signature
        .strip_prefix("v1,")
        .and_then(|sig| STANDARD.decode(sig).ok())
    else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(request.header("webhook-id").as_bytes());
    mac.update(b".");
    mac.update(request.header("webhook-timestamp").as_bytes());
    mac.update(b".");
    mac.update(&request.body);
    mac.verify_slice(&expected).is_ok()
}

/// The space-separated signatures of `webhook-signature`.
fn signatures(request: &Recorded) -> Vec<&str> {
    request.header("webhook-signature").split(' ').collect()
}

/// Rotates `id`'s secret with `grace_seconds`; returns the 200 body.
async fn rotate(app: &TestApp, id: &str, grace_seconds: u64) -> Value {
    let path = format!("/v1/subscribers/{id}/secret/rotate");
    let reply = app
        .post_json(&path, &json!({ "grace_seconds": grace_seconds }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

async fn c07_a_rotation_between_attempts_signs_with_both_secrets_until_the_grace_ends(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(500),
        Reply::status(200),
        Reply::status(200),
    ])
    .await;
    // Backoff base 1 s: the retry comes 0.5 to 1 s after the 500. Secrets sealed.
    let app = instance(db)
        .flags(&["--backoff-base-ms", "1000", "--secret-key", KEY])
        .start()
        .await;
    let old = app.subscriber("s", &receiver.url("/"), None).await;
    let body = format!(r#"{{"subscriber_id":"s","event_id":"evt-c07","payload":{C07_PAYLOAD}}}"#);
    let job = app.job_raw(&body).await;

    assert_eq!(app.run_pending().await.attempted(), 1);
    // Between the attempts (the retry is at least 0.5 s away): a 2 s grace period,
    // which the retry falls inside.
    let rotated = rotate(&app, "s", 2).await;
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    let grace_end =
        Timestamp::parse_rfc3339(rotated["previous_secret_expires_at"].as_str().unwrap()).unwrap();

    let retry = next_due(&app.job_now(&job).await);
    assert!(retry < grace_end, "the retry falls inside the grace period");
    app.advance(retry.millis_since(app.now()));
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(&request.body[..], C07_PAYLOAD.as_bytes());
        assert_eq!(request.header("webhook-id"), "evt-c07");
    }
    // Before the rotation: the old secret alone.
    let first = &requests[0];
    assert_eq!(
        signatures(first).len(),
        1,
        "{}",
        first.header("webhook-signature")
    );
    assert!(signed_by(&old, first, signatures(first)[0]));
    // During the grace period: the new one first, then the old one.
    let second = &requests[1];
    let sigs = signatures(second);
    assert_eq!(sigs.len(), 2, "{}", second.header("webhook-signature"));
    assert!(signed_by(&new, second, sigs[0]) && !signed_by(&old, second, sigs[0]));
    assert!(signed_by(&old, second, sigs[1]) && !signed_by(&new, second, sigs[1]));
    let signed_at: i64 = second.header("webhook-timestamp").parse().unwrap();
    assert!(signed_at <= grace_end.as_unix_seconds());

    // After the grace period: the new secret alone.
    app.advance(grace_end.millis_since(app.now()) + 51);
    let later = app.job_raw(&body.replace("evt-c07", "evt-c07-later")).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&later).await["state"], "delivered");
    let third = &receiver.requests()[2];
    assert_eq!(&third.body[..], C07_PAYLOAD.as_bytes());
    assert_eq!(
        signatures(third).len(),
        1,
        "{}",
        third.header("webhook-signature")
    );
    assert!(signed_by(&new, third, signatures(third)[0]));
    assert!(!signed_by(&old, third, signatures(third)[0]));
}

/// A server never starts on secrets it cannot open (another key, or none): it would fail
/// every delivery and write plaintext or other-key values into a sealed database. The
/// refusal names the subscriber, never a secret or a key. The right key delivers.
async fn a_server_with_another_key_or_none_refuses_a_sealed_database(db: Db) {
    let receiver = Receiver::ok().await;
    let mut sealing = instance(db).flags(&["--secret-key", KEY]).start().await;
    let secret = sealing.subscriber("s", &receiver.url("/"), None).await;
    let job = sealing.job("s", "e1", json!({"delay_ms": 60_000})).await;
    let database = sealing.keep_database();
    let url = sealing.database_url.clone();
    sealing.stop().await;

    let other = deferhook::store::sealing::Sealer::from_base64_key(OTHER_KEY).unwrap();
    for sealer in [other, deferhook::store::sealing::Sealer::plaintext()] {
        let refused = deferhook::store::open_with_sealer(&url, sealer)
            .await
            .expect_err("a sealed database needs its key");
        let message = refused.to_string();
        assert!(message.contains("subscriber `s`"), "{message}");
        assert!(message.contains("--secret-key"), "{message}");
        for hidden in [secret.as_str(), &secret[6..], KEY, OTHER_KEY] {
            assert!(!message.contains(hidden), "{message}");
        }
    }

    // The right key: the job is delivered, signed with the secret.
    let right = instance_on(&url)
        .flags(&["--secret-key", KEY])
        .start()
        .await;
    let id = job["id"].as_str().unwrap();
    let moved = right
        .patch_json(
            &format!("/v1/jobs/{id}"),
            &json!({"deliver_at": "2000-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.text);
    assert_eq!(right.run_pending().await.attempted(), 1);
    assert_eq!(right.job_now(&job).await["state"], "delivered");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert!(signed_by(
        &secret,
        &requests[0],
        signatures(&requests[0])[0]
    ));
    right.stop().await;
    drop(database);
}

/// Subscriber `id`'s `secret` column as stored.
async fn raw_secret(url: &str, id: &str) -> String {
    let query = "SELECT secret FROM subscribers WHERE id = ";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{query}?1")))
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{query}$1")))
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    }
}

/// Turning `--secret-key` on seals the secrets already stored in plaintext at start.
async fn enabling_a_key_seals_the_stored_secrets(db: Db) {
    let mut plain = instance(db).flags(&["--plaintext-secrets"]).start().await;
    plain.subscriber("p", "http://127.0.0.1:9/hook", None).await;
    let database = plain.keep_database();
    let url = plain.database_url.clone();
    plain.stop().await;
    let sealed = instance_on(&url)
        .flags(&["--secret-key", KEY])
        .start()
        .await;
    sealed.stop().await;
    let raw = raw_secret(&url, "p").await;
    assert!(raw.starts_with("enc:v1:"), "still plaintext: {}", &raw[..6]);
    drop(database);
}

crate::on_both_backends!(
    c07_a_rotation_between_attempts_signs_with_both_secrets_until_the_grace_ends,
    a_server_with_another_key_or_none_refuses_a_sealed_database,
    enabling_a_key_seals_the_stored_secrets,
);

// ---- the real binary's log -------------------------------------------------------------

/// `deferhook serve` on a fresh SQLite file with its standard error in `log`, killed
/// when dropped.
struct Logged {
    child: std::process::Child,
    base: String,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `deferhook`, without the `DEFERHOOK_*` variables of the test's own environment, so
/// that only what a test sets reaches it.
fn deferhook() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("DEFERHOOK_")) {
        command.env_remove(name);
    }
    command
}

fn serve_logged(dir: &Path, log: &Path, env: &[(&str, &str)]) -> Logged {
    let database = format!("sqlite://{}", dir.join("d.db").display());
    let mut command = deferhook();
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &database,
        ])
        .args(["--backoff-base-ms", "100", "--backoff-max-ms", "200"])
        // The receiver is on 127.0.0.1, which the SSRF policy refuses by default.
        .arg("--allow-private-targets")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the binary starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some((_, after)) = text.split_once("local_addr=") {
            let addr = after.split_whitespace().next().unwrap_or_default();
            return Logged {
                child,
                base: format!("http://{addr}"),
            };
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("deferhook exited ({status}) before listening:\n{text}");
        }
        assert!(Instant::now() < deadline, "no listen line in:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Value,
) -> (u16, Value) {
    let response = client
        .request(method, url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_log_never_shows_a_secret_or_the_key() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let receiver = Receiver::start(vec![Reply::status(500), Reply::status(200)]).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let server = serve_logged(dir.path(), &log, &[("DEFERHOOK_SECRET_KEY", KEY)]);
    let client = reqwest::Client::new();
    let base = &server.base;
    let put = reqwest::Method::PUT;
    let post = reqwest::Method::POST;

    let chosen = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let (status, created) = call(
        &client,
        put.clone(),
        format!("{base}/v1/subscribers/s"),
        json!({"url": receiver.url("/"), "secret": chosen}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut secrets = vec![chosen.to_owned()];
    for grace in [60, 0, 3600] {
        let (status, rotated) = call(
            &client,
            post.clone(),
            format!("{base}/v1/subscribers/s/secret/rotate"),
            json!({"grace_seconds": grace}),
        )
        .await;
        assert_eq!(status, 200, "{rotated}");
        secrets.push(rotated["secret"].as_str().unwrap().to_owned());
    }
    // Refused secrets are not logged either.
    let refused = "whsec_cmVmdXNlZC1zZWNyZXQ=";
    let (status, _) = call(
        &client,
        post.clone(),
        format!("{base}/v1/subscribers/s/secret/rotate"),
        json!({"grace_seconds": -1, "secret": refused}),
    )
    .await;
    assert_eq!(status, 422);
    // A delivery signed with two secrets, retried once.
    let (status, job) = call(
        &client,
        post.clone(),
        format!("{base}/v1/jobs"),
        json!({"subscriber_id": "s", "event_id": "e", "payload": {"n": 1}}),
    )
    .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, current) = call(
            &client,
            reqwest::Method::GET,
            format!("{base}/v1/jobs/{id}"),
            Value::Null,
        )
        .await;
        if current["state"] == "delivered" {
            break;
        }
        assert!(Instant::now() < deadline, "not delivered: {current}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(signatures(&receiver.requests()[1]).len(), 2);
    drop(server);

    let text = std::fs::read_to_string(&log).unwrap();
    // The log was captured, at debug level, and covers the rotations and the attempts.
    assert!(text.contains("signing secret rotated"), "{text}");
    assert!(text.contains("attempt finished"), "{text}");
    assert!(!text.contains("stored in plaintext"), "{text}");
    for secret in secrets.iter().map(String::as_str).chain([refused]) {
        let encoded = secret.strip_prefix("whsec_").unwrap();
        assert!(!text.contains(encoded), "a secret is in the log:\n{text}");
    }
    assert!(!text.contains(KEY), "the key is in the log:\n{text}");
}

#[tokio::test]
async fn with_plaintext_secrets_the_server_warns_and_a_bad_key_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let server = serve_logged(dir.path(), &log, &[("DEFERHOOK_PLAINTEXT_SECRETS", "true")]);
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let warning = text
        .lines()
        .find(|line| line.contains("stored in plaintext"))
        .unwrap_or_else(|| panic!("no plaintext warning in:\n{text}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("--secret-key-file") && warning.contains("DEFERHOOK_SECRET_KEY"));

    let database = format!("sqlite://{}", dir.path().join("d.db").display());
    let bad = "c2hvcnQta2V5LW5vdC0zMi1ieXRlcw==";
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, bad).unwrap();
    let key_file = key_file.display().to_string();
    for (flags, env) in [
        (vec![], vec![("DEFERHOOK_SECRET_KEY", bad)]),
        (vec!["--secret-key", bad], vec![]),
        (vec!["--secret-key-file", key_file.as_str()], vec![]),
    ] {
        let output = deferhook()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                &database,
            ])
            .args(&flags)
            .envs(env)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(stderr.contains("32 bytes"), "{stderr}");
        assert!(
            !stderr.contains(bad) && !stderr.contains("c2hvcnQ"),
            "{stderr}"
        );
    }
}
