//! Actions that finish whether or not their client waits for the answer
//! (docs/DESIGN.md §5.11).
//!
//! A request that may change something (any method but `GET`, `HEAD`, `OPTIONS` and
//! `TRACE`, RFC 9110 §9.2.1) runs its handler, and every route layer inside this one
//! (the audit trail's [`super::audit::record`] among them), in a task the connection
//! does not own. A client that hangs up, or the request timeout's 408, then ends only
//! the wait for the answer: an action that has begun runs to its end, and its audit
//! entry is written with it, so an action can never be committed without its entry by
//! a client that goes away at the right moment (issue #34 found `DELETE
//! /v1/subscribers/{id}` dropped 0.2–0.85 s in deleted the subscriber and left no
//! `subscriber.delete` entry). A body the client stops sending is a refused request,
//! not a partial one: the handler's read of it fails before anything is written.
//!
//! The tasks are tracked ([`TaskTracker`]): shutdown waits for them within its grace
//! period, as it waits for open requests.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Runs a request that may change something to its end in a task of `actions`, and
/// answers with its response if the client still waits; a safe request runs as it
/// came. A handler that panics is answered 500, as in the connection's own task.
pub async fn finish_without_client(
    State(actions): State<TaskTracker>,
    request: Request,
    next: Next,
) -> Response {
    if request.method().is_safe() {
        return next.run(request).await;
    }
    let running = actions.spawn(next.run(request).in_current_span());
    match running.await {
        Ok(response) => response,
        Err(error) => {
            tracing::error!(%error, "the request's handler failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
