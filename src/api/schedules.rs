//! `/v1/schedules`: recurring schedules (docs/DESIGN.md §5.14). A schedule's periods
//! start by a cron pattern in an IANA time zone, or every `every_ms` from an anchor;
//! each period becomes one ordinary job per target (its subscriber, or every
//! subscriber of its event type) whose event id is the `event_id` template filled with
//! the period's start, created by the scheduler shortly before the period starts.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::problem::{AppError, Problem};
use crate::app::pagination::{self, Listing, Page};
use crate::app::schedule_input::PutScheduleRequest;
use crate::app::schedule_views::{ScheduleView, full_view};
use crate::app::schedules::{self, PeriodJobsView, schedule_id, stored};
use crate::domain::validate;
use crate::store::PageRequest;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_schedule, get_schedule, delete_schedule))
        .routes(routes!(list_schedules))
        .routes(routes!(run_schedule))
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
    let answer = schedules::put(&state, &id, body).await?;
    if !answer.created {
        return Ok((StatusCode::OK, Json(answer.view)).into_response());
    }
    let mut response = (StatusCode::CREATED, Json(answer.view)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/schedules/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
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
    schedules::delete(&state, &id).await?;
    Ok(StatusCode::NO_CONTENT)
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
    let answer = schedules::run(&state, &id).await?;
    let status = if answer.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(answer.view)).into_response())
}
