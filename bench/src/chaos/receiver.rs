//! The soak's receivers: one HTTP/1.1 listener per [`ReceiverKind`] on 127.0.0.1, each
//! its own port and so its own destination for the servers, behaving as the kind says
//! and recording every request with how it ended. hyper directly, with an accept loop
//! and one task per connection, so the outage fault can close the listeners and cut
//! the open connections, and reopen on the same ports.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::clock::now_ms;
use super::history::{Ending, ReceiverKind, Request};
use super::plan::{HANG_MS, SLOW_MS};

/// How long [`Receivers::come_up`] retries a port still in use.
const REBIND_FOR: Duration = Duration::from_secs(5);
/// The pause between two binds of a port still in use.
const REBIND_PAUSE: Duration = Duration::from_millis(50);

/// Every request the listeners saw, in start order.
type Record = Arc<Mutex<Vec<Request>>>;

/// The running listeners, one per [`ReceiverKind`], and their record.
pub struct Receivers {
    listeners: Vec<Arc<Listener>>,
    requests: Record,
    /// The current up-period; `None` while down.
    up: tokio::sync::Mutex<Option<UpPeriod>>,
}

/// One kind's listener: its fixed address and its seeded choices.
struct Listener {
    kind: ReceiverKind,
    addr: SocketAddr,
    rng: Mutex<StdRng>,
    requests: Record,
}

/// The listeners serving: cancelling the token closes them and cuts every connection;
/// the tasks end once they have.
struct UpPeriod {
    token: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Receivers {
    /// Binds one listener per kind on 127.0.0.1:0 and serves in the background. The
    /// listener of `ReceiverKind::ALL[i]` draws its choices from
    /// `StdRng::seed_from_u64(seed + i)`.
    pub async fn start(seed: u64) -> anyhow::Result<Arc<Receivers>> {
        let requests = Record::default();
        let mut listeners = Vec::new();
        let mut bound = Vec::new();
        for (index, kind) in ReceiverKind::ALL.into_iter().enumerate() {
            let socket = bind("127.0.0.1:0".parse()?).await?;
            listeners.push(Arc::new(Listener {
                kind,
                addr: socket.local_addr()?,
                rng: Mutex::new(StdRng::seed_from_u64(seed.wrapping_add(index as u64))),
                requests: requests.clone(),
            }));
            bound.push(socket);
        }
        let receivers = Arc::new(Receivers {
            listeners,
            requests,
            up: tokio::sync::Mutex::new(None),
        });
        *receivers.up.lock().await = Some(receivers.serve(bound));
        Ok(receivers)
    }

    /// `http://127.0.0.1:{port}/{subscriber}` of `kind`'s listener.
    pub fn url(&self, kind: ReceiverKind, subscriber: &str) -> String {
        let listener = self
            .listeners
            .iter()
            .find(|listener| listener.kind == kind)
            .expect("one listener per kind");
        format!("http://{}/{subscriber}", listener.addr)
    }

    /// The outage: closes every listener (new connections refused) and cuts every open
    /// connection; requests open then end [`Ending::Cut`]. Returns once all are closed;
    /// nothing when already down.
    pub async fn go_down(&self) {
        let Some(period) = self.up.lock().await.take() else {
            return;
        };
        period.token.cancel();
        for task in period.tasks {
            let _ = task.await;
        }
    }

    /// Rebinds the same ports (`SO_REUSEADDR`, retrying a port still in use for a few
    /// seconds) and serves again; nothing when already up. An error when a port stays
    /// taken.
    pub async fn come_up(&self) -> anyhow::Result<()> {
        let mut up = self.up.lock().await;
        if up.is_some() {
            return Ok(());
        }
        let mut bound = Vec::new();
        for listener in &self.listeners {
            bound.push(bind(listener.addr).await?);
        }
        *up = Some(self.serve(bound));
        Ok(())
    }

    /// Every request so far (a copy), in start order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("not poisoned").clone()
    }

