//! The one test harness: deferhook in-process on 127.0.0.1:0 over a fresh database
//! (SQLite or PostgreSQL), its clock a manual one standing at
//! [`deferhook::testing::START`] (or the system clock), and its delivery worker stepped
//! by the test, run in the background, or off. The HTTP calls and bounded polls the
//! tests share are in `app_requests.rs`; a synchronous test's face in
//! `app_blocking.rs`. The `api`, `cli` and `delivery` test binaries include it with
//! `#[path = "../common/app.rs"] mod app;` (beside `../common/pg.rs`).
//!
//! ```ignore
//! let app = TestApp::builder().backend(Db::Postgres).flags(&["--max-in-flight", "3"])
//!     .manual_clock().stepped_worker().start().await;
//! app.advance(500);
//! let pending = app.run_pending().await;
//! ```

#![allow(dead_code)]

#[path = "app_blocking.rs"]
mod blocking;
#[path = "app_requests.rs"]
mod requests;

// Each test binary uses its own share of these.
#[allow(unused_imports)]
pub use blocking::BlockingApp;
#[allow(unused_imports)]
pub use requests::{Reply, job, metric};

use std::sync::Arc;

use clap::Parser;
use deferhook::cli::command::{Cli, Command};
use deferhook::config::ServeArgs;
use deferhook::delivery::resolve::Resolver;
use deferhook::delivery::{Pending, Worker};
use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{Clock, ManualClock, SystemClock, Timestamp};
use deferhook::server::{Server, ServerClock, Wiring, WorkerMode};
use deferhook::store::{
    AttemptResult, ClaimRequest, ClaimedJob, LeaseRef, OutcomeRecord, SharedStore,
    SharedWorkerStore,
};
use deferhook::testing::START;

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
    /// The system clock this many milliseconds off (a machine whose clock is wrong),
    /// set by the database's clock as `deferhook serve` sets this machine's.
    Skewed(i64),
}

/// The system clock `.0` milliseconds off.
#[derive(Debug)]
struct SkewedClock(i64);

impl Clock for SkewedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(SystemClock.now().as_millis() + self.0)
    }
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
    worker_store: Option<SharedWorkerStore>,
    bearer: Option<String>,
}

impl AppBuilder {
    /// With API token `token` (`--api-token`), which every request of the instance's
    /// client then sends (`Authorization: Bearer`).
    pub fn bearer(mut self, token: &str) -> Self {
        self.bearer = Some(token.to_owned());
        self.flag("--api-token", token)
    }

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

    /// The worker calls `store` (e.g. a wrapper that injects failures into the
    /// worker's calls alone) instead of the instance's store.
    pub fn worker_store(mut self, store: SharedWorkerStore) -> Self {
        self.worker_store = Some(store);
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

    /// The system clock `skew_ms` milliseconds off (negative: behind), set by the
    /// database's clock as `deferhook serve` sets this machine's (docs/DESIGN.md §12):
    /// an instance on a machine whose clock is wrong. [`TestApp::now`] reads the set
    /// clock.
    pub fn skewed_clock(mut self, skew_ms: i64) -> Self {
        self.clock = ClockKind::Skewed(skew_ms);
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
            // Secrets sealed as `serve` seals them: with the key of `--secret-key`
            // when the flags give one, else (SQLite) the key file beside the database.
            None => {
                deferhook::store::open_configured(
                    &database_url,
                    deferhook::secret_key::choose(&args).await?.sealer,
                    args.destination_policy(),
                )
                .await?
            }
        };
        let manual = self.manual.unwrap_or_else(|| ManualClock::new(START));
        let clock = match self.clock {
            ClockKind::Manual => ServerClock::AsIs(Arc::new(manual.clone())),
            ClockKind::System => ServerClock::AsIs(Arc::new(SystemClock)),
            ClockKind::Skewed(ms) => ServerClock::SetByDatabase(Arc::new(SkewedClock(ms))),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let wiring = Wiring {
            store: store.clone(),
            worker_store: self.worker_store,
            clock,
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
            client: match &self.bearer {
                None => reqwest::Client::new(),
                Some(token) => {
                    let mut headers = reqwest::header::HeaderMap::new();
                    let value = format!("Bearer {token}").parse().expect("a header value");
                    headers.insert(reqwest::header::AUTHORIZATION, value);
                    reqwest::Client::builder()
                        .default_headers(headers)
                        .build()?
                }
            },
            manual: (self.clock == ClockKind::Manual).then_some(manual),
            clock: server.clock(),
            store,
            worker: server.take_worker(),
            server: Some(server),
            database,
        })
    }

    /// Starts the instance on a runtime of its own, for a synchronous test (one that
    /// blocks on a CLI process, say).
    pub fn start_blocking(self) -> BlockingApp {
        BlockingApp::start(self)
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
            worker_store: None,
            bearer: None,
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

    /// Waits (at most 10 s) until the running worker has finished two more claim steps
    /// than when called, or has every slot in use (it claims nothing then): the second
    /// step began after the call, so a job it did not claim is one the worker does not
    /// claim as things stand (how a test of the running loop shows that nothing more
    /// is sent, rather than sleeping for a guessed time).
    pub async fn two_more_claim_passes(&self) {
        let passes = self
            .server
            .as_ref()
            .and_then(Server::claim_passes)
            .expect("a worker");
        let from = passes.count();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while passes.count() < from + 2 && !passes.all_slots_in_use() {
            assert!(
                std::time::Instant::now() < deadline,
                "the worker made {} claim passes in 10 s, not 2",
                passes.count() - from
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
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

    /// Records `claimed`'s attempt as started and finished at the clock's time with
    /// `result`, moving the job by `event`, as the worker would (no receiver involved).
    pub async fn record(&self, claimed: &ClaimedJob, event: JobEvent, result: AttemptResult) {
        let now = self.now();
        let record = OutcomeRecord {
            lease: LeaseRef {
                job_id: claimed.job_id,
                token: claimed.lease_token,
            },
            subscriber_id: claimed.subscriber_id.clone(),
            attempt: claimed.attempt,
            started_at: now,
            finished_at: now,
            attempt_timeout_ms: 10_000,
            result,
            retry_after: None,
            transition: transition(&claimed.snapshot, event, now).expect("a legal transition"),
            pause_subscriber: false,
        };
        self.store
            .record_outcomes(&[record], now)
            .await
            .expect("record the outcome");
    }
}

/// An attempt's result: `outcome`, with `status` and `class` when it failed (its
/// reason then `HTTP {status}`, or the class without a status).
pub fn answer(
    outcome: AttemptOutcome,
    status: Option<u16>,
    class: Option<ErrorClass>,
) -> AttemptResult {
    let reason = class.map(|class| match status {
        Some(status) => format!("HTTP {status}"),
        None => class.to_string(),
    });
    AttemptResult {
        outcome,
        status,
        error_class: class,
        reason,
        body_excerpt: None,
        resent: false,
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_token().cancel();
        }
    }
}
