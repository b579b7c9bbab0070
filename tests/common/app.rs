//! The one test harness: deferhook in-process on 127.0.0.1:0 over a fresh database
//! (SQLite or PostgreSQL), its clock a manual one standing at
//! [`deferhook::testing::START`] (or the system clock), and its delivery worker stepped
//! by the test, run in the background, or off; plus the HTTP calls and bounded polls
//! the tests share. The `api`, `cli` and `delivery` test binaries include it with
//! `#[path = "../common/app.rs"] mod app;` (beside `../common/pg.rs`).
//!
//! ```ignore
//! let app = TestApp::builder().backend(Db::Postgres).flags(&["--max-in-flight", "3"])
//!     .manual_clock().stepped_worker().start().await;
//! app.advance(500);
//! let pending = app.run_pending().await;
//! ```

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use deferhook::config::{Cli, Command, ServeArgs};
use deferhook::delivery::resolve::Resolver;
use deferhook::delivery::{Pending, Worker};
use deferhook::domain::{Clock, ManualClock, SystemClock, Timestamp};
use deferhook::server::{Server, Wiring, WorkerMode};
use deferhook::store::{ClaimRequest, ClaimedJob, SharedStore};
use deferhook::testing::START;
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// A fresh database and what keeps it alive (a temporary directory, or a PostgreSQL
/// database dropped at the end).
pub struct Database {
    pub url: String,
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl Db {
    /// A fresh, empty database on this backend.
    pub async fn database(self) -> Database {
        match self {
            Db::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("d.db").display());
                Database {
                    url,
                    _guard: Box::new(dir),
                }
            }
            Db::Postgres => {
                let database = crate::pg::TestDatabase::create()
                    .await
                    .expect("PostgreSQL was reachable a moment ago");
                Database {
                    url: database.url.clone(),
                    _guard: Box::new(database),
                }
            }
        }
    }
}

/// Runs each named `async fn name(db: Db)` as two tests, `name::sqlite` and
/// `name::postgres`; the latter is skipped (said once) where no PostgreSQL answers,
/// and fails under `CI=true`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name($crate::app::Db::Sqlite).await
                }

                #[tokio::test]
                async fn postgres() {
                    if $crate::pg::reachable().await {
                        super::$name($crate::app::Db::Postgres).await
                    }
                }
            }
        )+
    };
}

/// Where `now` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClockKind {
    /// A [`ManualClock`] at [`START`], moved only by the test.
    Manual,
    /// The system clock (a test whose other party reads the real time).
    System,
}

/// How the instance's delivery worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkerKind {
    /// Built, and stepped by the test ([`TestApp::run_pending`]).
    Stepped,
    /// Its loop runs in the background, as in `deferhook serve`.
    Running,
    /// `--no-worker`: the API alone.
    Off,
}

/// How to start a [`TestApp`]: `TestApp::builder()…start().await`. By default: a
/// fresh SQLite file, the CLI's defaults, a manual clock at [`START`] and a stepped
/// worker.
pub struct AppBuilder {
    backend: Db,
    database_url: Option<String>,
    defaults: Vec<String>,
    flags: Vec<String>,
    allow_private_targets: bool,
    clock: ClockKind,
    manual: Option<ManualClock>,
    worker: WorkerKind,
    resolver: Resolver,
    store: Option<SharedStore>,
}

impl AppBuilder {
    /// A fresh database on `db`.
    pub fn backend(mut self, db: Db) -> Self {
        self.backend = db;
        self
    }

    /// Another instance on an existing database (its `Database` kept by the caller).
    pub fn on(mut self, database_url: &str) -> Self {
        self.database_url = Some(database_url.to_owned());
        self
    }

    /// Flags (`name value` pairs) used unless [`AppBuilder::flags`] names the same flag.
    pub fn defaults(mut self, pairs: &[&str]) -> Self {
        assert!(pairs.len().is_multiple_of(2), "name value pairs");
        self.defaults.extend(pairs.iter().map(|f| f.to_string()));
        self
    }

    /// `deferhook serve` flags, as on the command line.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// One `--name value` flag.
    pub fn flag(mut self, name: &str, value: impl ToString) -> Self {
        self.flags.push(name.to_owned());
        self.flags.push(value.to_string());
        self
    }

