//! `GET /v1/subscribers/{subscriber_id}/stats`: what an operator on call wants to know
//! of one receiver: its jobs per state, how long its oldest due job has waited, and its
//! last success and last failure.

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::problem::{AppError, Problem};
use crate::app::views::JobCountsView;
use crate::domain::Timestamp;
use crate::domain::policy::ErrorClass;
use crate::store::{AttemptFailure, SubscriberStats};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_subscriber_stats))
}

/// The latest failed attempt (outcome `retryable`, `terminal` or `blocked`).
#[derive(Debug, Serialize, ToSchema)]
pub struct LastFailureView {
    /// When its result was recorded.
    pub at: Timestamp,
    /// `timeout`, `connect`, `http_3xx`, `http_4xx`, `http_429`, `http_5xx`, `protocol`,
    /// `blocked` or `secret_unreadable`.
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// A short account of the failure.
    pub reason: Option<String>,
}

impl From<AttemptFailure> for LastFailureView {
    fn from(f: AttemptFailure) -> Self {
        LastFailureView {
            at: f.at,
            class: f.class,
            status: f.status,
            reason: f.reason,
        }
    }
}

/// One subscriber's delivery figures, read at one instant.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberStatsView {
    /// The subscriber.
    pub subscriber_id: String,
    /// Its jobs per state.
    pub jobs: JobCountsView,
    /// Milliseconds since the oldest of its `scheduled`/`retrying` jobs became due
    /// (`deliver_at` or `next_attempt_at`); `null` when none is due. Counted whether or
    /// not the subscriber is paused.
    pub oldest_eligible_age_ms: Option<u64>,
    /// When its latest delivered attempt finished; `null` when none did.
    pub last_success_at: Option<Timestamp>,
    /// Its latest failed attempt; `null` when none failed.
    pub last_failure: Option<LastFailureView>,
}

impl SubscriberStatsView {
    /// The view of subscriber `id`'s `stats`, read at `now`.
    pub fn new(id: String, stats: SubscriberStats, now: Timestamp) -> Self {
        SubscriberStatsView {
            subscriber_id: id,
            jobs: stats.jobs.into(),
            oldest_eligible_age_ms: stats
                .oldest_eligible_since
                .map(|since| u64::try_from(now.millis_since(since)).unwrap_or(0)),
            last_success_at: stats.last_success_at,
            last_failure: stats.last_failure.map(LastFailureView::from),
        }
    }
}

/// Read a subscriber's delivery figures.
#[utoipa::path(
    get,
    path = "/v1/subscribers/{subscriber_id}/stats",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    responses(
        (status = 200, description = "Its figures now", body = SubscriberStatsView),
        (status = 404, description = "No such subscriber", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_subscriber_stats(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SubscriberStatsView>, AppError> {
    let now = state.clock.now();
    let stats = state
        .store
        .subscriber_stats(&id, now)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    Ok(Json(SubscriberStatsView::new(id, stats, now)))
}
