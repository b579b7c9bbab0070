//! `/console/subscribers`: the health table, failing first (then paused, then healthy;
//! most failing jobs first), filtered by `?health=`, with pause and resume buttons and
//! a bulk resume of the rows ticked.

use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};

use axum::response::{IntoResponse, Redirect};
use serde::Deserialize;
use serde_json::json;

use super::access::Session;
use super::actions::{self, Action};
use super::chrome::{Chrome, Section, When, local_page, segment};
use super::gate::FormFields;
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::api::request_id::RequestIds;
use crate::app::AppState;
use crate::app::actions as names;
use crate::app::subscribers::{self, MAX_RESUME_IDS, ResumeSubscribersRequest};
use crate::app::views::{HealthView, SubscriberView};
use crate::domain::Timestamp;
use crate::domain::health::HealthStatus;
use crate::domain::waiting::WaitingReason;
use crate::store::{PageRequest, Subscriber, SubscriberHealth};

/// Most subscribers the table reads (pages of 1,000 by id).
pub const MAX_SUBSCRIBERS: usize = 10_000;
/// Most rows one table shows.
pub const MAX_ROWS: usize = 500;

/// A row of the health table.
pub struct Row {
    /// The subscriber with its health.
    pub view: SubscriberView,
    /// Its id as a path segment.
    pub href: String,
    /// Its last error's time.
    pub error_at: Option<When>,
    /// Its status's time (failing since, paused since).
    pub since: Option<When>,
    /// What holds its due jobs back now, if anything does, and its jobs waiting
    /// (`scheduled` plus `retrying`).
    pub held: Option<Held>,
}

/// Why a subscriber's due jobs wait now, and where the hold is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The waiting reason (`destination_circuit_open`, `subscriber_circuit_open`, …).
    pub reason: WaitingReason,
    /// The destination (`host:port`) for a destination's hold, else the subscriber.
    pub place: String,
    /// Its jobs waiting: `scheduled` plus `retrying`.
    pub jobs: u64,
}

/// What holds `entry`'s jobs back at the instant read, in the order the claim judges
/// (docs/DESIGN.md §3.2): its pause, its destination's pause or open circuit, its own
/// endpoint circuit or `Retry-After`, its destination's limit. `None` without a hold,
/// or with no job waiting.
fn held(entry: &SubscriberHealth, destination: &str) -> Option<Held> {
    let figures = &entry.figures;
    let jobs = figures.scheduled + figures.retrying;
    if jobs == 0 {
        return None;
    }
    let subscriber = || entry.subscriber.id.clone();
    let (reason, place) = if !entry.subscriber.enabled {
        (WaitingReason::SubscriberPaused, subscriber())
    } else {
        match (figures.destination_hold, figures.endpoint_hold) {
            (
                Some(
                    reason @ (WaitingReason::DestinationPaused
                    | WaitingReason::DestinationCircuitOpen),
                ),
                _,
            ) => (reason, destination.to_owned()),
            (_, Some(reason)) => (reason, subscriber()),
            (Some(reason), None) => (reason, destination.to_owned()),
            (None, None) => return None,
        }
    };
    Some(Held {
        reason,
        place,
        jobs,
    })
}

/// Every subscriber with its health at `now`, failing first, then paused, then
/// healthy; within each, most failing jobs first, then by id. Reads at most
/// [`MAX_SUBSCRIBERS`], and their health in one snapshot.
pub async fn health_table(state: &AppState, now: Timestamp) -> Result<Vec<Row>, ConsoleError> {
    let mut subscribers: Vec<Subscriber> = Vec::new();
    loop {
        let page = PageRequest {
            after: subscribers.last().map(|s| s.id.clone()),
            limit: 1_000,
        };
        let batch = state.store.list_subscribers(page).await?;
        let done = batch.len() < 1_000;
        subscribers.extend(batch);
        if done || subscribers.len() >= MAX_SUBSCRIBERS {
            break;
        }
    }
    let ids: Vec<String> = subscribers.iter().map(|s| s.id.clone()).collect();
    let mut figures = state.store.subscriber_health(&ids, now).await?;
    let mut rows: Vec<Row> = subscribers
        .into_iter()
        .map(|subscriber| {
            // A subscriber deleted between the two reads shows no jobs and no attempts.
            let figures = figures.remove(&subscriber.id).unwrap_or_default();
            let entry = SubscriberHealth {
                subscriber,
                figures,
            };
            let view = SubscriberView::new(entry.subscriber.clone(), HealthView::from(&entry));
            let held = held(&entry, &view.destination);
            Row {
                href: segment(&view.id),
                error_at: view.health.last_error.as_ref().map(|e| When::of(e.at, now)),
                since: When::of_opt(view.health.since, now),
                held,
                view,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        rank(a.view.health.status)
            .cmp(&rank(b.view.health.status))
            .then(b.view.health.failing_jobs.cmp(&a.view.health.failing_jobs))
            .then(a.view.id.cmp(&b.view.id))
    });
    Ok(rows)
}

fn rank(status: HealthStatus) -> u8 {
    match status {
        HealthStatus::Failing => 0,
        HealthStatus::Paused => 1,
        HealthStatus::Healthy => 2,
    }
}

/// `?health=` and `?done=`.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    health: Option<String>,
    done: Option<String>,
}

