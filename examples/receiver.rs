//! A webhook receiver that does what every deferhook receiver should: verify the
//! Standard Webhooks signature, refuse stale timestamps (5 minutes), and apply each
//! `webhook-id` once, however often it is delivered (deferhook is at-least-once).
//!
//! ```sh
//! RECEIVER_SECRET='whsec_...' cargo run --release --example receiver -- --listen 127.0.0.1:9000
//! ```
//!
//! Answers 204 when the event is applied or was already applied, 401 when the
//! signature does not verify, 400 when headers are missing or the timestamp is outside
//! the tolerance. Prints one line per request to standard output.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use clap::Parser;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How far a `webhook-timestamp` may be from now, in seconds (Standard Webhooks).
const TOLERANCE_SECONDS: i64 = 5 * 60;

#[derive(Debug, Parser)]
#[command(about = "A verifying, idempotent webhook receiver for deferhook")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The subscriber's signing secret (`whsec_…`), as deferhook returned it.
    #[arg(long, env = "RECEIVER_SECRET")]
    secret: String,
}

#[derive(Clone)]
struct Receiver {
    key: Arc<Vec<u8>>,
    applied: Arc<Mutex<HashSet<String>>>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let encoded = args
        .secret
        .strip_prefix("whsec_")
        .ok_or_else(|| anyhow::anyhow!("--secret must start with whsec_"))?;
    // The `=` padding is optional in a secret, as in the Standard Webhooks libraries.
    let key = STANDARD_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .map_err(|_| anyhow::anyhow!("--secret is not whsec_ followed by base64"))?;
    let receiver = Receiver {
        key: Arc::new(key),
        applied: Arc::default(),
    };
    let app = Router::new().fallback(post(receive)).with_state(receiver);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("receiver listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    ) else {
        println!("rejected: missing webhook-* headers");
        return StatusCode::BAD_REQUEST;
    };
    let Ok(sent_at) = timestamp.parse::<i64>() else {
        println!("rejected {id}: webhook-timestamp is not a number");
        return StatusCode::BAD_REQUEST;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if (now - sent_at).abs() > TOLERANCE_SECONDS {
        println!("rejected {id}: timestamp outside the 5 minute tolerance");
        return StatusCode::BAD_REQUEST;
    }
    if !verifies(&receiver.key, id, timestamp, &body, signatures) {
        println!("rejected {id}: no signature verifies");
        return StatusCode::UNAUTHORIZED;
    }
    let first_time = receiver
        .applied
        .lock()
        .map(|mut applied| applied.insert(id.to_owned()))
        .unwrap_or(false);
    if first_time {
        println!("applied {id}: {}", String::from_utf8_lossy(&body));
    } else {
        println!("duplicate {id}: already applied, acknowledged again");
    }
    StatusCode::NO_CONTENT
}

/// True when one of the space-separated `v1,<base64>` signatures is the HMAC-SHA256 of
/// `{id}.{timestamp}.{body}` (compared in constant time).
fn verifies(key: &[u8], id: &str, timestamp: &str, body: &[u8], signatures: &str) -> bool {
    signatures.split(' ').any(|candidate| {
        let Some(encoded) = candidate.strip_prefix("v1,") else {
            return false;
        };
        let Ok(expected) = STANDARD.decode(encoded) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
            return false;
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.verify_slice(&expected).is_ok()
    })
}
