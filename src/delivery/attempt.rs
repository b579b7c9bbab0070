//! The execute step of one claimed job: hold its lease, send it while the lease is
//! renewed, and judge the answer into the outcome to record (docs/DESIGN.md §3). Recording it
//! is the complete step ([`super::complete`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::held_leases::HeldLeases;
use super::outcome::{judge, note_resend, unsigned};
use super::sender::{Outgoing, Received, Sender, Sent};
use super::settings::DeliverySettings;
use crate::domain::attempt::AttemptOutcome;
use crate::domain::job::{Transition, transition};
use crate::domain::policy::TransportFailure;
use crate::domain::policy::{parse_retry_after, pauses_subscriber};
use crate::domain::{Clock, JobEvent};
use crate::metrics;
use crate::store::{AttemptResult, ClaimedJob, LeaseRef, OutcomeRecord, SharedWorkerStore};

/// What an attempt needs from its worker.
#[derive(Debug, Clone)]
pub struct AttemptContext {
    /// The store.
    pub store: SharedWorkerStore,
    /// The source of `now`.
    pub clock: Arc<dyn Clock>,
    /// The HTTP sender.
    pub sender: Sender,
    /// The worker's settings.
    pub settings: Arc<DeliverySettings>,
    /// The leases being renewed.
    pub leases: HeldLeases,
}

/// An attempt that has been sent and judged: the outcome to record, fenced by the
/// lease token it carries. Its lease is still held (see [`HeldLeases`]) until the
/// complete step records it.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The job's event id, for the log.
    pub event_id: String,
    /// The job's subscriber, for the log.
    pub subscriber_id: String,
    /// The attempt row and the job's transition, fenced by `record.lease`.
    pub record: OutcomeRecord,
}

/// Why an attempt stopped without an answer.
enum Interrupted {
    /// Another worker took the lease, or it expired unrenewed.
    LeaseLost,
    /// Shutdown's grace period ended.
    Shutdown,
    /// The subscriber's secret could not be read, so nothing was sent (the message
    /// names the subscriber, never the secret or the key).
    Unsigned(String),
}

/// How long before its lease expires an unrenewed attempt stops: a tenth of the lease,
/// 10 ms to 1 s, room for clock differences between instances.
pub fn lease_margin_ms(lease_ms: u64) -> u64 {
    (lease_ms / 10).clamp(10, 1_000)
}

/// The attempt timeout of a job whose subscriber has `own` (else the worker's
/// `default`): its own is checked against the lease when set, and a server started
/// since with a shorter `--lease-ms` (`lease_ms`) still never lets an attempt outlive
/// its lease, less the margin an unrenewed attempt stops before it (CASES C-01).
fn timeout_of(own: Option<Duration>, default: Duration, lease_ms: u64) -> Duration {
    let cap = Duration::from_millis(lease_ms.saturating_sub(lease_margin_ms(lease_ms)));
    own.map_or(default, |own| own.min(cap))
}

/// How long one attempt may take: the attempt timeout, or the time left to the
/// deadline when shorter (`to_deadline_ms` = deadline − now, in ms); `None` when the
/// deadline has come, so nothing may be sent (docs/DESIGN.md §3, "Timeouts").
fn time_budget(to_deadline_ms: i64, attempt_timeout: Duration) -> Option<Duration> {
    let left = u64::try_from(to_deadline_ms).ok().filter(|&ms| ms > 0)?;
    Some(attempt_timeout.min(Duration::from_millis(left)))
}

