//! One HTTP attempt: POST the payload bytes, signed, with no redirects followed, bounded
//! in time as a whole (connect, headers and a body read capped at 64 KiB), and only to
//! addresses the [`TargetPolicy`] permits (CASES C-08).

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER, USER_AGENT};
use reqwest::redirect::Policy;

use super::resolve::{BlockedTarget, GuardedResolver, Resolver};
use super::signing::signature_header;
use crate::domain::policy::TransportFailure;
use crate::domain::secret::SigningSecret;
use crate::domain::target::TargetPolicy;

/// Most bytes of a response body that are read; the rest is never downloaded.
pub const MAX_BODY_READ_BYTES: usize = 64 * 1024;

/// `user-agent` of every request.
pub const USER_AGENT_VALUE: &str = concat!("deferhook/", env!("CARGO_PKG_VERSION"));

/// What one webhook request carries.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The subscriber's URL.
    pub url: &'a str,
    /// The event id, sent as `webhook-id`.
    pub event_id: &'a str,
    /// The exact payload bytes.
    pub payload: &'a str,
    /// The secrets to sign with (one signature each).
    pub secrets: &'a [SigningSecret],
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp_s: i64,
    /// The whole attempt's time limit.
    pub timeout: Duration,
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
    client: reqwest::Client,
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
        let client = reqwest::Client::builder()
            .redirect(Policy::none())
            .no_proxy()
            .dns_resolver(GuardedResolver::new(resolver, policy.clone()))
            .user_agent(USER_AGENT_VALUE)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(Sender { client, policy })
    }

    /// Sends one attempt. Never fails: every problem is a [`Received::Failed`].
    ///
    /// The timeout covers connecting, sending and receiving the status and headers, and
    /// reading the body. Once the status is known, the receiver has answered: a body
    /// that stalls or breaks is cut short, and the verdict still follows the status.
    pub async fn send(&self, outgoing: &Outgoing<'_>) -> Received {
        let deadline = tokio::time::Instant::now() + outgoing.timeout;
        self.exchange(outgoing, deadline).await
    }

    async fn exchange(&self, outgoing: &Outgoing<'_>, deadline: tokio::time::Instant) -> Received {
        // A literal address is never resolved, so the resolver cannot check it; the
        // policy may also have changed since the URL was registered.
        if let Ok(url) = url::Url::parse(outgoing.url)
            && let Err(refusal) = self.policy.permits_url(&url)
        {
            return failed(
                TransportFailure::Blocked,
                format!("blocked before connecting: {refusal}"),
            );
        }
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
            ("webhook-id", outgoing.event_id.to_owned()),
            ("webhook-timestamp", outgoing.timestamp_s.to_string()),
            ("webhook-signature", signature),
        ];
        for (name, value) in header_values {
            match HeaderValue::from_str(&value) {
                Ok(value) => {
                    headers.insert(name, value);
                }
                Err(_) => {
                    return failed(TransportFailure::Connect, format!("invalid {name} header"));
                }
            }
        }
        let request = self
            .client
            .post(outgoing.url)
            .headers(headers)
            .body(outgoing.payload.to_owned());
        let mut response = match tokio::time::timeout_at(deadline, request.send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return transport_failure(&error),
            Err(_) => {
                return failed(
                    TransportFailure::Timeout,
                    format!("no answer within {} ms", outgoing.timeout.as_millis()),
                );
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
        Received::Response {
            status,
            retry_after,
            body,
        }
    }
}

fn failed(failure: TransportFailure, reason: String) -> Received {
    Received::Failed { failure, reason }
}

/// Classifies a reqwest error without echoing the URL (it may carry a token in its
/// query string). A [`BlockedTarget`] from the resolver, anywhere in the chain of
/// causes, makes the failure `Blocked`.
fn transport_failure(error: &reqwest::Error) -> Received {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(blocked) = cause.downcast_ref::<BlockedTarget>() {
            return failed(
                TransportFailure::Blocked,
                format!("blocked before connecting: {blocked}"),
            );
        }
        source = cause.source();
    }
    let failure = if error.is_timeout() {
        TransportFailure::Timeout
    } else {
        TransportFailure::Connect
    };
    let mut reason = String::from(if error.is_connect() {
        "connection failed"
    } else if error.is_timeout() {
        "timed out"
    } else {
        "the connection broke after the request was sent; the receiver may have processed it"
    });
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason.push_str(": ");
        reason.push_str(&cause.to_string());
        source = cause.source();
    }
    reason.truncate(reason.floor_char_boundary(300));
    failed(failure, reason)
}
