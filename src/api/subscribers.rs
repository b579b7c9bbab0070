//! `/v1/subscribers`: register, update, read and list receivers.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::pagination::{self, Page};
use super::problem::{ApiError, FieldError, Problem};
use super::views::SubscriberView;
use crate::domain::secret::SigningSecret;
use crate::domain::target::TargetPolicy;
use crate::domain::validate;
use crate::store::{PageRequest, SubscriberPut};

/// Most `max_in_flight` a subscriber may ask for.
pub const MAX_IN_FLIGHT_LIMIT: u32 = 10_000;
/// Most `rate_limit_per_second` a subscriber may ask for.
pub const MAX_RATE_LIMIT: u32 = 100_000;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_subscriber, get_subscriber))
        .routes(routes!(list_subscribers))
}

/// Creates or updates a subscriber. Fields left out keep their current value on update
/// and take their default on create.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSubscriberRequest {
    /// Absolute `http(s)` URL, no credentials, no fragment. A literal internal address
    /// (loopback, private, link-local, …) is refused unless the server allows it.
    #[schema(format = "uri", min_length = 1, max_length = 2048)]
    pub url: String,
    /// `whsec_<base64 of 24–64 bytes>`, padded or not; generated on create when absent.
    #[schema(schema_with = super::doc::rules::signing_secret)]
    pub secret: Option<String>,
    /// Most attempts open at once (1–10000, default 16).
    #[schema(minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<u32>,
    /// Most attempts started per second (1–100000); `null` removes the limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100000)]
    pub rate_limit_per_second: Option<Option<u32>>,
    /// False pauses deliveries to it; true resumes them (default true).
    pub enabled: Option<bool>,
}

// By hand, so that `secret` never shows in a log or a panic.
impl std::fmt::Debug for PutSubscriberRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutSubscriberRequest")
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .field("max_in_flight", &self.max_in_flight)
            .field("rate_limit_per_second", &self.rate_limit_per_second)
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`).
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Query of the subscriber listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListSubscribersQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Checks the request; returns the parsed secret and the URL in its normalised form
/// (what is stored and shown). A URL whose host is a literal address the target policy
/// refuses is invalid; a host name is checked when it is resolved, at each attempt.
fn validate_put(
    id: &str,
    body: &PutSubscriberRequest,
    targets: &TargetPolicy,
) -> Result<(Option<SigningSecret>, String), ApiError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::subscriber_id(id) {
        errors.push(FieldError::new("subscriber_id", message));
    }
    let checked = validate::subscriber_url(&body.url).and_then(|url| {
        targets.permits_url(&url).map_err(|refusal| {
            format!(
                "{refusal}; deferhook refuses internal targets unless \
                 --allow-private-targets or --allow-target-cidr allows them"
            )
        })?;
        Ok(url)
    });
    let url = match checked {
        Ok(url) => url.to_string(),
        Err(message) => {
            errors.push(FieldError::new("url", message));
            String::new()
        }
    };
    let secret = match body.secret.as_deref().map(SigningSecret::parse).transpose() {
        Ok(secret) => secret,
        Err(e) => {
            errors.push(FieldError::new("secret", e.to_string()));
            None
        }
    };
    if body
        .max_in_flight
        .is_some_and(|n| !(1..=MAX_IN_FLIGHT_LIMIT).contains(&n))
    {
        errors.push(FieldError::new(
            "max_in_flight",
            format!("must be from 1 to {MAX_IN_FLIGHT_LIMIT}"),
        ));
    }
    if let Some(Some(rate)) = body.rate_limit_per_second
        && !(1..=MAX_RATE_LIMIT).contains(&rate)
    {
        errors.push(FieldError::new(
            "rate_limit_per_second",
            format!("must be from 1 to {MAX_RATE_LIMIT}, or null for no limit"),
        ));
    }
    if errors.is_empty() {
        Ok((secret, url))
    } else {
        Err(ApiError::Invalid(errors))
    }
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
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn put_subscriber(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<PutSubscriberRequest>,
) -> Result<Response, ApiError> {
    let (secret, url) = validate_put(&id, &body, &state.target_policy)?;
    let put = SubscriberPut {
        id: id.clone(),
        url,
        secret,
        generated_secret: SigningSecret::generate(),
        max_in_flight: body.max_in_flight,
        rate_limit_per_second: body.rate_limit_per_second,
        enabled: body.enabled,
    };
    let outcome = state.store.put_subscriber(put, state.clock.now()).await?;
    let mut view = SubscriberView::from(outcome.subscriber);
    let Some(secret) = outcome.created_secret else {
        return Ok((StatusCode::OK, Json(view)).into_response());
    };
    view.secret = Some(secret.expose().to_owned());
    let mut response = (StatusCode::CREATED, Json(view)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/subscribers/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
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
) -> Result<Json<SubscriberView>, ApiError> {
    state
        .store
        .get_subscriber(&id)
        .await?
        .map(|s| Json(SubscriberView::from(s)))
        .ok_or_else(|| ApiError::NotFound(format!("subscriber `{id}` does not exist")))
}

/// List subscribers in id order.
#[utoipa::path(
    get,
    path = "/v1/subscribers",
    tag = "subscribers",
    params(ListSubscribersQuery),
    responses(
        (status = 200, description = "One page of subscribers", body = Page<SubscriberView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_subscribers(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListSubscribersQuery>,
) -> Result<Json<Page<SubscriberView>>, ApiError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = pagination::decode_cursor(query.cursor.as_deref(), |key| {
        validate::subscriber_id(key).ok().map(|()| key.to_owned())
    })?;
    let fetched = state
        .store
        .list_subscribers(PageRequest {
            after,
            limit: limit + 1,
        })
        .await?;
    Ok(Json(pagination::page(
        fetched,
        limit,
        |s| s.id.clone(),
        SubscriberView::from,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_secret() {
        let body = PutSubscriberRequest {
            url: "https://example.com/hooks".into(),
            secret: Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()),
            max_in_flight: None,
            rate_limit_per_second: None,
            enabled: None,
        };
        let shown = format!("{body:?}");
        assert!(!shown.contains("MfKQ9r8G"), "{shown}");
        assert!(shown.contains("https://example.com/hooks"), "{shown}");
    }
}
