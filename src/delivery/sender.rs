//! One HTTP attempt: POST the payload bytes, signed, with no redirects followed, bounded
//! in time as a whole (connect, headers and a body read capped at 64 KiB), and only to
//! addresses the [`TargetPolicy`] permits (CASES C-08). A request whose connection the
//! receiver closed before answering is sent once more, at once, on a fresh connection,
//! within the same attempt (docs/DESIGN.md §3).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER, USER_AGENT};
use reqwest::redirect::Policy;

use super::resolve::{GuardedResolver, Resolver, UnusableName};
use super::signing::signature_header;
use crate::domain::policy::TransportFailure;
use crate::domain::secret::SigningSecret;
use crate::domain::target::TargetPolicy;

/// Most bytes of a response body that are read; the rest is never downloaded.
pub const MAX_BODY_READ_BYTES: usize = 64 * 1024;

/// `user-agent` of every request.
pub const USER_AGENT_VALUE: &str = concat!("deferhook/", env!("CARGO_PKG_VERSION"));

/// How long an idle pooled connection is kept: 4 s, below the 5 s after which common
/// receivers close idle keep-alive connections (Node.js `server.keepAliveTimeout`,
/// 5,000 ms by default from v8 until nodejs/node#62782 raised it to 65 s; Apache httpd
/// `KeepAliveTimeout`, 5 s), so that the sender drops a connection before its receiver
/// does rather than racing it with a request. A receiver quicker than that is covered
/// by the resend.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Most bytes of the first failure kept in a resend's note.
const RESEND_CAUSE_BYTES: usize = 160;

/// What one webhook request carries.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The subscriber's URL.
    pub url: &'a str,
    /// The event id, sent as `webhook-id`.
    pub event_id: &'a str,
    /// The event's type, sent as `webhook-event-type` when there is one (not signed:
    /// the Standard Webhooks signature covers the id, the timestamp and the body).
    pub event_type: Option<&'a str>,
    /// The exact payload bytes, shared with the other jobs that carry them (the body
    /// is sent from this copy, not a new one per request).
    pub payload: &'a Arc<str>,
    /// The secrets to sign with (one signature each).
    pub secrets: &'a [SigningSecret],
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp_s: i64,
    /// The whole attempt's time limit.
    pub timeout: Duration,
}

/// What one attempt came to: the answer, and whether its request had to be sent twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The answer (to the second request when there was one).
    pub received: Received,
    /// The request was sent a second time, on a fresh connection, because the first
    /// one's connection was closed or reset before any answer.
    pub resent: Option<Resent>,
}

/// Why a request was sent a second time: the first request's connection was closed or
/// reset before an answer arrived (as when a receiver closes an idle keep-alive
/// connection just as the request reaches it). The receiver may have read the first
/// request, so the second one is a possible duplicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resent {
    /// The first request's error chain, at most 160 bytes, without the URL.
    pub first_failure: String,
}

impl std::fmt::Display for Resent {
    /// `resent once on a fresh connection: the first closed before an answer (…)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "resent once on a fresh connection: the first closed before an answer ({})",
            self.first_failure
        )
    }
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// The receiver answered.
    Response {
        /// The HTTP status.
        status: u16,
        /// The raw `Retry-After` header, if any.
        retry_after: Option<String>,
        /// Up to [`MAX_BODY_READ_BYTES`] of the body.
        body: Vec<u8>,
    },
    /// No complete answer.
    Failed {
        /// Timeout or connection failure.
        failure: TransportFailure,
        /// A short account, without secrets.
        reason: String,
    },
}

/// Sends webhooks over a shared connection pool.
#[derive(Debug, Clone)]
pub struct Sender {
    /// Keeps idle connections for [`POOL_IDLE_TIMEOUT`].
    client: reqwest::Client,
    /// Keeps no idle connection, so each request opens its own: for resends.
    fresh: reqwest::Client,
    policy: Arc<TargetPolicy>,
}

