//! `/v1/replays`: move selected dead letters back to `scheduled`, or bring selected
//! retrying jobs forward, at a bounded rate (docs/DESIGN.md §5.5, CASES C-11); list the
//! replays, follow one's progress, stop it.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::AppState;
use super::audit_actions::MintedId;
use super::extract::{AppJson, AppQuery};
use super::problem::{AppError, Problem};
use crate::app::pagination::{self, Listing, Page};
use crate::app::replays::{self, ReplayView, not_found, replay_id};
use crate::domain::DeadReason;
use crate::domain::ids::new_id;
use crate::domain::policy::ErrorClass;
use crate::domain::replay::{ReplaySelection, ReplayState};
use crate::domain::replay_plan::{ReplayFields, ReplayPlan};
use crate::store::PageRequest;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_replay, list_replays))
        .routes(routes!(get_replay))
        .routes(routes!(cancel_replay))
}

/// A replay of dead jobs, or of retrying ones with `"selects": "retrying"`. Give at
/// least one filter, or `"all": true` to replay every job selected (up to `max_jobs`);
/// all given filters must match.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateReplayRequest {
    /// `dead` (the default): requeue dead jobs. `retrying`: make retrying jobs due at
    /// their release time instead of their `next_attempt_at` (no attempt spent, their
    /// deadline kept); not with `dead_reason`, `dead_after`, `dead_before` or `ttl_ms`.
    pub selects: Option<ReplaySelection>,
    /// Only this subscriber's jobs (not with `subscriber_ids`).
    pub subscriber_id: Option<String>,
    /// Only the jobs of these subscribers: 1 to 1000 distinct ids (not with
    /// `subscriber_id`). An id that names no subscriber matches nothing.
    #[schema(min_items = 1, max_items = 1000)]
    pub subscriber_ids: Option<Vec<String>>,
    /// Only this event's jobs.
    pub event_id: Option<String>,
    /// Only jobs whose last error has this class (`last_error.class`).
    #[schema(value_type = Option<ErrorClass>)]
    pub error_class: Option<String>,
    /// Only jobs whose last error has this HTTP status (`last_error.status`, 100–599).
    #[schema(minimum = 100, maximum = 599)]
    pub last_status: Option<i64>,
    /// Only jobs dead for this reason.
    pub dead_reason: Option<DeadReason>,
    /// Only jobs that became dead at or after this instant (RFC 3339 with an offset).
    #[schema(format = DateTime)]
    pub dead_after: Option<String>,
    /// Only jobs that became dead before this instant (RFC 3339 with an offset); must be
    /// after `dead_after`.
    #[schema(format = DateTime)]
    pub dead_before: Option<String>,
    /// `true` replays every job selected; not combined with other filters.
    pub all: Option<bool>,
    /// Most jobs to replay (1–100000): the oldest dead first, or the oldest retrying.
    #[schema(minimum = 1, maximum = 100000)]
    pub max_jobs: u32,
    /// Most jobs requeued per second, across all instances (1 to the server's
    /// `--max-replay-rate`).
    #[schema(minimum = 1)]
    pub rate_per_second: u32,
    /// Each requeued dead job's new deadline is its requeue time plus this, in ms
    /// (default: the server's `--default-ttl-ms`; at least its `--attempt-timeout-ms`,
    /// at most ten years). Not with `selects: retrying`.
    #[schema(minimum = 1, maximum = 315360000000_u64)]
    pub ttl_ms: Option<u64>,
    /// `true`: only count the matching jobs; nothing changes.
    pub dry_run: Option<bool>,
}

/// The answer of a dry run.
#[derive(Debug, Serialize, ToSchema)]
pub struct DryRunView {
    /// Jobs a replay with this filter would take now (at most `max_jobs`).
    pub matched: u64,
}

