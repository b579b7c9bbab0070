//! Operator actions on a waiting job: cancel it, move a scheduled one, or bring a
//! retrying one forward (docs/DESIGN.md §5). Each reads the job, applies the state
//! machine's transition, writes it conditional on the job not changing meanwhile, and
//! answers the job as it now is.

use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::error::AppError;
use super::job_views::job_id;
use super::views::JobView;
use crate::domain::field_error::FieldError;
use crate::domain::job::{JobEvent, TransitionError, transition};
use crate::domain::schedule::Schedule;
use crate::domain::{JobState, Timestamp};
use crate::store::Job;

/// Job `id` as read at `now` (a job whose lease has expired is `retrying`).
async fn load(state: &AppState, id: Uuid, now: Timestamp) -> Result<Job, AppError> {
    state
        .store
        .get_job(id, now)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("job {id} does not exist")))
}

fn not_waiting(job: &Job, action: &str, allowed: &str) -> AppError {
    AppError::Conflict(format!(
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
) -> Result<JobView, AppError> {
    let next = transition(&job.snapshot(), event, now).map_err(|error| match error {
        TransitionError::NotAllowed { .. } => not_waiting(&job, action, allowed),
        TransitionError::DeadlineNotAfterDelivery => AppError::invalid(
            "deadline",
            "the deadline must be after deliver_at (a past deliver_at means now)",
        ),
        other => AppError::Conflict(format!("job {} cannot be {action}: {other}", job.id)),
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
    Ok(super::job_views::written_job_view(state, updated, now).await)
}

/// Cancels job `raw_id` (a UUID, else a 422 naming `job_id`): `scheduled` or
/// `retrying` only (409 otherwise, 404 when there is no such job).
pub async fn cancel(state: &AppState, raw_id: &str) -> Result<JobView, AppError> {
    let now = state.clock.now();
    let job = load(state, job_id(raw_id)?, now).await?;
    apply(
        state,
        job,
        JobEvent::Cancel,
        now,
        "cancelled",
        "scheduled or retrying",
    )
    .await
}

/// Makes `retrying` job `raw_id` due now (409 when it is not retrying, past its
/// deadline or out of attempts; 404 when there is no such job).
pub async fn retry(state: &AppState, raw_id: &str) -> Result<JobView, AppError> {
    let now = state.clock.now();
    let job = load(state, job_id(raw_id)?, now).await?;
    apply(state, job, JobEvent::RetryNow, now, "retried", "retrying").await
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

/// Moves `scheduled` job `raw_id` to `request`'s times (422 naming the field that is
/// not RFC 3339 or that breaks deliver_at < deadline; 409 when the job is not
/// scheduled; 404 when there is no such job).
pub async fn reschedule(
    state: &AppState,
    raw_id: &str,
    request: RescheduleRequest,
) -> Result<JobView, AppError> {
    let id = job_id(raw_id)?;
    let mut errors = Vec::new();
    let deliver_at = instant("deliver_at", request.deliver_at.as_deref(), &mut errors);
    let deadline = instant("deadline", request.deadline.as_deref(), &mut errors);
    if request.deliver_at.is_none() && request.deadline.is_none() {
        errors.push(FieldError::new("body", "give deliver_at, deadline or both"));
    }
    if !errors.is_empty() {
        return Err(AppError::Invalid(errors));
    }
    let now = state.clock.now();
    let job = load(state, id, now).await?;
    if job.state != JobState::Scheduled {
        return Err(not_waiting(&job, "rescheduled", "scheduled"));
    }
    let current = Schedule {
        deliver_at: job.deliver_at,
        deadline: job.deadline,
    };
    let moved = current
        .moved(deliver_at, deadline, state.clock.now())
        .map_err(|error| AppError::Invalid(vec![error]))?;
    let event = JobEvent::Reschedule {
        deliver_at: moved.deliver_at,
        deadline: moved.deadline,
    };
    apply(state, job, event, now, "rescheduled", "scheduled").await
}
