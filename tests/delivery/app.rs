//! deferhook in-process with the system clock and short settings, plus the HTTP calls
//! and bounded polls the delivery tests share.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use deferhook::config::{Cli, Command, ServeArgs};
use deferhook::delivery::resolve::Resolver;
use deferhook::domain::SystemClock;
use deferhook::server::Server;
use serde_json::{Value, json};

/// Short settings so retries happen in milliseconds, not seconds.
pub const FAST: &[&str] = &[
    "--backoff-base-ms",
    "100",
    "--backoff-max-ms",
    "1000",
    "--attempt-timeout-ms",
    "2000",
    "--lease-ms",
    "3000",
    "--shutdown-grace-ms",
    "1000",
];

/// The receivers of these tests listen on 127.0.0.1, which the default target policy
/// refuses (CASES C-08); every instance gets this flag unless started with
/// [`Targets::Default`].
pub const ALLOW_PRIVATE: &str = "--allow-private-targets";

/// Which target policy an instance runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targets {
    /// `--allow-private-targets`: receivers on 127.0.0.1 are reachable.
    AllowPrivate,
    /// The default: internal addresses are refused (only `flags` may allow some).
    Default,
}

/// Serialises the tests that load the machine most (thousands of jobs at once), so a
/// timing assertion in one is not measuring the CPU another one takes. Hold the guard
/// for the whole test.
pub async fn heavy() -> tokio::sync::MutexGuard<'static, ()> {
    static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    HEAVY.lock().await
}

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
/// `name::postgres`; the latter is skipped (said once) where no PostgreSQL answers.
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

/// One deferhook instance (API + worker) on a fresh database.
pub struct App {
    pub base: String,
    pub client: reqwest::Client,
    pub database_url: String,
    server: Option<Server>,
    database: Option<Database>,
}

pub fn serve_args(database_url: &str, flags: &[&str]) -> ServeArgs {
    serve_args_with(database_url, flags, Targets::AllowPrivate)
}

pub fn serve_args_with(database_url: &str, flags: &[&str], targets: Targets) -> ServeArgs {
    let mut argv = vec![
        "deferhook",
        "serve",
        "--database-url",
        database_url,
        "--listen",
        "127.0.0.1:0",
    ];
    // FAST, unless a flag of `flags` overrides it.
    for pair in FAST.chunks(2) {
        if !flags.contains(&pair[0]) {
            argv.extend_from_slice(pair);
        }
    }
    if targets == Targets::AllowPrivate && !flags.contains(&ALLOW_PRIVATE) {
        argv.push(ALLOW_PRIVATE);
    }
    argv.extend_from_slice(flags);
    match Cli::try_parse_from(argv).expect("valid flags").command {
        Command::Serve(args) => args,
        _ => unreachable!("serve"),
    }
}

impl App {
    /// A fresh database on `db` with FAST settings overridden by `flags`.
    pub async fn start(db: Db, flags: &[&str]) -> App {
        let database = db.database().await;
        let mut app = App::on(&database.url, flags).await;
        app.database = Some(database);
        app
    }

    /// A fresh database on `db` with the given target policy, looking subscriber host
    /// names up with `resolver`.
    pub async fn start_targets(
        db: Db,
        flags: &[&str],
        targets: Targets,
        resolver: Resolver,
    ) -> App {
        let database = db.database().await;
        let mut app = App::on_with(&database.url, flags, targets, resolver).await;
        app.database = Some(database);
        app
    }

    /// Another instance on an existing database.
    pub async fn on(database_url: &str, flags: &[&str]) -> App {
        App::on_with(
            database_url,
            flags,
            Targets::AllowPrivate,
            Resolver::system(),
        )
        .await
    }

    /// Another instance on an existing database, with the given target policy and
    /// resolver.
    pub async fn on_with(
        database_url: &str,
        flags: &[&str],
        targets: Targets,
        resolver: Resolver,
    ) -> App {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let args = serve_args_with(database_url, flags, targets);
        // Secrets sealed with the key of `--secret-key` when `flags` give one.
        let sealer = args.sealer().expect("a usable secret key");
        let store = deferhook::store::open_with_sealer(database_url, sealer)
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let clock = Arc::new(SystemClock);
        let server = Server::start_with_resolver(&args, store.clone(), clock, listener, resolver)
            .await
            .unwrap();
        App {
            base: format!("http://{}", server.api_addr.unwrap()),
            client: reqwest::Client::new(),
            database_url: database_url.to_owned(),
            server: Some(server),
            database: None,
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

    /// Registers subscriber `id` at `url` with `secret` (or a generated one); returns the
    /// secret.
    pub async fn subscriber(&self, id: &str, url: &str, secret: Option<&str>) -> String {
        let mut body = json!({ "url": url });
        if let Some(secret) = secret {
            body["secret"] = json!(secret);
        }
        let response = self
            .client
            .put(format!("{}/v1/subscribers/{id}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let created: Value = response.json().await.unwrap();
        created["secret"].as_str().unwrap().to_owned()
    }

    /// Creates a job from raw JSON text; returns the job object.
    pub async fn job_raw(&self, body: &str) -> Value {
        let response = self
            .client
            .post(format!("{}/v1/jobs", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{body}");
        response.json().await.unwrap()
    }

    /// Creates a job; `extra` adds fields (`delay_ms`, `ttl_ms`, …).
    pub async fn job(&self, subscriber: &str, event: &str, extra: Value) -> Value {
        let mut body =
            json!({ "subscriber_id": subscriber, "event_id": event, "payload": {"n": 1} });
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        self.job_raw(&body.to_string()).await
    }

    pub async fn get(&self, path: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    pub async fn attempts(&self, job: &Value) -> Vec<Value> {
        let id = job["id"].as_str().unwrap();
        self.get(&format!("/v1/jobs/{id}/attempts")).await["items"]
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
        let id = job["id"].as_str().unwrap();
        let deadline = Instant::now() + within;
        loop {
            let current = self.get(&format!("/v1/jobs/{id}")).await;
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

    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_token().cancel();
        }
    }
}

/// The value of a counter or gauge line `name` (with its labels) in Prometheus text.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in /metrics"))
}
