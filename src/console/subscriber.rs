//! `/console/subscribers/{id}`: one subscriber's settings (never its secret), health
//! and figures, its latest attempts and jobs; pause or resume it, rotate its signing
//! secret (the new secret is shown once, in the answer to the rotation).

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};

use axum::response::{IntoResponse, Redirect};
use serde_json::json;

use super::access::Session;
use super::actions::{self, Action};
use super::chrome::{Chrome, Section, When, age, local_page, segment};
use super::gate::FormFields;
use super::subscribers::{ListQuery, notice};
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::api::request_id::RequestIds;
use crate::app::actions as names;
use crate::app::job_views::job_views;
use crate::app::secrets::{self, RotateSecretRequest};
use crate::app::subscriber_views::view_now;
use crate::app::subscribers::{self, PatchSubscriberRequest};
use crate::app::views::JobCountsView;
use crate::app::views::{AttemptView, JobView, SubscriberView};
use crate::domain::validate;
use crate::store::{JobFilter, PageRequest, RecentAttempt};

/// Most attempts and jobs the page lists.
const RECENT: u32 = 20;

/// An attempt as the page lists it.
struct AttemptRow {
    job_id: String,
    event_id: String,
    view: AttemptView,
    started: When,
}

/// A job as the page lists it.
struct JobRow {
    view: JobView,
    created: When,
}

#[derive(Template)]
#[template(path = "console/subscriber.html")]
struct SubscriberPage {
    chrome: Chrome,
    href: String,
    view: SubscriberView,
    since: Option<When>,
    stats: JobCountsView,
    oldest_eligible: Option<String>,
    last_success: Option<When>,
    attempts: Vec<AttemptRow>,
    jobs: Vec<JobRow>,
    /// The new secret, in the answer to a rotation only.
    rotated: Option<Rotated>,
}

/// A rotation's answer.
struct Rotated {
    secret: String,
    previous_until: Option<When>,
}

async fn render_page(
    state: &ConsoleState,
    session: &Session,
    id: String,
    notice_text: Option<String>,
    rotated: Option<Rotated>,
) -> PageResult {
    validate::subscriber_id(&id)
        .map_err(|message| ConsoleError::invalid("subscriber_id", message))?;
    let app = &state.app;
    let now = app.clock.now();
    let subscriber = app
        .store
        .get_subscriber(&id)
        .await?
        .ok_or_else(|| ConsoleError::not_found(format!("subscriber `{id}` does not exist")))?;
    let view = view_now(app, subscriber).await?;
    let stats = app
        .store
        .subscriber_stats(&id, now)
        .await?
        .unwrap_or_default();
    let attempts = app.store.recent_attempts(&id, RECENT).await?;
    let filter = JobFilter {
        subscriber_id: Some(id.clone()),
        ..JobFilter::default()
    };
    let jobs = app
        .store
        .list_jobs(
            &filter,
            PageRequest {
                after: None,
                limit: RECENT,
            },
            now,
        )
        .await?;
    let jobs = job_views(app, jobs, now).await?;
    let page = SubscriberPage {
        chrome: Chrome::new(format!("Subscriber {id}"), Section::Subscribers, session)
            .with_notice(notice_text),
        href: segment(&id),
        since: When::of_opt(view.health.since, now),
        stats: stats.jobs.into(),
        oldest_eligible: stats
            .oldest_eligible_since
            .map(|at| age(now.millis_since(at))),
        last_success: When::of_opt(stats.last_success_at, now),
        attempts: attempts
            .into_iter()
            .map(
                |RecentAttempt {
                     job_id,
                     event_id,
                     attempt,
                 }| AttemptRow {
                    job_id: job_id.to_string(),
                    event_id,
                    started: When::of(attempt.started_at, now),
                    view: AttemptView::from(attempt),
                },
            )
            .collect(),
        jobs: jobs
            .into_iter()
            .map(|view| JobRow {
                created: When::of(view.created_at, now),
                view,
            })
            .collect(),
        view,
        rotated,
    };
    Ok(render(&page))
}

/// `GET /console/subscribers/{id}`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let done = query_done(&query);
    render_page(&state, &session, id, notice(done.as_deref()), None).await
}

fn query_done(query: &ListQuery) -> Option<String> {
    query.done().map(str::to_owned)
}

/// `POST /console/subscribers/{id}/enabled` with `enabled=true|false`: resumes or
/// pauses it, as `PATCH /v1/subscribers/{id}` does; audited as `subscriber.patch`.
/// Goes back to `back` (a subscribers page) or to its page.
pub async fn set_enabled(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    Path(id): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let enabled = match form.get("enabled") {
        Some("true") => true,
        Some("false") => false,
        _ => return Err(ConsoleError::invalid("enabled", "must be true or false")),
    };
    let request = PatchSubscriberRequest {
        url: None,
        max_in_flight: None,
        rate_limit_per_second: None,
        enabled: Some(Some(enabled)),
        event_types: None,
        attempt_timeout_ms: None,
    };
    let action =
        Action::new(names::SUBSCRIBER_PATCH, Some(id.clone())).with(json!({ "enabled": enabled }));
    actions::audited(&state, &session, &request_ids, action, async {
        subscribers::patch(&state.app, &id, request).await?;
        Ok(())
    })
    .await?;
    let done = if enabled { "resumed" } else { "paused" };
    let back = match form
        .text("back")
        .and_then(|b| local_page(b, "/console/subscribers"))
    {
        Some(back) if !back.contains('?') => back.to_owned(),
        _ => format!("/console/subscribers/{}", segment(&id)),
    };
    Ok(Redirect::to(&format!("{back}?done={done}")).into_response())
}

/// `POST /console/subscribers/{id}/rotate-secret` with `grace_seconds` (0–604800): a
/// generated secret replaces the current one, which keeps signing for the grace
/// period, as `POST /v1/subscribers/{id}/secret/rotate` does. The answer is the page
/// with the new secret, shown this once (never stored by a cache); audited as
/// `subscriber.rotate_secret` without the secret.
pub async fn rotate_secret(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Extension(form): Extension<FormFields>,
    Path(id): Path<String>,
    request_ids: RequestIds,
) -> PageResult {
    let grace_seconds: i64 = form
        .text("grace_seconds")
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            ConsoleError::invalid(
                "grace_seconds",
                "give how long the old secret keeps signing: 0 to 604800 seconds",
            )
        })?;
    let request = RotateSecretRequest {
        grace_seconds,
        secret: None,
    };
    let action = Action::new(names::SUBSCRIBER_ROTATE_SECRET, Some(id.clone()))
        .with(json!({ "grace_seconds": grace_seconds }))
        .answered(200);
    let rotated = actions::audited(&state, &session, &request_ids, action, async {
        Ok(secrets::rotate(&state.app, &id, request).await?)
    })
    .await?;
    let now = state.app.clock.now();
    let shown = Rotated {
        secret: rotated.secret,
        previous_until: When::of_opt(rotated.previous_secret_expires_at, now),
    };
    render_page(
        &state,
        &session,
        id,
        Some("The secret is rotated. Copy the new secret now: it is not shown again.".into()),
        Some(shown),
    )
    .await
}
