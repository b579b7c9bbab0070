//! `/console/jobs/{id}`: one job and its attempt timeline (start, duration, outcome,
//! status, error class, the receiver's redacted body excerpt, lease owner); cancel it,
//! retry it now, or reschedule it, as the API's job actions do.

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};

use axum::response::{IntoResponse, Redirect};
use serde_json::json;

use super::access::Session;
use super::actions::{self, Action};
use super::chrome::{Chrome, Section, When, segment};
use super::gate::FormFields;
use super::subscribers::{ListQuery, notice};
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::api::request_id::RequestIds;
use crate::app::actions as names;
use crate::app::job_control::{self, RescheduleRequest};
use crate::app::job_views::{job_id, job_view};
use crate::app::views::{AttemptView, JobView};
use crate::domain::JobState;
use uuid::Uuid;

struct AttemptRow {
    view: AttemptView,
    started: When,
}

#[derive(Template)]
#[template(path = "console/job.html")]
struct JobPage {
    chrome: Chrome,
    job: JobView,
    subscriber_href: String,
    event_href: String,
    attempts: Vec<AttemptRow>,
    created: When,
    deliver_at: When,
    deadline: When,
    next_attempt: Option<When>,
    finished: Option<When>,
    lease_expires: Option<When>,
    can_cancel: bool,
    can_retry: bool,
    can_reschedule: bool,
}

/// `GET /console/jobs/{id}`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(raw): Path<String>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let id = job_id(&raw)?;
    let app = &state.app;
    let now = app.clock.now();
    let job = app
        .store
        .get_job(id, now)
        .await?
        .ok_or_else(|| ConsoleError::not_found(format!("job {id} does not exist")))?;
    let attempts = app.store.list_attempts(id, now).await?;
    let job = job_view(app, job, now).await?;
    let page = JobPage {
        chrome: Chrome::new(format!("Job {id}"), Section::None, &session)
            .with_notice(notice(query.done())),
        subscriber_href: segment(&job.subscriber_id),
        event_href: segment(&job.event_id),
        attempts: attempts
            .into_iter()
            .rev()
            .map(|a| AttemptRow {
                started: When::of(a.started_at, now),
                view: AttemptView::from(a),
            })
            .collect(),
        created: When::of(job.created_at, now),
        deliver_at: When::of(job.deliver_at, now),
        deadline: When::of(job.deadline, now),
        next_attempt: When::of_opt(job.next_attempt_at, now),
        finished: When::of_opt(job.delivered_at.or(job.dead_at), now),
        lease_expires: job.lease.as_ref().map(|l| When::of(l.expires_at, now)),
        can_cancel: matches!(job.state, JobState::Scheduled | JobState::Retrying),
        can_retry: job.state == JobState::Retrying,
        can_reschedule: job.state == JobState::Scheduled,
        job,
    };
    Ok(render(&page))
}

/// Back to job `id`'s page, saying what was `done`.
fn done(id: Uuid, done: &str) -> PageResult {
    Ok(Redirect::to(&format!("/console/jobs/{id}?done={done}")).into_response())
}

/// `POST /console/jobs/{id}/cancel`: as `POST /v1/jobs/{id}/cancel`; audited as
/// `job.cancel`.
pub async fn cancel(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(raw): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let id = job_id(&raw)?;
    let action = Action::new(names::JOB_CANCEL, Some(id.to_string()));
    actions::audited(&state, &session, &request_ids, action, async {
        job_control::cancel(&state.app, &id.to_string()).await?;
        Ok(())
    })
    .await?;
    done(id, "cancelled")
}

/// `POST /console/jobs/{id}/retry`: as `POST /v1/jobs/{id}/retry`; audited as
/// `job.retry`.
pub async fn retry(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(raw): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let id = job_id(&raw)?;
    let action = Action::new(names::JOB_RETRY, Some(id.to_string()));
    actions::audited(&state, &session, &request_ids, action, async {
        job_control::retry(&state.app, &id.to_string()).await?;
        Ok(())
    })
    .await?;
    done(id, "retried")
}

/// `POST /console/jobs/{id}/reschedule` with `deliver_at` and/or `deadline` (RFC 3339
/// with an offset): as `PATCH /v1/jobs/{id}`; audited as `job.reschedule`.
pub async fn reschedule(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    Path(raw): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let id = job_id(&raw)?;
    let request = RescheduleRequest {
        deliver_at: form.text("deliver_at").map(str::to_owned),
        deadline: form.text("deadline").map(str::to_owned),
    };
    let parameters = json!({ "deliver_at": request.deliver_at, "deadline": request.deadline });
    let action = Action::new(names::JOB_RESCHEDULE, Some(id.to_string())).with(parameters);
    actions::audited(&state, &session, &request_ids, action, async {
        job_control::reschedule(&state.app, &id.to_string(), request).await?;
        Ok(())
    })
    .await?;
    done(id, "rescheduled")
}
