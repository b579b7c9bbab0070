//! `DELETE /v1/subscribers/{subscriber_id}`: deletes a subscriber
//! ([`crate::app::subscriber_deletion`], docs/DESIGN.md §5.3); a long history goes on
//! moving after the answer, in batches, out of reach of the request timeout.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Committed;
use super::problem::{AppError, Problem};
use crate::app::subscriber_deletion::{self, SubscriberDeletedView};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(delete_subscriber))
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
    // Audited once the first step commits, before the wait (issue #34 part 1).
    let settle = || {
        if let Some(Extension(committed)) = committed {
            committed.now(StatusCode::OK);
        }
    };
    subscriber_deletion::delete(&state, &id, settle)
        .await
        .map(Json)
}
