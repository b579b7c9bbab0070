//! `GET /v1/events` (the events with jobs not delivered) and `GET
//! /v1/events/{event_id}` (one event's summary): the first questions of an incident,
//! each answered in one call (docs/DESIGN.md §5.10).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use uuid::Uuid;

use super::AppState;
use super::extract::AppQuery;
use super::problem::{AppError, Problem};
use crate::app::event_summary::{AffectedEventView, EventSummaryView, summarize};
use crate::app::pagination::{self, Listing, Page};
use crate::domain::{Timestamp, validate};
use crate::store::PageRequest;

/// How far back `affected_since` reaches when it is not given: one hour.
pub const DEFAULT_AFFECTED_WINDOW_MS: i64 = 3_600_000;

/// Query of the affected-event listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListEventsQuery {
    /// Dead jobs count as affected when they went dead at or after this instant (RFC
    /// 3339 with an offset); default: one hour before now.
    #[param(value_type = Option<String>, format = DateTime)]
    pub affected_since: Option<String>,
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List the events with jobs not delivered, newest first (by their newest job). A job
/// is affected when it is `retrying` (an expired lease included), `dead` since
/// `affected_since`, or due and held back: its subscriber paused or at its
/// `max_in_flight`, its destination paused, its circuit open or at its limit (a
/// subscriber's rate limit, a sub-second hold, is not counted). An event whose jobs are
/// all delivered, waiting for their time or in flight is not listed.
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "events",
    params(ListEventsQuery),
    responses(
        (status = 200, description = "One page of affected events", body = Page<AffectedEventView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_events(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListEventsQuery>,
) -> Result<Json<Page<AffectedEventView>>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = state
        .cursors
        .decode(Listing::Events, query.cursor.as_deref(), |k| {
            Uuid::parse_str(k).ok()
        })?;
    let now = state.clock.now();
    let since = match query.affected_since.as_deref() {
        Some(raw) => parse_instant("affected_since", raw)?,
        None => Timestamp::from_millis(now.as_millis() - DEFAULT_AFFECTED_WINDOW_MS),
    };
    let fetched = state
        .store
        .list_affected_events(
            since,
            PageRequest {
                after,
                limit: limit + 1,
            },
            now,
        )
        .await?;
    Ok(Json(state.cursors.page(
        Listing::Events,
        fetched,
        limit,
        |event| event.newest_job_id.to_string(),
        AffectedEventView::from,
    )))
}

/// Read one event's summary: its jobs by state, by `waiting_reason`, by `dead_reason`,
/// by last error class and by retry-advice verdict, and its first 100 failing
/// subscribers (a job `retrying`, `dead`, or due and held back), by subscriber id; list
/// the others with `GET /v1/jobs?event_id=…&state=retrying,dead`.
#[utoipa::path(
    get,
    path = "/v1/events/{event_id}",
    tag = "events",
    params(("event_id" = String, Path, description = "The producer's event id")),
    responses(
        (status = 200, description = "The event's summary", body = EventSummaryView),
        (status = 404, description = "No job has this event id", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a valid event id", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_event(
    State(state): State<AppState>,
    Path(event_id): Path<String>,
) -> Result<Json<EventSummaryView>, AppError> {
    validate::event_id(&event_id).map_err(|message| AppError::invalid("event_id", message))?;
    let now = state.clock.now();
    let read = state
        .store
        .event_jobs(&event_id, now)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("no job has event id {event_id}")))?;
    Ok(Json(summarize(event_id, read, now)))
}

/// `raw` as an instant, or a 422 naming `field`.
fn parse_instant(field: &str, raw: &str) -> Result<Timestamp, AppError> {
    Timestamp::parse_rfc3339(raw).map_err(|e| {
        let mut message = e.to_string();
        if raw.contains(' ') {
            // `+01:00` in a query string decodes to ` 01:00`.
            message.push_str(" (write `+` as `%2B` in a URL)");
        }
        AppError::invalid(field, message)
    })
}
