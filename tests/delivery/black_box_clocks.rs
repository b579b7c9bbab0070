//! The real binary on a machine whose clock is 90 s ahead, under libfaketime
//! (`FAKETIME=+90s`), as the second instance on one PostgreSQL database (issue #15
//! part 1, docs/DESIGN.md §12): it works on the database's time, so it takes none of
//! the first instance's live leases and sends nothing early; it reports its offset in
//! `deferhook_clock_offset_seconds` and warns about it once. `skewed_clocks.rs` tests
//! the same in-process with an injected clock.
//!
//! libfaketime is Debian's `faketime` package (`DEFERHOOK_LIBFAKETIME` names another
//! path). Where it is missing the test is skipped with one line on standard error,
//! except under `CI=true`, where that is a failure (`.ci/run` installs it).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use deferhook::domain::Timestamp;
use serde_json::{Value, json};

use crate::app::{Db, metric};
use crate::process::Process;
use crate::receiver::Receiver;

/// How far the second instance's clock is ahead.
const FAKETIME: &str = "+90s";
/// Jobs whose leases the first instance holds while the second starts.
const HELD: usize = 10;
/// The first instance: leases and attempts that outlast the test.
const HOLDER: &[&str] = &["--lease-ms", "20000", "--attempt-timeout-ms", "15000"];
/// The second: a job it wrongly takes from the held receiver times out soon.
const JUDGE: &[&str] = &["--lease-ms", "20000", "--attempt-timeout-ms", "2000"];
/// How far a set clock may be from the database's (as in `skewed_clocks.rs`).
const SYNC_ERROR_MS: i64 = 50;

// Where libfaketime is, shared with the chaos soak's skewed instance.
#[path = "../../bench/src/chaos/faketime.rs"]
mod faketime;

/// libfaketime's library, or `None` (said once) where it is not installed; under
/// `CI=true` its absence fails the test.
fn libfaketime() -> Option<PathBuf> {
    let found = faketime::library();
    if found.is_none() {
        let message = "libfaketime is not installed (Debian: apt-get install faketime; or \
                       set DEFERHOOK_LIBFAKETIME to its path)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}");
        }
        let _ = writeln!(
            std::io::stderr(),
            "skipping the libfaketime test: {message}"
        );
    }
    found
}

/// `deferhook serve` on `database_url` with `flags`, its clock shifted by
/// [`FAKETIME`] through `library`; returns it with the lines it logged before
/// listening.
fn spawn_skewed(library: &PathBuf, database_url: &str, flags: &[&str]) -> (Process, Vec<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
        ])
        .arg("--allow-private-targets")
        .args(flags)
        .env("RUST_LOG", "info")
        .env("LD_PRELOAD", library)
        .env("FAKETIME", FAKETIME);
    let (child, after, before) = crate::log_wait::spawn_until_logged(command, "local_addr=");
    let base = format!(
        "http://{}",
        after.split_whitespace().next().unwrap_or_default()
    );
    (Process { child, base }, before)
}

async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> Value {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

async fn create_job(base: &str, subscriber: &str, event: &str, extra: Value) -> Value {
    let body = crate::app::job(subscriber, event, extra);
    call(reqwest::Method::POST, format!("{base}/v1/jobs"), Some(body)).await
}

/// Polls `base` until no job is left undelivered, within 10 s.
async fn wait_all_delivered(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let jobs = call(
            reqwest::Method::GET,
            format!("{base}/v1/jobs?limit=100"),
            None,
        )
        .await;
        let items = jobs["items"].as_array().unwrap();
        if items.iter().all(|job| job["state"] == "delivered") {
            return;
        }
        assert!(Instant::now() < deadline, "not all delivered: {jobs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_on_a_machine_90_s_ahead_works_on_the_database_time() {
    if !crate::pg::reachable().await {
        return;
    }
    let Some(library) = libfaketime() else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (held, ok) = (Receiver::holding(200).await, Receiver::ok().await);
    let database = Db::Postgres.database().await;
    let a = crate::process::spawn(&database.url, HOLDER);
    for (id, receiver) in [("held", &held), ("ok", &ok)] {
        let subscriber = json!({ "url": receiver.url("/"), "max_in_flight": 100 });
        let url = format!("{}/v1/subscribers/{id}", a.base);
        call(reqwest::Method::PUT, url, Some(subscriber)).await;
    }
    for n in 0..HELD {
        create_job(&a.base, "held", &format!("evt-held-{n}"), json!({})).await;
    }
    held.wait_for(HELD, Duration::from_secs(10)).await;

    // B starts while A holds every lease, its worker claiming at once.
    let (b, logged) = spawn_skewed(&library, &database.url, JUDGE);
    let warnings: Vec<_> = logged
        .iter()
        .filter(|line| line.contains("ahead of the database's"))
        .collect();
    assert_eq!(warnings.len(), 1, "{logged:#?}");
    let offset = metric(
        &reqwest::get(format!("{}/metrics", b.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "deferhook_clock_offset_seconds",
    );
    assert!((-91.0..=-89.0).contains(&offset), "offset {offset} s");

    // A job due in 3 s, created through A and announced to both: whoever sends it,
    // not before its time.
    let later = create_job(&a.base, "ok", "evt-later", json!({ "delay_ms": 3_000 })).await;
    let due = Timestamp::parse_rfc3339(later["deliver_at"].as_str().unwrap()).unwrap();
    let sent = ok.wait_for(1, Duration::from_secs(10)).await[0].wall;
    let sent = Timestamp::from_millis(
        i64::try_from(sent.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap(),
    );
    assert!(
        sent.millis_since(due) >= -SYNC_ERROR_MS,
        "sent {} ms before its time",
        -sent.millis_since(due)
    );
    // By now B has claimed (at start, at the creation's notification, at its polls):
    // none of A's live leases.
    assert_eq!(held.requests().len(), HELD, "a held job was sent twice");

    // A job created through B has an id (which listings sort by and `created_after`
    // reads) stamped on the database's time, not on B's machine's.
    let wall = || {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        Timestamp::from_millis(i64::try_from(ms).unwrap())
    };
    let before = wall();
    let through_b = create_job(&b.base, "ok", "evt-through-b", json!({})).await;
    let after = wall();
    let id = uuid::Uuid::parse_str(through_b["id"].as_str().unwrap()).unwrap();
    let (seconds, nanos) = id.get_timestamp().unwrap().to_unix();
    let stamped = Timestamp::from_millis(
        i64::try_from(seconds * 1_000 + u64::from(nanos / 1_000_000)).unwrap(),
    );
    assert!(
        before.minus_ms(SYNC_ERROR_MS.unsigned_abs()) <= stamped
            && stamped <= after.plus_ms(SYNC_ERROR_MS.unsigned_abs()),
        "the id is stamped {} ms from the request",
        stamped.millis_since(before)
    );

    held.release();
    wait_all_delivered(&a.base).await;
    for receiver in [&held, &ok] {
        let counts = receiver.counts_by_id();
        assert!(counts.values().all(|n| *n == 1), "sent twice: {counts:?}");
        assert_eq!(receiver.max_open_per_id(), 1);
    }
    drop((a, b));
}
