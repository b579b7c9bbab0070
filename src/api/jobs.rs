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
use super::pagination::{self, Listing, Page};
use super::problem::{ApiError, Problem};
use super::views::{AttemptView, JobView};
use std::collections::HashMap;

use crate::domain::ids::new_id;
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::{SubscriberLoad, needs_load};
use crate::domain::{JobState, Timestamp};
use crate::store::{CreateOutcome, Job, PageRequest};

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
) -> Result<Response, ApiError> {
    let now = state.clock.now();
    let new = job_input::new_job(request, new_id(now), now, state.job_limits)?;
    let outcome = state
        .store
        .create_jobs(vec![new])
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("create_jobs returned no outcome".into()))?;
    match outcome {
        CreateOutcome::Created(job) => {
            crate::metrics::jobs_accepted(1);
            let location = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id))
                .map_err(|e| ApiError::Internal(e.to_string()))?;
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

/// The views of `jobs` at `now`, reading the load of each subscriber whose due jobs may
/// be held back by its limits (once per subscriber).
pub async fn job_views(
    state: &AppState,
    jobs: Vec<Job>,
    now: Timestamp,
) -> Result<Vec<JobView>, ApiError> {
    let loads = loads_of(state, &jobs, now).await?;
    Ok(views_with(jobs, &loads, now))
}

/// The view of `job`, just written (created, or found by its idempotency key): see
/// [`written_job_views`].
pub async fn written_job_view(state: &AppState, job: Job, now: Timestamp) -> JobView {
    written_job_views(state, vec![job], now)
        .await
        .pop()
        .expect("one view per job")
}

/// The views of `jobs`, just written: when the load their views read cannot be read
/// (the store unavailable a moment after the write), the views without it, a warning
/// logged. The write has been committed, so the answer must not be a 503, which says
/// that nothing was (CASES C-19).
pub async fn written_job_views(state: &AppState, jobs: Vec<Job>, now: Timestamp) -> Vec<JobView> {
    let loads = match loads_of(state, &jobs, now).await {
        Ok(loads) => loads,
        Err(error) => {
            tracing::warn!(jobs = jobs.len(), %error,
                "the jobs are stored; their subscribers' load could not be read for their views");
            HashMap::new()
        }
    };
    views_with(jobs, &loads, now)
}

fn views_with(
    jobs: Vec<Job>,
    loads: &HashMap<String, Option<SubscriberLoad>>,
    now: Timestamp,
) -> Vec<JobView> {
    jobs.into_iter()
        .map(|job| {
            let load = loads.get(&job.subscriber_id).and_then(Option::as_ref);
            JobView::new(job, load, now)
        })
        .collect()
}

/// The load of each subscriber of `jobs` whose view needs it, read once each.
async fn loads_of(
    state: &AppState,
    jobs: &[Job],
    now: Timestamp,
) -> Result<HashMap<String, Option<SubscriberLoad>>, ApiError> {
    let mut loads: HashMap<String, Option<SubscriberLoad>> = HashMap::new();
    for job in jobs {
        // A retrying job's advice reads its destination's hold even before it is due;
        // one whose last attempt timed out reads whether its subscriber's recent
        // attempts all did (then the advice is `no`, dead or not, §5.9).
        let retrying = job.state == JobState::Retrying && job.subscriber_enabled;
        let timed_out = job.state != JobState::Delivered
            && job
                .last_error
                .as_ref()
                .is_some_and(|e| e.class == ErrorClass::Timeout);
        if (retrying || timed_out || needs_load(job.state, job.due_at, job.subscriber_enabled, now))
            && !loads.contains_key(&job.subscriber_id)
        {
            let load = state.loads.get(&job.subscriber_id, now).await?;
            loads.insert(job.subscriber_id.clone(), load);
        }
    }
    Ok(loads)
}

/// The view of one job at `now`.
pub async fn job_view(state: &AppState, job: Job, now: Timestamp) -> Result<JobView, ApiError> {
    let mut views = job_views(state, vec![job], now).await?;
    views
        .pop()
        .ok_or_else(|| ApiError::Internal("no view for the job".into()))
}

/// The job id a path names (any form `Uuid::parse_str` takes), else a 422 naming
/// `job_id`.
pub(super) fn job_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| ApiError::invalid("job_id", "must be a UUID"))
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
) -> Result<Json<JobView>, ApiError> {
    let id = job_id(&raw_id)?;
    let now = state.clock.now();
    let job = state
        .store
        .get_job(id, now)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))?;
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
) -> Result<Json<Page<JobView>>, ApiError> {
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
) -> Result<Json<AttemptList>, ApiError> {
    let id = job_id(&raw_id)?;
    let now = state.clock.now();
    if state.store.get_job(id, now).await?.is_none() {
        return Err(ApiError::NotFound(format!("job {id} does not exist")));
    }
    let attempts = state.store.list_attempts(id, now).await?;
    Ok(Json(AttemptList {
        items: attempts.into_iter().map(AttemptView::from).collect(),
    }))
}
