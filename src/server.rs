//! Wiring of `deferhook serve`: store, API, delivery worker and shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::clock_sync::ClockSync;
use crate::config::ServeArgs;
use crate::console;
use crate::delivery::resolve::Resolver;
use crate::delivery::slots::WorkerSlots;
use crate::delivery::{ClaimPasses, DeliverySettings, Worker, retention};
use crate::domain::{Clock, SteadyClock, SystemClock};
use crate::heartbeat::{self, Instance};
use crate::open_files;
use crate::scheduler::Scheduler;
use crate::store::{self, Heartbeat, SharedStore, SharedWorkerStore};

/// The open-files limit assumed when it cannot be read: the common default.
const UNREADABLE_OPEN_FILES: u64 = 1_024;

/// A running server: what tests and `main` need to reach and stop it.
pub struct Server {
    /// The store it serves from.
    pub store: SharedStore,
    /// Where the API listens (`None` with `--no-api`).
    pub api_addr: Option<SocketAddr>,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
    tasks: JoinSet<anyhow::Result<()>>,
    worker: Option<Worker>,
    claim_passes: Option<ClaimPasses>,
}

/// How a server runs its delivery worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerMode {
    /// The worker's loop runs as a task of the server ([`Worker::run`]), as in
    /// `deferhook serve`.
    Background,
    /// The worker is built but not run: [`Server::take_worker`] hands it to the caller
    /// (a test) to step with its own clock.
    Stepped,
}

/// Where a server's `now` comes from: the one source of the API, the worker and
/// retention.
#[derive(Clone, Debug)]
pub enum ServerClock {
    /// As `deferhook serve` runs: where the store has a clock of its own (PostgreSQL),
    /// this machine's steady clock set by the database's ([`ClockSync`],
    /// docs/DESIGN.md §12); otherwise (SQLite) the system clock.
    System,
    /// This clock (a test's skewed one) set by the database's as
    /// [`ServerClock::System`] sets this machine's; as it is where the store has no
    /// clock of its own.
    SetByDatabase(Arc<dyn Clock>),
    /// This clock as it is (a test's manual clock).
    AsIs(Arc<dyn Clock>),
}

/// What a server is started with beside its flags ([`Server::start_with`]).
pub struct Wiring {
    /// The store it serves from.
    pub store: SharedStore,
    /// The worker's store when not `store`: a test's wrapper that injects failures
    /// into the worker's calls alone (tests/common/faulty_store.rs).
    pub worker_store: Option<SharedWorkerStore>,
    /// The source of `now` for the API, the worker and retention.
    pub clock: ServerClock,
    /// Where the API listens (a test binds 127.0.0.1:0).
    pub listener: TcpListener,
    /// Looks subscriber host names up before the target policy filters the addresses.
    pub resolver: Resolver,
    /// Whether the worker runs in the background or is handed to the caller.
    pub worker: WorkerMode,
}

/// The store a server serves from, and the one its worker calls (the same store but
/// where a test injects failures into the worker's calls).
struct Stores {
    all: SharedStore,
    worker: SharedWorkerStore,
}

impl Server {
    /// Opens the store, binds `args.listen` (unless `--no-api`) and starts the API and
    /// the worker (unless `--no-worker`) with [`ServerClock::System`].
    pub async fn start(args: &ServeArgs) -> anyhow::Result<Server> {
        let slots = prepare_worker(args)?;
        // A bad key stops the start before anything is bound or created.
        args.given_sealer()?;
        let listener = if args.no_api {
            None
        } else {
            let settings = args.api_settings()?;
            if settings.tokens.is_empty() && !args.listen.ip().is_loopback() {
                // docs/DESIGN.md §5: without API tokens the API is open, so it binds loopback only.
                anyhow::bail!(
                    "refusing to listen on {} without API tokens: anyone who can reach it \
                     could schedule webhooks. Set --api-token (or DEFERHOOK_API_TOKENS, \
                     comma-separated; e.g. `openssl rand -hex 32`), or listen on a loopback \
                     address (e.g. 127.0.0.1:8080 or [::1]:8080)",
                    args.listen
                );
            }
            Some(
                TcpListener::bind(args.listen)
                    .await
                    .with_context(|| format!("cannot listen on {}", args.listen))?,
            )
        };
        let key = crate::secret_key::choose(args).await?;
        let store = store::open_configured(
            &args.database.database_url,
            key.sealer.clone(),
            args.destination_policy(),
        )
        .await?;
        // Once the start can no longer fail on a bad setting: an error stays one line.
        key.log();
        if args.allow_private_targets {
            tracing::warn!(
                "--allow-private-targets: deliveries may reach loopback, private and \
                 link-local addresses (docs/DESIGN.md §9); for local development only"
            );
        }
        let stores = Stores {
            worker: store.clone(),
            all: store,
        };
        Self::launch(
            args,
            slots,
            stores,
            ServerClock::System,
            listener,
            Resolver::system(),
            WorkerMode::Background,
        )
        .await
    }

