//! A subscriber's `health` as every subscriber view shows it (docs/DESIGN.md §5.3),
//! and the reads that attach it to the subscribers a handler answers with.

use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::views::SubscriberView;
use crate::domain::Timestamp;
use crate::domain::health::HealthStatus;
use crate::domain::policy::ErrorClass;
use crate::domain::retry_advice::{self, RetryAdvice};
use crate::store::{AttemptFailure, PausedReason, Subscriber, SubscriberHealth};

/// A subscriber's health at the instant read.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// `paused`: not enabled; `failing`: its last attempt failed (an `unknown` outcome
    /// after a crash does not count) or some of its jobs are `retrying`; `healthy`
    /// otherwise.
    pub status: HealthStatus,
    /// When it entered that status: paused, its `paused_at`; failing, its first failed
    /// attempt after its latest success (its latest failure when its last attempt
    /// succeeded but jobs still retry); healthy, its latest success. `null` when
    /// unknown (no attempt yet).
    pub since: Option<Timestamp>,
    /// Its latest failed attempt (outcome `retryable`, `terminal` or `blocked`),
    /// whatever its status; `null` when none failed.
    pub last_error: Option<HealthErrorView>,
    /// Its non-terminal jobs, as read (an expired lease counts as `retrying`).
    pub jobs: HealthJobsView,
    /// Its jobs that became `dead` in the last hour: (now − 1 h, now].
    pub dead_last_hour: u64,
    /// `jobs.retrying + dead_last_hour`: the order of `GET /v1/subscribers?health=`.
    pub failing_jobs: u64,
    /// Why it is paused: `gone` (its receiver answered 410), `operator`; `null` while
    /// enabled.
    #[schema(value_type = Option<String>, example = "gone")]
    pub paused_reason: Option<&'static str>,
    /// When it was paused; `null` while enabled.
    pub paused_at: Option<Timestamp>,
    /// Whether a retry now can change the outcome, and why (docs/DESIGN.md §5.9);
    /// `null` while healthy.
    pub retry_advice: Option<RetryAdvice>,
}

/// A subscriber's latest failed attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthErrorView {
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `protocol`,
    /// `blocked` or `secret_unreadable`.
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
    /// When its result was recorded.
    pub at: Timestamp,
}

impl From<AttemptFailure> for HealthErrorView {
    fn from(f: AttemptFailure) -> Self {
        HealthErrorView {
            class: f.class,
            status: f.status,
            reason: f.reason,
            at: f.at,
        }
    }
}

/// A subscriber's non-terminal jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthJobsView {
    /// Waiting for `deliver_at` (or due, waiting for a worker).
    pub scheduled: u64,
    /// An attempt is running (its lease holds).
    pub in_flight: u64,
    /// Waiting for `next_attempt_at` after a failure, or an expired lease.
    pub retrying: u64,
}

impl From<&SubscriberHealth> for HealthView {
    fn from(entry: &SubscriberHealth) -> Self {
        let health = entry.health();
        let figures = &entry.figures;
        let retry_advice = match health.status {
            HealthStatus::Healthy => None,
            HealthStatus::Failing | HealthStatus::Paused => {
                retry_advice::for_subscriber(&entry.advice_facts())
            }
        };
        HealthView {
            status: health.status,
            since: health.since,
            last_error: figures.last_failure.clone().map(HealthErrorView::from),
            jobs: HealthJobsView {
                scheduled: figures.scheduled,
                in_flight: figures.in_flight,
                retrying: figures.retrying,
            },
            dead_last_hour: figures.dead_last_hour,
            failing_jobs: figures.failing_jobs(),
            paused_reason: entry.subscriber.paused_reason.map(PausedReason::as_str),
            paused_at: entry.subscriber.paused_at,
            retry_advice,
        }
    }
}

/// The view of `entry`, with its health.
pub fn view(entry: SubscriberHealth) -> SubscriberView {
    let health = HealthView::from(&entry);
    SubscriberView::new(entry.subscriber, health)
}

/// The views of `subscribers` with their health read at `now`, in the same order.
pub async fn views(
    state: &AppState,
    subscribers: Vec<Subscriber>,
    now: Timestamp,
) -> Result<Vec<SubscriberView>, AppError> {
    let ids: Vec<String> = subscribers.iter().map(|s| s.id.clone()).collect();
    let mut figures = state.store.subscriber_health(&ids, now).await?;
    Ok(subscribers
        .into_iter()
        .map(|subscriber| {
            // A subscriber deleted between the two reads shows no jobs and no attempts.
            let figures = figures.remove(&subscriber.id).unwrap_or_default();
            view(SubscriberHealth {
                subscriber,
                figures,
            })
        })
        .collect())
}

/// The view of `subscriber`, just written (created, replaced, changed): when its health
/// cannot be read (the store unavailable a moment after the write), the view with no
/// figures, a warning logged. The write has been committed, so the answer must not be a
/// 503, which says that nothing was (CASES C-19; issue #34's second probe found a
/// created subscriber whose generated secret was lost that way).
pub async fn written_view(state: &AppState, subscriber: Subscriber) -> SubscriberView {
    match view_now(state, subscriber.clone()).await {
        Ok(view) => view,
        Err(error) => {
            tracing::warn!(subscriber_id = %subscriber.id, %error,
                "the subscriber is stored; its health could not be read for its view");
            view(SubscriberHealth {
                subscriber,
                figures: Default::default(),
            })
        }
    }
}

/// The view of `subscriber` with its health read now.
pub async fn view_now(
    state: &AppState,
    subscriber: Subscriber,
) -> Result<SubscriberView, AppError> {
    let now = state.clock.now();
    let mut views = views(state, vec![subscriber], now).await?;
    views
        .pop()
        .ok_or_else(|| AppError::Internal("a subscriber view went missing".into()))
}
