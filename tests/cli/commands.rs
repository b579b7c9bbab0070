//! Runs the real binary.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use crate::log_wait::spawn_until;
use std::time::{Duration, Instant};

fn deferhook() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    command.env_remove("RUST_LOG");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("DEFERHOOK_") {
            command.env_remove(key);
        }
    }
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_bad_flag_is_a_one_line_error_and_a_nonzero_exit() {
    let output = run(deferhook().args(["serve", "--listen", "nowhere"]));
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("--listen"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn serve_refuses_a_non_loopback_address_without_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(deferhook()
        .current_dir(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"]));
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("loopback"), "{text}");
    assert!(text.contains("--api-token"), "says how to set one: {text}");
    assert!(
        !dir.path().join("deferhook.db").exists(),
        "nothing is created"
    );
}

#[test]
fn with_a_token_serve_listens_on_any_address() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = deferhook();
    command.current_dir(dir.path()).args([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--no-worker",
        "--api-token",
        "a-token-for-the-network-0123",
    ]);
    let (mut child, after) = spawn_until(command, "local_addr=");
    let port = after
        .split_whitespace()
        .next()
        .and_then(|addr| addr.rsplit(':').next())
        .expect("a port")
        .to_owned();
    let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET /v1/jobs HTTP/1.1\r\nHost: deferhook\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status).unwrap();
    assert!(
        status.starts_with("HTTP/1.1 401"),
        "the API needs the token: {status}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_malformed_token_is_refused_without_being_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(deferhook()
        .current_dir(dir.path())
        .env(
            "DEFERHOOK_API_TOKENS",
            "good-token-0123456789abcdef,short-secret",
        )
        .args(["serve", "--listen", "127.0.0.1:0"]));
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(text.contains("API token #2"), "{text}");
    assert!(!text.contains("short-secret"), "{text}");
    assert!(!text.contains("good-token"), "{text}");
}

#[test]
fn an_attempt_timeout_not_below_the_lease_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(deferhook().current_dir(dir.path()).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--lease-ms",
        "2000",
        "--attempt-timeout-ms",
        "8000",
    ]));
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("--attempt-timeout-ms (8000) must be shorter than --lease-ms (2000)"),
        "{text}"
    );
}

#[test]
fn an_invalid_allowed_cidr_is_a_usage_error() {
    for value in ["10.0.0.0/33", "intranet", "10.0.0.0/8,nope"] {
        let output = run(deferhook().args(["serve", "--allow-target-cidr", value]));
        assert_eq!(output.status.code(), Some(2), "{value}");
        let text = stderr(&output);
        assert!(text.contains("--allow-target-cidr"), "{text}");
        assert!(text.contains("is not a CIDR"), "{text}");
    }
    // (Were the variable accepted, the lease check would stop the server at once.)
    let dir = tempfile::tempdir().unwrap();
    let output = run(deferhook()
        .current_dir(dir.path())
        .env("DEFERHOOK_ALLOW_TARGET_CIDRS", "10.0.0.0/8,bad")
        .args(["serve", "--listen", "127.0.0.1:0", "--lease-ms", "2000"])
        .args(["--attempt-timeout-ms", "8000"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("`bad` is not a CIDR"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn no_api_and_no_worker_cannot_be_combined() {
    let output = run(deferhook().args(["serve", "--no-api", "--no-worker"]));
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_unknown_subcommand_is_refused() {
    let output = run(deferhook().arg("explode"));
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_unreachable_database_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/missing/dir/x.db", dir.path().display());
    let output =
        run(deferhook().args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url]));
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].starts_with("deferhook: "), "{text}");
    assert!(lines[0].contains("cannot open"), "{text}");
}

#[test]
fn an_unsupported_database_url_is_a_one_line_error() {
    let output = run(deferhook().args(["migrate", "--database-url", "mysql://root@localhost/db"]));
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("sqlite://"), "{text}");
}

/// `serve --help` names both database kinds it takes, not only SQLite (issue #15).
#[test]
fn serve_help_names_both_database_kinds() {
    let output = run(deferhook().args(["serve", "--help"]));
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    let database = &help[help.find("--database-url").expect("the flag")..];
    let database = &database[..database.find("[env:").expect("its variable")];
    assert!(database.contains("sqlite://PATH"), "{database}");
    assert!(database.contains("postgres://"), "{database}");
}

#[test]
fn migrate_creates_the_database_and_is_repeatable() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/d.db", dir.path().display());
    for _ in 0..2 {
        let output = run(deferhook().args(["migrate", "--database-url", &url]));
        assert!(output.status.success(), "{}", stderr(&output));
    }
    assert!(dir.path().join("d.db").exists());
}

#[test]
fn openapi_prints_the_committed_document() {
    let output = run(deferhook().arg("openapi"));
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["openapi"], "3.1.0");
    assert_eq!(
        printed,
        serde_json::to_value(deferhook::api::openapi()).unwrap()
    );
}

