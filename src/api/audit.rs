//! The audit trail (docs/DESIGN.md §5.11): [`record`], a route layer that records every
//! operator action ([`super::audit_actions`]), and `GET /v1/audit`, which lists the
//! entries newest first.
//!
//! The entry is begun before the handler runs and settled with its answer
//! ([`crate::audit_trail`]): an action whose entry cannot be written is answered 503 and
//! not taken, and a crash between the action's commit and the settlement leaves an
//! entry with no status instead of none. The layer runs inside
//! [`super::detached::finish_without_client`], so a client that goes away cancels
//! neither the action nor its settlement.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::AppState;
use super::audit_actions::{self, MintedId, Target};
use super::auth::ApiActor;
use super::extract::AppQuery;
use super::problem::{AppError, FieldError, Problem};
use super::request_id::RequestIds;
use crate::app::pagination::{self, Listing, Page};
use crate::audit_trail::{Intent, Trail};
use crate::domain::Timestamp;
use crate::domain::audit::without_secrets;
use crate::domain::destination::Destination;
use crate::domain::ids::new_id;
use crate::store::{AuditEntry, AuditFilter, PageRequest};

/// Longest `target` filter, in characters.
const MAX_TARGET_LEN: usize = 512;

/// What [`record`] needs.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Where entries go.
    pub trail: Trail,
    /// The body limit, as the handlers apply it.
    pub max_body_bytes: usize,
}

/// Records the request as an audit entry when its route is an operator action (see
/// [`audit_actions::AUDITED`]): begun before the handler runs, settled with its answer
/// (a 4xx, or a status [`audit_actions::AuditedRoute::only_status`] excludes,
/// withdraws it). Every other request passes untouched. Runs as a route layer, so the
/// route the router matched is known.
pub async fn record(
    State(recorder): State<Recorder>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let audited = matched
        .as_ref()
        .and_then(|path| audit_actions::audited(request.method(), path.as_str()));
    let Some(audited) = audited else {
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    let target = match audited.target {
        Target::Path(name) => path_param(&mut parts, name)
            .await
            .map(|value| canonical_target(name, value)),
        Target::Minted => {
            let id = new_id(recorder.trail.clock.now());
            parts.extensions.insert(MintedId(id));
            Some(id.to_string())
        }
        Target::None => None,
    };
    let ids = RequestIds::of(&parts.headers, &parts.extensions);
    let bytes = match axum::body::to_bytes(body, recorder.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return AppError::TooLarge(FieldError::new("body", "the request body is too large"))
                .into_response();
        }
    };
    let intent = Intent {
        action: audited.action,
        target,
        parameters: parameters(&bytes),
        actor: parts.extensions.get::<ApiActor>().map(|a| a.0.clone()),
        request_id: ids.request_id,
        server_request_id: ids.server_request_id,
    };
    let begun = match recorder.trail.begin(intent).await {
        Ok(begun) => begun,
        Err(error) => {
            return AppError::Unavailable(format!(
                "the audit trail could not be written, so the action was not taken: {error}"
            ))
            .into_response();
        }
    };
    let (notice, committed) = Committed::channel();
    parts.extensions.insert(notice);
    let handler = next.run(Request::from_parts(parts, Body::from(bytes)));
    tokio::pin!(handler);
    // A handler that goes on after its commit (a deletion waiting for its history to
    // move) says so: the entry is settled then, not only when it answers.
    let early = tokio::select! {
        response = &mut handler => Err(response),
        Ok(status) = committed => Ok(status),
    };
    let response = match early {
        Ok(status) => {
            begun.answered(status).await;
            return handler.await;
        }
        Err(response) => response,
    };
    let status = response.status();
    let an_action = status.is_success() && audited.only_status.is_none_or(|only| only == status);
    if an_action {
        begun.answered(status).await;
        response
    } else if status.is_server_error() {
        // Failed after the action began: it may have taken effect.
        begun.answered(status).await;
        response
    } else {
        begun.refused().await;
        response
    }
}

/// What a handler tells [`record`] once its action is committed and it will answer
/// with `status` whatever comes after: put in the request's extensions of audited
/// routes. Only handlers whose answer waits after the commit use it.
#[derive(Clone, Debug)]
pub struct Committed(Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<StatusCode>>>>);

