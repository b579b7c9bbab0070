//! Operator actions taken in the console, recorded in the audit trail
//! (docs/DESIGN.md §5.11) under the same action names as the API's (`job.cancel`,
//! `subscriber.resume`, …) plus `console.login`, `console.login_failed` and
//! `console.logout`, with the session's token fingerprint as the actor and `"via":
//! "console"` in the parameters.

use serde_json::{Value, json};

use super::ConsoleState;
use super::access::Session;
use crate::api::audit::MAX_AUDIT_WAIT;
use crate::api::request_id::RequestIds;
use crate::domain::ids::new_id;
use crate::metrics;
use crate::store::NewAuditEntry;

/// The action names only the console records.
pub const CONSOLE_ACTIONS: [&str; 3] = ["console.login", "console.login_failed", "console.logout"];

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

/// Records `action`, taken in `session` by the request with `ids`, in the audit trail.
/// Like the API, waits at most [`MAX_AUDIT_WAIT`] for the write, and a failure is
/// logged and counted, never shown: the action itself has happened.
pub async fn record(state: &ConsoleState, session: &Session, ids: &RequestIds, action: Action) {
    record_as(state, session.actor.clone(), ids, action).await;
}

/// [`record`] for `actor` (a token fingerprint; `None`: nobody signed in, as for a
/// refused login).
pub async fn record_as(
    state: &ConsoleState,
    actor: Option<String>,
    ids: &RequestIds,
    action: Action,
) {
    let at = state.app.clock.now();
    let mut parameters = action.parameters;
    if let Value::Object(map) = &mut parameters {
        map.insert("via".into(), Value::from("console"));
    }
    let entry = NewAuditEntry {
        id: new_id(at),
        at,
        action: action.name.to_owned(),
        target: action.target,
        parameters: Some(parameters.to_string()),
        actor,
        status: action.status,
        request_id: ids.request_id.clone(),
        server_request_id: ids.server_request_id,
    };
    let store = state.app.store.clone();
    let name = action.name;
    let writing = tokio::spawn(async move {
        if let Err(error) = store.record_audit(entry).await {
            metrics::audit_write_failed();
            tracing::error!(action = name, %error,
                "the console action succeeded but its audit entry could not be written");
        }
    });
    if tokio::time::timeout(MAX_AUDIT_WAIT, writing).await.is_err() {
        tracing::warn!(
            action = name,
            "the audit entry is still being written; answering without waiting for it"
        );
    }
}
