//! `/v1/destinations`: list and read the `host:port` destinations that subscribers'
//! URLs share, and let an operator set one's limit, pause it, or hold its circuit
//! (docs/DESIGN.md §15).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::problem::{AppError, Problem};
use crate::app::destinations::{self, PutDestinationRequest, destination, not_found};
use crate::app::pagination::{self, Listing, Page};
use crate::app::views::DestinationView;
use crate::domain::destination::Destination;
use crate::store::PageRequest;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_destinations))
        .routes(routes!(get_destination, put_destination))
}

/// Query of the destination listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListDestinationsQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List destinations in `host:port` order.
#[utoipa::path(
    get,
    path = "/v1/destinations",
    tag = "destinations",
    params(ListDestinationsQuery),
    responses(
        (status = 200, description = "One page of destinations", body = Page<DestinationView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_destinations(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListDestinationsQuery>,
) -> Result<Json<Page<DestinationView>>, AppError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = state
        .cursors
        .decode(Listing::Destinations, query.cursor.as_deref(), |key| {
            Destination::parse(key).ok().map(|d| d.to_string())
        })?;
    let page = PageRequest {
        after,
        limit: limit + 1,
    };
    let fetched = state
        .store
        .list_destinations(page, state.clock.now())
        .await?;
    Ok(Json(state.cursors.page(
        Listing::Destinations,
        fetched,
        limit,
        |d| d.key.clone(),
        DestinationView::from,
    )))
}

/// Read a destination.
#[utoipa::path(
    get,
    path = "/v1/destinations/{destination}",
    tag = "destinations",
    params(("destination" = String, Path, description = "`host:port`, e.g. `hooks.example.com:443` or `[2001:db8::1]:8443` (percent-encoded or not); read case-insensitively; a label beginning with `xn--` must be valid Punycode (RFC 3492)")),
    responses(
        (status = 200, description = "The destination", body = DestinationView),
        (status = 404, description = "No subscriber's URL sends there", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a `host:port`", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_destination(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<DestinationView>, AppError> {
    let destination = destination(&raw)?;
    state
        .store
        .get_destination(destination.as_str(), state.clock.now())
        .await?
        .map(|d| Json(DestinationView::from(d)))
        .ok_or_else(|| not_found(&destination))
}

/// Set a destination's limit, pause or resume it, or hold its circuit open or closed.
#[utoipa::path(
    put,
    path = "/v1/destinations/{destination}",
    tag = "destinations",
    params(("destination" = String, Path, description = "`host:port`, as for GET")),
    request_body = PutDestinationRequest,
    responses(
        (status = 200, description = "The destination as it now stands", body = DestinationView),
        (status = 404, description = "No subscriber's URL sends there; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a `host:port`, or an invalid field", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn put_destination(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    AppJson(body): AppJson<PutDestinationRequest>,
) -> Result<Json<DestinationView>, AppError> {
    destinations::put(&state, &raw, body).await.map(Json)
}
