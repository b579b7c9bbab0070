//! The routes of the operator actions on a waiting job ([`crate::app::job_control`]):
//! cancel it, move a scheduled one, or bring a retrying one forward (docs/DESIGN.md §5).

use axum::Json;
use axum::extract::{Path, State};

use super::AppState;
use super::extract::AppJson;
use super::problem::{AppError, Problem};
use crate::app::job_control::{self, RescheduleRequest};
use crate::app::views::JobView;

/// Cancel a `scheduled` or `retrying` job.
#[utoipa::path(
    post,
    path = "/v1/jobs/{job_id}/cancel",
    tag = "jobs",
    params(("job_id" = Uuid, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Cancelled", body = JobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "In flight or already finished", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn cancel_job(
    State(state): State<AppState>,
    Path(raw_id): Path<String>,
) -> Result<Json<JobView>, AppError> {
    job_control::cancel(&state, &raw_id).await.map(Json)
}

/// Retry a `retrying` job now.
///
/// It becomes due at once instead of at its `next_attempt_at` (its deadline, attempts and max_attempts are unchanged). A job whose
/// lease expired reads `retrying` and can be retried; the write ends that lease, as a
/// cancel does. 409 when the job is not `retrying`, when its deadline has passed (the
/// sweep makes it dead), or when it has used all of its attempts.
#[utoipa::path(
    post,
    path = "/v1/jobs/{job_id}/retry",
    tag = "jobs",
    params(("job_id" = Uuid, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Due now", body = JobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not retrying, past its deadline or out of attempts", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn retry_job(
    State(state): State<AppState>,
    Path(raw_id): Path<String>,
) -> Result<Json<JobView>, AppError> {
    job_control::retry(&state, &raw_id).await.map(Json)
}

/// Move a `scheduled` job: new `deliver_at` and/or `deadline`.
#[utoipa::path(
    patch,
    path = "/v1/jobs/{job_id}",
    tag = "jobs",
    params(("job_id" = Uuid, Path, description = "The job's id")),
    request_body = RescheduleRequest,
    responses(
        (status = 200, description = "Rescheduled", body = JobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not scheduled (in flight, retrying or finished)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn reschedule_job(
    State(state): State<AppState>,
    Path(raw_id): Path<String>,
    AppJson(request): AppJson<RescheduleRequest>,
) -> Result<Json<JobView>, AppError> {
    job_control::reschedule(&state, &raw_id, request)
        .await
        .map(Json)
}
