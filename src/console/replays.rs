//! `/console/replays`: the replays, newest first, each with a progress bar that
//! refreshes while any runs (htmx, every 2 s) and a cancel button while it runs;
//! `POST /console/replays` starts the replay of a slice chosen on the dead letters
//! page, as `POST /v1/replays` does.

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};

use axum::response::{IntoResponse, Redirect};
use serde_json::json;

use super::access::Session;
use super::actions::{self, Action};
use super::chrome::{Chrome, Section, When};
use super::dead_letters::Slice;
use super::gate::FormFields;
use super::subscribers::{ListQuery, notice};
use super::{ConsoleState, PageResult, render};
use crate::api::request_id::RequestIds;
use crate::app::actions as names;
use crate::app::replays::{self, ReplayView};
use crate::domain::ids::new_id;
use crate::domain::replay::ReplayState;
use crate::store::PageRequest;

/// Most replays listed.
const MAX_REPLAYS: u32 = 50;

struct ReplayRow {
    view: ReplayView,
    /// Jobs dealt with (requeued or skipped).
    done: u64,
    /// What the replay selects, in words.
    slice: String,
    created: When,
    finished: Option<When>,
    running: bool,
}

#[derive(Template)]
#[template(path = "console/replays.html")]
struct ReplaysPage {
    chrome: Chrome,
    replays: Vec<ReplayRow>,
    any_running: bool,
}

fn describe(view: &ReplayView) -> String {
    let f = &view.filter;
    let mut parts = Vec::new();
    if let Some(id) = &f.subscriber_id {
        parts.push(format!("subscriber {id}"));
    }
    if let Some(ids) = &f.subscriber_ids {
        parts.push(format!("{} subscribers", ids.len()));
    }
    if let Some(reason) = f.dead_reason {
        parts.push(format!("dead: {reason}"));
    }
    if let Some(class) = f.error_class {
        parts.push(format!("last error {class}"));
    }
    if let Some(status) = f.last_status {
        parts.push(format!("status {status}"));
    }
    if let Some(event) = &f.event_id {
        parts.push(format!("event {event}"));
    }
    if parts.is_empty() {
        parts.push("every dead job".to_owned());
    }
    parts.join(", ")
}

/// `GET /console/replays`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let now = state.app.clock.now();
    let replays = state
        .app
        .store
        .list_replays(
            None,
            PageRequest {
                after: None,
                limit: MAX_REPLAYS,
            },
        )
        .await?;
    let replays: Vec<ReplayRow> = replays
        .into_iter()
        .map(|r| {
            let view = ReplayView::from(r);
            ReplayRow {
                done: view.requeued + view.skipped,
                slice: describe(&view),
                created: When::of(view.created_at, now),
                finished: When::of_opt(view.finished_at, now),
                running: view.state == ReplayState::Running,
                view,
            }
        })
        .collect();
    let page = ReplaysPage {
        chrome: Chrome::new("Replays", Section::Replays, &session)
            .with_notice(notice(query.done())),
        any_running: replays.iter().any(|r| r.running),
        replays,
    };
    Ok(render(&page))
}

/// `POST /console/replays` with a slice (`subscriber_id`, `dead_reason`,
/// `error_class`; none: every dead job), `max_jobs` and `rate_per_second`: creates the
/// replay as `POST /v1/replays` does (409 when running replays already use the
/// server's replay rate); audited as `replay.create`.
pub async fn start(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    request_ids: RequestIds,
) -> PageResult {
    let slice = Slice::from_fields(&form);
    let app = &state.app;
    let plan = slice.plan(app.replay_limits)?;
    let now = app.clock.now();
    let id = new_id(now);
    let parameters = json!({
        "subscriber_id": (!slice.subscriber_id.is_empty()).then_some(&slice.subscriber_id),
        "dead_reason": (!slice.dead_reason.is_empty()).then_some(&slice.dead_reason),
        "error_class": (!slice.error_class.is_empty()).then_some(&slice.error_class),
        "all": slice.is_empty(),
        "max_jobs": plan.max_jobs,
        "rate_per_second": plan.rate_per_second,
    });
    let action = Action::new(names::REPLAY_CREATE, Some(id.to_string())).with(parameters);
    // Its first burst is due now: this instance's worker wakes (the store tells it).
    actions::audited(&state, &session, &request_ids, action, async {
        Ok(replays::create(app, plan, id).await?)
    })
    .await?;
    Ok(Redirect::to("/console/replays?done=replay-started").into_response())
}

/// `POST /console/replays/{id}/cancel`: as `POST /v1/replays/{id}/cancel`; audited as
/// `replay.cancel`.
pub async fn cancel(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(raw): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let id = replays::replay_id(&raw)?;
    let action = Action::new(names::REPLAY_CANCEL, Some(id.to_string()));
    actions::audited(&state, &session, &request_ids, action, async {
        replays::cancel(&state.app, &id.to_string()).await?;
        Ok(())
    })
    .await?;
    Ok(Redirect::to("/console/replays?done=replay-cancelled").into_response())
}