    /// How many requests so far.
    pub fn count(&self) -> usize {
        self.requests.lock().expect("not poisoned").len()
    }

    /// Starts an up-period serving `bound` (in `self.listeners` order).
    fn serve(&self, bound: Vec<TcpListener>) -> UpPeriod {
        let token = CancellationToken::new();
        let tasks = self
            .listeners
            .iter()
            .zip(bound)
            .map(|(listener, socket)| tokio::spawn(accept(socket, listener.clone(), token.clone())))
            .collect();
        UpPeriod { token, tasks }
    }
}

/// Binds `addr` with `SO_REUSEADDR` (the cut connections' ports linger in TIME_WAIT),
/// retrying for [`REBIND_FOR`] while the address is in use.
async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let give_up = Instant::now() + REBIND_FOR;
    loop {
        match try_bind(addr) {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && Instant::now() < give_up => {
                tokio::time::sleep(REBIND_PAUSE).await;
            }
            Err(error) => return Err(error).with_context(|| format!("binding {addr}")),
        }
    }
}

fn try_bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Accepts until `token` is cancelled, one task per connection; then drops the
/// listener and waits for the connections, which the same token cuts.
async fn accept(socket: TcpListener, listener: Arc<Listener>, token: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = socket.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, listener.clone(), token.clone()));
                }
                Err(error) => {
                    // Out of descriptors or an aborted handshake: pause, go on.
                    tracing::warn!(%error, "chaos receiver accept");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    drop(socket);
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until it ends or `token` cuts it. Dropping the connection
/// drops a pending handler, whose [`Open`] records the end. hyper notices a sender that
/// went away while a handler waits (an EOF once the request was read, since half-close
/// is off), ends the connection and so drops the handler at once.
async fn connection(stream: TcpStream, listener: Arc<Listener>, token: CancellationToken) {
    let _ = stream.set_nodelay(true);
    let handler_token = token.clone();
    let service =
        service_fn(move |request| handle(listener.clone(), handler_token.clone(), request));
    let served = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = served => {}
        () = token.cancelled() => {}
    }
}

/// What a listener does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Answer `status` after `after`; with `Retry-After: 1` when `retry_after`.
    Answer {
        status: u16,
        after: Duration,
        retry_after: bool,
    },
    /// Close the connection without an answer.
    Close,
}

impl Behaviour {
    fn answer(status: u16) -> Behaviour {
        Behaviour::Answer {
            status,
            after: Duration::ZERO,
            retry_after: false,
        }
    }

    fn after(status: u16, ms: u64) -> Behaviour {
        Behaviour::Answer {
            status,
            after: Duration::from_millis(ms),
            retry_after: false,
        }
    }
}

/// The kind's choice for one request, as documented on [`ReceiverKind`].
fn behaviour(kind: ReceiverKind, rng: &mut StdRng) -> Behaviour {
    match kind {
        ReceiverKind::Fast => Behaviour::answer(200),
        ReceiverKind::Slow => Behaviour::after(200, SLOW_MS),
        ReceiverKind::Flaky => match rng.random_range(0..4) {
            0 | 1 => Behaviour::Answer {
                status: 503,
                after: Duration::ZERO,
                retry_after: true,
            },
            2 => Behaviour::answer(500),
            _ => Behaviour::answer(200),
        },
        ReceiverKind::Gone => Behaviour::answer(410),
        ReceiverKind::Closing if rng.random_bool(0.5) => Behaviour::Close,
        ReceiverKind::Hanging if rng.random_bool(1.0 / 3.0) => Behaviour::after(200, HANG_MS),
        ReceiverKind::Closing | ReceiverKind::Hanging => Behaviour::answer(200),
    }
}

/// The service's error: makes hyper close the connection without writing an answer.
#[derive(Debug)]
struct CloseWithoutAnswer;