impl Sender {
    /// A sender whose client never follows redirects, verifies TLS with the platform's
    /// roots, and connects only to addresses `policy` permits: names are looked up with
    /// `resolver` and filtered (see [`GuardedResolver`]); literal addresses are checked
    /// before each request. It ignores `HTTP(S)_PROXY`: through a proxy the name would
    /// be resolved, and the address connected, out of the policy's sight.
    pub fn new(policy: Arc<TargetPolicy>, resolver: Resolver) -> anyhow::Result<Self> {
        // reqwest is built without a default crypto provider; use ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let builder = || {
            reqwest::Client::builder()
                .redirect(Policy::none())
                .no_proxy()
                .dns_resolver(GuardedResolver::new(resolver.clone(), policy.clone()))
                .user_agent(USER_AGENT_VALUE)
                .tcp_nodelay(true)
        };
        let client = builder().pool_idle_timeout(POOL_IDLE_TIMEOUT).build()?;
        let fresh = builder().pool_max_idle_per_host(0).build()?;
        Ok(Sender {
            client,
            fresh,
            policy,
        })
    }

    /// Sends one attempt. Never fails: every problem is a [`Received::Failed`].
    ///
    /// The timeout covers connecting, sending and receiving the status and headers, and
    /// reading the body, of both requests when there is a resend. Once the status is
    /// known, the receiver has answered: a body that stalls or breaks is cut short, and
    /// the verdict still follows the status.
    ///
    /// A request that fails before its response's status and headers arrive, with an
    /// error saying that the connection was closed or reset (hyper's incomplete
    /// message, or an I/O error `ConnectionReset`, `ConnectionAborted`, `BrokenPipe` or
    /// `UnexpectedEof`), is sent once more at once, with the same headers (the same
    /// attempt: `webhook-id`, `webhook-timestamp` and signatures unchanged), on a new
    /// connection; [`Sent::resent`] says so. Never after a timeout, a failure to
    /// connect, a refusal, or once the status is known.
    pub async fn send(&self, outgoing: &Outgoing<'_>) -> Sent {
        let deadline = tokio::time::Instant::now() + outgoing.timeout;
        // A literal address is never resolved, so the resolver cannot check it; the
        // policy may also have changed since the URL was registered.
        if let Ok(url) = url::Url::parse(outgoing.url)
            && let Err(refusal) = self.policy.permits_url(&url)
        {
            let received = failed(
                TransportFailure::Blocked,
                format!("blocked before connecting: {refusal}"),
            );
            return Sent {
                received,
                resent: None,
            };
        }
        let headers = match request_headers(outgoing) {
            Ok(headers) => headers,
            Err(received) => {
                return Sent {
                    received,
                    resent: None,
                };
            }
        };
        match exchange(&self.client, outgoing, headers.clone(), deadline).await {
            Err(Closed(first_failure)) => {
                tracing::debug!(event_id = outgoing.event_id, cause = %first_failure,
                    "the connection closed before an answer; resending on a fresh connection");
                let received = match exchange(&self.fresh, outgoing, headers, deadline).await {
                    Ok(received) => received,
                    Err(Closed(second)) => connection_broke(&second),
                };
                Sent {
                    received,
                    resent: Some(Resent { first_failure }),
                }
            }
            Ok(received) => Sent {
                received,
                resent: None,
            },
        }
    }
}

