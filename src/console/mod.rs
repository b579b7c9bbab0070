//! The operator console (docs/DESIGN.md §5.12): server-rendered pages at `/console/`,
//! served by the same binary as the API and working offline (every asset embedded).
//!
//! Each page is a plain GET that renders a complete page, so a link can be shared
//! during an incident; the one script (htmx, vendored) only refreshes parts of a page.
//! Every state-changing form is a POST that carries a CSRF token and answers with a
//! redirect to the page it came from (`303 See Other`), or with the page and a clear
//! error. The console calls the same store calls and API operations the HTTP API
//! uses, in process; it never calls the API over the network. Templates are askama's,
//! compiled with the binary: every value is HTML-escaped, whoever wrote it.
//!
//! Layout: [`access`] signs sessions and CSRF tokens, [`gate`] checks them on every
//! request, [`login`] opens and ends sessions, [`chrome`] holds what every page shares
//! (navigation, formatting), and one module per page: [`overview`], [`subscribers`],
//! [`subscriber`], [`destinations`], [`events`], [`jobs`], [`dead_letters`],
//! [`replays`]. [`actions`] records operator actions in the audit trail.

pub mod access;
pub mod actions;
mod assets;
pub mod chart;
pub mod chrome;
mod dead_letters;
mod destinations;
mod events;
pub mod gate;
mod jobs;
mod login;
mod overview;
mod replays;
mod subscriber;
mod subscribers;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::api::problem::Problem;
use crate::app::AppError;
use crate::app::AppState;
use crate::store::StoreError;
use access::Access;

/// What every console handler shares: the API's state (store, clock, limits) and the
/// session keys.
#[derive(Clone, Debug)]
pub struct ConsoleState {
    /// The API's state: the console runs the same operations on the same store.
    pub app: AppState,
    /// Signs and checks sessions.
    pub access: Access,
    /// Failed login guesses per client address, shared with the API's tokens
    /// ([`crate::api::guesses`]).
    pub guesses: crate::api::guesses::Guesses,
    /// `--public-url` is an `https` URL: cookies are always `Secure`.
    pub public_https: bool,
    /// Where the console's actions are recorded, as the API's are.
    pub trail: crate::audit_trail::Trail,
}

/// The console's routes, with their gate: every page and form but the login form and
/// the assets needs a session (see [`gate::require_session`]).
pub fn router(state: ConsoleState) -> Router {
    let pages = Router::new()
        .route("/console/", get(overview::page))
        .route("/console/subscribers", get(subscribers::page))
        .route("/console/subscribers/resume", post(subscribers::resume))
        .route(
            "/console/subscribers/{subscriber_id}",
            get(subscriber::page),
        )
        .route(
            "/console/subscribers/{subscriber_id}/enabled",
            post(subscriber::set_enabled),
        )
        .route(
            "/console/subscribers/{subscriber_id}/rotate-secret",
            post(subscriber::rotate_secret),
        )
        .route("/console/destinations", get(destinations::page))
        .route(
            "/console/destinations/{destination}",
            post(destinations::change),
        )
        .route("/console/events", get(events::lookup))
        .route("/console/events/{event_id}", get(events::page))
        .route("/console/jobs/{job_id}", get(jobs::page))
        .route("/console/jobs/{job_id}/cancel", post(jobs::cancel))
        .route("/console/jobs/{job_id}/retry", post(jobs::retry))
        .route("/console/jobs/{job_id}/reschedule", post(jobs::reschedule))
        .route("/console/dead-letters", get(dead_letters::page))
        .route("/console/replays", get(replays::page).post(replays::start))
        .route("/console/replays/{replay_id}/cancel", post(replays::cancel))
        .route("/console/logout", post(login::logout))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gate::require_session,
        ));
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/login", get(login::form).post(login::submit))
        .route("/console/assets/{name}", get(assets::serve))
        .merge(pages)
        .layer(axum::middleware::from_fn(gate::page_headers))
        .with_state(state)
}

/// A console answer that went wrong: rendered as a page with its status.
#[derive(Debug)]
pub struct ConsoleError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A short title.
    pub title: String,
    /// What happened, and what to do.
    pub detail: String,
}

impl ConsoleError {
    /// An error with `status` and `detail`, titled by the status.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ConsoleError {
            status,
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            detail: detail.into(),
        }
    }

    /// 404.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 422 naming `field`.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{field}: {message}"),
        )
    }
}

impl From<AppError> for ConsoleError {
    fn from(error: AppError) -> Self {
        let problem: Problem = error.into_problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ConsoleError {
            status,
            title: problem.title,
            detail: problem.detail.unwrap_or_default(),
        }
    }
}

impl From<StoreError> for ConsoleError {
    fn from(error: StoreError) -> Self {
        ConsoleError::from(AppError::from(error))
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let page = chrome::ErrorPage {
            chrome: chrome::Chrome::bare(&self.title),
            title: self.title.clone(),
            detail: self.detail.clone(),
        };
        (self.status, render(&page)).into_response()
    }
}

/// A page rendered with its template; a template that fails to render (it cannot
/// fail on the values given) is a 500 page without the values.
pub fn render<T: askama::Template>(template: &T) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(%error, "a console template failed to render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Html("<!doctype html><title>Error</title><p>The page could not be rendered."),
            )
                .into_response()
        }
    }
}

/// What a console handler answers.
pub type PageResult = Result<Response, ConsoleError>;
