//! Delivery policy (docs/DESIGN.md §3): when to try again, what an answer means, and what of a
//! response body may be kept. Pure functions: `now` and the jitter are parameters, there
//! is no clock, no randomness and no I/O here.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::names::wire_names;
use super::time::Timestamp;

mod redact;

pub use redact::redact_excerpt;

/// Exponential backoff with "equal jitter" between attempts (docs/DESIGN.md §3: base 1 s,
/// factor 2, cap 1 h by default).
///
/// The jitter scheme is "equal jitter" from Marc Brooker, *Exponential Backoff And
/// Jitter* (AWS Architecture Blog, 2015): half of the delay is kept, the other half is
/// random, so retries spread out but never come sooner than half the nominal delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The nominal delay after the first failed attempt, in milliseconds.
    pub base_ms: u64,
    /// The cap on the nominal delay, in milliseconds.
    pub max_ms: u64,
}

impl BackoffPolicy {
    /// The delay in milliseconds before the attempt after `attempt` (1-based: the
    /// attempt that just failed; 0 is read as 1).
    ///
    /// The nominal delay is `d = min(base_ms * 2^(attempt-1), max_ms)`, computed with
    /// saturation so that no `attempt`, `base_ms` or `max_ms` overflows or panics. The
    /// result is `d/2 + jitter * (d - d/2)`, rounded down, so it lies in `[d/2, d]`.
    /// `jitter` is meant to be uniform in `[0, 1)`; values outside are clamped to it and
    /// NaN is read as 0.
    pub fn delay_ms(&self, attempt: u32, jitter: f64) -> u64 {
        let doublings = attempt.saturating_sub(1);
        let nominal = saturating_shl(self.base_ms, doublings).min(self.max_ms);
        let half = nominal / 2;
        let spread = nominal - half;
        // `as` from f64 saturates and floors; the `min` absorbs rounding above 2^53.
        let extra = ((spread as f64) * clamp_jitter(jitter)) as u64;
        half + extra.min(spread)
    }
}

impl Default for BackoffPolicy {
    /// Base 1,000 ms, cap 3,600,000 ms (1 h), as in docs/DESIGN.md §3.
    fn default() -> Self {
        BackoffPolicy {
            base_ms: 1_000,
            max_ms: 3_600_000,
        }
    }
}

/// `value * 2^shift`, saturating at `u64::MAX`.
fn saturating_shl(value: u64, shift: u32) -> u64 {
    if value == 0 {
        0
    } else if shift >= u64::BITS || value > (u64::MAX >> shift) {
        u64::MAX
    } else {
        value << shift
    }
}

/// The largest `f64` below 1.
const JITTER_MAX: f64 = 1.0 - f64::EPSILON / 2.0;

/// `jitter` clamped to `[0, 1)`; NaN becomes 0.
fn clamp_jitter(jitter: f64) -> f64 {
    if jitter.is_nan() {
        0.0
    } else {
        jitter.clamp(0.0, JITTER_MAX)
    }
}

/// Reads a `Retry-After` header value (RFC 9110 §10.2.3) received at `now`.
///
/// Either `delay-seconds` (`1*DIGIT`; huge values saturate and the instant clamps to
/// [`Timestamp::MAX`]) or an `HTTP-date` (RFC 9110 §5.6.7: IMF-fixdate and the obsolete
/// RFC 850 and asctime forms, as the `httpdate` crate parses them). Surrounding spaces
/// and tabs are ignored. A date in the past gives `now`. Anything else (`abc`, `-1`,
/// `1.5`, empty) gives `None`, so the caller falls back to its backoff.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Timestamp> {
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        let seconds = value.bytes().fold(0u64, |acc, digit| {
            acc.saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'))
        });
        return Some(now.plus_ms(seconds.saturating_mul(1_000)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(from_system_time(at).max(now))
}

/// A `SystemTime` as a [`Timestamp`], clamped to the range the API can express.
fn from_system_time(at: SystemTime) -> Timestamp {
    let ms = match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    };
    Timestamp::from_millis(ms.clamp(Timestamp::MIN.as_millis(), Timestamp::MAX.as_millis()))
}

/// When the attempt after the failed `attempt` (1-based) may start: `now` plus the
/// backoff delay, or the `Retry-After` instant when that is later (docs/DESIGN.md §3, CASES
/// C-05: jitter never makes the next attempt earlier than `Retry-After`).
///
/// The deadline is not applied here: the state machine sends the job `dead` when this
/// instant is not before the deadline (docs/DESIGN.md §2).
pub fn next_attempt_at(
    now: Timestamp,
    attempt: u32,
    backoff: &BackoffPolicy,
    retry_after: Option<Timestamp>,
    jitter: f64,
) -> Timestamp {
    let by_backoff = now.plus_ms(backoff.delay_ms(attempt, jitter));
    retry_after.map_or(by_backoff, |at| by_backoff.max(at))
}

