//! The console in a real browser (issue #19): headless Chromium, driven over WebDriver
//! (chromedriver) by fantoccini, against an instance with a running worker delivering
//! to real receivers on 127.0.0.1. An incident (a failing subscriber, one paused by a
//! 410, dead letters), then: log in, find the failing subscriber from the overview,
//! open one of its jobs' attempt timeline, dry-run its dead letters, start a replay and
//! see it finish in the page (its progress refreshed by htmx).
//!
//! Needs `chromium` and `chromedriver` (Debian: `apt-get install chromium
//! chromium-driver`); without them the test is skipped with a line saying so, and under
//! `CI=true` it fails instead (`.ci/run` installs them). The screenshots go to
//! `$DEFERHOOK_CONSOLE_SCREENSHOTS` (the README's are `docs/console/`), else to
//! `target/tmp/console-screenshots/`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::{Receiver, Reply};
use crate::setup::instance;

const TOKEN: &str = "console-browser-token-5d1e7a";
/// How long the browser waits for a page's content.
const WAIT: Duration = Duration::from_secs(30);

/// chromedriver in a process group of its own, with the browsers it starts: the whole
/// group is killed when dropped, so a failed test leaves no browser running.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the process group the child
        // leads (it was started with `process_group(0)`); no memory is involved.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

fn found(name: &str, candidates: &[&str]) -> Option<PathBuf> {
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(name))
                .collect()
        })
        .unwrap_or_default();
    candidates
        .iter()
        .map(PathBuf::from)
        .chain(on_path)
        .find(|p| p.is_file())
}

/// The browser and its driver, when installed.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let chromium = found("chromium", &["/usr/bin/chromium"])?;
    let driver = found("chromedriver", &["/usr/bin/chromedriver"])?;
    Some((chromium, driver))
}

async fn start_driver(path: &Path) -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(path)
        .process_group(0)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "chromedriver does not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Driver { child, port }
}

async fn browser(chromium: &Path, driver: &Driver, profile: &Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                "--window-size=1400,1300",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session")
}

