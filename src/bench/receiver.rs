//! The fast receiver: axum on 127.0.0.1:0 with keep-alive, answering 200 at once (or
//! after `slow_ms` under `/slow/…`), recording each request's path, `webhook-id` and
//! arrival time.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::net::TcpListener;

use super::clock::now_ms;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// The subscriber, from the path.
    pub subscriber: String,
    /// The `webhook-id` header (the event id).
    pub webhook_id: String,
    /// Unix milliseconds when the request reached the handler.
    pub at_ms: i64,
}

#[derive(Clone)]
struct Shared {
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    slow: Duration,
}

/// A running receiver; stops when the process ends.
pub struct Receiver {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Receiver {
    /// Binds 127.0.0.1:0 and serves in the background.
    pub async fn start(slow_ms: u64) -> anyhow::Result<Self> {
        let shared = Shared {
            arrivals: Arc::default(),
            slow: Duration::from_millis(slow_ms),
        };
        let app = Router::new()
            .route("/fast/{subscriber}", post(fast))
            .route("/slow/{subscriber}", post(slow))
            .with_state(shared.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Receiver {
            addr,
            arrivals: shared.arrivals,
        })
    }

    /// The URL a subscriber gets: `/slow/{id}` when it should answer slowly.
    pub fn url(&self, subscriber: &str, slow: bool) -> String {
        let kind = if slow { "slow" } else { "fast" };
        format!("http://{}/{kind}/{subscriber}", self.addr)
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.arrivals.lock().expect("not poisoned").len()
    }

    /// Every request so far.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().expect("not poisoned").clone()
    }
}

fn record(shared: &Shared, subscriber: String, headers: &HeaderMap) {
    let at_ms = now_ms();
    let webhook_id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    shared.arrivals.lock().expect("not poisoned").push(Arrival {
        subscriber,
        webhook_id,
        at_ms,
    });
}

async fn fast(
    State(shared): State<Shared>,
    Path(subscriber): Path<String>,
    headers: HeaderMap,
) -> StatusCode {
    record(&shared, subscriber, &headers);
    StatusCode::OK
}

async fn slow(
    State(shared): State<Shared>,
    Path(subscriber): Path<String>,
    headers: HeaderMap,
) -> StatusCode {
    record(&shared, subscriber, &headers);
    tokio::time::sleep(shared.slow).await;
    StatusCode::OK
}