    /// Starts serving on the wiring's listener with its store, clock and resolver, the
    /// worker (unless `--no-worker`) run as `wiring.worker` says: tests bind port 0,
    /// bring a manual clock, and step the worker themselves.
    pub async fn start_with(args: &ServeArgs, wiring: Wiring) -> anyhow::Result<Server> {
        let slots = prepare_worker(args)?;
        args.api_settings()?;
        let Wiring {
            store,
            worker_store,
            clock,
            listener,
            resolver,
            worker,
        } = wiring;
        let stores = Stores {
            worker: worker_store.unwrap_or_else(|| store.clone()),
            all: store,
        };
        Self::launch(args, slots, stores, clock, Some(listener), resolver, worker).await
    }

    /// The worker of a server started with [`WorkerMode::Stepped`], for the caller to
    /// step ([`Worker::run_pending`]); `None` otherwise, or once taken.
    pub fn take_worker(&mut self) -> Option<Worker> {
        self.worker.take()
    }

    /// Sets the clock (by the database's, as `clock` says), then starts the API
    /// (unless `--no-api`) and, with `slots` (`None` under `--no-worker`), the worker
    /// and retention.
    async fn launch(
        args: &ServeArgs,
        slots: Option<WorkerSlots>,
        stores: Stores,
        clock: ServerClock,
        listener: Option<TcpListener>,
        resolver: Resolver,
        mode: WorkerMode,
    ) -> anyhow::Result<Server> {
        let Stores {
            all: store,
            worker: worker_store,
        } = stores;
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let clock = set_clock(args, &store, clock, &shutdown, &mut tasks).await;
        let mut api_addr = None;
        let mut stepped = None;
        let mut claim_passes = None;
        if let Some(listener) = listener.filter(|_| !args.no_api) {
            let local_addr = listener.local_addr()?;
            api_addr = Some(local_addr);
            let settings = args.api_settings()?;
            let actions = settings.actions.clone();
            // The deployment's cursor key: the first instance on the database makes it.
            let cursors = crate::app::pagination::Cursors::of_deployment(&store, clock.now())
                .await
                .context("cannot read the page cursors' key from the database")?;
            let public_https = settings.public_https;
            let access = console::access::Access::new(&settings.tokens);
            let api = api::Api::new(store.clone(), clock.clone(), settings, cursors);
            // The console runs the application's actions on the API's state, records
            // them in the same trail, and counts failed logins with the API's tokens.
            let console = console::router(console::ConsoleState {
                app: api.state.clone(),
                access,
                guesses: api.guesses.clone(),
                public_https,
                trail: api.trail.clone(),
            });
            let router = api.router(api::Beside {
                routes: console,
                error_pages: console::gate::error_pages,
            });
            let stop = shutdown.clone();
            let grace = args.shutdown_grace();
            let header_read_timeout = args.header_read_timeout();
            let connections = api::connections::Connections::new(args.connection_limits());
            tasks.spawn(async move {
                // Open requests first, then the actions whose clients left (§5.11).
                let serve = async {
                    api::listener::serve(
                        listener,
                        router,
                        stop.clone(),
                        header_read_timeout,
                        connections,
                    )
                    .await;
                    actions.close();
                    actions.wait().await;
                };
                tokio::select! {
                    () = serve => Ok(()),
                    () = async { stop.cancelled().await; tokio::time::sleep(grace).await } => {
                        tracing::warn!("shutdown grace period over; closing open requests");
                        Ok(())
                    }
                }
            });
            tracing::info!(%local_addr, "deferhook listening");
        }
        // The instance's id: its worker's lease owner, and its heartbeat row's key.
        let owner = format!(
            "{}:{}:{}",
            hostname(),
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let mut instance = Instance {
            beat: Heartbeat {
                id: owner.clone(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                started_at: clock.now(),
                worker_slots: 0,
                slots_in_use: 0,
            },
            busy: None,
        };
        if let Some(slots) = slots {
            slots.log();
            let settings = DeliverySettings {
                resolver,
                ..args.delivery_settings(owner, slots.count)
            };
            let worker = Worker::new(worker_store, clock.clone(), settings)?;
            instance.beat.worker_slots = u32::try_from(slots.count).unwrap_or(u32::MAX);
            instance.busy = Some(worker.held_leases());
            claim_passes = Some(worker.claim_passes());
            match mode {
                WorkerMode::Background => {
                    let stop = shutdown.clone();
                    tasks.spawn(async move {
                        worker.run(stop).await;
                        Ok(())
                    });
                }
                WorkerMode::Stepped => stepped = Some(worker),
            }
            // Maintenance runs where the worker runs: purging finished jobs.
            let retention = retention::run(
                store.clone(),
                clock.clone(),
                args.retention_settings(),
                shutdown.clone(),
            );
            tasks.spawn(async move {
                retention.await;
                Ok(())
            });
            // So does the scheduler of recurring schedules.
            let limits = args.api_settings()?.job_limits;
            let scheduler = Scheduler::new(store.clone(), clock.clone(), limits)
                .with_quotas(args.schedule_quotas());
            let stop = shutdown.clone();
            tasks.spawn(async move {
                scheduler.run(stop).await;
                Ok(())
            });
        }
        let beating = heartbeat::run(store.clone(), clock.clone(), instance, shutdown.clone());
        tasks.spawn(async move {
            beating.await;
            Ok(())
        });
        Ok(Server {
            store,
            api_addr,
            clock,
            shutdown,
            tasks,
            worker: stepped,
            claim_passes,
        })
    }

    /// Its worker's count of finished claim steps (`None` under `--no-worker`): a
    /// test of the running loop waits on it ([`ClaimPasses`]).
    pub fn claim_passes(&self) -> Option<ClaimPasses> {
        self.claim_passes.clone()
    }

    /// The clock the server runs on (for a test to read the instance's `now`).
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops claiming and accepting, lets open requests and attempts finish within the
    /// grace period, releases the leases still held, and waits.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until every part has stopped; the first failure stops the others.
    pub async fn wait(mut self) -> anyhow::Result<()> {
        let mut outcome = Ok(());
        while let Some(joined) = self.tasks.join_next().await {
            let result = joined.context("a server task panicked").and_then(|r| r);
            if result.is_err() && outcome.is_ok() {
                self.shutdown.cancel();
                outcome = result;
            }
        }
        outcome
    }
}

/// The clock `clock` names: one set by the store's clock is measured once here, and
/// kept set by a task in `tasks` until `shutdown`.
async fn set_clock(
    args: &ServeArgs,
    store: &SharedStore,
    clock: ServerClock,
    shutdown: &CancellationToken,
    tasks: &mut JoinSet<anyhow::Result<()>>,
) -> Arc<dyn Clock> {
    let (base, otherwise): (Arc<dyn Clock>, Arc<dyn Clock>) = match clock {
        ServerClock::AsIs(clock) => return clock,
        ServerClock::System => (Arc::new(SteadyClock::new()), Arc::new(SystemClock)),
        ServerClock::SetByDatabase(clock) => (clock.clone(), clock),
    };
    let Some(sync) = ClockSync::start(store.clone(), base, args.clock_sync_settings()).await else {
        return otherwise;
    };
    let clock = sync.clock();
    let stop = shutdown.clone();
    tasks.spawn(async move {
        sync.run(stop).await;
        Ok(())
    });
    clock
}

/// For an instance that runs the worker (`None` under `--no-worker`): raises the
/// open-files limit, chooses the worker's slots and checks its settings. Logs the
/// choice only in `launch`, so that a refused start stays one line.
fn prepare_worker(args: &ServeArgs) -> anyhow::Result<Option<WorkerSlots>> {
    if args.no_worker {
        return Ok(None);
    }
    let open_files = make_room_for_attempts(args.max_in_flight);
    let slots = WorkerSlots::choose(args.max_in_flight, open_files, args.memory_budget_mb);
    args.delivery_settings(String::new(), slots.count)
        .validate()
        .map_err(anyhow::Error::msg)?;
    Ok(Some(slots))
}

/// Raises the open-files soft limit so the attempts (a socket each) fit beside
/// everything else: to `--max-in-flight` plus [`RESERVED`](open_files::RESERVED) when
/// given, else to the hard limit, from which the default slot count follows. Returns
/// the soft limit now, or the common default of 1,024 when it cannot be read (then
/// the default is the floor).
fn make_room_for_attempts(max_in_flight: Option<u64>) -> u64 {
    let wanted = max_in_flight.map_or(u64::MAX, |n| n.saturating_add(open_files::RESERVED));
    match open_files::raise_to(wanted) {
        Ok(files) => files.now,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the open-files limit");
            UNREADABLE_OPEN_FILES
        }
    }
}

/// This machine's name, for lease owners (`HOSTNAME`, else /etc/hostname).
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "deferhook".to_owned())
}

/// SIGINT and SIGTERM, registered when created so that a signal arriving while the
/// server starts is not lost.
pub struct ShutdownSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Registers the handlers.
    pub fn register() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(ShutdownSignals {
                terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
                interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            })
        }
        #[cfg(not(unix))]
        Ok(ShutdownSignals {})
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => tracing::info!("SIGINT received; shutting down"),
            _ = self.terminate.recv() => tracing::info!("SIGTERM received; shutting down"),
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("interrupt received; shutting down");
        }
    }
}
