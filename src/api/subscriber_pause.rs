//! `POST /v1/subscribers/pause`: pause many subscribers at once (reason `operator`),
//! named or matched by a filter — the inverse of `POST /v1/subscribers/resume`, audited
//! as `subscriber.pause` (docs/DESIGN.md §5.3, issue #33). During an incident on a
//! shared host: pause every subscriber whose receiver times out, in one call, and
//! resume them later by the ids the answer lists.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::AppJson;
use super::problem::{AppError, Problem};
use crate::app::subscriber_pause::{self, PauseSubscribersRequest, PausedSubscribers};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(pause_subscribers))
}

/// Pause subscribers (reason `operator`), all or nothing, in one transaction.
#[utoipa::path(
    post,
    path = "/v1/subscribers/pause",
    tag = "subscribers",
    request_body = PauseSubscribersRequest,
    responses(
        (status = 200, description = "How many enabled subscribers it paused, and which it selected", body = PausedSubscribers),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "An id is not registered (the first one named); nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field, not exactly one selector (`body`), or a filter matching more than 10,000 (`health`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn pause_subscribers(
    State(state): State<AppState>,
    AppJson(body): AppJson<PauseSubscribersRequest>,
) -> Result<Json<PausedSubscribers>, AppError> {
    subscriber_pause::pause(&state, body).await.map(Json)
}