impl Committed {
    fn channel() -> (Self, tokio::sync::oneshot::Receiver<StatusCode>) {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        (
            Committed(Arc::new(std::sync::Mutex::new(Some(sender)))),
            receiver,
        )
    }

    /// The action is committed and will be answered `status` (2xx): its entry may be
    /// settled now. Later calls do nothing.
    pub fn now(&self, status: StatusCode) {
        let sender = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sender) = sender {
            let _ = sender.send(status);
        }
    }
}

/// The target as every view spells it: a job or replay id in its hyphenated lower-case
/// form, however the path wrote it (the handlers take any form `Uuid::parse_str` takes,
/// so a search by the id a view shows finds every action on it); a destination as its
/// normalised `host:port` (as the handler reads it); other ids as given.
fn canonical_target(param: &str, value: String) -> String {
    match param {
        "job_id" | "replay_id" => Uuid::parse_str(&value)
            .map(|id| id.to_string())
            .unwrap_or(value),
        "destination" => Destination::parse(&value)
            .map(|key| key.as_str().to_owned())
            .unwrap_or(value),
        _ => value,
    }
}

/// The path parameter `name`, percent-decoded.
async fn path_param(parts: &mut axum::http::request::Parts, name: &str) -> Option<String> {
    use axum::extract::FromRequestParts;
    let params = RawPathParams::from_request_parts(parts, &()).await.ok()?;
    params
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// Most bytes of parameters an entry keeps whole.
pub const MAX_PARAMETERS_BYTES: usize = 16 * 1024;
/// Over [`MAX_PARAMETERS_BYTES`], the most bytes a top-level field keeps.
const MAX_FIELD_BYTES: usize = 1024;

/// The request's JSON body without its secrets, as text; `None` without a body (or
/// for one that is not JSON, which the handler refuses anyway). A body over
/// [`MAX_PARAMETERS_BYTES`] keeps its top-level fields of at most [`MAX_FIELD_BYTES`];
/// each longer one becomes `{"omitted_bytes": n}`, so a large body (a schedule's
/// payload template, or one sent to an action that ignores it) cannot inflate the
/// trail (issue #34 probe).
fn parameters(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text = without_secrets(value).to_string();
    if text.len() <= MAX_PARAMETERS_BYTES {
        return Some(text);
    }
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let shortened = match value {
        serde_json::Value::Object(fields) => serde_json::Value::Object(
            fields
                .into_iter()
                .map(|(name, field)| {
                    let bytes = field.to_string().len();
                    if bytes <= MAX_FIELD_BYTES {
                        (name, field)
                    } else {
                        (name, serde_json::json!({ "omitted_bytes": bytes }))
                    }
                })
                .collect(),
        ),
        other => serde_json::json!({ "omitted_bytes": other.to_string().len() }),
    };
    let shortened = shortened.to_string();
    if shortened.len() <= MAX_PARAMETERS_BYTES {
        Some(shortened)
    } else {
        // Many small fields: none kept.
        Some(serde_json::json!({ "omitted_bytes": text.len() }).to_string())
    }
}

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

/// Query of the audit listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListAuditQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only this action (the names of [`audit_actions::AUDITED`], listed in the
    /// document by [`action_schema`]).
    #[param(schema_with = action_schema)]
    pub action: Option<String>,
    /// Only entries about this target (a job, subscriber or replay id, a destination
    /// key).
    pub target: Option<String>,
}

/// The `action` filter's schema: one of the action names.
fn action_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some("Only entries of this action."))
        .enum_values(Some(audit_actions::action_names()))
        .build()
}

