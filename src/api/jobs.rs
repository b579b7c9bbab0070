//! `/v1/jobs`: schedule a job, read it, list jobs, read its attempt history.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::job_filter::{ListJobsQuery, job_filter};
use super::job_input::{self, CreateJobRequest};
use super::problem::{AppError, Problem};
use crate::app::job_views::{job_id, job_view, job_views, written_job_view};
use crate::app::pagination::{self, Listing, Page};
use crate::app::views::{AttemptView, JobView};

use crate::domain::ids::new_id;
use crate::store::{CreateOutcome, PageRequest};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job, super::job_control::reschedule_job))
        .routes(routes!(super::job_control::cancel_job))
        .routes(routes!(super::job_control::retry_job))
        .routes(routes!(list_attempts))
}

/// Schedule a job. Idempotent on (subscriber_id, event_id): repeating it with the same
/// payload (compared as JSON values) answers 200 with the job already stored, whatever
/// its scheduling fields; with a different payload, 409.
#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    request_body = CreateJobRequest,
    responses(
        (status = 201, description = "Scheduled", body = JobView),
        (status = 200, description = "The same job already exists", body = JobView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown subscriber", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Same (subscriber_id, event_id), different payload", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Payload over --max-payload-bytes", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; nothing stored, retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_job(
    State(state): State<AppState>,
    AppJson(request): AppJson<CreateJobRequest>,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    let new = job_input::new_job(request, new_id(now), now, state.job_limits)?;
    let outcome = state
        .store
        .create_jobs(vec![new])
        .await?
        .pop()
        .ok_or_else(|| AppError::Internal("create_jobs returned no outcome".into()))?;
    match outcome {
        CreateOutcome::Created(job) => {
            crate::metrics::jobs_accepted(1);
            let location = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id))
                .map_err(|e| AppError::Internal(e.to_string()))?;
            let view = written_job_view(&state, job, now).await;
            let mut response = (StatusCode::CREATED, Json(view)).into_response();
            response.headers_mut().insert(header::LOCATION, location);
            Ok(response)
        }
        CreateOutcome::Existing { job, .. } => {
            let view = written_job_view(&state, job, now).await;
            Ok((StatusCode::OK, Json(view)).into_response())
        }
    }
}

/// Read a job.
#[utoipa::path(
    get,
    path = "/v1/jobs/{job_id}",
    tag = "jobs",
    params(("job_id" = Uuid, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_job(
    State(state): State<AppState>,
    Path(raw_id): Path<String>,
) -> Result<Json<JobView>, AppError> {
    let id = job_id(&raw_id)?;
    let now = state.clock.now();
    let job = state
        .store
        .get_job(id, now)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("job {id} does not exist")))?;
    Ok(Json(job_view(&state, job, now).await?))
}

/// List jobs, newest first.
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "One page of jobs", body = Page<JobView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_jobs(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListJobsQuery>,
) -> Result<Json<Page<JobView>>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = state
        .cursors
        .decode(Listing::Jobs, query.cursor.as_deref(), |k| {
            Uuid::parse_str(k).ok()
        })?;
    let filter = job_filter(&query)?;
    let now = state.clock.now();
    let fetched = state
        .store
        .list_jobs(
            &filter,
            PageRequest {
                after,
                limit: limit + 1,
            },
            now,
        )
        .await?;
    let (jobs, next_cursor) = state
        .cursors
        .split(Listing::Jobs, fetched, limit, |job| job.id.to_string());
    Ok(Json(Page {
        items: job_views(&state, jobs, now).await?,
        next_cursor,
    }))
}

/// A job's attempt history, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptList {
    /// The attempts.
    pub items: Vec<AttemptView>,
}

/// Read a job's attempt history.
#[utoipa::path(
    get,
    path = "/v1/jobs/{job_id}/attempts",
    tag = "jobs",
    params(("job_id" = Uuid, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Its attempts, oldest first", body = AttemptList),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_attempts(
    State(state): State<AppState>,
    Path(raw_id): Path<String>,
) -> Result<Json<AttemptList>, AppError> {
    let id = job_id(&raw_id)?;
    let now = state.clock.now();
    if state.store.get_job(id, now).await?.is_none() {
        return Err(AppError::NotFound(format!("job {id} does not exist")));
    }
    let attempts = state.store.list_attempts(id, now).await?;
    Ok(Json(AttemptList {
        items: attempts.into_iter().map(AttemptView::from).collect(),
    }))
}