    /// `--allow-private-targets`: receivers on 127.0.0.1 are reachable (the default
    /// target policy refuses them, CASES C-08).
    pub fn allow_private_targets(mut self) -> Self {
        self.allow_private_targets = true;
        self
    }

    /// The default target policy: internal addresses refused (unless `flags` allow
    /// some).
    pub fn default_targets(mut self) -> Self {
        self.allow_private_targets = false;
        self
    }

    /// Looks subscriber host names up with `resolver` (the system's by default).
    pub fn resolver(mut self, resolver: Resolver) -> Self {
        self.resolver = resolver;
        self
    }

    /// Serves from `store` (e.g. a wrapper that injects failures) instead of opening
    /// the database; give its URL with [`AppBuilder::on`].
    pub fn store(mut self, store: SharedStore) -> Self {
        self.store = Some(store);
        self
    }

    /// A [`ManualClock`] at [`START`] (the default), moved by [`TestApp::advance`].
    pub fn manual_clock(mut self) -> Self {
        self.clock = ClockKind::Manual;
        self
    }

    /// Shares `clock` (another instance's, [`TestApp::manual_clock`]): instances on
    /// one database move together.
    pub fn shared_clock(mut self, clock: ManualClock) -> Self {
        self.clock = ClockKind::Manual;
        self.manual = Some(clock);
        self
    }

    /// The system clock, for a test whose other party reads the real time (a
    /// verifier's timestamp tolerance, a CLI that watches a replay).
    pub fn system_clock(mut self) -> Self {
        self.clock = ClockKind::System;
        self
    }

    /// The worker is stepped by the test (the default).
    pub fn stepped_worker(mut self) -> Self {
        self.worker = WorkerKind::Stepped;
        self
    }

    /// The worker's loop runs in the background (tests of the loop itself).
    pub fn running_worker(mut self) -> Self {
        self.worker = WorkerKind::Running;
        self
    }

    /// `--no-worker`: the API alone.
    pub fn no_worker(mut self) -> Self {
        self.worker = WorkerKind::Off;
        self
    }

    /// The `serve` arguments these settings make for `database_url`.
    pub fn serve_args(&self, database_url: &str) -> ServeArgs {
        let mut argv: Vec<String> = ["deferhook", "serve", "--database-url", database_url]
            .into_iter()
            .chain(["--listen", "127.0.0.1:0"])
            .map(str::to_owned)
            .collect();
        for pair in self.defaults.chunks(2) {
            if !self.flags.contains(&pair[0]) {
                argv.extend_from_slice(pair);
            }
        }
        let private = "--allow-private-targets".to_owned();
        if self.allow_private_targets && !self.flags.contains(&private) {
            argv.push(private);
        }
        if self.worker == WorkerKind::Off {
            argv.push("--no-worker".to_owned());
        }
        argv.extend(self.flags.iter().cloned());
        match Cli::try_parse_from(argv).expect("valid flags").command {
            Command::Serve(args) => args,
            _ => unreachable!("serve"),
        }
    }

    /// Starts the instance; panics if it does not start.
    pub async fn start(self) -> TestApp {
        self.try_start().await.expect("the server starts")
    }

    /// Starts the instance, or says why it refused to.
    pub async fn try_start(self) -> anyhow::Result<TestApp> {
        // reqwest is built with `rustls-no-provider` (for the delivery sender): install
        // ring's provider once, as the sender does, before building a client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let database = match &self.database_url {
            Some(_) => None,
            None => Some(self.backend.database().await),
        };
        let database_url = self
            .database_url
            .clone()
            .or_else(|| database.as_ref().map(|d| d.url.clone()))
            .expect("a database");
        let args = self.serve_args(&database_url);
        let store = match self.store {
            Some(store) => store,
            // Secrets sealed with the key of `--secret-key` when the flags give one.
            None => deferhook::store::open_with_sealer(&database_url, args.sealer()?).await?,
        };
        let manual = self.manual.unwrap_or_else(|| ManualClock::new(START));
        let clock: Arc<dyn Clock> = match self.clock {
            ClockKind::Manual => Arc::new(manual.clone()),
            ClockKind::System => Arc::new(SystemClock),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let wiring = Wiring {
            store: store.clone(),
            clock: clock.clone(),
            listener,
            resolver: self.resolver,
            worker: match self.worker {
                WorkerKind::Stepped => WorkerMode::Stepped,
                WorkerKind::Running | WorkerKind::Off => WorkerMode::Background,
            },
        };
        let mut server = Server::start_with(&args, wiring).await?;
        Ok(TestApp {
            base_url: format!("http://{}", server.api_addr.expect("the API listens")),
            database_url,
            client: reqwest::Client::new(),
            manual: (self.clock == ClockKind::Manual).then_some(manual),
            clock,
            store,
            worker: server.take_worker(),
            server: Some(server),
            database,
        })
    }