/// What kind of failure an attempt met; recorded as `error_class` on the attempt and in
/// `last_error` (docs/DESIGN.md §3 and the API's attempt history).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
pub enum ErrorClass {
    /// No complete answer within the attempt timeout.
    #[serde(rename = "timeout")]
    Timeout,
    /// The connection (DNS, TCP or TLS) could not be made, a host name gave no
    /// permitted address (docs/DESIGN.md §9), or the connection broke after the request
    /// was sent.
    #[serde(rename = "connect")]
    Connect,
    /// A 3xx answer; redirects are not followed.
    #[serde(rename = "http_3xx")]
    Http3xx,
    /// A 4xx answer other than 429.
    #[serde(rename = "http_4xx")]
    Http4xx,
    /// 429 Too Many Requests.
    #[serde(rename = "http_429")]
    Http429,
    /// A 5xx answer, or a status outside 200–599.
    #[serde(rename = "http_5xx")]
    Http5xx,
    /// The receiver's answer was not valid HTTP (a malformed status line or head):
    /// retryable like a 5xx, a fault of the receiver.
    #[serde(rename = "protocol")]
    Protocol,
    /// The URL's literal address was refused by the SSRF policy before connecting (a
    /// host name that resolves only to refused addresses is a `connect`,
    /// docs/DESIGN.md §9).
    #[serde(rename = "blocked")]
    Blocked,
    /// Nothing was sent: the subscriber's stored signing secret could not be read
    /// (encrypted with another `--secret-key`, or altered). Retryable: the job waits
    /// for an instance with the right key, within its deadline.
    #[serde(rename = "secret_unreadable")]
    SecretUnreadable,
}

wire_names!(ErrorClass, "Every class." {
    Timeout => "timeout",
    Connect => "connect",
    Http3xx => "http_3xx",
    Http4xx => "http_4xx",
    Http429 => "http_429",
    Http5xx => "http_5xx",
    Protocol => "protocol",
    Blocked => "blocked",
    SecretUnreadable => "secret_unreadable",
});

/// What an attempt's outcome means for the job (docs/DESIGN.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The receiver accepted the event (2xx).
    Delivered,
    /// Worth another attempt if one fits before the deadline.
    Retryable(ErrorClass),
    /// The job cannot be delivered; it goes `dead`.
    Terminal(ErrorClass),
}

/// Classifies an HTTP status code (docs/DESIGN.md §3; status semantics from RFC 9110 §15).
///
/// - 200–299: delivered.
/// - 408 Request Timeout (RFC 9110 §15.5.9) and 425 Too Early (RFC 8470 §5.2):
///   retryable, class `http_4xx`; 429 Too Many Requests (RFC 6585 §4): retryable,
///   class `http_429`.
/// - 500–599: retryable, class `http_5xx`.
/// - 300–399: terminal, class `http_3xx` (redirects are not followed).
/// - Other 400–499 (410 Gone included; pausing the subscriber is the caller's job):
///   terminal, class `http_4xx`.
/// - Anything outside 200–599 (1xx as a final answer, 600 and above) is a protocol
///   violation by the receiver; it is treated like a server error: retryable,
///   `http_5xx`, so a misbehaving receiver is bounded by the deadline, not dropped.
pub fn classify_status(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        408 | 425 => Verdict::Retryable(ErrorClass::Http4xx),
        429 => Verdict::Retryable(ErrorClass::Http429),
        300..=399 => Verdict::Terminal(ErrorClass::Http3xx),
        400..=499 => Verdict::Terminal(ErrorClass::Http4xx),
        _ => Verdict::Retryable(ErrorClass::Http5xx),
    }
}

/// True when an answer pauses the subscriber: `410 Gone` (RFC 9110 §15.5.11) says the
/// target is gone for good, so its other jobs wait (deadlines running) until an operator
/// re-enables it, instead of each being sent and dead-lettered in turn (docs/DESIGN.md §3).
pub fn pauses_subscriber(status: u16) -> bool {
    status == 410
}

/// An attempt that got no HTTP answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// The attempt timeout elapsed (connect, response or body read).
    Timeout,
    /// The connection could not be made (DNS, TCP, TLS; a host name with no permitted
    /// address), or broke after the request was sent.
    Connect,
    /// The receiver's answer was not valid HTTP (hyper could not parse its head).
    Protocol,
    /// The URL's literal address was refused before connecting (SSRF policy,
    /// docs/DESIGN.md §9 / CASES C-08).
    Blocked,
}

/// Classifies a failure without an HTTP answer (docs/DESIGN.md §3): timeouts, connection
/// errors and answers that are not valid HTTP are retryable; a blocked target is
/// terminal (`target_rejected`).
pub fn classify_transport(failure: TransportFailure) -> Verdict {
    match failure {
        TransportFailure::Timeout => Verdict::Retryable(ErrorClass::Timeout),
        TransportFailure::Connect => Verdict::Retryable(ErrorClass::Connect),
        TransportFailure::Protocol => Verdict::Retryable(ErrorClass::Protocol),
        TransportFailure::Blocked => Verdict::Terminal(ErrorClass::Blocked),
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
