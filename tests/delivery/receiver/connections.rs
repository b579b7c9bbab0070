//! The receiver's connections, counted while they carry a request: from the arrival
//! of a connection's first request until the connection closes. A request held
//! unanswered thus counts until the sender gives up and closes its connection, not
//! merely until the sender stops waiting for it.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How many connections carry a request now, and the most that ever did at once.
#[derive(Default)]
struct Counts {
    now: usize,
    max: usize,
}

/// The counts of one receiver, shared by its connections.
#[derive(Clone, Default)]
pub struct ConnectionCounts(Arc<Mutex<Counts>>);

impl ConnectionCounts {
    /// Connections open now that have carried a request.
    pub fn now(&self) -> usize {
        self.0.lock().unwrap().now
    }

    /// The most such connections open at once.
    pub fn max(&self) -> usize {
        self.0.lock().unwrap().max
    }
}

/// One accepted connection, as a request handler sees it (`ConnectInfo<Connection>`).
#[derive(Clone)]
pub struct Connection {
    carried: Arc<AtomicBool>,
    counts: ConnectionCounts,
}

impl Connection {
    /// A request arrived on this connection: it counts from now until it closes.
    pub fn request_arrived(&self) {
        if !self.carried.swap(true, Ordering::SeqCst) {
            let mut counts = self.counts.0.lock().unwrap();
            counts.now += 1;
            counts.max = counts.max.max(counts.now);
        }
    }
}

impl Connected<IncomingStream<'_, CountingListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, CountingListener>) -> Self {
        stream.io().connection.clone()
    }
}

/// A TCP listener whose connections report when they close.
pub struct CountingListener {
    inner: TcpListener,
    counts: ConnectionCounts,
}

impl CountingListener {
    pub fn new(inner: TcpListener, counts: ConnectionCounts) -> Self {
        CountingListener { inner, counts }
    }
}

impl Listener for CountingListener {
    type Io = CountedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CountedStream, SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let connection = Connection {
                        carried: Arc::new(AtomicBool::new(false)),
                        counts: self.counts.clone(),
                    };
                    return (CountedStream { stream, connection }, addr);
                }
                // Out of file descriptors, say: try again shortly, as axum does.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A connection's socket; dropped (closed) when the server is done with the connection.
pub struct CountedStream {
    stream: TcpStream,
    connection: Connection,
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        if self.connection.carried.load(Ordering::SeqCst) {
            self.connection.counts.0.lock().unwrap().now -= 1;
        }
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
