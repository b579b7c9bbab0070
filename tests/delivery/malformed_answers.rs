//! Issue #34 item 5.1: a receiver that reads the request and answers something that is
//! not HTTP (a malformed status line) made a `protocol` attempt, retried with the
//! backoff like a 5xx, and is never sent twice within one attempt; its reason says the
//! answer was not valid HTTP. Before, it read as a `connect` failure ("the connection
//! broke after the request was sent"), which stays for a connection closed before any
//! answer (`resend.rs`). The receiver here is raw TCP on 127.0.0.1, since no HTTP
//! server library writes a malformed status line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::app::{Db, metric};
use crate::setup::{instance, next_due};

/// A raw receiver on 127.0.0.1:0 that reads each request (head and body) and writes
/// `answer`, then closes the connection; stops when dropped.
struct GarbageReceiver {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: CancellationToken,
}

impl Drop for GarbageReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl GarbageReceiver {
    async fn start(answer: &'static [u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let (count, stopped) = (requests.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    accepted = listener.accept() => accepted.unwrap().0,
                    () = stopped.cancelled() => return,
                };
                let count = count.clone();
                tokio::spawn(answer_one(stream, answer, count));
            }
        });
        GarbageReceiver {
            addr,
            requests,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one whole request from `stream`, counts it, and writes `answer`.
async fn answer_one(mut stream: TcpStream, answer: &[u8], count: Arc<AtomicUsize>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let length: usize = String::from_utf8_lossy(&buffer[..head_end])
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, value)| value.trim().parse().unwrap());
    while buffer.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    count.fetch_add(1, Ordering::SeqCst);
    let _ = stream.write_all(answer).await;
    let _ = stream.shutdown().await;
}

/// Each malformed answer, and what the attempt's reason must say after the common
/// "the receiver's answer was not valid HTTP: " (hyper's account of what it could not
/// parse).
const MALFORMED: &[(&[u8], &str)] = &[
    (b"HTTP/1.1 abc\r\n\r\n", "invalid HTTP status-code parsed"),
    (b"garbage\r\n\r\n", "invalid HTTP version parsed"),
];

async fn c34_a_malformed_status_line_is_a_retryable_protocol_failure(db: Db) {
    let app = instance(db).start().await;
    for (i, (answer, cause)) in MALFORMED.iter().enumerate() {
        let receiver = GarbageReceiver::start(answer).await;
        let subscriber = format!("s{i}");
        app.subscriber(&subscriber, &receiver.url(), None).await;
        let job = app.job(&subscriber, &format!("evt-{i}"), json!({})).await;
        assert_eq!(app.run_pending().await.attempted(), 1);
        // One request: an answer that is not HTTP is not a reason to send again.
        assert_eq!(receiver.requests(), 1);
        let attempts = app.attempts(&job).await;
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        let attempt = &attempts[0];
        assert_eq!(attempt["outcome"], "retryable", "{attempt}");
        assert_eq!(attempt["error_class"], "protocol", "{attempt}");
        assert_eq!(attempt["status"], serde_json::Value::Null, "{attempt}");
        assert_eq!(attempt["possible_duplicate"], false, "{attempt}");
        let reason = format!("the receiver's answer was not valid HTTP: {cause}");
        assert_eq!(attempt["reason"], reason.as_str(), "{attempt}");
        let retrying = app.job_now(&job).await;
        assert_eq!(retrying["state"], "retrying", "{retrying}");
        assert_eq!(retrying["last_error"]["class"], "protocol", "{retrying}");
        assert_eq!(retrying["last_error"]["reason"], reason.as_str());
        assert_eq!(retrying["retry_advice"]["verdict"], "yes", "{retrying}");
        // The backoff of any retryable failure: base 100 ms, equal jitter, 50–100 ms.
        let wait = next_due(&retrying).millis_since(app.now());
        assert!((50..=100).contains(&wait), "{wait} ms: {retrying}");
    }
    // (The metrics are process-wide: other tests may have counted some too.)
    let metrics = app.metrics().await;
    let series = "deferhook_attempts_total{outcome=\"retryable\",class=\"protocol\"}";
    assert!(metric(&metrics, series) >= 2.0, "{series}");
}

on_both_backends!(c34_a_malformed_status_line_is_a_retryable_protocol_failure);
