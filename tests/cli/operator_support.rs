//! What the operator-command tests share: an instance of the one harness
//! (`tests/common/app.rs`) on a temporary SQLite file for the CLI to talk to, a
//! receiver on 127.0.0.1 that refuses every webhook (so jobs die at their first
//! attempt), a fake server that records what the CLI sends, and running the CLI as a
//! process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::app::{BlockingApp, TestApp};

/// An instance of the one harness for the CLI to talk to: the system clock (the CLI
/// watches replays in real time), receivers on 127.0.0.1 allowed, and its worker
/// running in the background when `worker`, else `--no-worker`.
pub fn served(worker: bool) -> BlockingApp {
    let builder = TestApp::builder().system_clock().allow_private_targets();
    let builder = if worker {
        builder.running_worker()
    } else {
        builder.no_worker()
    };
    builder.start_blocking()
}

/// A `deferhook` command without any `DEFERHOOK_*` or `RUST_LOG` variable of the
/// environment running the tests.
pub fn clean_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    command.env_remove("RUST_LOG").stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("DEFERHOOK_") {
            command.env_remove(key);
        }
    }
    command
}

/// What a CLI run printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `deferhook args…` against `server` (passed as `--server`, if any).
pub fn cli(server: Option<&str>, args: &[&str]) -> Ran {
    let mut command = clean_command();
    command.args(args);
    if let Some(server) = server {
        command.args(["--server", server]);
    }
    run(&mut command)
}

/// Runs a prepared command.
pub fn run(command: &mut Command) -> Ran {
    let output = command.output().expect("the binary runs");
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A receiver on 127.0.0.1 that answers every webhook `400 Bad Request`: a job sent to
/// it dies at its first attempt (`non_retryable_response`). Runs until the test ends.
pub fn refusing_receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if read_request(&stream).is_ok() {
                let _ = respond(stream, "400 Bad Request", "text/plain", "refused");
            }
        }
    });
    url
}

/// A stand-in for the server that answers canned responses in turn (the last one
/// again and again) and records each request.
pub struct FakeServer {
    /// `http://127.0.0.1:port`.
    pub base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

/// One canned response: status line text (`"401 Unauthorized"`), content type, body.
pub type Canned = (&'static str, &'static str, String);

impl FakeServer {
    /// Answers `status` (e.g. `"401 Unauthorized"`) with `body` of `content_type`.
    pub fn start(status: &'static str, content_type: &'static str, body: &str) -> Self {
        Self::answering(vec![(status, content_type, body.to_owned())])
    }

    /// Answers `responses` in turn, repeating the last.
    pub fn answering(responses: Vec<Canned>) -> Self {
        assert!(!responses.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().flatten().enumerate() {
                let (status, content_type, body) = &responses[n.min(responses.len() - 1)];
                // Recorded before answering, so a test that saw the answer sees the request.
                if let Ok(request) = read_request(&stream) {
                    seen.lock().unwrap().push(request);
                    let _ = respond(stream, status, content_type, body);
                }
            }
        });
        FakeServer { base, requests }
    }

    /// The requests received so far (head, blank line, body).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request; answers its text (head, blank line, body).
fn read_request(stream: &TcpStream) -> std::io::Result<String> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(format!("{head}\r\n{}", String::from_utf8_lossy(&body)))
}

/// Writes a response and closes the connection.
fn respond(
    mut stream: TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Runs `deferhook args… --server server`, killed (and the test failed) if it has not
/// finished within `limit`: for `--watch`, which ends only when the replay does.
pub fn cli_within(server: &str, args: &[&str], limit: Duration) -> Ran {
    let mut child = clean_command()
        .args(args)
        .args(["--server", server])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "deferhook {args:?} did not finish within {limit:?}; it printed:\n{}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The cells of the table row whose first cell is `name` (an operator command's table).
pub fn row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .map(|line| line.trim_matches(|c| c == '|' || c == ' '))
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` row in:\n{text}"))
        .split_whitespace()
        .collect()
}
