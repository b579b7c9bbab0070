//! `/v1/subscribers`: register, update, read and list receivers.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::problem::{AppError, Problem};
use crate::app::pagination::{self, Listing};
use crate::app::subscriber_triage::{self, SubscriberListing};
use crate::app::subscriber_views;
use crate::app::subscribers::{
    self, PatchSubscriberRequest, PutSubscriberRequest, ResumeSubscribersRequest,
    ResumedSubscribers,
};
use crate::app::views::SubscriberView;
use crate::domain::health::HealthStatus;
use crate::domain::validate;
use crate::store::PageRequest;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_subscriber, get_subscriber, patch_subscriber))
        .routes(routes!(list_subscribers))
        .routes(routes!(resume_subscribers))
}

/// Query of the subscriber listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListSubscribersQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page (of the same listing: with the same
    /// `health`, or without).
    pub cursor: Option<String>,
    /// Only the subscribers with this health at the instant read, most
    /// `health.failing_jobs` first, then by id; without it, every subscriber in id
    /// order.
    #[param(value_type = Option<HealthStatus>)]
    pub health: Option<String>,
}

/// Create or update a subscriber.
#[utoipa::path(
    put,
    path = "/v1/subscribers/{subscriber_id}",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "1–128 of A-Z a-z 0-9 . _ : -, but not `.` or `..`")),
    request_body = PutSubscriberRequest,
    responses(
        (status = 201, description = "Created; the only response that shows `secret`", body = SubscriberView),
        (status = 200, description = "Updated", body = SubscriberView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A subscriber of this id is being deleted (its history still moving, §5.3.1); nothing written, try again in a moment", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn put_subscriber(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<PutSubscriberRequest>,
) -> Result<Response, AppError> {
    let answer = subscribers::put(&state, &id, body).await?;
    if !answer.created {
        return Ok((StatusCode::OK, Json(answer.view)).into_response());
    }
    let mut response = (StatusCode::CREATED, Json(answer.view)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/subscribers/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Change only the fields given of a subscriber.
#[utoipa::path(
    patch,
    path = "/v1/subscribers/{subscriber_id}",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    request_body = PatchSubscriberRequest,
    responses(
        (status = 200, description = "Updated", body = SubscriberView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscriber; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field, unknown field (`secret` included), or no field (`body`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn patch_subscriber(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<PatchSubscriberRequest>,
) -> Result<Json<SubscriberView>, AppError> {
    subscribers::patch(&state, &id, body).await.map(Json)
}

/// Resume paused subscribers, all or nothing, in one transaction.
#[utoipa::path(
    post,
    path = "/v1/subscribers/resume",
    tag = "subscribers",
    request_body = ResumeSubscribersRequest,
    responses(
        (status = 200, description = "How many paused subscribers it enabled", body = ResumedSubscribers),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "An id is not registered (the first one named); nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field, or not exactly one selector (`body`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn resume_subscribers(
    State(state): State<AppState>,
    AppJson(body): AppJson<ResumeSubscribersRequest>,
) -> Result<Json<ResumedSubscribers>, AppError> {
    subscribers::resume(&state, body).await.map(Json)
}

/// Read a subscriber (never its secret).
#[utoipa::path(
    get,
    path = "/v1/subscribers/{subscriber_id}",
    tag = "subscribers",
    params(("subscriber_id" = String, Path, description = "The subscriber's id")),
    responses(
        (status = 200, description = "The subscriber", body = SubscriberView),
        (status = 404, description = "No such subscriber", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_subscriber(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SubscriberView>, AppError> {
    let subscriber = state
        .store
        .get_subscriber(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    Ok(Json(subscriber_views::view_now(&state, subscriber).await?))
}

/// List subscribers in id order, or those of one health, most failing jobs first.
///
/// With `health`, the order is `health.failing_jobs` descending, then id; the cursor
/// carries the last item's count as read and its id, so a subscriber whose count did
/// not change between two pages is never skipped or repeated (one whose count changed
/// may move across the boundary).
#[utoipa::path(
    get,
    path = "/v1/subscribers",
    tag = "subscribers",
    params(ListSubscribersQuery),
    responses(
        (status = 200, description = "One page of subscribers; with `health=failing`, the causes of all of them first", body = SubscriberListing),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_subscribers(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListSubscribersQuery>,
) -> Result<Json<SubscriberListing>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    if let Some(health) = query.health.as_deref() {
        let status = health
            .parse::<HealthStatus>()
            .map_err(|_| AppError::invalid("health", "must be `failing`, `paused` or `healthy`"))?;
        let cursor = query.cursor.as_deref();
        return Ok(Json(
            subscriber_triage::list_by_health(&state, status, cursor, limit).await?,
        ));
    }
    let after = state
        .cursors
        .decode(Listing::Subscribers, query.cursor.as_deref(), |key| {
            validate::subscriber_id(key).ok().map(|()| key.to_owned())
        })?;
    let fetched = state
        .store
        .list_subscribers(PageRequest {
            after,
            limit: limit + 1,
        })
        .await?;
    let (items, next_cursor) = state
        .cursors
        .split(Listing::Subscribers, fetched, limit, |s| s.id.clone());
    let items = subscriber_views::views(&state, items, state.clock.now()).await?;
    Ok(Json(SubscriberListing {
        causes: None,
        items,
        next_cursor,
    }))
}