/// An operator action, as recorded.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntryView {
    /// The entry's id (UUIDv7).
    pub id: Uuid,
    /// When the action was answered.
    pub at: Timestamp,
    /// What was done (see the `action` filter).
    pub action: String,
    /// What it was done to: a job, subscriber or replay id, a destination key; `null`
    /// for a resume, whose `parameters` name the selection.
    pub target: Option<String>,
    /// The request's JSON body without any secret (fields naming a secret, token,
    /// password or key are removed); `null` without a body.
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<serde_json::Value>,
    /// The API token that made it: `sha256:` and the first 16 hex digits of the
    /// token's SHA-256; `null` when the server runs without tokens (loopback only).
    pub actor: Option<String>,
    /// The HTTP status it was answered with: 2xx, or a 5xx when the server failed
    /// after the action began (it may have taken effect); `null` while the action runs,
    /// or when the server stopped between its start and its answer, so whether it took
    /// effect was never recorded: look at its target.
    pub status: Option<u16>,
    /// The request's `x-request-id`: the client's when it sent an acceptable one, else
    /// the server's own id. A client chooses it, so it may repeat another entry's.
    pub request_id: Option<String>,
    /// The server's own id of the request, as answered in `x-server-request-id`: a
    /// fresh UUID the client cannot choose; `null` for entries recorded before the
    /// server kept it.
    pub server_request_id: Option<Uuid>,
}

impl From<AuditEntry> for AuditEntryView {
    fn from(entry: AuditEntry) -> Self {
        AuditEntryView {
            id: entry.id,
            at: entry.at,
            action: entry.action,
            target: entry.target,
            parameters: entry
                .parameters
                .and_then(|text| serde_json::from_str(&text).ok()),
            actor: entry.actor,
            status: entry.status,
            request_id: entry.request_id,
            server_request_id: entry.server_request_id,
        }
    }
}

/// The filters of a listing query, checked.
fn filter(query: &ListAuditQuery) -> Result<AuditFilter, AppError> {
    let mut errors = Vec::new();
    if let Some(action) = &query.action
        && !audit_actions::action_names().any(|name| name == action)
    {
        let names: Vec<&str> = audit_actions::action_names().collect();
        errors.push(FieldError::new(
            "action",
            format!("must be one of {}", names.join(", ")),
        ));
    }
    if let Some(target) = &query.target
        && (target.is_empty() || target.len() > MAX_TARGET_LEN)
    {
        errors.push(FieldError::new(
            "target",
            format!("must be 1 to {MAX_TARGET_LEN} characters long"),
        ));
    }
    if !errors.is_empty() {
        return Err(AppError::Invalid(errors));
    }
    Ok(AuditFilter {
        action: query.action.clone(),
        target: query.target.clone(),
    })
}

/// List the audit trail: successful operator actions, newest first.
#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "audit",
    params(ListAuditQuery),
    responses(
        (status = 200, description = "One page of entries, newest first", body = Page<AuditEntryView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_audit(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListAuditQuery>,
) -> Result<Json<Page<AuditEntryView>>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let filter = filter(&query)?;
    let after = state
        .cursors
        .decode(Listing::Audit, query.cursor.as_deref(), |key| {
            Uuid::parse_str(key).ok()
        })?;
    let fetched = state
        .store
        .list_audit(
            &filter,
            PageRequest {
                after,
                limit: limit + 1,
            },
        )
        .await?;
    Ok(Json(state.cursors.page(
        Listing::Audit,
        fetched,
        limit,
        |entry| entry.id.to_string(),
        AuditEntryView::from,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_never_pass_16_kib() {
        let small = parameters(br#"{"reason":"maintenance"}"#).unwrap();
        assert_eq!(small, r#"{"reason":"maintenance"}"#);
        // One large field: the others kept, its size instead of it.
        let big = format!(r#"{{"reason":"x","payload":"{}"}}"#, "a".repeat(300_000));
        let kept: serde_json::Value =
            serde_json::from_str(&parameters(big.as_bytes()).unwrap()).unwrap();
        assert_eq!(kept["reason"], "x");
        assert_eq!(kept["payload"]["omitted_bytes"], 300_002);
        // Many small fields: the size of the whole.
        let many: serde_json::Map<String, serde_json::Value> = (0..300)
            .map(|n| (format!("k{n}"), serde_json::Value::from("c".repeat(1_000))))
            .collect();
        let many = serde_json::Value::Object(many).to_string();
        let kept = parameters(many.as_bytes()).unwrap();
        assert_eq!(kept, format!(r#"{{"omitted_bytes":{}}}"#, many.len()));
        // Not an object.
        let array = format!("[\"{}\"]", "b".repeat(20_000));
        assert_eq!(
            parameters(array.as_bytes()).unwrap(),
            r#"{"omitted_bytes":20004}"#
        );
    }
}