/// A `serve` process in a temporary directory, killed when dropped.
struct Served {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `serve` with no database flag in a fresh directory, on a free port, and
/// reads the bound address from its log.
fn serve(extra: &[&str]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let mut command = deferhook();
    command
        .current_dir(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra);
    let (child, after) = spawn_until(command, "local_addr=");
    let addr = after
        .split_whitespace()
        .next()
        .expect("an address")
        .to_owned();
    Served {
        child,
        addr,
        _dir: dir,
    }
}

fn get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

#[test]
fn serve_without_flags_creates_deferhook_db_and_answers() {
    let served = serve(&[]);
    assert!(served._dir.path().join("deferhook.db").exists());
    assert_eq!(get(&served.addr, "/healthz").0, 200);
    assert_eq!(get(&served.addr, "/readyz").0, 200);
}

/// docs/DESIGN.md §7: every metric is registered at start, before the first event.
#[test]
fn a_fresh_instance_shows_every_metric() {
    let served = serve(&[]);
    let (status, text) = get(&served.addr, "/metrics");
    assert_eq!(status, 200);
    for (name, kind) in [
        ("deferhook_jobs_accepted_total", "counter"),
        ("deferhook_attempts_total", "counter"),
        ("deferhook_attempt_duration_seconds", "histogram"),
        ("deferhook_claim_delay_seconds", "histogram"),
        ("deferhook_oldest_eligible_age_seconds", "gauge"),
        ("deferhook_jobs", "gauge"),
        ("deferhook_retry_depth", "histogram"),
        ("deferhook_lease_extensions_total", "counter"),
        ("deferhook_lease_expirations_total", "counter"),
        ("deferhook_possible_duplicates_total", "counter"),
        ("deferhook_late_results_total", "counter"),
        ("deferhook_dead_letters_total", "counter"),
        ("deferhook_dead_jobs", "gauge"),
        ("deferhook_replayed_total", "counter"),
        ("deferhook_oldest_retrying_age_seconds", "gauge"),
        ("deferhook_jobs_past_slo", "gauge"),
        ("deferhook_jobs_near_deadline", "gauge"),
        ("deferhook_jobs_purged_total", "counter"),
        ("deferhook_schedule_periods_total", "counter"),
        ("deferhook_destinations_at_limit", "gauge"),
        ("deferhook_circuits", "gauge"),
        ("deferhook_worker_slots_busy", "gauge"),
        ("deferhook_worker_slots_free", "gauge"),
        ("deferhook_clock_offset_seconds", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name} ({kind}) is missing:\n{text}"
        );
    }
    assert!(text.contains("deferhook_jobs_accepted_total 0\n"));
    assert!(text.contains("deferhook_circuits{state=\"open\"} 0\n"));
    assert!(text.contains("deferhook_destinations_at_limit 0\n"));
    // SQLite shares this machine's clock: no offset (docs/DESIGN.md §12).
    assert!(text.contains("deferhook_clock_offset_seconds 0\n"));
    assert!(text.contains("deferhook_dead_letters_total{reason=\"deadline_exceeded\"} 0\n"));
    for reason in deferhook::domain::DeadReason::ALL {
        let series = format!("deferhook_dead_jobs{{reason=\"{reason}\"}} 0\n");
        assert!(text.contains(&series), "{series} is missing:\n{text}");
    }
    for state in ["delivered", "cancelled", "dead"] {
        let series = format!("deferhook_jobs_purged_total{{state=\"{state}\"}} 0\n");
        assert!(text.contains(&series), "{series} is missing:\n{text}");
    }
    for outcome in ["created", "skipped", "refused"] {
        let series = format!("deferhook_schedule_periods_total{{outcome=\"{outcome}\"}} 0\n");
        assert!(text.contains(&series), "{series} is missing:\n{text}");
    }
}

#[test]
fn sigterm_stops_serve_cleanly() {
    let mut served = serve(&["--shutdown-grace-ms", "2000"]);
    assert_eq!(get(&served.addr, "/healthz").0, 200);
    let pid = served.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn json_logs_carry_the_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = deferhook()
        .current_dir(dir.path())
        .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve exited early").unwrap();
        let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
        if let Some(addr) = entry["local_addr"].as_str() {
            break addr.to_owned();
        }
    };
    let (status, response) = get(&addr, "/healthz");
    assert_eq!(status, 200);
    let id_line = response
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("x-request-id:"))
        .expect("x-request-id header");
    let request_id = id_line.split(':').nth(1).unwrap().trim().to_owned();
    let logged = lines
        .map(|l| l.unwrap())
        .find(|l| l.contains(&request_id))
        .expect("a log line with the request id");
    let entry: serde_json::Value = serde_json::from_str(&logged).unwrap();
    assert_eq!(entry["status"], 200, "{logged}");
    let _ = child.kill();
    let _ = child.wait();
}
