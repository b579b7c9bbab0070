//! `/console/destinations`: every destination with its limit, requests in flight and
//! circuit; change its limit (or go back to the default), pause or resume it, as
//! `PUT /v1/destinations/{destination}` does.

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
use crate::app::destinations::{self, CircuitSetting, PutDestinationRequest};
use crate::app::views::DestinationView;
use crate::domain::destination::Destination;
use crate::store::PageRequest;

/// Most destinations the page lists.
const MAX_ROWS: u32 = 1_000;

struct Row {
    view: DestinationView,
    href: String,
    retry_at: Option<When>,
    error_at: Option<When>,
}

#[derive(Template)]
#[template(path = "console/destinations.html")]
struct DestinationsPage {
    chrome: Chrome,
    rows: Vec<Row>,
    more: bool,
}

/// `GET /console/destinations`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let now = state.app.clock.now();
    let list = state
        .app
        .store
        .list_destinations(
            PageRequest {
                after: None,
                limit: MAX_ROWS,
            },
            now,
        )
        .await?;
    let more = list.len() as u32 == MAX_ROWS;
    let rows = list
        .into_iter()
        .map(|d| {
            let view = DestinationView::from(d);
            Row {
                href: segment(&view.destination),
                retry_at: When::of_opt(view.circuit.retry_at, now),
                error_at: view.last_error.as_ref().map(|e| When::of(e.at, now)),
                view,
            }
        })
        .collect();
    let page = DestinationsPage {
        chrome: Chrome::new("Destinations", Section::Destinations, &session)
            .with_notice(notice(query.done())),
        rows,
        more,
    };
    Ok(render(&page))
}

/// `POST /console/destinations/{destination}` with `max_in_flight` (1–10000, or empty
/// for the server's default), `paused` (`true`, `false`) and/or `circuit` (`open`,
/// `closed`: held so; `auto`: back to the breaker); audited as `destination.put`.
pub async fn change(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    Path(destination): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let mut request = PutDestinationRequest::default();
    let mut parameters = serde_json::Map::new();
    if let Some(limit) = form.get("max_in_flight") {
        let limit = limit.trim();
        let value = if limit.is_empty() || limit == "default" {
            None
        } else {
            Some(limit.parse::<u32>().map_err(|_| {
                ConsoleError::invalid(
                    "max_in_flight",
                    "must be a whole number from 1 to 10000, or empty for the default",
                )
            })?)
        };
        parameters.insert("max_in_flight".into(), json!(value));
        request.max_in_flight = Some(value);
    }
    match form.get("paused") {
        None => {}
        Some("true") => request.paused = Some(Some(true)),
        Some("false") => request.paused = Some(Some(false)),
        Some(_) => return Err(ConsoleError::invalid("paused", "must be true or false")),
    }
    if let Some(Some(paused)) = request.paused {
        parameters.insert("paused".into(), json!(paused));
    }
    if let Some(circuit) = form.get("circuit") {
        let setting = CircuitSetting::try_from(circuit.to_owned())
            .map_err(|message| ConsoleError::invalid("circuit", message))?;
        parameters.insert("circuit".into(), json!(circuit));
        request.circuit = Some(Some(setting));
    }
    if request.max_in_flight.is_none() && request.paused.is_none() && request.circuit.is_none() {
        return Err(ConsoleError::invalid(
            "max_in_flight",
            "give a limit, pause or resume, or a circuit setting",
        ));
    }
    // The entry names the destination as every view spells it, whatever the path's
    // spelling (`LOCALHOST:019000`), from the start (issue #34's third probe).
    let key = Destination::parse(&destination)
        .map_err(|e| ConsoleError::invalid("destination", e.to_string()))?;
    let action = Action::new(names::DESTINATION_PUT, Some(key.as_str().to_owned()))
        .with(serde_json::Value::Object(parameters));
    let _ = actions::audited(&state, &session, &request_ids, action, async {
        Ok(destinations::put(&state.app, &destination, request).await?)
    })
    .await?;
    let done = if form.get("max_in_flight").is_some() {
        "limit"
    } else if form.get("circuit").is_some() {
        "circuit"
    } else {
        "destination"
    };
    Ok(Redirect::to(&format!("/console/destinations?done={done}")).into_response())
}
