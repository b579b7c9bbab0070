//! What an attempt's answer means: the attempt row to record and the event for the
//! state machine (docs/DESIGN.md §3). Pure: `now` and the jitter are parameters.

use super::sender::{Received, Resent};
use crate::domain::attempt::AttemptOutcome;
use crate::domain::policy::{
    BackoffPolicy, ErrorClass, Verdict, classify_status, classify_transport, next_attempt_at,
    parse_retry_after, redact_excerpt,
};
use crate::domain::{DeadReason, JobEvent, Timestamp};
use crate::store::AttemptResult;

/// Most bytes of a response body kept as `body_excerpt` (docs/DESIGN.md §5).
pub const EXCERPT_BYTES: usize = 1024;

/// The attempt row and the job event for `received`, the answer to attempt number
/// `attempt` at `now`. A `Retry-After` (RFC 9110 §10.2.3) that asks for longer than
/// the backoff wins; the state machine then applies the deadline.
pub fn judge(
    received: &Received,
    attempt: u32,
    now: Timestamp,
    backoff: &BackoffPolicy,
    jitter: f64,
) -> (AttemptResult, JobEvent) {
    match received {
        Received::Response {
            status,
            retry_after,
            body,
        } => {
            let asked = retry_after
                .as_deref()
                .and_then(|value| parse_retry_after(value, now));
            let retry_at = next_attempt_at(now, attempt, backoff, asked, jitter);
            let (outcome, class, event) = meaning(
                classify_status(*status),
                retry_at,
                AttemptOutcome::Terminal,
                DeadReason::NonRetryableResponse,
            );
            let result = AttemptResult {
                outcome,
                status: Some(*status),
                error_class: class,
                reason: class.map(|_| status_reason(*status, retry_after.as_deref(), asked)),
                body_excerpt: (!body.is_empty()).then(|| redact_excerpt(body, EXCERPT_BYTES)),
                resent: false,
            };
            (result, event)
        }
        Received::Failed { failure, reason } => {
            let retry_at = next_attempt_at(now, attempt, backoff, None, jitter);
            let (outcome, class, event) = meaning(
                classify_transport(*failure),
                retry_at,
                AttemptOutcome::Blocked,
                DeadReason::TargetRejected,
            );
            let result = AttemptResult {
                outcome,
                status: None,
                error_class: class,
                reason: Some(reason.clone()),
                body_excerpt: None,
                resent: false,
            };
            (result, event)
        }
    }
}

/// The attempt row and the job event when attempt number `attempt` could not be
/// signed at `now` because the subscriber's stored secret is unreadable (`why` names
/// the subscriber, never the secret): nothing was sent. Retryable, class
/// `secret_unreadable`, with the usual backoff: the key is the operator's to fix (an
/// instance with the right `--secret-key` then delivers the job), and the deadline
/// still bounds the job, so it is not dead-lettered for a configuration fault at once.
pub fn unsigned(
    why: &str,
    attempt: u32,
    now: Timestamp,
    backoff: &BackoffPolicy,
    jitter: f64,
) -> (AttemptResult, JobEvent) {
    let result = AttemptResult {
        outcome: AttemptOutcome::Retryable,
        status: None,
        error_class: Some(ErrorClass::SecretUnreadable),
        reason: Some(format!("not sent: {why}")),
        body_excerpt: None,
        resent: false,
    };
    let retry_at = next_attempt_at(now, attempt, backoff, None, jitter);
    (result, JobEvent::RetryableFailure { retry_at })
}

/// Notes on `result` that its request was sent twice (docs/DESIGN.md §3): the note
/// `resent once on a fresh connection: …` is its reason when it has none (a delivered
/// attempt), else follows it after `; `. Outcome, class and status are those of the
/// second answer, which decided the attempt.
pub fn note_resend(result: &mut AttemptResult, resent: &Resent) {
    result.resent = true;
    result.reason = Some(match result.reason.take() {
        Some(reason) => format!("{reason}; {resent}"),
        None => resent.to_string(),
    });
}