/// Where screenshots go.
fn shots() -> PathBuf {
    let dir = std::env::var_os("DEFERHOOK_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shoot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
}

/// Waits until `css` matches an element whose text contains `text`; returns its text.
async fn wait_for_text(client: &Client, css: &str, text: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(elements) = client.find_all(Locator::Css(css)).await {
            for element in elements {
                if let Ok(found) = element.text().await
                    && found.contains(text)
                {
                    return found;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no `{css}` with `{text}` in {}",
            client
                .current_url()
                .await
                .map(|u| u.to_string())
                .unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `path` of the API until `done` holds for its JSON, within `WAIT`.
async fn wait_for_api(app: &TestApp, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = app.get_json(path).await;
        if done(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "{path}: {value}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn count(list: &Value) -> usize {
    list["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn an_incident_is_understood_and_replayed_in_a_real_browser() {
    let Some((chromium, driver_path)) = tools() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI=true: chromium and chromedriver must be installed (.ci/run does)"
        );
        eprintln!("skipped: chromium or chromedriver not installed");
        return;
    };
    // The incident: search-indexer answers 503, legacy-crm 410 (paused, reason gone),
    // billing 200.
    let billing = Receiver::ok().await;
    let indexer = Receiver::start(vec![
        Reply::status(503).body("<h1>index rebuild in progress</h1>"),
    ])
    .await;
    let crm = Receiver::start(vec![Reply::status(410)]).await;
    let app = instance(Db::Sqlite)
        .bearer(TOKEN)
        .system_clock()
        .running_worker()
        .start()
        .await;
    for (id, receiver) in [
        ("billing", &billing),
        ("search-indexer", &indexer),
        ("legacy-crm", &crm),
    ] {
        app.subscriber(id, &receiver.url(&format!("/{id}")), None)
            .await;
    }
    let subscribers = ["billing", "search-indexer", "legacy-crm"];
    for n in 0..5 {
        let body = json!({
            "event_id": format!("order.{}", 1001 + n), "subscriber_ids": subscribers,
            "payload": {"order": 1001 + n, "status": "shipped"}, "max_attempts": 1,
        });
        let reply = app.post_json("/v1/events", &body).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    // One more that keeps retrying the failing receiver.
    let body = json!({
        "event_id": "order.1006", "subscriber_ids": subscribers,
        "payload": {"order": 1006}, "max_attempts": 50,
    });
    assert_eq!(app.post_json("/v1/events", &body).await.status, 201);
    wait_for_api(
        &app,
        "/v1/jobs?subscriber_id=search-indexer&state=dead",
        |v| count(v) == 5,
    )
    .await;
    wait_for_api(&app, "/v1/subscribers/legacy-crm", |v| {
        v["enabled"] == false
    })
    .await;

    let driver = start_driver(&driver_path).await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&chromium, &driver, profile.path()).await;
    walk(&app, &client, &indexer).await;
    client.close().await.expect("the session ends");
}

/// The operator's walk through the console.
async fn walk(app: &TestApp, client: &Client, indexer: &Receiver) {
    // Log in: the overview asks for a token first.
    client.goto(&app.url("/console/")).await.unwrap();
    wait_for_text(client, "h1", "Log in").await;
    shoot(client, "login").await;
    client
        .find(Locator::Css("input[name=token]"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    client
        .find(Locator::Css("form[action='/console/login'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // The overview: the failing subscriber, the paused one, the live instance.
    let failing = wait_for_text(client, "#failing-subscribers", "search-indexer").await;
    assert!(failing.contains("http_5xx"), "{failing}");
    assert!(
        !failing.contains("billing"),
        "a healthy subscriber is not failing"
    );
    wait_for_text(client, "h2", "1 paused").await;
    wait_for_text(client, "#instances", "of").await;
    shoot(client, "overview").await;

    // From the overview to the subscriber, then to one of its dead jobs.
    client
        .find(Locator::Css(
            "#failing-subscribers a[href='/console/subscribers/search-indexer']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(client, "h1", "search-indexer").await;
    wait_for_text(client, "#attempts", "503").await;
    shoot(client, "subscriber").await;
    let dead_job = client
        .find(Locator::XPath("//table[@id='jobs']//tr[.//span[text()='dead']]//a[starts-with(@href, '/console/jobs/')]"))
        .await
        .expect("a dead job listed");
    dead_job.click().await.unwrap();
    let timeline = wait_for_text(client, "#timeline", "HTTP 503").await;
    assert!(timeline.contains("lease owner"), "{timeline}");
    let source = client.source().await.unwrap();
    assert!(
        source.contains("&lt;h1&gt;index rebuild in progress&lt;/h1&gt;"),
        "the receiver's body, escaped"
    );
    shoot(client, "job").await;

    // The receiver recovers: replay its dead letters, after a dry run.
    indexer.reply_from_now(Reply::status(200));
    client
        .goto(&app.url("/console/dead-letters"))
        .await
        .unwrap();
    wait_for_text(client, "#dead-groups", "search-indexer").await;
    shoot(client, "dead-letters").await;
    client
        .find(Locator::XPath("//table[@id='dead-groups']//tr[.//a[text()='search-indexer']]//a[text()='Select: dry run']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let dry = wait_for_text(client, "#dry-run", "match").await;
    assert!(dry.contains("5 dead jobs match"), "{dry}");
    let rate = client
        .find(Locator::Css("#start-replay input[name=rate_per_second]"))
        .await
        .unwrap();
    rate.clear().await.unwrap();
    // One job a second: the replay runs for 4 s or more, long enough to be seen running.
    rate.send_keys("1").await.unwrap();
    shoot(client, "dry-run").await;
    client
        .find(Locator::Css("#start-replay button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(client, "p.notice", "replay started").await;
    wait_for_text(
        client,
        "#replays tr[data-state='running']",
        "search-indexer",
    )
    .await;
    shoot(client, "replay-running").await;
    // The page refreshes itself while the replay runs (htmx): no reload from here on.
    let done = wait_for_text(client, "#replays tr[data-state='done']", "5 requeued").await;
    assert!(done.contains("search-indexer"), "{done}");
    shoot(client, "replays").await;
    let delivered = wait_for_api(
        app,
        "/v1/jobs?subscriber_id=search-indexer&state=delivered",
        |v| count(v) >= 5,
    )
    .await;
    assert!(count(&delivered) >= 5);
}
