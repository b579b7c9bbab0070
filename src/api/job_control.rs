//! Operator actions on a waiting job: cancel it, move a scheduled one, or bring a
//! retrying one forward (docs/DESIGN.md §5).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::extract::AppJson;
use super::jobs::job_id;
use super::problem::{ApiError, FieldError, Problem};
use super::views::JobView;
use crate::domain::job::{JobEvent, TransitionError, transition};
use crate::domain::schedule::Schedule;
use crate::domain::{JobState, Timestamp};
use crate::store::Job;

/// Job `id` as read at `now` (a job whose lease has expired is `retrying`).
async fn load(state: &AppState, id: Uuid, now: Timestamp) -> Result<Job, ApiError> {
    state
        .store
        .get_job(id, now)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
}

fn not_waiting(job: &Job, action: &str, allowed: &str) -> ApiError {
    ApiError::Conflict(format!(
        "job {} is {}: only {allowed} jobs can be {action}",
        job.id, job.state
    ))
}

/// Applies `event` at `now` to the job read at `now`, conditional on its state not
/// changing meanwhile (e.g. a worker claiming it); answers the job as it now is.
async fn apply(
    state: &AppState,
    job: Job,
    event: JobEvent,
    now: Timestamp,
    action: &str,
    allowed: &str,
) -> Result<Json<JobView>, ApiError> {
    let next = transition(&job.snapshot(), event, now).map_err(|error| match error {
        TransitionError::NotAllowed { .. } => not_waiting(&job, action, allowed),
        TransitionError::DeadlineNotAfterDelivery => ApiError::invalid(
            "deadline",
            "the deadline must be after deliver_at (a past deliver_at means now)",
        ),
        other => ApiError::Conflict(format!("job {} cannot be {action}: {other}", job.id)),
    })?;
    if !state
        .store
        .transition_waiting(job.id, job.version(), next, now)
        .await?
    {
        let current = load(state, job.id, now).await?;
        return Err(not_waiting(&current, action, allowed));
    }
    if let Some(due) = next.due_at {
        // A job now due sooner than this instance's worker plans to wake is claimed at
        // once (other instances are told by the store, docs/DESIGN.md §4).
        state.store.wake().job_due_at(due);
    }
    let id = job.id;
    // The transition is committed: the answer is 200 whatever the reads after it meet
    // (a 503 would say nothing was done, CASES C-19). The job as read again, else as
    // the write stored it.
    let updated = match load(state, id, now).await {
        Ok(updated) => updated,
        Err(error) => {
            tracing::warn!(job_id = %id, ?error,
                "the job's change is stored; it could not be read again for the answer");
            job.transitioned(&next, now)
        }
    };
    // The view as GET shows it: a job made due reads its subscriber's and destination's
    // holds (an open circuit: `not_before`, not "sent now").
    Ok(Json(
        super::jobs::written_job_view(state, updated, now).await,
    ))
}

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
) -> Result<Json<JobView>, ApiError> {
    let now = state.clock.now();
    let job = load(&state, job_id(&raw_id)?, now).await?;
    apply(
        &state,
        job,
        JobEvent::Cancel,
        now,
        "cancelled",
        "scheduled or retrying",
    )
    .await
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
) -> Result<Json<JobView>, ApiError> {
    let now = state.clock.now();
    let job = load(&state, job_id(&raw_id)?, now).await?;
    apply(&state, job, JobEvent::RetryNow, now, "retried", "retrying").await
}

/// New times for a scheduled job; a field left out keeps its value. Give at least one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct RescheduleRequest {
    /// RFC 3339 with an offset; a past instant means now.
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
    /// RFC 3339 with an offset; must be after `deliver_at` (the new one, or else the
    /// job's own). To move a job past its deadline, give both.
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
}

fn instant(field: &str, text: Option<&str>, errors: &mut Vec<FieldError>) -> Option<Timestamp> {
    let text = text?;
    Timestamp::parse_rfc3339(text)
        .map_err(|e| errors.push(FieldError::new(field, e.to_string())))
        .ok()
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
) -> Result<Json<JobView>, ApiError> {
    let id = job_id(&raw_id)?;
    let mut errors = Vec::new();
    let deliver_at = instant("deliver_at", request.deliver_at.as_deref(), &mut errors);
    let deadline = instant("deadline", request.deadline.as_deref(), &mut errors);
    if request.deliver_at.is_none() && request.deadline.is_none() {
        errors.push(FieldError::new("body", "give deliver_at, deadline or both"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    let now = state.clock.now();
    let job = load(&state, id, now).await?;
    if job.state != JobState::Scheduled {
        return Err(not_waiting(&job, "rescheduled", "scheduled"));
    }
    let current = Schedule {
        deliver_at: job.deliver_at,
        deadline: job.deadline,
    };
    let moved = current
        .moved(deliver_at, deadline, state.clock.now())
        .map_err(|error| ApiError::Invalid(vec![error]))?;
    let event = JobEvent::Reschedule {
        deliver_at: moved.deliver_at,
        deadline: moved.deadline,
    };
    apply(&state, job, event, now, "rescheduled", "scheduled").await
}
