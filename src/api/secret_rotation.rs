//! `POST /v1/subscribers/{subscriber_id}/secret/rotate`: a new signing secret, shown
//! once, while the replaced one keeps signing alongside for a grace period (docs/DESIGN.md §4,
//! §5; Standard Webhooks: receivers accept any one of the space-separated signatures).

use axum::Json;
use axum::extract::{Path, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::AppJson;
use super::problem::{AppError, Problem};
use crate::app::secrets::{self, RotateSecretRequest, SecretRotatedView};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(rotate_secret))
}

/// Rotate a subscriber's signing secret.
///
/// The new secret signs every request from now on; the replaced one keeps signing
/// alongside (one `v1,<signature>` each in `webhook-signature`, new first) until
/// `previous_secret_expires_at`, so receivers can switch without rejecting a request.
#[utoipa::path(
    post,
    path = "/v1/subscribers/{subscriber_id}/secret/rotate",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    request_body = RotateSecretRequest,
    responses(
        (status = 200, description = "Rotated; the only response that shows the new `secret`", body = SecretRotatedView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscriber", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field (`grace_seconds`, `secret`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn rotate_secret(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<RotateSecretRequest>,
) -> Result<Json<SecretRotatedView>, AppError> {
    secrets::rotate(&state, &id, body).await.map(Json)
}
