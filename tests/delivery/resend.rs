//! Issue #15 part 2: a request whose kept-alive connection the receiver closes before
//! answering is sent once more, at once, on a fresh connection, inside the same
//! attempt; never after a timeout or once a response has begun. The receiver here is
//! raw TCP on 127.0.0.1, so that it can close a connection right after reading a
//! request's headers, as a receiver closing idle keep-alive connections does when a
//! request reaches it just as it closes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::app::{Db, metric};
use crate::setup::instance;

/// What the receiver does with a request once it has read its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    /// Reads the body and answers `200` with keep-alive.
    Answer,
    /// Closes the connection without a byte of answer.
    Close,
    /// Sends a `500` status line and headers announcing 100 bytes of body, 4 of them,
    /// then closes.
    HeadThenClose,
    /// Never answers; keeps the connection open until the receiver stops.
    Hold,
}

/// One request as the receiver read it: on which connection (numbered from 0 in
/// accept order), its index on that connection, its headers (names lowercased) and
/// what the receiver did with it.
#[derive(Clone, Debug)]
struct Seen {
    connection: usize,
    index: usize,
    headers: HashMap<String, String>,
    act: Act,
}

type Script = Arc<dyn Fn(usize, usize) -> Act + Send + Sync>;

/// A raw HTTP/1.1 receiver on 127.0.0.1:0 that acts on each request as `script`
/// (connection number, index on the connection) says; stops when dropped.
struct RawReceiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: CancellationToken,
}

impl Drop for RawReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RawReceiver {
    async fn start(script: impl Fn(usize, usize) -> Act + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let script: Script = Arc::new(script);
        let (log, stopped) = (seen.clone(), stop.clone());
        tokio::spawn(async move {
            for connection in 0.. {
                let stream = tokio::select! {
                    accepted = listener.accept() => accepted.unwrap().0,
                    () = stopped.cancelled() => return,
                };
                let (script, log, stopped) = (script.clone(), log.clone(), stopped.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = serve(stream, connection, script, log) => {}
                        () = stopped.cancelled() => {}
                    }
                });
            }
        });
        RawReceiver { addr, seen, stop }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves one connection until the script closes it or the sender does.
async fn serve(
    mut stream: TcpStream,
    connection: usize,
    script: Script,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buffer = Vec::new();
    for index in 0.. {
        let Some(head_end) = read_head(&mut stream, &mut buffer).await else {
            return;
        };
        let headers = parse_headers(&buffer[..head_end]);
        let act = script(connection, index);
        log.lock().unwrap().push(Seen {
            connection,
            index,
            headers: headers.clone(),
            act,
        });
        match act {
            Act::Answer => {
                let length: usize = headers
                    .get("content-length")
                    .map_or(0, |v| v.parse().unwrap());
                while buffer.len() < head_end + length {
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
                buffer.drain(..head_end + length);
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                if stream.write_all(answer).await.is_err() {
                    return;
                }
            }
            Act::Close => return,
            Act::HeadThenClose => {
                let answer =
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 100\r\n\r\nE42 ";
                let _ = stream.write_all(answer).await;
                return;
            }
            Act::Hold => std::future::pending::<()>().await,
        }
    }
}

/// Reads until `buffer` holds a whole header block; its end (after the blank line), or
/// `None` when the connection ends first.
async fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(at + 4);
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

fn parse_headers(head: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(head)
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect()
}

/// The first attempt's reason.
async fn first_reason(attempts: &[Value]) -> String {
    attempts[0]["reason"].as_str().unwrap_or("").to_owned()
}

/// The scenario of the issue, made deterministic: the first request on a connection is
/// answered with keep-alive; the next one on that connection is closed right after its
/// headers are read, once. The job has one attempt, and that attempt delivers it: its
/// request is sent again, on a new connection, with the same headers.
async fn a_request_on_a_connection_closed_before_answering_is_resent_on_a_fresh_one(db: Db) {
    let receiver = RawReceiver::start(|connection, index| {
        if (connection, index) == (0, 1) {
            Act::Close
        } else {
            Act::Answer
        }
    })
    .await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url(), None).await;
    let warm = app.job("s", "evt-warm", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&warm).await["state"], "delivered");
    let duplicates_before = metric(&app.metrics().await, "deferhook_possible_duplicates_total");

    let job = app.job("s", "evt-race", json!({ "max_attempts": 1 })).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let done = app.job_now(&job).await;
    assert_eq!(done["state"], "delivered", "{done}");
    assert_eq!(done["attempts"], 1, "{done}");

    let seen = receiver.seen();
    let places: Vec<_> = seen
        .iter()
        .map(|s| (s.connection, s.index, s.act))
        .collect();
    assert_eq!(
        places,
        [(0, 0, Act::Answer), (0, 1, Act::Close), (1, 0, Act::Answer)],
        "the second request went out on the kept-alive connection, then on a new one"
    );
    // The same attempt: the same event id, timestamp and signature both times.
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert_eq!(seen[1].headers[name], seen[2].headers[name], "{name}");
    }
    assert_eq!(seen[2].headers["webhook-id"], "evt-race");

    let attempts = app.attempts(&job).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "delivered");
    assert_eq!(attempts[0]["status"], 200);
    assert_eq!(attempts[0]["possible_duplicate"], true, "{attempts:?}");
    let reason = first_reason(&attempts).await;
    assert!(
        reason.starts_with("resent once on a fresh connection: the first closed before an answer"),
        "{reason}"
    );
    // Counted as a possible duplicate (the counter is process-wide: other tests may
    // add to it, never take from it).
    let duplicates_after = metric(&app.metrics().await, "deferhook_possible_duplicates_total");
    assert!(duplicates_after > duplicates_before);
}