/// Sends `job` and judges the answer at the clock's `now`. `hard_stop` is cancelled
/// when the shutdown grace period is over: the request is dropped and the outcome is
/// unknown (never a terminal state, CASES C-02). `None` only when the state machine has
/// no transition for the answer (cannot happen for a job claimed `in_flight`): the
/// lease is then left to expire.
pub async fn execute(
    ctx: &AttemptContext,
    job: ClaimedJob,
    hard_stop: &CancellationToken,
) -> Option<Executed> {
    let lease = LeaseRef {
        job_id: job.job_id,
        token: job.lease_token,
    };
    let lost = ctx.leases.hold(lease, job.lease_expires_at);
    let started = Instant::now();
    let now = ctx.clock.now();
    metrics::claimed(
        now.millis_since(job.due_since) as f64 / 1000.0,
        job.possible_duplicate,
        job.reclaimed_expired_lease,
    );
    // The subscriber's own timeout, when it has one (checked against the lease when
    // set, docs/DESIGN.md §3), else the worker's.
    let attempt_timeout = timeout_of(
        job.attempt_timeout,
        ctx.settings.attempt_timeout,
        ctx.settings.lease_ms,
    );
    let budget = time_budget(job.snapshot.deadline.millis_since(now), attempt_timeout);
    let answer = match (&job.secrets, budget) {
        // Claimed before its deadline but started at or after it (a stalled process, a
        // slow store): nothing may leave now (issue #17's soak saw such a request
        // reach its receiver 1.3 s late). No answer within no time: a timeout, which
        // the state machine turns into `dead` (`deadline_exceeded`).
        (Ok(_), None) => Ok(Sent {
            received: Received::Failed {
                failure: TransportFailure::Timeout,
                reason: "the deadline passed before the request could leave; nothing was sent"
                    .to_owned(),
            },
            resent: None,
        }),
        (Ok(secrets), Some(timeout)) => {
            // Signed now: the previous secret of a rotation signs too until its grace
            // period ends (docs/DESIGN.md §4).
            let secrets = secrets.active_at(now);
            let outgoing = Outgoing {
                url: &job.url,
                event_id: &job.event_id,
                event_type: job.event_type.as_deref(),
                payload: &job.payload,
                secrets: &secrets,
                timestamp_s: now.as_unix_seconds(),
                timeout,
            };
            let margin = lease_margin_ms(ctx.settings.lease_ms);
            let long = note_when_long(ctx, lease, timeout);
            tokio::select! {
                received = ctx.sender.send(&outgoing) => Ok(received),
                never = long => match never {},
                () = lost.cancelled() => Err(Interrupted::LeaseLost),
                () = ctx.leases.until_expiry(job.job_id, ctx.clock.as_ref(), margin) => {
                    tracing::warn!(job_id = %job.job_id,
                        "the lease is about to expire unrenewed; abandoning the attempt");
                    Err(Interrupted::LeaseLost)
                }
                () = hard_stop.cancelled() => Err(Interrupted::Shutdown),
            }
        }
        (Err(unreadable), _) => {
            tracing::error!(job_id = %job.job_id, subscriber_id = %job.subscriber_id,
                error = %unreadable, "cannot sign the attempt; nothing was sent");
            Err(Interrupted::Unsigned(unreadable.to_string()))
        }
    };
    ctx.leases.recording(job.job_id);
    let finished_at = ctx.clock.now();
    let (result, event) = match &answer {
        Ok(sent) => {
            let (mut result, event) = judge(
                &sent.received,
                job.attempt,
                finished_at,
                &ctx.settings.backoff,
                rand::random::<f64>(),
            );
            if let Some(resent) = &sent.resent {
                note_resend(&mut result, resent);
                metrics::resent();
            }
            (result, event)
        }
        Err(Interrupted::LeaseLost) => unknown("the lease was lost while the attempt was open"),
        Err(Interrupted::Shutdown) => unknown("interrupted by shutdown; outcome unknown"),
        Err(Interrupted::Unsigned(why)) => unsigned(
            why,
            job.attempt,
            finished_at,
            &ctx.settings.backoff,
            rand::random::<f64>(),
        ),
    };
    if let Ok(Sent {
        received: Received::Response { status, .. },
        ..
    }) = &answer
    {
        tracing::info!(job_id = %job.job_id, subscriber_id = %job.subscriber_id,
            event_id = job.event_id.as_str(), attempt = job.attempt, status, outcome = %result.outcome,
            "attempt finished");
    } else {
        tracing::info!(job_id = %job.job_id, subscriber_id = %job.subscriber_id,
            event_id = job.event_id.as_str(), attempt = job.attempt, outcome = %result.outcome, reason = result.reason.as_deref().unwrap_or(""),
            "attempt finished");
    }
    metrics::attempt_finished(
        result.outcome,
        result.error_class,
        started.elapsed().as_secs_f64(),
    );
    let transition = match transition(&job.snapshot, event, finished_at) {
        // After a resend the receiver may have had the first request: a next attempt
        // (or a replay) is a possible duplicate, as after an attempt of unknown outcome.
        Ok(transition) if result.resent => Transition {
            possible_duplicate: true,
            ..transition
        },
        Ok(transition) => transition,
        Err(error) => {
            // Cannot happen for a job claimed in_flight; keep the lease to expire.
            tracing::error!(job_id = %job.job_id, %error, "no transition for the attempt");
            ctx.leases.release(job.job_id);
            return None;
        }
    };
    let pause_subscriber = matches!(&answer,
        Ok(Sent { received: Received::Response { status, .. }, .. })
            if pauses_subscriber(*status));
    if pause_subscriber {
        tracing::warn!(subscriber_id = %job.subscriber_id,
            "the receiver answered 410 Gone; pausing the subscriber");
    }
    let retry_after = match &answer {
        Ok(Sent {
            received: Received::Response { retry_after, .. },
            ..
        }) => retry_after
            .as_deref()
            .and_then(|value| parse_retry_after(value, finished_at)),
        _ => None,
    };
    Some(Executed {
        event_id: job.event_id,
        subscriber_id: job.subscriber_id.to_string(),
        record: OutcomeRecord {
            lease,
            subscriber_id: job.subscriber_id,
            attempt: job.attempt,
            started_at: now,
            finished_at,
            attempt_timeout_ms: u64::try_from(attempt_timeout.as_millis()).unwrap_or(u64::MAX),
            result,
            retry_after,
            transition,
            pause_subscriber,
        },
    })
}

