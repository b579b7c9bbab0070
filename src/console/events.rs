//! `/console/events`: look up an event id, or pick one of the events affected in the
//! last hour; `/console/events/{event_id}`: the event's summary across its
//! subscribers and every one of its jobs (as `GET /v1/events/{event_id}` summarises it).

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use serde::Deserialize;

use super::access::Session;
use super::chrome::{Chrome, Section, When, segment};
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::app::event_summary::{EventSummaryView, summarize};
use crate::app::views::JobView;
use crate::domain::validate;
use crate::store::PageRequest;

/// Most jobs the event page lists (a fan-out may have 10,000).
const MAX_JOBS: usize = 500;
/// Most affected events the lookup page lists.
const MAX_EVENTS: u32 = 50;

/// `?event_id=`.
#[derive(Debug, Deserialize)]
pub struct LookupQuery {
    event_id: Option<String>,
}

struct EventRow {
    event_id: String,
    href: String,
    affected: u64,
    created: When,
}

#[derive(Template)]
#[template(path = "console/events.html")]
struct EventsPage {
    chrome: Chrome,
    events: Vec<EventRow>,
}

/// `GET /console/events`: with `?event_id=`, goes to that event's page; without, lists
/// the events affected in the last hour.
pub async fn lookup(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Query(query): Query<LookupQuery>,
) -> PageResult {
    if let Some(id) = query
        .event_id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        return Ok(Redirect::to(&format!("/console/events/{}", segment(id))).into_response());
    }
    let now = state.app.clock.now();
    let events = state
        .app
        .store
        .list_affected_events(
            now.minus_ms(3_600_000),
            PageRequest {
                after: None,
                limit: MAX_EVENTS,
            },
            now,
        )
        .await?;
    let page = EventsPage {
        chrome: Chrome::new("Events", Section::Events, &session),
        events: events
            .into_iter()
            .map(|e| EventRow {
                href: segment(&e.event_id),
                event_id: e.event_id,
                affected: e.affected,
                created: When::of(e.created_at, now),
            })
            .collect(),
    };
    Ok(render(&page))
}

struct JobRow {
    view: JobView,
    subscriber_href: String,
}

#[derive(Template)]
#[template(path = "console/event.html")]
struct EventPage {
    chrome: Chrome,
    summary: EventSummaryView,
    jobs: Vec<JobRow>,
    total: usize,
}

/// `GET /console/events/{event_id}`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(event_id): Path<String>,
) -> PageResult {
    validate::event_id(&event_id).map_err(|message| ConsoleError::invalid("event_id", message))?;
    let now = state.app.clock.now();
    let read = state
        .app
        .store
        .event_jobs(&event_id, now)
        .await?
        .ok_or_else(|| ConsoleError::not_found(format!("no job has event id {event_id}")))?;
    let total = read.jobs.len();
    let jobs = read
        .jobs
        .iter()
        .take(MAX_JOBS)
        .map(|entry| {
            let load = read.holds.get(&entry.job.subscriber_id);
            let view = JobView::new(entry.job.clone(), load, now);
            JobRow {
                subscriber_href: segment(&view.subscriber_id),
                view,
            }
        })
        .collect();
    let summary = summarize(event_id.clone(), read, now);
    let page = EventPage {
        chrome: Chrome::new(format!("Event {event_id}"), Section::Events, &session),
        summary,
        jobs,
        total,
    };
    Ok(render(&page))
}
