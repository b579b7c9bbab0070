//! An independent verifier — the `standardwebhooks` package from PyPI, the reference
//! implementation of the Standard Webhooks spec — accepts what deferhook sends.
//!
//! The Python interpreter comes from `DEFERHOOK_PYTHON` (`.ci/run` points it at a
//! virtualenv with the package), else `python3`. Without the package the test is
//! skipped with one line, except under `CI=true`, where it fails.

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use crate::app::{AppBuilder, Db};
use crate::receiver::{Receiver, Recorded};
use crate::setup::instance;

/// The instance: the system clock, since the verifier checks the signed timestamp
/// against its own (a five-minute tolerance); the worker stepped.
fn verified_instance() -> AppBuilder {
    instance(Db::Sqlite).system_clock()
}

const VERIFY: &str = r#"
import base64, json, sys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
case = json.load(sys.stdin)
body = base64.b64decode(case["body"])
hook = Webhook(case["secret"])
hook.verify(body, case["headers"])
try:
    hook.verify(body + b" ", case["headers"])
except WebhookVerificationError:
    print("verified")
else:
    print("a tampered body verified")
"#;

fn python() -> Option<String> {
    let python = std::env::var("DEFERHOOK_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = Command::new(&python)
        .args(["-c", "import standardwebhooks"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(python);
    }
    let message = format!(
        "the standardwebhooks package is not importable by `{python}`; \
         `pip install standardwebhooks` or set DEFERHOOK_PYTHON"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    // Straight to the process's stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "skipping the Standard Webhooks interop test: {message}"
    );
    None
}

#[tokio::test]
async fn the_reference_verifier_accepts_a_captured_request() {
    let Some(python) = python() else { return };
    let receiver = Receiver::ok().await;
    let app = verified_instance().start().await;
    let secret = app.subscriber("s", &receiver.url("/"), None).await;
    let payload = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;
    let job = app
        .job_raw(&format!(
            r#"{{"subscriber_id":"s","event_id":"evt-interop","payload":{payload}}}"#
        ))
        .await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    let request = &receiver.requests()[0];
    assert_eq!(reference_verify(&python, &secret, request), Ok(()));
}

/// Runs the reference verifier on `request` with `secret`: `Ok` when it accepts the
/// request and refuses it with one byte added, else what it printed.
fn reference_verify(python: &str, secret: &str, request: &Recorded) -> Result<(), String> {
    let case = json!({
        "secret": secret,
        "body": STANDARD.encode(&request.body),
        "headers": {
            "webhook-id": request.header("webhook-id"),
            "webhook-timestamp": request.header("webhook-timestamp"),
            "webhook-signature": request.header("webhook-signature"),
        },
    });
    let mut child = Command::new(python)
        .args(["-c", VERIFY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(case.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.trim() == "verified" {
        Ok(())
    } else {
        Err(format!(
            "verification failed: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// During a rotation's grace period the request carries two signatures; the reference
/// verifier accepts it with either secret, and not with another one.
#[tokio::test]
async fn the_reference_verifier_accepts_either_secret_during_a_rotation() {
    let Some(python) = python() else { return };
    let receiver = Receiver::ok().await;
    let app = verified_instance().start().await;
    let old = app.subscriber("s", &receiver.url("/"), None).await;
    let rotated = app
        .post_json(
            "/v1/subscribers/s/secret/rotate",
            &json!({"grace_seconds": 3600}),
        )
        .await
        .json();
    let new = rotated["secret"].as_str().unwrap();
    let job = app.job("s", "evt-rotated", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    let request = &receiver.requests()[0];
    assert_eq!(request.header("webhook-signature").split(' ').count(), 2);
    assert_eq!(reference_verify(&python, new, request), Ok(()));
    assert_eq!(reference_verify(&python, &old, request), Ok(()));
    let other = deferhook::domain::secret::SigningSecret::generate();
    assert!(reference_verify(&python, other.expose(), request).is_err());
}

/// Secrets in unpadded base64 (accepted by the official libraries, issue #15): a
/// subscriber created with one, then rotated to another, signs requests that the
/// reference verifier accepts with either text as given.
#[tokio::test]
async fn the_reference_verifier_accepts_unpadded_secrets() {
    use base64::engine::general_purpose::STANDARD_NO_PAD;
    let Some(python) = python() else { return };
    let receiver = Receiver::ok().await;
    let app = verified_instance().start().await;
    // 25 and 32 bytes: padded, these would end in `==` and `=`.
    let first = format!("whsec_{}", STANDARD_NO_PAD.encode([7u8; 25]));
    let second = format!("whsec_{}", STANDARD_NO_PAD.encode([9u8; 32]));
    assert!(!first.ends_with('=') && !second.ends_with('='));
    app.subscriber("s", &receiver.url("/"), Some(&first)).await;
    let rotated = app
        .post_json(
            "/v1/subscribers/s/secret/rotate",
            &json!({"grace_seconds": 3600, "secret": second}),
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    assert_eq!(rotated.json()["secret"], second.as_str());
    let job = app
        .job("s", "evt-unpadded", json!({"payload": [1, 2, 3]}))
        .await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    let request = &receiver.requests()[0];
    assert_eq!(&request.body[..], b"[1,2,3]");
    assert_eq!(reference_verify(&python, &second, request), Ok(()));
    assert_eq!(reference_verify(&python, &first, request), Ok(()));
}
