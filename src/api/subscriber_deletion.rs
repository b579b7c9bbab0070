//! `DELETE /v1/subscribers/{subscriber_id}`: deletes a subscriber (docs/DESIGN.md
//! §5.3). Its waiting jobs end `dead` (`subscriber_deleted`), its history stays
//! readable by job and event id until retention, and its id may be registered again
//! as a new subscriber that inherits nothing of it.

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::problem::{ApiError, Problem};
use crate::domain::Timestamp;
use crate::metrics;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(delete_subscriber))
}

/// What a deletion did.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberDeletedView {
    /// The id of the deleted subscriber, free again for a new one.
    pub deleted: String,
    /// Its waiting jobs (`scheduled`, `retrying`, `in_flight`) now `dead` with reason
    /// `subscriber_deleted`.
    pub jobs_dead: u64,
    /// When it was deleted.
    pub deleted_at: Timestamp,
}

/// Delete a subscriber: in one transaction, its waiting jobs end `dead` with reason
/// `subscriber_deleted` (the late result of an attempt in flight is fenced out), and
/// its jobs and attempts stay readable by job id and event id (no longer under
/// `subscriber_id` filters) until retention purges them. The id may then be
/// registered again (`PUT`) as a new subscriber, with nothing of the old one: not its
/// jobs' idempotency keys, secret, stats, pause or destination.
#[utoipa::path(
    delete,
    path = "/v1/subscribers/{subscriber_id}",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    responses(
        (status = 200, description = "Deleted", body = SubscriberDeletedView),
        (status = 404, description = "No such subscriber; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_subscriber(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SubscriberDeletedView>, ApiError> {
    let deleted = state
        .store
        .delete_subscriber(&id, state.clock.now())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("subscriber `{id}` does not exist")))?;
    metrics::deleted_dead(deleted.jobs_dead);
    tracing::info!(subscriber_id = %id, jobs_dead = deleted.jobs_dead, "subscriber deleted");
    Ok(Json(SubscriberDeletedView {
        deleted: deleted.subscriber_id,
        jobs_dead: deleted.jobs_dead,
        deleted_at: deleted.deleted_at,
    }))
}
