//! Secrets sealed by default (issue #34 part 4.11, docs/DESIGN.md §4.2), with the real
//! binary: on SQLite without `--secret-key` or `--secret-key-file`, the first start
//! makes a key file beside the database (mode 0600) and the secrets are stored sealed,
//! never in plaintext; a later start reuses that key; a database holding sealed
//! secrets whose key file is gone is refused, naming the file; `--plaintext-secrets`
//! keeps plaintext; PostgreSQL gets no generated key, and a warning.

use std::path::Path;
use std::process::Child;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::operator_support::{FakeServer, clean_command};

/// A secret the test chooses, so its plaintext can be looked for.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `deferhook serve`, killed when dropped, with the lines it logged before listening.
struct Served {
    child: Child,
    base: String,
    log: Vec<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `serve` in `dir` on `database_url` with `flags`; waits until it listens.
fn serve(dir: &Path, database_url: &str, flags: &[&str]) -> Served {
    let mut command = clean_command();
    command
        .current_dir(dir)
        .env("RUST_LOG", "info")
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(database_url)
        // The receiver is on 127.0.0.1, which the SSRF policy refuses by default.
        .arg("--allow-private-targets")
        .args(flags);
    let (child, after, log) = crate::log_wait::spawn_until_logged(command, "local_addr=");
    let addr = after.split_whitespace().next().unwrap_or_default();
    Served {
        child,
        base: format!("http://{addr}"),
        log,
    }
}

/// Runs `serve` on `database_url` expecting it to refuse to start; its standard error.
fn refused(dir: &Path, database_url: &str) -> String {
    let output = clean_command()
        .current_dir(dir)
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(database_url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    stderr
}

/// An HTTP client (reqwest is built without a default TLS provider: ring's is
/// installed first, as the server's sender does).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn put_subscriber(base: &str, url: &str) {
    let response = client()
        .put(format!("{base}/v1/subscribers/s"))
        .json(&json!({"url": url, "secret": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
}

/// Subscriber `s`'s `secret` column as stored.
async fn stored_secret(database_url: &str) -> String {
    let pool = sqlx::SqlitePool::connect(database_url).await.unwrap();
    let secret = sqlx::query_scalar("SELECT secret FROM subscribers WHERE id = 's'")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    secret
}

/// Whether any file in `dir` holds `text`.
fn any_file_holds(dir: &Path, text: &str) -> bool {
    std::fs::read_dir(dir).unwrap().flatten().any(|entry| {
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        bytes
            .windows(text.len())
            .any(|window| window == text.as_bytes())
    })
}

/// Whether `request` (head, blank line, body) is signed with [`SECRET`], checked
/// here independently of deferhook's signing code.
fn signed_with_the_secret(request: &str) -> bool {
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    let header = |name: &str| {
        head.lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let key = STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", header("webhook-id"), header("webhook-timestamp")).as_bytes());
    mac.update(body.as_bytes());
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    header("webhook-signature")
        .split(' ')
        .any(|signature| signature == format!("v1,{expected}"))
}

#[tokio::test]
async fn the_first_start_makes_a_private_key_file_and_the_next_one_reuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", dir.path().join("d.db").display());
    let key_path = dir.path().join("d.db.key");
    let receiver = FakeServer::start("200 OK", "text/plain", "ok");

    let first = serve(dir.path(), &database_url, &[]);
    let note = first
        .log
        .iter()
        .find(|line| line.contains("generated a secret key file"))
        .unwrap_or_else(|| panic!("no note of the new key file in {:?}", first.log));
    assert!(note.contains(&key_path.display().to_string()), "{note}");
    put_subscriber(&first.base, &format!("{}/hook", receiver.base)).await;
    drop(first);

    let key = std::fs::read_to_string(&key_path).expect("a key file beside the database");
    assert_eq!(STANDARD.decode(key.trim()).unwrap().len(), 32);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let encoded = SECRET.strip_prefix("whsec_").unwrap();
    assert!(
        !any_file_holds(dir.path(), encoded),
        "the secret is in plaintext in a file"
    );
    assert!(stored_secret(&database_url).await.starts_with("enc:v1:"));

    // The next start reads the same key: the secret opens and signs a delivery.
    let second = serve(dir.path(), &database_url, &[]);
    assert!(
        second
            .log
            .iter()
            .all(|line| !line.contains("generated a secret key file")),
        "{:?}",
        second.log
    );
    let created: Value = client()
        .post(format!("{}/v1/jobs", second.base))
        .json(&json!({"subscriber_id": "s", "event_id": "e1", "payload": {"n": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("a job").to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let job: Value = client()
            .get(format!("{}/v1/jobs/{id}", second.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if job["state"] == "delivered" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not delivered: {job}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert!(signed_with_the_secret(&requests[0]), "{}", requests[0]);
    drop(second);
    assert_eq!(std::fs::read_to_string(&key_path).unwrap(), key, "kept");
}

#[tokio::test]
async fn sealed_secrets_without_their_key_file_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", dir.path().join("d.db").display());
    let key_path = dir.path().join("d.db.key");
    let first = serve(dir.path(), &database_url, &[]);
    put_subscriber(&first.base, "http://127.0.0.1:9/hook").await;
    drop(first);
    let key = std::fs::read_to_string(&key_path).unwrap();
    let elsewhere = dir.path().join("elsewhere.key");
    std::fs::rename(&key_path, &elsewhere).unwrap();

    let stderr = refused(dir.path(), &database_url);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("key file {} is missing", key_path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("--secret-key-file"), "{stderr}");
    assert!(!stderr.contains(key.trim()), "{stderr}");
    assert!(!key_path.exists(), "no new key replaces the lost one");

    // The key given as a file opens them.
    let elsewhere = elsewhere.display().to_string();
    let served = serve(
        dir.path(),
        &database_url,
        &["--secret-key-file", elsewhere.as_str()],
    );
    drop(served);
}

#[tokio::test]
async fn plaintext_secrets_keeps_them_in_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", dir.path().join("d.db").display());
    let served = serve(dir.path(), &database_url, &["--plaintext-secrets"]);
    put_subscriber(&served.base, "http://127.0.0.1:9/hook").await;
    let warning = served
        .log
        .iter()
        .find(|line| line.contains("stored in plaintext"))
        .unwrap_or_else(|| panic!("no warning in {:?}", served.log));
    assert!(warning.contains("WARN") && warning.contains("--secret-key-file"));
    drop(served);
    assert!(!dir.path().join("d.db.key").exists());
    assert_eq!(stored_secret(&database_url).await, SECRET);
}

#[tokio::test]
async fn an_in_memory_database_needs_no_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), "sqlite::memory:", &[]);
    put_subscriber(&served.base, "http://127.0.0.1:9/hook").await;
    assert!(
        served.log.iter().all(|line| !line.contains("plaintext")),
        "{:?}",
        served.log
    );
    drop(served);
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(files.is_empty(), "{files:?}");
}

#[tokio::test]
async fn postgres_gets_no_generated_key_and_a_warning() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), &database.url, &[]);
    let warning = served
        .log
        .iter()
        .find(|line| line.contains("stored in plaintext"))
        .unwrap_or_else(|| panic!("no warning in {:?}", served.log));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("--secret-key-file"), "{warning}");
    drop(served);
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(files.is_empty(), "{files:?}");
}
