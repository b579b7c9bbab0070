//! `/v1/schedules`: recurring schedules (docs/DESIGN.md §5.14). A schedule's periods
//! start by a cron pattern in an IANA time zone, or every `every_ms` from an anchor;
//! each period becomes one ordinary job per target (its subscriber, or every
//! subscriber of its event type) whose event id is the `event_id` template filled with
//! the period's start, created by the scheduler shortly before the period starts.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::problem::{AppError, FieldError, Problem};
use super::schedule_input::{PutScheduleRequest, definition};
use super::schedule_views::{ScheduleView, full_view, written_view};
use crate::app::job_views::written_job_views;
use crate::app::pagination::{self, Listing, Page};
use crate::app::views::JobView;
use crate::domain::Timestamp;
use crate::domain::recurrence::{Recurrence, period_text};
use crate::domain::schedule_quota::shortest_period_ms;
use crate::domain::validate;
use crate::fan_out::MAX_FAN_OUT;
use crate::scheduler::period::{PeriodError, create_period, recurrence_of};
use crate::store::{
    PageRequest, Schedule, ScheduleDefinition, SchedulePut, ScheduleTarget, ScheduleTiming,
};

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_schedule, get_schedule, delete_schedule))
        .routes(routes!(list_schedules))
        .routes(routes!(run_schedule))
}

/// The 404 of a schedule that does not exist.
fn not_found(id: &str) -> AppError {
    AppError::NotFound(format!("schedule `{id}` does not exist"))
}

/// Schedule `id` as stored, or its 404.
async fn stored(state: &AppState, id: &str) -> Result<Schedule, AppError> {
    state
        .store
        .get_schedule(id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Checks a `schedule_id` path parameter (422 naming it).
fn schedule_id(raw: &str) -> Result<(), AppError> {
    validate::schedule_id(raw).map_err(|message| AppError::invalid("schedule_id", message))
}

/// Create or replace a recurring schedule.
#[utoipa::path(
    put,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "1–128 of A-Z a-z 0-9 . _ : -, but not `.` or `..`")),
    request_body = PutScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 200, description = "Replaced, or unchanged", body = ScheduleView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The subscriber does not exist; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Payload or body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field: a cron pattern or time zone, an event id template without {period_start}, an interval under 1 s, an event type's characters; over a quota (`schedule_id`: as many schedules as --max-schedules exist; `cron` or `every_ms`: periods closer than --schedule-min-period-ms, or more jobs a minute than --schedule-max-jobs-per-minute)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn put_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<PutScheduleRequest>,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    schedule_id(&id)?;
    let existing = state.store.get_schedule(&id).await?;
    let stored = existing.as_ref().map(|s| s.definition.clone());
    let enabled_given = body.enabled.is_some();
    let (limits, checked_id) = (state.job_limits, id.clone());
    // Reading a cron pattern searches its calendar (a pattern that is never due is
    // searched far): off the request threads.
    let (definition, recurrence) = tokio::task::spawn_blocking(move || {
        definition(limits, &checked_id, body, stored.as_ref(), now)
    })
    .await
    .map_err(|error| AppError::Internal(format!("checking a schedule: {error}")))??;
    if let ScheduleTarget::Subscriber(subscriber) = &definition.target
        && state.store.get_subscriber(subscriber).await?.is_none()
    {
        return Err(AppError::UnknownReference(FieldError::new(
            "subscriber_id",
            format!("subscriber `{subscriber}` does not exist"),
        )));
    }
    if let Some(other) = state.store.schedule_sharing_template(&definition).await? {
        let whom = match &definition.target {
            ScheduleTarget::Subscriber(id) => format!("subscriber `{id}`"),
            ScheduleTarget::EventType(_) => "the subscribers of an event type".to_owned(),
        };
        return Err(AppError::invalid(
            "event_id",
            format!(
                "schedule `{other}` makes event ids from this template for {whom} too, so \
                 their periods would share jobs: give each schedule a template of its own \
                 (e.g. `{}:{{period_start}}`)",
                definition.id
            ),
        ));
    }
    if let Some(existing) = existing.as_ref().filter(|s| s.definition == definition) {
        return Ok((
            StatusCode::OK,
            Json(full_view(&state, existing.clone(), now).await?),
        )
            .into_response());
    }
    // A producer that puts its schedules again at every start is not refused for a
    // pace its event type's subscribers grew past: the scheduler bounds that one.
    let new_pace = existing.as_ref().is_none_or(|s| {
        s.definition.timing != definition.timing || s.definition.target != definition.target
    });
    if new_pace {
        check_pace(&state, &definition, &recurrence, now).await?;
    }
    // The store keeps the cursor unless the timing changes or the schedule is resumed,
    // and then starts the periods again from the first one after now.
    let put = SchedulePut {
        definition,
        next_period: recurrence.next_after(now),
        enabled_given,
        max_schedules: state.schedule_quotas.max_schedules,
    };
    let created = existing.is_none();
    let schedule = state.store.put_schedule(put, now).await?;
    let view = written_view(&state, schedule, now).await;
    if !created {
        return Ok((StatusCode::OK, Json(view)).into_response());
    }
    let mut response = (StatusCode::CREATED, Json(view)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/schedules/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Checks the pace of `definition`, its periods by `recurrence` after `now`, against
/// the server's quotas (docs/DESIGN.md §5.14), with one job a period for a subscriber,
/// or as many as its event type matches subscribers now: a 422 naming the timing
/// (`cron` or `every_ms`) with the figures when its periods come closer than the
/// shortest period or make more jobs a minute than the cap.
async fn check_pace(
    state: &AppState,
    definition: &ScheduleDefinition,
    recurrence: &Recurrence,
    now: Timestamp,
) -> Result<(), AppError> {
    // A cron pattern's periods are searched: off the request threads.
    let periods = recurrence.clone();
    let shortest_ms = tokio::task::spawn_blocking(move || shortest_period_ms(&periods, now))
        .await
        .map_err(|error| AppError::Internal(format!("checking a schedule: {error}")))?;
    let field = match definition.timing {
        ScheduleTiming::Cron { .. } => "cron",
        ScheduleTiming::Every { .. } => "every_ms",
    };
    let (jobs, whom) = match &definition.target {
        ScheduleTarget::Subscriber(id) => (1, format!("subscriber `{id}`")),
        ScheduleTarget::EventType(name) => {
            let limit = u32::try_from(MAX_FAN_OUT + 1).unwrap_or(u32::MAX);
            let matched = state.store.subscribers_of_event_type(name, limit).await?;
            let jobs = u64::try_from(matched.len()).unwrap_or(u64::MAX);
            (jobs, format!("the subscribers of event type `{name}` now"))
        }
    };
    state
        .schedule_quotas
        .check_put(field, shortest_ms, jobs, &whom)
        .map_err(|error| AppError::Invalid(vec![error]))
}

/// Read a recurring schedule: its definition, its next five periods and its last run.
#[utoipa::path(
    get,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ScheduleView>, AppError> {
    schedule_id(&id)?;
    let now = state.clock.now();
    let schedule = stored(&state, &id).await?;
    Ok(Json(full_view(&state, schedule, now).await?))
}

/// Delete a recurring schedule: no period starts after this; the jobs it created stay
/// (those of a period starting within the next 5 s may already be stored and are
/// delivered).
#[utoipa::path(
    delete,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, AppError> {
    schedule_id(&id)?;
    if state.store.delete_schedule(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(&id))
    }
}