/// Replay dead jobs, or bring retrying ones forward.
///
/// Selects dead jobs by the filter (oldest dead first, at most `max_jobs`) and moves
/// them back to `scheduled` at `rate_per_second`, across all instances, keeping their
/// id, event id, payload and attempt history; each gets a fresh deadline and attempt
/// budget. With `selects: retrying`, selects retrying jobs (oldest first) and makes each
/// due at its release time at the same pace, as `POST /v1/jobs/{id}/retry` does for one
/// (no attempt spent, deadline kept). A job that left the selected state meanwhile is
/// skipped, never resent.
#[utoipa::path(
    post,
    path = "/v1/replays",
    tag = "replays",
    request_body = CreateReplayRequest,
    responses(
        (status = 202, description = "Accepted; workers requeue the matched jobs at the given pace (`state: done` at once when nothing matched)", body = ReplayView),
        (status = 200, description = "Dry run: how many jobs match; nothing changed", body = DryRunView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Running replays that still have jobs to release already use the server's --max-replay-rate (their rates add up); nothing created", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field, or no filter and no `all: true`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; nothing changed, retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_replay(
    State(state): State<AppState>,
    minted: Option<Extension<MintedId>>,
    AppJson(request): AppJson<CreateReplayRequest>,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    let dry_run = request.dry_run.unwrap_or(false);
    let plan =
        ReplayPlan::check(request.fields(), state.replay_limits).map_err(AppError::Invalid)?;
    if dry_run {
        let matched = replays::dry_run(&state, &plan).await?;
        return Ok((StatusCode::OK, Json(DryRunView { matched })).into_response());
    }
    // The audit entry, begun before this, already names the id (docs/DESIGN.md §5.11).
    let id = minted.map_or_else(|| new_id(now), |Extension(MintedId(id))| id);
    let created = replays::create(&state, plan, id).await?;
    Ok((StatusCode::ACCEPTED, Json(created)).into_response())
}

impl CreateReplayRequest {
    /// The replay as asked for, for [`ReplayPlan::check`] (`dry_run` aside).
    fn fields(self) -> ReplayFields {
        ReplayFields {
            selects: self.selects,
            subscriber_id: self.subscriber_id,
            subscriber_ids: self.subscriber_ids,
            error_class: self.error_class,
            last_status: self.last_status,
            event_id: self.event_id,
            dead_reason: self.dead_reason,
            dead_after: self.dead_after,
            dead_before: self.dead_before,
            all: self.all,
            max_jobs: self.max_jobs,
            rate_per_second: self.rate_per_second,
            ttl_ms: self.ttl_ms,
        }
    }
}

/// Query of the replay listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListReplaysQuery {
    /// Only replays in this state: `running`, `done` or `cancelled`.
    #[param(value_type = Option<ReplayState>)]
    pub state: Option<String>,
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List replays, newest first.
#[utoipa::path(
    get,
    path = "/v1/replays",
    tag = "replays",
    params(ListReplaysQuery),
    responses(
        (status = 200, description = "One page of replays, newest first", body = Page<ReplayView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_replays(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListReplaysQuery>,
) -> Result<Json<Page<ReplayView>>, AppError> {
    let replay_state = query
        .state
        .as_deref()
        .map(|raw| {
            raw.parse::<ReplayState>()
                .map_err(|_| AppError::invalid("state", "must be one of running, done, cancelled"))
        })
        .transpose()?;
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = state
        .cursors
        .decode(Listing::Replays, query.cursor.as_deref(), |key| {
            Uuid::parse_str(key).ok()
        })?;
    let page = PageRequest {
        after,
        limit: limit + 1,
    };
    let fetched = state.store.list_replays(replay_state, page).await?;
    Ok(Json(state.cursors.page(
        Listing::Replays,
        fetched,
        limit,
        |r| r.id.to_string(),
        ReplayView::from,
    )))
}

/// A replay's progress.
#[utoipa::path(
    get,
    path = "/v1/replays/{replay_id}",
    tag = "replays",
    params(("replay_id" = Uuid, Path, description = "The replay's id")),
    responses(
        (status = 200, description = "The replay", body = ReplayView),
        (status = 404, description = "No such replay", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_replay(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<ReplayView>, AppError> {
    let id = replay_id(&raw)?;
    let replay = state
        .store
        .get_replay(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Json(replay.into()))
}

/// Stop a running replay. Jobs it already requeued stay requeued; a replay that has
/// ended is answered as it is.
#[utoipa::path(
    post,
    path = "/v1/replays/{replay_id}/cancel",
    tag = "replays",
    params(("replay_id" = Uuid, Path, description = "The replay's id")),
    responses(
        (status = 200, description = "The replay, now `cancelled` unless it had already ended", body = ReplayView),
        (status = 404, description = "No such replay", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn cancel_replay(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<ReplayView>, AppError> {
    replays::cancel(&state, &raw).await.map(Json)
}