impl std::fmt::Display for CloseWithoutAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("closing without an answer")
    }
}

impl std::error::Error for CloseWithoutAnswer {}

/// One request: recorded when the headers are read, the body read, then the kind's
/// behaviour. Only `POST` is recorded; anything else is a 405.
async fn handle(
    listener: Arc<Listener>,
    token: CancellationToken,
    request: hyper::Request<Incoming>,
) -> Result<Response<String>, CloseWithoutAnswer> {
    if request.method() != Method::POST {
        return Ok(respond(405, false));
    }
    let webhook_id = request
        .headers()
        .get("webhook-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let subscriber = request.uri().path().trim_start_matches('/').to_owned();
    let mut open = Open::start(&listener, token, subscriber, webhook_id);
    // Read the whole body: hyper watches for the sender's EOF only once it has been.
    if read_body(request.into_body()).await.is_err() {
        // The sender went away mid-body: `open` records it when dropped.
        return Err(CloseWithoutAnswer);
    }
    let chosen = behaviour(
        listener.kind,
        &mut listener.rng.lock().expect("not poisoned"),
    );
    match chosen {
        Behaviour::Answer {
            status,
            after,
            retry_after,
        } => {
            tokio::time::sleep(after).await;
            open.end(Ending::Answered(status));
            Ok(respond(status, retry_after))
        }
        Behaviour::Close => {
            open.end(Ending::Closed);
            Err(CloseWithoutAnswer)
        }
    }
}

/// Reads and discards the body.
async fn read_body(mut body: Incoming) -> Result<(), hyper::Error> {
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        frame?;
    }
    Ok(())
}

