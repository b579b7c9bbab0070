//! The fast receiver: axum on 127.0.0.1:0 with keep-alive, answering 200 at once (or
//! after `slow_ms` under `/slow/…`, or the status under `/status/{code}/…`, a 5xx until
//! [`Receiver::recover`]), recording each request's path, `webhook-id` and arrival
//! time, and the most requests it had open at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
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
    /// A hash of the body's bytes ([`body_hash`]).
    pub body_hash: u64,
}

/// A hash of `body` (the same for the same bytes), to tell whether a delivery carried
/// the payload's exact bytes without keeping them.
pub fn body_hash(body: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

#[derive(Clone)]
struct Shared {
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    open: Arc<Open>,
    slow: Duration,
    recovered: Arc<AtomicBool>,
}

/// Requests whose handler is running (from arrival until the answer is written or the
/// sender gave up and the handler was dropped), and the most at once.
#[derive(Default)]
struct Open {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// One open request; closes it when dropped.
struct Opened(Arc<Open>);

impl Open {
    fn enter(self: &Arc<Self>) -> Opened {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Opened(self.clone())
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running receiver; stops when the process ends.
pub struct Receiver {
    /// Its listeners, one per port: each port is a destination of its own
    /// (`127.0.0.1:<port>`, docs/DESIGN.md §15).
    addrs: Vec<SocketAddr>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    open: Arc<Open>,
    recovered: Arc<AtomicBool>,
}

impl Receiver {
    /// Binds 127.0.0.1:0 and serves in the background.
    pub async fn start(slow_ms: u64) -> anyhow::Result<Self> {
        Self::start_on(1, slow_ms).await
    }

    /// Binds `ports` listeners on 127.0.0.1 (each its own port: its own destination)
    /// serving the same routes and record, in the background.
    pub async fn start_on(ports: usize, slow_ms: u64) -> anyhow::Result<Self> {
        let shared = Shared {
            arrivals: Arc::default(),
            open: Arc::default(),
            slow: Duration::from_millis(slow_ms),
            recovered: Arc::default(),
        };
        let app = Router::new()
            .route("/fast/{subscriber}", post(fast))
            .route("/slow/{subscriber}", post(slow))
            .route("/status/{code}/{subscriber}", post(status))
            .with_state(shared.clone());
        let mut addrs = Vec::with_capacity(ports.max(1));
        for _ in 0..ports.max(1) {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            addrs.push(listener.local_addr()?);
            let app = app.clone();
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        Ok(Receiver {
            addrs,
            arrivals: shared.arrivals,
            open: shared.open,
            recovered: shared.recovered,
        })
    }

    /// The URL a subscriber gets: `/slow/{id}` when it should answer slowly.
    pub fn url(&self, subscriber: &str, slow: bool) -> String {
        self.url_on(0, subscriber, slow)
    }

    /// [`Self::url`] on listener `port` (modulo the listeners): its destination.
    pub fn url_on(&self, port: usize, subscriber: &str, slow: bool) -> String {
        let kind = if slow { "slow" } else { "fast" };
        let addr = self.addrs[port % self.addrs.len()];
        format!("http://{addr}/{kind}/{subscriber}")
    }

    /// The URL of a subscriber answered `code` (e.g. 500, 410); a 5xx until
    /// [`Self::recover`], then 200.
    pub fn url_answering(&self, subscriber: &str, code: u16) -> String {
        format!("http://{}/status/{code}/{subscriber}", self.addrs[0])
    }

    /// From now on every `/status/5xx/…` request is answered 200: the receiver recovered
    /// (a 410 stays gone).
    pub fn recover(&self) {
        self.recovered.store(true, Ordering::SeqCst);
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.arrivals.lock().expect("not poisoned").len()
    }

    /// Every request so far.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().expect("not poisoned").clone()
    }

    /// The most requests it had open at once so far.
    pub fn peak_open(&self) -> usize {
        self.open.peak.load(Ordering::SeqCst)
    }
}

fn record(shared: &Shared, subscriber: String, headers: &HeaderMap, body: &[u8]) {
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
        body_hash: body_hash(body),
    });
}

async fn fast(
    State(shared): State<Shared>,
    Path(subscriber): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let _open = shared.open.enter();
    record(&shared, subscriber, &headers, &body);
    StatusCode::OK
}

async fn slow(
    State(shared): State<Shared>,
    Path(subscriber): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let _open = shared.open.enter();
    record(&shared, subscriber, &headers, &body);
    tokio::time::sleep(shared.slow).await;
    StatusCode::OK
}

async fn status(
    State(shared): State<Shared>,
    Path((code, subscriber)): Path<(u16, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let _open = shared.open.enter();
    record(&shared, subscriber, &headers, &body);
    if code >= 500 && shared.recovered.load(Ordering::SeqCst) {
        return StatusCode::OK;
    }
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_requests_peak_is_the_most_at_once() {
        let open = Arc::new(Open::default());
        let first = open.enter();
        let second = open.enter();
        drop(first);
        let third = open.enter();
        assert_eq!(open.now.load(Ordering::SeqCst), 2);
        drop((second, third));
        assert_eq!(open.now.load(Ordering::SeqCst), 0);
        assert_eq!(open.peak.load(Ordering::SeqCst), 2);
    }
}