    /// Starts the instance on a runtime of its own, for a synchronous test (one that
    /// blocks on a CLI process, say).
    pub fn start_blocking(self) -> BlockingApp {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let app = runtime.block_on(self.start());
        BlockingApp {
            base_url: app.base_url.clone(),
            app: Some(app),
            runtime,
        }
    }
}

/// A running instance and what a test needs to drive it.
pub struct TestApp {
    /// `http://127.0.0.1:port`.
    pub base_url: String,
    pub database_url: String,
    pub client: reqwest::Client,
    /// The store it serves from (a test may read or claim through it directly).
    pub store: SharedStore,
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    worker: Option<Worker>,
    server: Option<Server>,
    database: Option<Database>,
}

impl TestApp {
    /// How to start one.
    pub fn builder() -> AppBuilder {
        AppBuilder {
            backend: Db::Sqlite,
            database_url: None,
            defaults: Vec::new(),
            flags: Vec::new(),
            allow_private_targets: false,
            clock: ClockKind::Manual,
            manual: None,
            worker: WorkerKind::Stepped,
            resolver: Resolver::system(),
            store: None,
        }
    }

    /// The instance's `now`.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Moves the manual clock forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.manual
            .as_ref()
            .expect("a manual clock (the system clock cannot be moved)")
            .advance_ms(ms);
    }

    /// The manual clock, to share with another instance.
    pub fn manual_clock(&self) -> ManualClock {
        self.manual.clone().expect("a manual clock")
    }

    /// The stepped worker.
    pub fn worker(&self) -> &Worker {
        self.worker.as_ref().expect("a stepped worker")
    }

    /// One step of the worker at the clock's `now`: upkeep, then every due job claimed
    /// and attempted to its recorded end.
    pub async fn run_pending(&self) -> Pending {
        self.worker().run_pending().await
    }

    /// Takes the database out, so it outlives this instance.
    pub fn keep_database(&mut self) -> Option<Database> {
        self.database.take()
    }

    /// Stops the instance gracefully (drain, then release leases).
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await.unwrap();
        }
    }

    /// Claims every due job through the store as a worker `test-worker` would, at the
    /// clock's time, with a 30 s lease.
    pub async fn claim(&self) -> Vec<ClaimedJob> {
        self.store
            .claim(ClaimRequest {
                now: self.now(),
                limit: 100,
                owner: "test-worker".into(),
                lease_ms: 30_000,
            })
            .await
            .expect("claim")
    }

    // ---- HTTP ------------------------------------------------------------------------

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

    /// GETs `path`, expects 200 and returns the JSON body.
    pub async fn get_json(&self, path: &str) -> Value {
        let reply = self.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        reply.json()
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PUT, path).json(body)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    pub async fn patch_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PATCH, path).json(body))
            .await
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
        let url = format!("https://example.com/hooks/{id}");
        self.put_subscriber(id, &json!({ "url": url })).await
    }

    /// Registers subscriber `id` at `url` with `secret` (or a generated one); returns
    /// the secret.
    pub async fn subscriber(&self, id: &str, url: &str, secret: Option<&str>) -> String {
        let mut body = json!({ "url": url });
        if let Some(secret) = secret {
            body["secret"] = json!(secret);
        }
        let created = self.put_subscriber(id, &body).await;
        created["secret"].as_str().unwrap().to_owned()
    }

    /// PUTs subscriber `id` as `body`; expects 201 (created) and returns the body.
    pub async fn put_subscriber(&self, id: &str, body: &Value) -> Value {
        let reply = self.put_json(&format!("/v1/subscribers/{id}"), body).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// POSTs a job; expects 201 and returns the job.
    pub async fn create_job(&self, body: &Value) -> Value {
        self.job_raw(&body.to_string()).await
    }

    /// Creates a job from raw JSON text; expects 201 and returns the job.
    pub async fn job_raw(&self, body: &str) -> Value {
        let reply = self.post_raw("/v1/jobs", body).await;
        assert_eq!(reply.status, 201, "{body}: {}", reply.text);
        reply.json()
    }

    /// Creates a job for `subscriber` and `event` with payload `{"n": 1}`; `extra` adds
    /// fields (`delay_ms`, `ttl_ms`, …). Returns the job.
    pub async fn job(&self, subscriber: &str, event: &str, extra: Value) -> Value {
        self.create_job(&job(subscriber, event, extra)).await
    }

    /// The job as the API shows it now.
    pub async fn job_now(&self, job: &Value) -> Value {
        let id = job["id"].as_str().unwrap();
        self.get_json(&format!("/v1/jobs/{id}")).await
    }

    /// The job's attempts, oldest first.
    pub async fn attempts(&self, job: &Value) -> Vec<Value> {
        let id = job["id"].as_str().unwrap();
        self.get_json(&format!("/v1/jobs/{id}/attempts")).await["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Polls the job until `done` holds, within `within`; returns it.
    pub async fn wait_job(
        &self,
        job: &Value,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let current = self.job_now(job).await;
            if done(&current) {
                return current;
            }
            assert!(
                Instant::now() < deadline,
                "job did not reach the expected state within {within:?}: {current}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until the job is in `state`.
    pub async fn wait_state(&self, job: &Value, state: &str, within: Duration) -> Value {
        self.wait_job(job, within, |j| j["state"] == state).await
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let reply = self.get("/metrics").await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.text
    }
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

/// A minimal job body for `subscriber` and `event` with payload `{"n": 1}`, plus `extra`
/// fields.
pub fn job(subscriber: &str, event: &str, extra: Value) -> Value {
    let mut body = json!({
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

/// The value of a counter or gauge line `series` (with its labels) in Prometheus text.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in /metrics"))
}

/// A [`TestApp`] served by a runtime of its own while a synchronous test blocks (on
/// a CLI process, say): the same instance, with blocking calls.
pub struct BlockingApp {
    /// `http://127.0.0.1:port`.
    pub base_url: String,
    app: Option<TestApp>,
    runtime: tokio::runtime::Runtime,
}

impl BlockingApp {
    /// The instance, for its async calls (run them with [`BlockingApp::block_on`]).
    pub fn app(&self) -> &TestApp {
        self.app.as_ref().expect("running")
    }

    /// Runs `future` to its end on the instance's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Calls the API; answers the status and the JSON body (`null` when there is none).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.app().request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply = self.block_on(self.app().send(request));
        let json = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
        (reply.status, json)
    }

    /// Registers subscriber `id` receiving at `url`.
    pub fn subscriber(&self, id: &str, url: &str) {
        self.block_on(self.app().subscriber(id, url, None));
    }

    /// Creates a job delivered after `delay_ms`; answers its id.
    pub fn job(&self, subscriber: &str, event: &str, delay_ms: u64) -> String {
        let extra = json!({ "delay_ms": delay_ms });
        let job = self.block_on(self.app().job(subscriber, event, extra));
        job["id"].as_str().unwrap().to_owned()
    }

    /// Polls (bounded: 15 s) until the job `id` is in `state`; answers it.
    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        let job = json!({ "id": id });
        self.block_on(self.app().wait_state(&job, state, Duration::from_secs(15)))
    }
}

impl Drop for BlockingApp {
    fn drop(&mut self) {
        // The server's tasks belong to this runtime: stop them inside it.
        let _inside = self.runtime.enter();
        drop(self.app.take());
    }
}
