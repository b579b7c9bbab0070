//! What an unauthenticated client can write to the log (issue #15 part 5.1): a request
//! refused for its headers (431) writes nothing, however large they are and however
//! many such requests one keep-alive connection sends; a request id that imitates the
//! fields of a log line is replaced, so no line carries a forged field. The real
//! binary runs with its default text log, written to a file.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bytes of each oversized request id: 24 times the 16 KiB header limit.
const HUGE_ID_BYTES: usize = 390_000;
/// Requests with such an id on one connection.
const HUGE_REQUESTS: usize = 10;
/// An id that imitates the fields of a text log line.
const FORGED: &str = "abc method=DELETE path=/v1/subscribers/billing}: status=204";

struct Logged {
    child: Child,
    log: std::path::PathBuf,
    addr: String,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `deferhook serve` on 127.0.0.1:0 with its log in `dir/server.log`.
fn spawn(dir: &std::path::Path) -> Logged {
    let log = dir.join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_deferhook"))
        .current_dir(dir)
        .args(["serve", "--listen", "127.0.0.1:0", "--no-worker"])
        .env_remove("RUST_LOG")
        .env_remove("DEFERHOOK_API_TOKENS")
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let addr = wait_for(&log, &mut child, "local_addr=")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    Logged { child, log, addr }
}

/// Waits (at most 30 s) until the log holds `marker`; returns the text after it.
fn wait_for(log: &std::path::Path, child: &mut Child, marker: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(at) = text.find(marker) {
            return text[at + marker.len()..].to_owned();
        }
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "`{marker}` never logged: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `GET path` with the given `x-request-id` on `stream` (kept alive) and reads
/// the answer; returns its head (lower-cased) and body.
fn exchange(stream: &mut TcpStream, path: &str, request_id: &str) -> (String, String) {
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-request-id: {request_id}\r\n\r\n"
    )
    .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer).unwrap();
        assert!(
            n > 0,
            "connection closed: {}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let head = head.to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .expect("content-length");
            if body.len() >= length {
                return (head, body.to_owned());
            }
        }
    }
}

/// The `x-request-id` a response head (lower-cased) carries.
fn echoed_id(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("x-request-id: "))
        .expect("an x-request-id")
        .trim()
        .to_owned()
}

#[test]
fn requests_with_oversized_headers_write_nothing_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = spawn(dir.path());
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let huge = "q".repeat(HUGE_ID_BYTES);
    for _ in 0..HUGE_REQUESTS {
        let (head, body) = exchange(&mut stream, "/v1/jobs", &huge);
        assert!(head.starts_with("http/1.1 431"), "{head}");
        assert!(body.contains("header"), "{body}");
    }
    let (head, _) = exchange(&mut stream, "/v1/jobs", "marker-request-1");
    assert!(head.starts_with("http/1.1 200"), "{head}");

    // The marker's line comes after every earlier request's.
    wait_for(&server.log, &mut server.child, "marker-request-1");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.len() < 16 * 1024,
        "{} bytes of log after {HUGE_REQUESTS} refused requests",
        log.len()
    );
    assert!(
        !log.contains("qqqqqqqq"),
        "an oversized request id was logged"
    );
    assert!(!log.contains("status=431"), "a refused request was logged");
}

#[test]
fn a_request_id_that_imitates_log_fields_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = spawn(dir.path());
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let (head, _) = exchange(&mut stream, "/healthz", FORGED);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let id = echoed_id(&head);
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "not a fresh id: {id}");

    // The request is logged under the fresh id, its fields quoted.
    let marker = format!("request_id=\"{id}\"");
    let after = wait_for(&server.log, &mut server.child, &marker);
    let line = after.lines().next().unwrap_or_default();
    assert!(line.contains("path=\"/healthz\""), "{line}");
    // Every request's lines name the client's address (issue #34 part 4.1).
    assert!(line.contains("client=\"127.0.0.1\""), "{line}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(!log.contains("method=DELETE"), "a forged field:\n{log}");
}

/// The line of a request carries both its ids: the client's `x-request-id` and the
/// server's own, as answered in `x-server-request-id` (issue #34 part 4.10).
#[test]
fn the_request_log_line_carries_the_client_s_and_the_server_s_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = spawn(dir.path());
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let (head, _) = exchange(&mut stream, "/healthz", "client-chosen-7");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(echoed_id(&head), "client-chosen-7");
    let server_id = head
        .lines()
        .find_map(|l| l.strip_prefix("x-server-request-id: "))
        .expect("an x-server-request-id")
        .trim()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&server_id).is_ok(), "{server_id}");

    let after = wait_for(
        &server.log,
        &mut server.child,
        "request_id=\"client-chosen-7\"",
    );
    let line = after.lines().next().unwrap_or_default();
    assert!(
        line.starts_with(&format!(" server_request_id=\"{server_id}\"")),
        "{line}"
    );
}
