//! A scripted receiver on 127.0.0.1:0: records every request (arrival time, headers,
//! raw body bytes) and answers as the test scripts it; it counts the requests open at
//! once, and the connections carrying one until they close (`connections.rs`).

mod connections;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use connections::{Connection, ConnectionCounts, CountingListener};

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Wait a further random time up to this long.
    pub jitter: Duration,
    /// Stream an endless body after the headers.
    pub endless_body: bool,
    /// Send the headers, then never a byte of the body.
    pub stalled_body: bool,
    /// Answer only once the receiver is released ([`Receiver::release`]) or dropped.
    pub held: bool,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            endless_body: false,
            stalled_body: false,
            held: false,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn jitter(mut self, up_to: Duration) -> Self {
        self.jitter = up_to;
        self
    }

    pub fn endless(mut self) -> Self {
        self.endless_body = true;
        self
    }

    pub fn stalled(mut self) -> Self {
        self.stalled_body = true;
        self
    }

    pub fn held(mut self) -> Self {
        self.held = true;
        self
    }
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub at: Instant,
    pub wall: SystemTime,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[derive(Default)]
struct Shared {
    script: Vec<Reply>,
    /// Fixed replies by path, before the script.
    by_path: HashMap<String, Reply>,
    requests: Vec<Recorded>,
    open: HashMap<String, usize>,
    max_open_per_id: usize,
    open_by_path: HashMap<String, usize>,
    max_open_per_path: usize,
    max_open: usize,
    open_total: usize,
    /// Lets the held requests answer.
    release: CancellationToken,
}

/// The receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    connections: ConnectionCounts,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.release();
        self.stop.cancel();
    }
}

impl Receiver {
    /// Answers with `script` in order, then repeats its last reply.
    pub async fn start(script: Vec<Reply>) -> Receiver {
        assert!(!script.is_empty(), "a script needs at least one reply");
        let shared = Arc::new(Mutex::new(Shared {
            script,
            ..Shared::default()
        }));
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = ConnectionCounts::default();
        let listener = CountingListener::new(listener, connections.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<Connection>();
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        Receiver {
            addr,
            shared,
            connections,
            stop,
        }
    }

    /// Holds every request unanswered until [`Receiver::release`] (then answers
    /// `status`).
    pub async fn holding(status: u16) -> Receiver {
        Self::start(vec![Reply::status(status).held()]).await
    }

    /// Lets every held request, and every later one, answer.
    pub fn release(&self) {
        self.shared.lock().unwrap().release.cancel();
    }

    /// Answers every later request with `reply` (the script is replaced).
    pub fn reply_from_now(&self, reply: Reply) {
        self.shared.lock().unwrap().script = vec![reply];
    }

    /// Answers every later request to `path` with `reply`, whatever the script says:
    /// many subscribers on one `host:port`, told apart by path.
    pub fn reply_on(&self, path: &str, reply: Reply) {
        let mut shared = self.shared.lock().unwrap();
        shared.by_path.insert(path.to_owned(), reply);
    }

    /// Connections open now that have carried a request (answered or not): a request
    /// counts as open until its connection closes.
    pub fn connections_now(&self) -> usize {
        self.connections.now()
    }

    /// The most connections carrying a request open at once.
    pub fn max_connections(&self) -> usize {
        self.connections.max()
    }

    /// Answers 200 at once, always.
    pub async fn ok() -> Receiver {
        Self::start(vec![Reply::status(200)]).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// How many requests each `webhook-id` received.
    pub fn counts_by_id(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for request in self.shared.lock().unwrap().requests.iter() {
            *counts
                .entry(request.header("webhook-id").to_owned())
                .or_default() += 1;
        }
        counts
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().unwrap().requests.clone()
    }

    /// The most requests with the same `webhook-id` that were open at once.
    pub fn max_open_per_id(&self) -> usize {
        self.shared.lock().unwrap().max_open_per_id
    }

    /// The most requests to the same path that were open at once.
    pub fn max_open_per_path(&self) -> usize {
        self.shared.lock().unwrap().max_open_per_path
    }

    /// Requests open now (arrived, not yet answered or dropped).
    pub fn open_now(&self) -> usize {
        self.shared.lock().unwrap().open_total
    }

    /// The most requests open at once.
    pub fn max_open(&self) -> usize {
        self.shared.lock().unwrap().max_open
    }

    /// Waits (bounded) until at least `n` requests arrived.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + within;
        loop {
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            assert!(
                Instant::now() < deadline,
                "expected {n} requests within {within:?}, got {}",
                requests.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Decrements the open counts when the request ends, however it ends.
struct OpenGuard {
    shared: Arc<Mutex<Shared>>,
    id: String,
    path: String,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let mut shared = self.shared.lock().unwrap();
        if let Some(open) = shared.open.get_mut(&self.id) {
            *open -= 1;
        }
        if let Some(open) = shared.open_by_path.get_mut(&self.path) {
            *open -= 1;
        }
        shared.open_total -= 1;
    }
}

async fn answer(
    State(shared): State<Arc<Mutex<Shared>>>,
    ConnectInfo(connection): ConnectInfo<Connection>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    connection.request_arrived();
    let (reply, release) = {
        let mut s = shared.lock().unwrap();
        let index = s.requests.len().min(s.script.len() - 1);
        let reply = match s.by_path.get(uri.path()) {
            Some(reply) => reply.clone(),
            None => s.script[index].clone(),
        };
        s.requests.push(Recorded {
            path: uri.path().to_owned(),
            at: Instant::now(),
            wall: SystemTime::now(),
            headers,
            body,
        });
        let open = s.open.entry(id.clone()).or_default();
        *open += 1;
        let open = *open;
        s.max_open_per_id = s.max_open_per_id.max(open);
        s.open_total += 1;
        s.max_open = s.max_open.max(s.open_total);
        let by_path = s.open_by_path.entry(uri.path().to_owned()).or_default();
        *by_path += 1;
        let by_path = *by_path;
        s.max_open_per_path = s.max_open_per_path.max(by_path);
        (reply, s.release.clone())
    };
    let guard = OpenGuard {
        shared: shared.clone(),
        id,
        path: uri.path().to_owned(),
    };
    if reply.held {
        release.cancelled().await;
    }
    tokio::time::sleep(reply.delay + reply.jitter.mul_f64(rand::random::<f64>())).await;
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    let body = if reply.endless_body {
        let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
        Body::from_stream(EndlessBody {
            chunk,
            _guard: guard,
        })
    } else if reply.stalled_body {
        Body::from_stream(StalledBody { _guard: guard })
    } else {
        drop(guard);
        Body::from(reply.body)
    };
    builder.body(body).unwrap()
}

/// An endless stream of `chunk`s that keeps the request counted as open.
struct EndlessBody {
    chunk: Bytes,
    _guard: OpenGuard,
}

impl futures_core::Stream for EndlessBody {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(Some(Ok(self.chunk.clone())))
    }
}

/// A body that never yields a byte, keeping the request counted as open.
struct StalledBody {
    _guard: OpenGuard,
}

impl futures_core::Stream for StalledBody {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Pending
    }
}
