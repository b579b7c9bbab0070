//! Wiring of `deferhook serve`: store, API and shutdown.

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::config::ServeArgs;
use crate::domain::{Clock, SystemClock};
use crate::store::{self, SharedStore};

/// A running server: what tests and `main` need to reach and stop it.
pub struct Server {
    /// The store it serves from.
    pub store: SharedStore,
    /// Where it listens.
    pub local_addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Opens the store, binds `args.listen` and starts serving with the system clock.
    pub async fn start(args: &ServeArgs) -> anyhow::Result<Server> {
        if !args.listen.ip().is_loopback() {
            // DESIGN §5: without API tokens the API is open, so it binds loopback only.
            anyhow::bail!(
                "refusing to listen on {}: the API has no authentication in this version, \
                 so it only listens on a loopback address (e.g. 127.0.0.1:8080 or [::1]:8080)",
                args.listen
            );
        }
        let store = store::open(&args.database.database_url).await?;
        let listener = TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        Self::start_with(args, store, Arc::new(SystemClock), listener).await
    }

    /// Starts serving on `listener` with the given store and clock (tests use a bound
    /// port 0 listener and a manual clock).
    pub async fn start_with(
        args: &ServeArgs,
        store: SharedStore,
        clock: Arc<dyn Clock>,
        listener: TcpListener,
    ) -> anyhow::Result<Server> {
        let local_addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let router = api::router(store.clone(), clock, args.api_settings());
        let stop = shutdown.clone();
        let grace = args.shutdown_grace();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, router)
                .with_graceful_shutdown(stop.clone().cancelled_owned())
                .into_future();
            tokio::pin!(serve);
            tokio::select! {
                result = &mut serve => result.context("the HTTP server failed"),
                () = async { stop.cancelled().await; tokio::time::sleep(grace).await } => {
                    tracing::warn!("shutdown grace period over; closing open requests");
                    Ok(())
                }
            }
        });
        tracing::info!(%local_addr, "deferhook listening");
        Ok(Server {
            store,
            local_addr,
            shutdown,
            task,
        })
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops accepting, lets open requests finish within the grace period, and waits.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until the server has stopped.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("the server task panicked")?
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received; shutting down"),
        () = terminate => tracing::info!("SIGTERM received; shutting down"),
    }
}