/// One request through `client`; `Err` when its connection was closed or reset before
/// an answer (see [`Sender::send`]), with the error chain.
async fn exchange(
    client: &reqwest::Client,
    outgoing: &Outgoing<'_>,
    headers: HeaderMap,
    deadline: tokio::time::Instant,
) -> Result<Received, Closed> {
    let request = client
        .post(outgoing.url)
        .headers(headers)
        .body(Bytes::from_owner(SharedText(outgoing.payload.clone())));
    let mut response = match tokio::time::timeout_at(deadline, request.send()).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return transport_failure(&error),
        Err(_) => {
            return Ok(failed(
                TransportFailure::Timeout,
                format!("no answer within {} ms", outgoing.timeout.as_millis()),
            ));
        }
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while body.len() < MAX_BODY_READ_BYTES {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = MAX_BODY_READ_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            // The status is known; a body that ends, breaks or stalls past the
            // timeout is cut short and does not change the verdict.
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    Ok(Received::Response {
        status,
        retry_after,
        body,
    })
}

/// A request's connection was closed or reset before any answer; the error chain.
struct Closed(String);

/// The headers of `outgoing`'s request, or the failure when one cannot be a header.
fn request_headers(outgoing: &Outgoing<'_>) -> Result<HeaderMap, Received> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
    let signature = signature_header(
        outgoing.secrets,
        outgoing.event_id,
        outgoing.timestamp_s,
        outgoing.payload.as_bytes(),
    );
    let header_values = [
        ("webhook-id", Some(outgoing.event_id.to_owned())),
        ("webhook-timestamp", Some(outgoing.timestamp_s.to_string())),
        ("webhook-signature", Some(signature)),
        ("webhook-event-type", outgoing.event_type.map(str::to_owned)),
    ];
    for (name, value) in header_values
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
    {
        match HeaderValue::from_str(&value) {
            Ok(value) => {
                headers.insert(name, value);
            }
            Err(_) => {
                return Err(failed(
                    TransportFailure::Connect,
                    format!("invalid {name} header"),
                ));
            }
        }
    }
    Ok(headers)
}

fn failed(failure: TransportFailure, reason: String) -> Received {
    Received::Failed { failure, reason }
}

/// Classifies a reqwest error without echoing the URL (it may carry a token in its
/// query string). An [`UnusableName`] from the resolver, anywhere in the chain of
/// causes, is a `Connect` failure whose reason is its fixed text, the same whether the
/// name did not resolve or resolved only to refused addresses (issue #34, item 4.7); an
/// answer hyper could not parse is a `Protocol` failure (issue #34, item 5.1); a
/// connection closed or reset before an answer is [`Closed`].
fn transport_failure(error: &reqwest::Error) -> Result<Received, Closed> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(unusable) = cause.downcast_ref::<UnusableName>() {
            return Ok(failed(TransportFailure::Connect, unusable.to_string()));
        }
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>()
            && hyper.is_parse()
        {
            return Ok(not_http(hyper));
        }
        source = cause.source();
    }
    if closed_before_answer(error) {
        let mut chain = causes(error);
        chain.truncate(chain.floor_char_boundary(RESEND_CAUSE_BYTES));
        return Err(Closed(chain));
    }
    let failure = if error.is_timeout() {
        TransportFailure::Timeout
    } else {
        TransportFailure::Connect
    };
    let reason = if error.is_connect() {
        "connection failed"
    } else if error.is_timeout() {
        "timed out"
    } else {
        return Ok(connection_broke(&causes(error)));
    };
    let mut reason = with_causes(reason, &causes(error));
    reason.truncate(reason.floor_char_boundary(300));
    Ok(failed(failure, reason))
}

/// The failure of a request whose connection broke after it was sent, with its error
/// chain `causes`.
fn connection_broke(causes: &str) -> Received {
    let mut reason = with_causes(
        "the connection broke after the request was sent; the receiver may have processed it",
        causes,
    );
    reason.truncate(reason.floor_char_boundary(300));
    failed(TransportFailure::Connect, reason)
}

/// The failure of a request whose answer was not valid HTTP (a malformed status line,
/// version or header; a head too large), with hyper's short account of what it could
/// not parse (`invalid HTTP status-code parsed`), never the bytes received.
fn not_http(parse: &hyper::Error) -> Received {
    let mut reason = format!("the receiver's answer was not valid HTTP: {parse}");
    reason.truncate(reason.floor_char_boundary(300));
    failed(TransportFailure::Protocol, reason)
}

/// `what: causes`, or `what` alone when there are none.
fn with_causes(what: &str, causes: &str) -> String {
    if causes.is_empty() {
        what.to_owned()
    } else {
        format!("{what}: {causes}")
    }
}

/// The causes of `error`, joined by `: ` (reqwest's own message names the URL; its
/// causes do not).
fn causes(error: &reqwest::Error) -> String {
    let mut chain = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        chain.push(cause.to_string());
        source = cause.source();
    }
    chain.join(": ")
}

/// True when `error` says that the request's connection was closed or reset before
/// the response's status and headers arrived: hyper's incomplete message ("connection
/// closed before message completed"), or an I/O error `ConnectionReset`,
/// `ConnectionAborted`, `BrokenPipe` or `UnexpectedEof` in its chain. Never for a
/// timeout or a failure to connect (the request never left). reqwest gives no byte
/// counts: hyper reports a status line cut short by the close as the same incomplete
/// message, so a receiver that dies while writing its first line is resent too, as
/// one that dies after reading the request but before answering is.
fn closed_before_answer(error: &reqwest::Error) -> bool {
    if error.is_timeout() || error.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            if hyper.is_timeout() {
                return false;
            }
            if hyper.is_incomplete_message() {
                return true;
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof,
            };
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

/// A shared payload text as a request body's bytes, without copying them.
struct SharedText(Arc<str>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}
