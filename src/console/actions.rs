//! Operator actions taken in the console, recorded in the audit trail
//! (docs/DESIGN.md §5.11) under the same action names as the API's (`job.cancel`,
//! `subscriber.resume`, …) plus `console.login`, `console.login_failed` and
//! `console.logout`, with the session's token fingerprint as the actor and `"via":
//! "console"` in the parameters.

use serde_json::{Value, json};

use axum::http::StatusCode;

use super::access::Session;
use super::{ConsoleError, ConsoleState};
use crate::api::request_id::RequestIds;
use crate::audit_trail::Intent;

/// One action, as the trail records it.
#[derive(Clone, Debug)]
pub struct Action {
    /// Its name (`job.cancel`).
    pub name: &'static str,
    /// What it acted on (a job, subscriber or replay id, a destination).
    pub target: Option<String>,
    /// What the form said, without secrets (`via: console` is added).
    pub parameters: Value,
    /// The status the console answered with (303 for a redirect).
    pub status: u16,
}

impl Action {
    /// Action `name` on `target`, answered with a redirect.
    pub fn new(name: &'static str, target: Option<String>) -> Self {
        Action {
            name,
            target,
            parameters: json!({}),
            status: 303,
        }
    }

    /// With `parameters` (an object).
    pub fn with(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// Answered with `status`.
    pub fn answered(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}

/// Takes `action` in `session` for the request with `ids`: begins its audit entry,
/// runs `act`, and settles the entry with the outcome (the redirect's
/// [`Action::status`], or the error's status: a 4xx withdraws the entry, a 5xx keeps
/// it; see [`crate::audit_trail`]). An entry that cannot be begun is answered 503 and
/// `act` does not run: no action without its entry.
///
/// The entry names its target from the start (an id, a destination's normalised
/// `host:port`), so a crash or a failed settlement cannot leave it without one.
///
/// # Errors
/// 503 when the entry cannot be written, else `act`'s.
pub async fn audited<T>(
    state: &ConsoleState,
    session: &Session,
    ids: &RequestIds,
    action: Action,
    act: impl Future<Output = Result<T, ConsoleError>>,
) -> Result<T, ConsoleError> {
    let status = StatusCode::from_u16(action.status).unwrap_or(StatusCode::SEE_OTHER);
    let begun = state
        .trail
        .begin(intent(session.actor.clone(), ids, action))
        .await
        .map_err(|_| {
            ConsoleError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "The audit trail could not be written, so nothing was done. Try again.",
            )
        })?;
    match act.await {
        Ok(done) => {
            begun.answered(status).await;
            Ok(done)
        }
        Err(error) if error.status.is_server_error() => {
            begun.answered(error.status).await;
            Err(error)
        }
        Err(error) => {
            begun.refused().await;
            Err(error)
        }
    }
}

/// Records `action` whole for `actor` (`None`: nobody signed in): what is recorded
/// but takes no effect, as a refused login. Waits at most the trail's wait; a failure
/// is logged and counted, never shown.
pub async fn record_as(
    state: &ConsoleState,
    actor: Option<String>,
    ids: &RequestIds,
    action: Action,
) {
    let status = StatusCode::from_u16(action.status).unwrap_or(StatusCode::SEE_OTHER);
    state.trail.record(intent(actor, ids, action), status).await;
}

/// The entry `action` makes, `via: console` added to its parameters.
fn intent(actor: Option<String>, ids: &RequestIds, action: Action) -> Intent {
    let mut parameters = action.parameters;
    if let Value::Object(map) = &mut parameters {
        map.insert("via".into(), Value::from("console"));
    }
    Intent {
        action: action.name,
        target: action.target,
        parameters: Some(parameters.to_string()),
        actor,
        request_id: ids.request_id.clone(),
        server_request_id: ids.server_request_id,
    }
}
