//! Serving the router on a listener, HTTP/1.1, with a limit on how long a client may
//! take to send its request headers (`--header-read-timeout-ms`): a client that
//! trickles its headers (slowloris) is disconnected instead of holding a connection
//! forever. Likewise a client that stops reading its answers: a write that cannot make
//! progress for [`WRITE_TIMEOUT`] closes the connection. `axum::serve` sets no timer,
//! so hyper's header-read timeout never fires there; this loop configures hyper
//! directly. Open connections are bounded in all and per client address
//! ([`super::connections`]), and each request carries its peer's address
//! (`ConnectInfo<SocketAddr>`) for the log and the credential limits. On shutdown it
//! stops accepting and lets open connections finish (the caller bounds that wait with
//! its grace period).

use std::time::Duration;

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::connections::{Admission, Connections};

/// Longest a write to a client may block (the client not reading its answers).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause after a failed `accept` (e.g. out of file descriptors), so the loop never spins.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `stop` is cancelled, then waits for the open
/// connections to finish. A connection whose request headers take longer than
/// `header_read_timeout` to arrive is closed; no more connections than `connections`
/// allows are open at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
    header_read_timeout: Duration,
    connections: Connections,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let graceful = GracefulShutdown::new();
    'accepting: loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        // Every place taken and none to shed: hold this one, accept no other, until a
        // place is free.
        let place = loop {
            match connections.admit(peer.ip()) {
                Admission::Admitted(place) => break place,
                Admission::Refused => {
                    tracing::debug!(client = %peer.ip(),
                        "connection closed: its address holds its share");
                    crate::metrics::connection_refused();
                    continue 'accepting;
                }
                Admission::Full => tokio::select! {
                    () = stop.cancelled() => break 'accepting,
                    () = connections.freed() => {}
                },
            }
        };
        let service = TowerToHyperService::new(router.clone().map_request(
            move |request: Request<Incoming>| {
                let mut request = request.map(Body::new);
                request
                    .extensions_mut()
                    .insert(ConnectInfo::<SocketAddr>(peer));
                request
            },
        ));
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let io = TokioIo::new(Box::pin(stream));
        let connection = graceful.watch(builder.serve_connection(io, service));
        let shed = place.shed();
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => {
                    if let Err(error) = ended {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                }
                () = shed.cancelled() => {
                    tracing::debug!(client = %peer.ip(),
                        "connection closed: its place was given to another client address");
                }
            }
            drop(place);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
