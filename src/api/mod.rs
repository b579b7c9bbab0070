//! The HTTP API (docs/DESIGN.md §5): axum routers per resource, problem+json errors, and the
//! OpenAPI document generated from the handlers (utoipa).

pub mod audit;
pub mod audit_actions;
pub mod auth;
pub mod connections;
pub mod destinations;
pub mod detached;
pub(crate) mod doc;
pub mod event_reads;
mod events;
pub mod extract;
pub mod guesses;
mod health;
pub mod job_control;
pub mod job_filter;
pub mod job_input;
pub mod jobs;
mod limits;
pub mod listener;
pub mod loopback_host;
mod metrics_route;
pub mod problem;
pub mod query_params;
pub mod replays;
pub mod request_id;
pub mod schedules;
pub mod secret_rotation;
mod subscriber_deletion;
pub mod subscriber_pause;
pub mod subscriber_stats;
pub mod subscribers;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use tower::ServiceBuilder;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Level, Span};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

pub use crate::app::{AppState, AttemptTimeouts};
use crate::app::{load_reads, pagination};
use crate::domain::Clock;
use crate::domain::job_template::JobLimits;
use crate::domain::replay_plan::ReplayLimits;
use crate::domain::schedule_quota::ScheduleQuotas;
use crate::domain::target::TargetPolicy;
use crate::store::SharedStore;

/// The header carrying each request's id: the client's when [`request_id::acceptable`],
/// the server's own id ([`request_id::ServerRequestId`]) otherwise.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Room for the fields around the payload when sizing the body limit, in bytes: a
/// fan-out's 10,000 subscriber ids of up to 128 bytes each, quoted and separated.
const ENVELOPE_BYTES: usize =
    64 * 1024 + events::MAX_FAN_OUT * (crate::domain::validate::MAX_SUBSCRIBER_ID_LEN + 3);

/// Settings of the HTTP layer.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// The tokens `/v1/*` needs; empty: open.
    pub tokens: auth::ApiTokens,
    /// Limits on new jobs.
    pub job_limits: JobLimits,
    /// The longest a request may take before it is answered 408.
    pub request_timeout: Duration,
    /// The eligible → delivered objective, in milliseconds (for a gauge).
    pub delivery_slo_ms: u64,
    /// Limits on replays.
    pub replay_limits: ReplayLimits,
    /// Which literal addresses subscriber URLs may name (CASES C-08).
    pub target_policy: Arc<TargetPolicy>,
    /// The attempt timeouts: the server's, and the most a subscriber may set.
    pub attempt_timeouts: AttemptTimeouts,
    /// The quotas on recurring schedules (docs/DESIGN.md §5.14).
    pub schedule_quotas: ScheduleQuotas,
    /// Where requests that may change something run to their end, whether or not the
    /// client waits ([`detached`]); shutdown waits for them.
    pub actions: tokio_util::task::TaskTracker,
    /// `--public-url` is an `https` URL: the console's cookies are always `Secure`.
    pub public_https: bool,
    /// Credentials that are not valid one client address may present at once
    /// (`--max-failed-credentials`, [`guesses`]).
    pub max_failed_credentials: u32,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "deferhook",
        description = "Schedules and delivers delayed webhooks: signed (Standard Webhooks), \
                       retried with backoff and jitter until a deadline, dead-lettered when \
                       they cannot be delivered. Errors are RFC 9457 problem details.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "jobs", description = "Delayed webhook jobs"),
        (name = "subscribers", description = "Registered receivers"),
        (name = "destinations", description = "The host:port destinations subscribers share: limits, pauses, circuit breakers"),
        (name = "events", description = "Events fanned out to subscribers: which are affected, and one event's summary"),
        (name = "replays", description = "Paced replays of dead letters"),
        (name = "schedules", description = "Recurring schedules: one job per period, its event id derived from the period"),
        (name = "audit", description = "The trail of operator actions"),
        (name = "health", description = "Probes"),
    )
)]
struct ApiDoc;

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(subscribers::router())
        .merge(subscriber_pause::router())
        .merge(secret_rotation::router())
        .merge(subscriber_stats::router())
        .merge(destinations::router())
        .merge(jobs::router())
        .merge(events::router())
        .merge(replays::router())
        .merge(schedules::router())
        .merge(subscriber_deletion::router())
        .merge(audit::router())
        .merge(health::router())
        .merge(metrics_route::router())
}

/// The OpenAPI 3.1 document of the API, as committed in `openapi/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut openapi = routes().split_for_parts().1;
    doc::finish(&mut openapi);
    openapi
}

/// The content security policy of every answer but the console's pages (which set a
/// stricter one): `/docs/` (Swagger UI: its own scripts and style sheets, inline style
/// attributes, `data:` images) may load only from this origin and be framed by no
/// page; the JSON answers are not documents, and no page may frame them either (issue
/// #34 part 4.4).
const DOCUMENT_CSP: &str = "default-src 'self'; img-src 'self' data:; \
    style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// Routes served beside the API, under the same middleware: the console's pages, and
/// the middleware that turns an error answered to one of their addresses outside them
/// (routing, access, limits, timeouts) into a page of theirs. `server.rs` brings them;
/// the API knows nothing else of the console.
pub struct Beside {
    /// The routes, their state applied.
    pub routes: Router,
    /// Runs inside the access check and outside the API's problem+json rewriting.
    pub error_pages: ErrorPages,
}