impl ListQuery {
    /// `?done=`: which action just ended (see [`notice`]).
    pub fn done(&self) -> Option<&str> {
        self.done.as_deref()
    }
}

/// A filter link.
struct Filter {
    label: &'static str,
    href: &'static str,
    active: bool,
    count: usize,
}

#[derive(Template)]
#[template(path = "console/subscribers.html")]
struct SubscribersPage {
    chrome: Chrome,
    filters: Vec<Filter>,
    rows: Vec<Row>,
    shown_of: Option<usize>,
    paused_shown: bool,
}

/// The confirmation shown after an action (`?done=`), from a fixed list: a link cannot
/// make the page say anything else.
pub fn notice(done: Option<&str>) -> Option<String> {
    let text = match done? {
        "paused" => "Paused: its jobs wait until it is resumed.",
        "resumed" => "Resumed: its due jobs go now.",
        "resumed-some" => "The selected subscribers are resumed; their due jobs go now.",
        "resumed-none" => "None of the selected subscribers was paused; nothing changed.",
        "cancelled" => "Cancelled.",
        "retried" => "Due now: a worker takes it at once.",
        "rescheduled" => "Rescheduled.",
        "limit" => "The destination's limit is changed.",
        "destination" => "The destination is changed.",
        "circuit" => "The destination's circuit setting is changed.",
        "replay-started" => "The replay started: its progress shows below.",
        "replay-cancelled" => "The replay is cancelled; jobs already requeued stay requeued.",
        _ => return None,
    };
    Some(text.to_owned())
}

/// `GET /console/subscribers`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let wanted =
        match query.health.as_deref() {
            None | Some("") => None,
            Some(text) => Some(text.parse::<HealthStatus>().map_err(|_| {
                ConsoleError::invalid("health", "must be healthy, failing or paused")
            })?),
        };
    let now = state.app.clock.now();
    let all = health_table(&state.app, now).await?;
    let count = |status: Option<HealthStatus>| {
        all.iter()
            .filter(|r| status.is_none_or(|s| r.view.health.status == s))
            .count()
    };
    let filters = vec![
        Filter {
            label: "All",
            href: "/console/subscribers",
            active: wanted.is_none(),
            count: count(None),
        },
        Filter {
            label: "Failing",
            href: "/console/subscribers?health=failing",
            active: wanted == Some(HealthStatus::Failing),
            count: count(Some(HealthStatus::Failing)),
        },
        Filter {
            label: "Paused",
            href: "/console/subscribers?health=paused",
            active: wanted == Some(HealthStatus::Paused),
            count: count(Some(HealthStatus::Paused)),
        },
        Filter {
            label: "Healthy",
            href: "/console/subscribers?health=healthy",
            active: wanted == Some(HealthStatus::Healthy),
            count: count(Some(HealthStatus::Healthy)),
        },
    ];
    let matching: Vec<Row> = all
        .into_iter()
        .filter(|r| wanted.is_none_or(|s| r.view.health.status == s))
        .collect();
    let total = matching.len();
    let rows: Vec<Row> = matching.into_iter().take(MAX_ROWS).collect();
    let paused_shown = rows.iter().any(|r| !r.view.enabled);
    let page = SubscribersPage {
        chrome: Chrome::new("Subscribers", Section::Subscribers, &session)
            .with_notice(notice(query.done.as_deref())),
        filters,
        shown_of: (total > rows.len()).then_some(total),
        rows,
        paused_shown,
    };
    Ok(render(&page))
}

/// `POST /console/subscribers/resume`: resumes the subscribers ticked (`subscriber_id`,
/// repeated; 1 to 1,000), as `POST /v1/subscribers/resume` does; audited as
/// `subscriber.resume`.
pub async fn resume(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    request_ids: RequestIds,
) -> PageResult {
    let ids = form.all("subscriber_id");
    if ids.is_empty() {
        return Err(ConsoleError::invalid(
            "subscriber_id",
            "tick at least one paused subscriber to resume",
        ));
    }
    if ids.len() > MAX_RESUME_IDS {
        return Err(ConsoleError::invalid(
            "subscriber_id",
            format!("{} ticked; at most {MAX_RESUME_IDS} at once", ids.len()),
        ));
    }
    let request = ResumeSubscribersRequest {
        subscriber_ids: Some(ids.clone()),
        paused_reason: None,
    };
    let action = Action::new(names::SUBSCRIBER_RESUME, None).with(json!({ "subscriber_ids": ids }));
    let resumed = actions::audited(&state, &session, &request_ids, action, async {
        Ok(subscribers::resume(&state.app, request).await?)
    })
    .await?
    .resumed;
    let done = if resumed > 0 {
        "resumed-some"
    } else {
        "resumed-none"
    };
    let back = form
        .text("back")
        .and_then(|b| local_page(b, "/console/subscribers"))
        .unwrap_or("/console/subscribers");
    let separator = if back.contains('?') { '&' } else { '?' };
    Ok(Redirect::to(&format!("{back}{separator}done={done}")).into_response())
}
