//! `spawn_app()`: a real server on 127.0.0.1:0 over a fresh SQLite file, driven by a
//! manual clock, and the request and assertion helpers the tests share.

use std::sync::Arc;

use clap::Parser;
use deferhook::config::{Cli, Command};
use deferhook::domain::{Clock, ManualClock, Timestamp};
use deferhook::server::Server;
use deferhook::store::{ClaimRequest, ClaimedJob, SharedStore};
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use tempfile::TempDir;

/// Where every test's clock starts: 2026-11-30T12:00:00Z.
pub const START: Timestamp = Timestamp::from_millis(1_796_040_000_000);
/// `START` as the API writes it.
pub const START_TEXT: &str = "2026-11-30T12:00:00.000Z";

/// A running server and what a test needs to drive it.
pub struct TestApp {
    pub base_url: String,
    pub database_url: String,
    pub client: reqwest::Client,
    pub clock: ManualClock,
    pub store: SharedStore,
    server: Option<Server>,
    // Dropped last: the database file lives here.
    _dir: TempDir,
}

/// Extra `deferhook serve` flags for one test.
#[derive(Default)]
pub struct AppBuilder {
    flags: Vec<String>,
}

impl AppBuilder {
    pub fn max_payload_bytes(self, bytes: u64) -> Self {
        self.flag("--max-payload-bytes", bytes)
    }

    pub fn default_ttl_ms(self, ms: u64) -> Self {
        self.flag("--default-ttl-ms", ms)
    }

    pub fn request_timeout_ms(self, ms: u64) -> Self {
        self.flag("--request-timeout-ms", ms)
    }

    pub fn header_read_timeout_ms(self, ms: u64) -> Self {
        self.flag("--header-read-timeout-ms", ms)
    }

    pub fn api_token(self, token: &str) -> Self {
        self.flag("--api-token", token)
    }

    pub fn max_replay_rate(self, rate: u32) -> Self {
        self.flag("--max-replay-rate", rate)
    }

    /// `--allow-private-targets`.
    pub fn allow_private_targets(mut self) -> Self {
        self.flags.push("--allow-private-targets".to_owned());
        self
    }

    /// `--allow-target-cidr CIDR`.
    pub fn allow_target_cidr(self, cidr: &str) -> Self {
        self.flag("--allow-target-cidr", cidr)
    }

    fn flag(mut self, name: &str, value: impl ToString) -> Self {
        self.flags.push(name.to_owned());
        self.flags.push(value.to_string());
        self
    }

    pub async fn spawn(self) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let database_url = format!("sqlite://{}", dir.path().join("api.db").display());
        let mut argv: Vec<String> = ["deferhook", "serve", "--database-url", &database_url]
            .into_iter()
            // The API alone: tests claim jobs through the store themselves.
            .chain(["--listen", "127.0.0.1:0", "--no-worker"])
            .map(str::to_owned)
            .collect();
        argv.extend(self.flags);
        let Command::Serve(args) = Cli::try_parse_from(argv).expect("valid flags").command else {
            panic!("expected the serve command");
        };
        let store = deferhook::store::open(&database_url)
            .await
            .expect("open store");
        let clock = ManualClock::new(START);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let server = Server::start_with(&args, store.clone(), shared_clock, listener)
            .await
            .expect("start server");
        // reqwest is built with `rustls-no-provider` (for the delivery sender): install
        // ring's provider once, as the sender does, before building a client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        TestApp {
            base_url: format!("http://{addr}"),
            database_url,
            client: reqwest::Client::new(),
            clock,
            store,
            server: Some(server),
            _dir: dir,
        }
    }
}

/// A server with the CLI's defaults.
pub async fn spawn_app() -> TestApp {
    AppBuilder::default().spawn().await
}

/// A server with extra flags: `app_with().max_payload_bytes(1024).spawn().await`.
pub fn app_with() -> AppBuilder {
    AppBuilder::default()
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_token().cancel();
        }
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ASCII header"))
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// Sends and reads the whole response; every response must carry an `x-request-id`.
    pub async fn send(&self, request: RequestBuilder) -> Reply {
        let response = request.send().await.expect("request failed");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("read body");
        let reply = Reply {
            status,
            headers,
            text,
        };
        let id = reply.header("x-request-id");
        assert!(
            id.is_some_and(|id| !id.is_empty()),
            "no x-request-id: {reply:?}"
        );
        reply
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PUT, path).json(body)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// POSTs `body` as given, with `content-type: application/json`.
    pub async fn post_raw(&self, path: &str, body: impl Into<String>) -> Reply {
        let request = self
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body(body.into());
        self.send(request).await
    }

    /// Registers subscriber `id` at a public URL; returns the 201 body.
    pub async fn create_subscriber(&self, id: &str) -> Value {
        let reply = self
            .put_json(
                &format!("/v1/subscribers/{id}"),
                &serde_json::json!({"url": format!("https://example.com/hooks/{id}")}),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// POSTs a job; expects 201 and returns the job.
    pub async fn create_job(&self, body: &Value) -> Value {
        let reply = self.post_json("/v1/jobs", body).await;
        expect_json(&reply, 201)
    }

    /// Claims every due job as a worker would, at the clock's time.
    pub async fn claim(&self) -> Vec<ClaimedJob> {
        self.store
            .claim(ClaimRequest {
                now: self.clock.now(),
                limit: 100,
                owner: "test-worker".into(),
                lease_ms: 30_000,
            })
            .await
            .expect("claim")
    }
}

/// `START + ms` as the API writes it.
pub fn at(ms: u64) -> String {
    START.plus_ms(ms).to_rfc3339()
}

/// Asserts a JSON success with `status` and returns its body.
pub fn expect_json(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{reply:?}"
    );
    reply.json()
}

/// Asserts an RFC 9457 problem with `status` (in the body too) and the status's
/// standard title; returns its body.
pub fn expect_problem(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json"),
        "{reply:?}"
    );
    let body = reply.json();
    assert_eq!(body["status"], status, "{body}");
    let title = reqwest::StatusCode::from_u16(status)
        .unwrap()
        .canonical_reason()
        .unwrap();
    assert_eq!(body["title"], title, "{body}");
    assert_eq!(body["type"], "about:blank", "{body}");
    body
}

/// Asserts a problem with `status` whose `errors` name exactly `fields`, each with a
/// message; returns its body.
pub fn expect_fields(reply: &Reply, status: u16, fields: &[&str]) -> Value {
    let body = expect_problem(reply, status);
    let errors = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    let named: Vec<&str> = errors
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    assert_eq!(named, fields, "{body}");
    for error in errors {
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    body
}

/// A minimal job body for `subscriber` and `event` with payload `{"n": 1}`, plus `extra`
/// fields.
pub fn job(subscriber: &str, event: &str, extra: Value) -> Value {
    let mut body = serde_json::json!({
        "subscriber_id": subscriber,
        "event_id": event,
        "payload": {"n": 1},
    });
    let fields = body.as_object_mut().unwrap();
    for (key, value) in extra.as_object().expect("extra is an object") {
        fields.insert(key.clone(), value.clone());
    }
    body
}