/// Query of the schedule listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListSchedulesQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List recurring schedules in id order.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    params(ListSchedulesQuery),
    responses(
        (status = 200, description = "One page of schedules (`last_run.job` is null here: read one schedule for it)", body = Page<ScheduleView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_schedules(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListSchedulesQuery>,
) -> Result<Json<Page<ScheduleView>>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = state
        .cursors
        .decode(Listing::Schedules, query.cursor.as_deref(), |key| {
            validate::schedule_id(key).ok().map(|()| key.to_owned())
        })?;
    let fetched = state
        .store
        .list_schedules(PageRequest {
            after,
            limit: limit + 1,
        })
        .await?;
    let now = state.clock.now();
    // Each view searches its cron pattern's calendar for the next periods: off the
    // request threads.
    let cursors = state.cursors.clone();
    let page = tokio::task::spawn_blocking(move || {
        cursors.page(
            Listing::Schedules,
            fetched,
            limit,
            |s| s.definition.id.clone(),
            |s| ScheduleView::new(s, now),
        )
    })
    .await
    .map_err(|error| AppError::Internal(format!("listing schedules: {error}")))?;
    Ok(Json(page))
}

/// The jobs of one period of a schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct PeriodJobsView {
    /// The period's start.
    pub period_start: Timestamp,
    /// Its event id.
    pub event_id: String,
    /// Its jobs, created now or already there, in subscriber id order (empty when no
    /// subscriber matches the event type).
    pub items: Vec<JobView>,
}

/// Create the current period's jobs now, unless they exist: the period that started
/// last (at or before now), due at once. Works while the schedule is paused.
#[utoipa::path(
    post,
    path = "/v1/schedules/{schedule_id}/run",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 201, description = "The period's jobs were created (some may have existed)", body = PeriodJobsView),
        (status = 200, description = "The period's jobs already existed", body = PeriodJobsView),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No period has started yet, or the schedule cannot make the period's jobs now (its subscriber does not exist, over 10,000 subscribers match); nothing created", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn run_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    schedule_id(&id)?;
    let now = state.clock.now();
    let schedule = stored(&state, &id).await?;
    let definition = &schedule.definition;
    let recurrence = recurrence_of(definition).map_err(AppError::Conflict)?;
    let Some(start) = recurrence.latest_at_or_before(now) else {
        let first = recurrence
            .next_after(now)
            .map(|t| format!("; the first starts at {}", period_text(t)))
            .unwrap_or_default();
        return Err(AppError::Conflict(format!(
            "schedule `{id}` has no period that has started yet{first}"
        )));
    };
    let made = create_period(&state.store, definition, start, now, state.job_limits)
        .await
        .map_err(|error| match error {
            PeriodError::Refused(reason) => AppError::Conflict(reason),
            PeriodError::Store(error) => AppError::from(error),
        })?;
    let created = made.created > 0;
    // The period's jobs are committed: what follows only describes them, so a store
    // that fails now is logged, not answered as a 503 that would say nothing was made
    // (CASES C-19).
    if let Err(error) = state.store.record_schedule_run(&id, made.run.clone()).await {
        tracing::warn!(schedule_id = %id, %error,
            "the period's jobs are made; the schedule's last run could not be recorded");
    }
    let jobs = made.jobs;
    let view = PeriodJobsView {
        period_start: made.run.period,
        event_id: made.run.event_id,
        items: written_job_views(&state, jobs, now).await,
    };
    let status = if created || view.items.is_empty() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)).into_response())
}