/// The attempt outcome, error class and job event of a verdict; a terminal verdict
/// records `terminal_outcome` and kills the job with `dead_reason`.
fn meaning(
    verdict: Verdict,
    retry_at: Timestamp,
    terminal_outcome: AttemptOutcome,
    dead_reason: DeadReason,
) -> (AttemptOutcome, Option<ErrorClass>, JobEvent) {
    match verdict {
        Verdict::Delivered => (AttemptOutcome::Delivered, None, JobEvent::Delivered),
        Verdict::Retryable(class) => (
            AttemptOutcome::Retryable,
            Some(class),
            JobEvent::RetryableFailure { retry_at },
        ),
        Verdict::Terminal(class) => (
            terminal_outcome,
            Some(class),
            JobEvent::TerminalFailure {
                reason: dead_reason,
            },
        ),
    }
}

/// `HTTP 503 Service Unavailable (Retry-After: 3)`. The header's value is shown only
/// when it was read as a delay or a date (`asked`, RFC 9110 §10.2.3): anything else a
/// receiver puts there is its own text, which may carry a credential (issue #34's
/// second probe), and is named as ignored instead.
fn status_reason(status: u16, retry_after: Option<&str>, asked: Option<Timestamp>) -> String {
    let text = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map_or_else(
            || format!("HTTP {status}"),
            |name| format!("HTTP {status} {name}"),
        );
    match (retry_after, asked) {
        (Some(value), Some(_)) => {
            let value = value.trim_matches([' ', '\t']);
            // Delay-seconds as the number it was read as (`0012` waited 12 s).
            let digits = value.trim_start_matches('0');
            let value = match value.bytes().all(|b| b.is_ascii_digit()) {
                true if digits.is_empty() => "0",
                true => digits,
                false => value,
            };
            let shown = &value[..value.floor_char_boundary(64)];
            format!("{text} (Retry-After: {shown})")
        }
        (Some(_), None) => {
            format!("{text} (Retry-After ignored: neither delay-seconds nor an HTTP-date)")
        }
        (None, _) => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::policy::TransportFailure;

    const NOW: Timestamp = Timestamp::from_millis(1_000_000);
    const BACKOFF: BackoffPolicy = BackoffPolicy {
        base_ms: 200,
        max_ms: 10_000,
    };

    fn response(status: u16, retry_after: Option<&str>, body: &str) -> Received {
        Received::Response {
            status,
            retry_after: retry_after.map(str::to_owned),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_2xx_is_delivered() {
        let (result, event) = judge(&response(204, None, ""), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(event, JobEvent::Delivered);
        assert_eq!(result.outcome, AttemptOutcome::Delivered);
        assert_eq!(result.status, Some(204));
        assert_eq!(result.error_class, None);
        assert_eq!(result.body_excerpt, None);
    }

    #[test]
    fn a_5xx_backs_off_and_keeps_the_body() {
        let (result, event) = judge(&response(500, None, "E42"), 2, NOW, &BACKOFF, 0.0);
        // attempt 2: nominal 400 ms, equal jitter 0 -> 200 ms
        assert_eq!(
            event,
            JobEvent::RetryableFailure {
                retry_at: NOW.plus_ms(200)
            }
        );
        assert_eq!(result.outcome, AttemptOutcome::Retryable);
        assert_eq!(result.error_class, Some(ErrorClass::Http5xx));
        assert_eq!(result.body_excerpt.as_deref(), Some("E42"));
        assert_eq!(
            result.reason.as_deref(),
            Some("HTTP 500 Internal Server Error")
        );
    }

    #[test]
    fn retry_after_wins_when_it_asks_for_longer() {
        let (result, event) = judge(&response(429, Some("3"), ""), 1, NOW, &BACKOFF, 0.99);
        assert_eq!(
            event,
            JobEvent::RetryableFailure {
                retry_at: NOW.plus_ms(3_000)
            }
        );
        assert_eq!(result.error_class, Some(ErrorClass::Http429));
        assert_eq!(
            result.reason.as_deref(),
            Some("HTTP 429 Too Many Requests (Retry-After: 3)")
        );
        // A malformed value falls back to the backoff.
        let (_, event) = judge(&response(429, Some("abc"), ""), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(
            event,
            JobEvent::RetryableFailure {
                retry_at: NOW.plus_ms(100)
            }
        );
    }

    /// Issue #34's second probe: a receiver's `Retry-After` that is not a delay or a
    /// date (a credential, here) is never copied into the reason; a date is.
    #[test]
    fn a_retry_after_that_is_no_delay_or_date_is_not_shown() {
        for value in [
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIJOtmw2Yc",
            "authorization=Bearer SECRETR2",
            "5 sk_live_abcdefghijklmnopqrstuvwx",
        ] {
            let (result, _) = judge(&response(503, Some(value), ""), 1, NOW, &BACKOFF, 0.0);
            assert_eq!(
                result.reason.as_deref(),
                Some(
                    "HTTP 503 Service Unavailable (Retry-After ignored: neither \
                     delay-seconds nor an HTTP-date)"
                ),
                "{value}"
            );
        }
        let padded = format!("{}12", "0".repeat(70));
        let (result, _) = judge(&response(429, Some(&padded), ""), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(
            result.reason.as_deref(),
            Some("HTTP 429 Too Many Requests (Retry-After: 12)")
        );
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        let (result, _) = judge(&response(503, Some(date), ""), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(
            result.reason.as_deref(),
            Some("HTTP 503 Service Unavailable (Retry-After: Sun, 06 Nov 1994 08:49:37 GMT)")
        );
    }

    #[test]
    fn a_3xx_or_4xx_is_terminal() {
        for (status, class) in [(302, ErrorClass::Http3xx), (400, ErrorClass::Http4xx)] {
            let (result, event) = judge(&response(status, None, ""), 1, NOW, &BACKOFF, 0.0);
            assert_eq!(
                event,
                JobEvent::TerminalFailure {
                    reason: DeadReason::NonRetryableResponse
                }
            );
            assert_eq!(result.outcome, AttemptOutcome::Terminal);
            assert_eq!(result.error_class, Some(class));
        }
    }

    #[test]
    fn an_unreadable_secret_is_retryable_and_says_nothing_was_sent() {
        let why = "cannot read the signing secret of subscriber `s`: it does not decrypt";
        let (result, event) = unsigned(why, 1, NOW, &BACKOFF, 0.0);
        assert_eq!(result.outcome, AttemptOutcome::Retryable);
        assert_eq!(result.error_class, Some(ErrorClass::SecretUnreadable));
        assert_eq!(result.status, None);
        assert_eq!(result.reason.as_deref(), Some(&*format!("not sent: {why}")));
        // The same backoff as any retryable failure.
        let (_, expected) = judge(&response(503, None, ""), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(event, expected);
    }

    #[test]
    fn a_resend_is_noted_after_the_reason_of_the_answer_that_decided() {
        let resent = Resent {
            first_failure: "connection closed before message completed".into(),
        };
        let note = "resent once on a fresh connection: the first closed before an answer \
                    (connection closed before message completed)";
        let (mut delivered, _) = judge(&response(200, None, ""), 1, NOW, &BACKOFF, 0.0);
        note_resend(&mut delivered, &resent);
        assert_eq!(delivered.outcome, AttemptOutcome::Delivered);
        assert_eq!(delivered.error_class, None);
        assert_eq!(delivered.reason.as_deref(), Some(note));
        let (mut failed, _) = judge(&response(503, None, ""), 1, NOW, &BACKOFF, 0.0);
        note_resend(&mut failed, &resent);
        assert_eq!(failed.error_class, Some(ErrorClass::Http5xx));
        assert_eq!(
            failed.reason.as_deref(),
            Some(&*format!("HTTP 503 Service Unavailable; {note}"))
        );
    }

    #[test]
    fn transport_failures() {
        let failed = |failure| Received::Failed {
            failure,
            reason: "x".into(),
        };
        let (result, event) = judge(&failed(TransportFailure::Timeout), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(result.error_class, Some(ErrorClass::Timeout));
        assert!(matches!(event, JobEvent::RetryableFailure { .. }));
        let (result, _) = judge(&failed(TransportFailure::Connect), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(result.error_class, Some(ErrorClass::Connect));
        // An answer that is not HTTP backs off as a 5xx does.
        let (result, event) = judge(&failed(TransportFailure::Protocol), 2, NOW, &BACKOFF, 0.0);
        assert_eq!(result.outcome, AttemptOutcome::Retryable);
        assert_eq!(result.error_class, Some(ErrorClass::Protocol));
        let (_, as_5xx) = judge(&response(503, None, ""), 2, NOW, &BACKOFF, 0.0);
        assert_eq!(event, as_5xx);
        let (result, event) = judge(&failed(TransportFailure::Blocked), 1, NOW, &BACKOFF, 0.0);
        assert_eq!(result.outcome, AttemptOutcome::Blocked);
        assert_eq!(
            event,
            JobEvent::TerminalFailure {
                reason: DeadReason::TargetRejected
            }
        );
    }
}