fn respond(status: u16, retry_after: bool) -> Response<String> {
    let mut response = Response::new(String::new());
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// A recorded request still open. Dropped without [`Open::end`] (the handler dropped),
/// it ends [`Ending::Cut`] when its up-period was cancelled, else [`Ending::Abandoned`].
struct Open {
    requests: Record,
    index: usize,
    token: CancellationToken,
    ended: bool,
}

impl Open {
    /// Records the request as started now; the record stays in start order since the
    /// time is taken under its lock.
    fn start(
        listener: &Listener,
        token: CancellationToken,
        subscriber: String,
        webhook_id: String,
    ) -> Open {
        let mut requests = listener.requests.lock().expect("not poisoned");
        requests.push(Request {
            subscriber,
            webhook_id,
            kind: listener.kind,
            started_ms: now_ms(),
            ended: None,
        });
        Open {
            requests: listener.requests.clone(),
            index: requests.len() - 1,
            token,
            ended: false,
        }
    }

    fn end(&mut self, ending: Ending) {
        let mut requests = self.requests.lock().expect("not poisoned");
        requests[self.index].ended = Some((now_ms(), ending));
        self.ended = true;
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.ended {
            let ending = if self.token.is_cancelled() {
                Ending::Cut
            } else {
                Ending::Abandoned
            };
            self.end(ending);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn client(timeout: Duration) -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .no_proxy()
            .timeout(timeout)
            .build()
            .expect("client")
    }

    async fn post(
        client: &reqwest::Client,
        url: &str,
        id: &str,
    ) -> reqwest::Result<reqwest::Response> {
        client
            .post(url)
            .header("webhook-id", id)
            .body("{}")
            .send()
            .await
    }

    fn port(url: &str) -> u16 {
        let rest = url.strip_prefix("http://127.0.0.1:").expect("url");
        rest.split('/').next().expect("port").parse().expect("port")
    }

    /// Sends one POST on a fresh connection and reads the raw answer until the server
    /// closes or `wait` passes; `None` when it had not closed nor answered by then.
    async fn raw_post(stream: &mut TcpStream, path: &str, wait: Duration) -> Option<Vec<u8>> {
        let request = format!(
            "POST /{path} HTTP/1.1\r\nhost: x\r\nwebhook-id: raw\r\ncontent-length: 2\r\n\
             connection: close\r\n\r\n{{}}"
        );
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        tokio::time::timeout(wait, stream.read_to_end(&mut answer))
            .await
            .ok()
            .map(|read| {
                read.expect("read");
                answer
            })
    }

    async fn ended(receivers: &Receivers, id: &str, within: Duration) -> Option<(i64, Ending)> {
        let give_up = Instant::now() + within;
        loop {
            let request = receivers
                .requests()
                .into_iter()
                .find(|request| request.webhook_id == id)
                .expect("recorded");
            if request.ended.is_some() || Instant::now() > give_up {
                return request.ended;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn fast_slow_and_gone_answer_and_record_subscriber_and_id() {
        let receivers = Receivers::start(1).await.expect("start");
        let client = client(Duration::from_secs(5));
        let fast = post(
            &client,
            &receivers.url(ReceiverKind::Fast, "fast-0"),
            "ev-1",
        )
        .await
        .expect("fast");
        assert_eq!(fast.status(), 200);
        let began = Instant::now();
        let slow = post(
            &client,
            &receivers.url(ReceiverKind::Slow, "slow-1"),
            "ev-2",
        )
        .await
        .expect("slow");
        assert_eq!(slow.status(), 200);
        assert!(began.elapsed() >= Duration::from_millis(SLOW_MS));
        let gone = post(
            &client,
            &receivers.url(ReceiverKind::Gone, "gone-0"),
            "ev-3",
        )
        .await
        .expect("gone");
        assert_eq!(gone.status(), 410);

        let requests = receivers.requests();
        assert_eq!(receivers.count(), 3);
        let seen: Vec<_> = requests
            .iter()
            .map(|r| (r.subscriber.as_str(), r.webhook_id.as_str(), r.kind))
            .collect();
        assert_eq!(
            seen,
            [
                ("fast-0", "ev-1", ReceiverKind::Fast),
                ("slow-1", "ev-2", ReceiverKind::Slow),
                ("gone-0", "ev-3", ReceiverKind::Gone),
            ]
        );
        let endings: Vec<_> = requests.iter().map(|r| r.ended.expect("ended").1).collect();
        assert_eq!(
            endings,
            [
                Ending::Answered(200),
                Ending::Answered(200),
                Ending::Answered(410)
            ]
        );
        let slow = &requests[1];
        assert!(slow.ended.expect("ended").0 - slow.started_ms >= SLOW_MS as i64);
        assert!(
            requests
                .windows(2)
                .all(|p| p[0].started_ms <= p[1].started_ms)
        );
    }

    #[tokio::test]
    async fn flaky_answers_503_with_retry_after_500_and_200() {
        let receivers = Receivers::start(2).await.expect("start");
        let client = client(Duration::from_secs(5));
        let url = receivers.url(ReceiverKind::Flaky, "flaky-0");
        let mut statuses = HashSet::new();
        for n in 0..40 {
            let answer = post(&client, &url, &format!("ev-{n}"))
                .await
                .expect("flaky");
            let retry_after = answer.headers().get("retry-after").map(|v| v.as_bytes());
            assert_eq!(retry_after.is_some(), answer.status() == 503);
            if let Some(value) = retry_after {
                assert_eq!(value, b"1");
            }
            statuses.insert(answer.status().as_u16());
        }
        assert_eq!(statuses, HashSet::from([200, 500, 503]));
        assert!(
            receivers
                .requests()
                .iter()
                .all(|r| matches!(r.ended, Some((_, Ending::Answered(_)))))
        );
    }

    #[tokio::test]
    async fn closing_sometimes_closes_the_connection_with_no_answer_bytes() {
        let receivers = Receivers::start(3).await.expect("start");
        let port = port(&receivers.url(ReceiverKind::Closing, "x"));
        let (mut closed, mut answered) = (0, 0);
        for _ in 0..20 {
            let mut stream = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            let answer = raw_post(&mut stream, "closing-0", Duration::from_secs(2))
                .await
                .expect("closed or answered at once");
            if answer.is_empty() {
                closed += 1;
            } else {
                assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
                answered += 1;
            }
        }
        assert!(
            closed > 0 && answered > 0,
            "{closed} closed, {answered} answered"
        );
        let endings: Vec<_> = receivers
            .requests()
            .iter()
            .map(|r| r.ended.expect("ended").1)
            .collect();
        assert_eq!(
            endings.iter().filter(|&&e| e == Ending::Closed).count(),
            closed
        );
        assert_eq!(
            endings
                .iter()
                .filter(|&&e| e == Ending::Answered(200))
                .count(),
            answered
        );
        // A client sees the closing as an error, not an answer.
        let client = client(Duration::from_secs(2));
        let url = receivers.url(ReceiverKind::Closing, "closing-1");
        let mut errors = 0;
        for n in 0..20 {
            if post(&client, &url, &format!("ev-{n}")).await.is_err() {
                errors += 1;
            }
        }
        assert!(errors > 0);
    }

    #[tokio::test]
    async fn a_hanging_request_its_sender_left_is_abandoned_at_once() {
        let receivers = Receivers::start(4).await.expect("start");
        let client = client(Duration::from_millis(300));
        let url = receivers.url(ReceiverKind::Hanging, "hanging-0");
        let mut left = None;
        for n in 0..30 {
            let id = format!("ev-{n}");
            match post(&client, &url, &id).await {
                Ok(answer) => assert_eq!(answer.status(), 200),
                Err(error) => {
                    assert!(error.is_timeout(), "{error}");
                    left = Some((id, now_ms()));
                    break;
                }
            }
        }
        let (id, gave_up_ms) = left.expect("one request hung");
        let (at, ending) = ended(&receivers, &id, Duration::from_secs(1))
            .await
            .expect("ended within a second");
        assert_eq!(ending, Ending::Abandoned);
        // hyper sees the EOF and drops the handler at once, not after HANG_MS.
        assert!(
            at - gave_up_ms < 100,
            "abandoned {} ms late",
            at - gave_up_ms
        );
    }

    #[tokio::test]
    async fn go_down_refuses_and_cuts_and_come_up_serves_the_same_ports() {
        let receivers = Receivers::start(5).await.expect("start");
        let hanging_port = port(&receivers.url(ReceiverKind::Hanging, "x"));
        // Find a request that hangs and keep its connection open.
        let mut hung = None;
        for _ in 0..30 {
            let mut stream = TcpStream::connect(("127.0.0.1", hanging_port))
                .await
                .expect("connect");
            if raw_post(&mut stream, "hanging-1", Duration::from_millis(200))
                .await
                .is_none()
            {
                hung = Some(stream);
                break;
            }
        }
        let mut hung = hung.expect("one request hung");

        receivers.go_down().await;
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(1), hung.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "cut, no answer: {read:?}"
        );
        let last = receivers.requests().pop().expect("recorded");
        assert!(matches!(last.ended, Some((_, Ending::Cut))), "{last:?}");
        for kind in ReceiverKind::ALL {
            let port = port(&receivers.url(kind, "x"));
            let refused = TcpStream::connect(("127.0.0.1", port)).await;
            assert!(refused.is_err(), "{kind:?} still accepts");
        }

        receivers.come_up().await.expect("come up");
        receivers.come_up().await.expect("already up");
        let client = client(Duration::from_secs(2));
        let answer = post(
            &client,
            &receivers.url(ReceiverKind::Fast, "fast-1"),
            "ev-9",
        )
        .await
        .expect("fast again");
        assert_eq!(answer.status(), 200);
        assert_eq!(
            receivers.requests().pop().expect("recorded").webhook_id,
            "ev-9"
        );
    }
}