/// Once the attempt has been open for `--long-attempt-ms` (when its `timeout` lets it
/// last that long), notes its subscriber's endpoint as long-running in the store, in a
/// task of its own so the attempt never waits on the write; then waits forever (the
/// attempt's other branches end it). The evidence comes from here, not from the claim:
/// the time from claim to a recorded outcome includes the outcome's commit, which under
/// load made quick endpoints look long-running (docs/DESIGN.md §15.2).
async fn note_when_long(
    ctx: &AttemptContext,
    lease: LeaseRef,
    timeout: Duration,
) -> std::convert::Infallible {
    let after = ctx.settings.long_attempt;
    if timeout > after {
        tokio::time::sleep(after).await;
        let store = ctx.store.clone();
        let now = ctx.clock.now();
        tokio::spawn(async move {
            if let Err(error) = store.note_long_attempt(lease, now).await {
                tracing::warn!(job_id = %lease.job_id, %error,
                    "cannot mark the endpoint long-running; its next result will");
            }
        });
    }
    std::future::pending().await
}

fn unknown(reason: &str) -> (AttemptResult, JobEvent) {
    let result = AttemptResult {
        outcome: AttemptOutcome::Unknown,
        status: None,
        error_class: None,
        reason: Some(reason.to_owned()),
        body_excerpt: None,
        resent: false,
    };
    (result, JobEvent::Released)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscribers_own_timeout_never_outlives_the_lease() {
        let ms = Duration::from_millis;
        // The worker's own when the subscriber has none.
        assert_eq!(timeout_of(None, ms(10_000), 30_000), ms(10_000));
        assert_eq!(timeout_of(Some(ms(20_000)), ms(10_000), 30_000), ms(20_000));
        // Set to 29 s under a 30 s lease, the server restarted with a 10 s one: 9 s.
        assert_eq!(timeout_of(Some(ms(29_000)), ms(5_000), 10_000), ms(9_000));
    }

    #[test]
    fn an_attempt_gets_the_time_left_to_its_deadline_and_none_once_it_has_come() {
        let timeout = Duration::from_secs(10);
        assert_eq!(time_budget(60_000, timeout), Some(timeout));
        assert_eq!(time_budget(5, timeout), Some(Duration::from_millis(5)));
        assert_eq!(time_budget(1, timeout), Some(Duration::from_millis(1)));
        // Before this rule the request left with a 1 ms limit and could still reach
        // its receiver after the deadline.
        assert_eq!(time_budget(0, timeout), None);
        assert_eq!(time_budget(-1_270, timeout), None);
        assert_eq!(time_budget(i64::MIN, timeout), None);
    }
}