/// Once only: when the fresh connection is closed before an answer too, the attempt
/// fails (`connect`), its reason says it was resent, and no third request is made.
async fn a_request_is_resent_once_only(db: Db) {
    let receiver = RawReceiver::start(|_, _| Act::Close).await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url(), None).await;
    let job = app
        .job("s", "evt-closed", json!({ "max_attempts": 1 }))
        .await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    let dead = app.job_now(&job).await;
    assert_eq!(dead["state"], "dead", "{dead}");
    assert_eq!(dead["dead_reason"], "max_attempts");
    let connections: Vec<_> = receiver.seen().iter().map(|s| s.connection).collect();
    assert_eq!(connections, [0, 1], "one request and one resend");
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts[0]["outcome"], "retryable");
    assert_eq!(attempts[0]["error_class"], "connect");
    assert_eq!(attempts[0]["possible_duplicate"], true, "{attempts:?}");
    let reason = first_reason(&attempts).await;
    assert!(
        reason.starts_with("the connection broke after the request was sent"),
        "{reason}"
    );
    assert!(
        reason.contains("; resent once on a fresh connection"),
        "{reason}"
    );
    assert!(!reason.contains("/hook"), "the URL leaked: {reason}");
}

/// Never once a response has begun: a status line and headers then a close is the
/// receiver's answer (a `500`), not a reason to send again.
async fn a_response_cut_after_its_headers_is_not_resent(db: Db) {
    let receiver = RawReceiver::start(|_, _| Act::HeadThenClose).await;
    let app = instance(db).start().await;
    app.subscriber("s", &receiver.url(), None).await;
    let job = app.job("s", "evt-cut", json!({ "max_attempts": 1 })).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(receiver.seen().len(), 1);
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts[0]["status"], 500);
    assert_eq!(attempts[0]["body_excerpt"], "E42 ");
    assert_eq!(attempts[0]["possible_duplicate"], false, "{attempts:?}");
    let reason = first_reason(&attempts).await;
    assert_eq!(reason, "HTTP 500 Internal Server Error");
}

/// Never after a timeout: the receiver may still be working on the request.
async fn a_timed_out_request_is_not_resent(db: Db) {
    let receiver = RawReceiver::start(|_, _| Act::Hold).await;
    let app = instance(db)
        .flags(&["--attempt-timeout-ms", "300"])
        .start()
        .await;
    app.subscriber("s", &receiver.url(), None).await;
    let job = app.job("s", "evt-slow", json!({ "max_attempts": 1 })).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(receiver.seen().len(), 1);
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts[0]["error_class"], "timeout");
    let reason = first_reason(&attempts).await;
    assert!(!reason.contains("resent"), "{reason}");
}

on_both_backends!(
    a_request_on_a_connection_closed_before_answering_is_resent_on_a_fresh_one,
    a_request_is_resent_once_only,
);

#[tokio::test]
async fn a_response_cut_after_its_headers_is_not_resent_sqlite() {
    a_response_cut_after_its_headers_is_not_resent(Db::Sqlite).await;
}

#[tokio::test]
async fn a_timed_out_request_is_not_resent_sqlite() {
    a_timed_out_request_is_not_resent(Db::Sqlite).await;
}