/// A middleware function as [`Beside::error_pages`] takes it.
pub type ErrorPages = fn(
    axum::extract::Request,
    axum::middleware::Next,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = axum::response::Response> + Send>,
>;

/// The API before it is mounted: the state its handlers share, the audit trail its
/// actions are recorded in, and the failed credential guesses per client address —
/// what the console shares with it.
pub struct Api {
    /// What every handler shares (the application's state).
    pub state: AppState,
    /// The audit trail of the API's actions.
    pub trail: crate::audit_trail::Trail,
    /// Failed credential guesses per client address (the API's tokens, the console's
    /// logins).
    pub guesses: guesses::Guesses,
    settings: ApiSettings,
}

impl Api {
    /// The API over `store`, on `clock`, with `settings`; page cursors signed by
    /// `cursors`.
    pub fn new(
        store: SharedStore,
        clock: Arc<dyn Clock>,
        settings: ApiSettings,
        cursors: pagination::Cursors,
    ) -> Api {
        let state = AppState {
            loads: load_reads::LoadReads::spawn(store.clone()),
            store,
            clock,
            job_limits: settings.job_limits,
            metrics: crate::metrics::install(),
            delivery_slo_ms: settings.delivery_slo_ms,
            replay_limits: settings.replay_limits,
            target_policy: settings.target_policy.clone(),
            attempt_timeouts: settings.attempt_timeouts,
            schedule_quotas: settings.schedule_quotas,
            cursors,
            deletion_wait: crate::app::subscriber_deletion::wait(settings.request_timeout),
        };
        let trail = crate::audit_trail::Trail {
            store: state.store.clone(),
            clock: state.clock.clone(),
            wait: crate::audit_trail::audit_wait(settings.request_timeout),
        };
        let guesses = guesses::Guesses::new(state.clock.clone(), settings.max_failed_credentials);
        Api {
            state,
            trail,
            guesses,
            settings,
        }
    }

    /// The API's router and `beside`'s routes with their middleware, outermost first:
    /// `nosniff`, no framing and a content security policy on every answer that has
    /// none (issue #34 part 4.4), header and target limits (431, 414; before anything
    /// is logged), request ids (the server's own, and a client's unsafe id replaced by
    /// it), tracing, problem+json for every error (then `beside`'s error pages), access
    /// (tokens, or loopback hosts only), the declared body length (413 before the body
    /// is read), a request timeout, a task that finishes what may change something
    /// whether or not the client waits ([`detached`]), and a body limit sized from the
    /// payload limit.
    pub fn router(self, beside: Beside) -> Router {
        let Api {
            state,
            trail,
            guesses,
            settings,
        } = self;
        let recorder = audit::Recorder {
            trail: trail.clone(),
            max_body_bytes: settings.job_limits.max_payload_bytes + ENVELOPE_BYTES,
        };
        let (router, mut openapi) = routes().split_for_parts();
        doc::finish(&mut openapi);
        // Route layers: they see the route the router matched. The query check runs first
        // (outermost), so a refused request is neither handled nor audited.
        let router = router
            .route_layer(axum::middleware::from_fn_with_state(
                recorder,
                audit::record,
            ))
            .route_layer(axum::middleware::from_fn_with_state(
                query_params::QueryRoutes::from_doc(&openapi),
                query_params::refuse_on_routes_without,
            ));
        let request_id_header = HeaderName::from_static(REQUEST_ID_HEADER);
        let max_body_bytes = settings.job_limits.max_payload_bytes + ENVELOPE_BYTES;
        let middleware = ServiceBuilder::new()
            .layer(SetResponseHeaderLayer::if_not_present(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ))
            .layer(SetResponseHeaderLayer::if_not_present(
                header::X_FRAME_OPTIONS,
                HeaderValue::from_static("DENY"),
            ))
            .layer(SetResponseHeaderLayer::if_not_present(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(DOCUMENT_CSP),
            ))
            .layer(axum::middleware::from_fn(limits::limit_headers))
            .layer(axum::middleware::from_fn(request_id::assign_ids))
            .layer(SetRequestIdLayer::new(
                request_id_header.clone(),
                request_id::ServerIdAsRequestId,
            ))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
                    .on_response(DefaultOnResponse::new().level(Level::INFO)),
            )
            .layer(PropagateRequestIdLayer::new(request_id_header))
            .layer(axum::middleware::from_fn(problem::problem_for_bare_errors))
            .layer(axum::middleware::from_fn(beside.error_pages))
            .layer(axum::middleware::from_fn_with_state(
                auth::Access {
                    tokens: settings.tokens.clone(),
                    guesses: guesses.clone(),
                },
                auth::require_token,
            ))
            .layer(axum::middleware::from_fn_with_state(
                max_body_bytes,
                limits::limit_declared_body,
            ))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                settings.request_timeout,
            ))
            .layer(axum::middleware::from_fn_with_state(
                settings.actions.clone(),
                detached::finish_without_client,
            ));
        router
            .merge(SwaggerUi::new("/docs").url("/openapi.json", openapi))
            .with_state(state)
            .merge(beside.routes)
            .layer(DefaultBodyLimit::max(max_body_bytes))
            .layer(middleware)
    }
}

/// The span of a request, whose fields every line logged for it carries: the request
/// id (the client's or the server's), the server's own id, the client's address (its
/// connection's peer; `-` without a listener), method and path. The values are
/// recorded as strings, which the text log prints quoted and escaped (`path="/v1"`)
/// and the JSON log as JSON strings: a field cannot forge another. The request id has
/// been checked (short, safe characters) and the path is at most 8 KiB (414 beyond).
fn request_span<B>(request: &Request<B>) -> Span {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    let server_id = request
        .extensions()
        .get::<request_id::ServerRequestId>()
        .map_or_else(|| "-".to_owned(), |id| id.0.to_string());
    let client = auth::client_address(request.extensions()).map(|ip| ip.to_string());
    tracing::info_span!(
        "request",
        request_id = id,
        server_request_id = server_id.as_str(),
        client = client.as_deref().unwrap_or("-"),
        method = request.method().as_str(),
        path = request.uri().path(),
    )
}
