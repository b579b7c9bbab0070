//! `/metrics`: Prometheus text exposition (docs/DESIGN.md §7).

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::problem::AppError;

/// Held from setting the job gauges to rendering them.
static SCRAPE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The Prometheus text format's media type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// Prometheus metrics. The job gauges are read from the store at each scrape.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses(
        (status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
        (status = 503, description = "The store is unreachable", body = super::problem::Problem, content_type = "application/problem+json"),
    ))]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, AppError> {
    let now = state.clock.now();
    let gauges = state.store.gauges(now, state.delivery_slo_ms).await?;
    let text = {
        // The gauges are the process's: two scrapes of servers on different stores in
        // one process (the tests') must not render each other's figures.
        let _one_at_a_time = SCRAPE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        crate::metrics::set_gauges(&gauges, now);
        state.metrics.run_upkeep();
        state.metrics.render()
    };
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROMETHEUS_TEXT),
    );
    Ok(response)
}
