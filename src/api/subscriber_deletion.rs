//! `DELETE /v1/subscribers/{subscriber_id}`: deletes a subscriber (docs/DESIGN.md
//! §5.3). Its waiting jobs end `dead` (`subscriber_deleted`), its history stays
//! readable by job and event id until retention, and its id may be registered again
//! as a new subscriber that inherits nothing of it.
//!
//! The request commits the first, short step of the deletion, then moves the history
//! in a task of its own ([`crate::delivery::deletions`]), waiting for it at most
//! [`wait`]: a long history goes on moving after the answer, in batches, out of reach
//! of the request timeout.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Committed;
use super::problem::{AppError, Problem};
use crate::delivery::deletions;
use crate::domain::Timestamp;
use crate::metrics;

/// The longest a deletion's answer waits for its history to move.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// How long a deletion's answer waits for its history to move when requests time out
/// after `request_timeout`: half of it, at most [`MAX_WAIT`].
pub fn wait(request_timeout: Duration) -> Duration {
    (request_timeout / 2).min(MAX_WAIT)
}

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

/// Delete a subscriber: in one short transaction, its waiting jobs end `dead` with
/// reason `subscriber_deleted` (the late result of an attempt in flight is fenced out)
/// and it is gone for every read, change and claim; then its jobs and attempts move,
/// in batches, to a tombstone where they stay readable by job id and event id (no
/// longer under `subscriber_id` filters) until retention purges them. The answer waits
/// for the move at most half the request timeout (5 s at most); a longer one goes on
/// after it, and until it ends a `PUT` of the id answers 409. The id may then be
/// registered again (`PUT`) as a new subscriber, with nothing of the old one: not its
/// jobs' idempotency keys, secret, stats, pause or destination.
#[utoipa::path(
    delete,
    path = "/v1/subscribers/{subscriber_id}",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    responses(
        (status = 200, description = "Deleted", body = SubscriberDeletedView),
        (status = 404, description = "No such subscriber (or already being deleted); nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_subscriber(
    State(state): State<AppState>,
    committed: Option<Extension<Committed>>,
    Path(id): Path<String>,
) -> Result<Json<SubscriberDeletedView>, AppError> {
    let deleted = state
        .store
        .begin_subscriber_deletion(&id, state.clock.now())
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    // Audited now, before the wait below (issue #34 part 1).
    if let Some(Extension(committed)) = committed {
        committed.now(StatusCode::OK);
    }
    metrics::deleted_dead(deleted.jobs_dead);
    tracing::info!(subscriber_id = %id, jobs_dead = deleted.jobs_dead, "subscriber deleted");
    // The move runs in its own task: neither the request timeout nor a client that
    // goes away cancels it. Waiting a moment lets a short history be gone (and the id
    // free) when the answer comes.
    let moving = deletions::spawn(state.store.clone(), id.clone());
    if tokio::time::timeout(state.deletion_wait, moving)
        .await
        .is_err()
    {
        tracing::info!(subscriber_id = %id, "the deleted subscriber's history is still moving");
    }
    Ok(Json(SubscriberDeletedView {
        deleted: deleted.subscriber_id,
        jobs_dead: deleted.jobs_dead,
        deleted_at: deleted.deleted_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_waits_half_the_request_timeout_and_five_seconds_at_most() {
        assert_eq!(wait(Duration::from_secs(30)), Duration::from_secs(5));
        assert_eq!(wait(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(wait(Duration::from_millis(1)), Duration::from_micros(500));
    }
}
