//! `POST /v1/events`: fan-out. One event's payload to many subscribers, one job each,
//! created in one transaction (all or nothing): the subscribers named, or every
//! subscriber whose event types match the event's type (docs/DESIGN.md §5.13).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::AppJson;
use super::job_input::job_record;
use super::problem::{AppError, FieldError, Problem};
use crate::app::views::JobView;
use crate::domain::ids::new_id;
use crate::domain::job_template::{JobFields, JobTemplate};
use crate::domain::schedule::ScheduleFields;
use crate::domain::{event_type, validate};
use crate::fan_out::{FanOutError, create_for_event_type};
use crate::store::{CreateOutcome, NewJob, StoreError};

pub use crate::fan_out::MAX_FAN_OUT;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(fan_out, super::event_reads::list_events))
        .routes(routes!(super::event_reads::get_event))
}

/// One event for many subscribers: those named in `subscriber_ids`, or, with an
/// `event_type` and no `subscriber_ids`, every subscriber (enabled or paused) whose
/// `event_types` match it. Scheduling fields as in `POST /v1/jobs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FanOutRequest {
    /// The producer's stable event id; with each subscriber id it identifies a job.
    #[schema(min_length = 1, max_length = 256)]
    pub event_id: String,
    /// The event's type (1–128 of A-Z a-z 0-9 . _ : -), sent as `webhook-event-type`.
    /// Without `subscriber_ids`, the jobs go to every subscriber subscribed to it (at
    /// most 10,000, else 422).
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_type: Option<String>,
    /// Any JSON value but `null`; delivered byte for byte to every subscriber.
    #[schema(schema_with = crate::domain::job_template::payload_schema)]
    pub payload: Box<RawValue>,
    /// 1 to 10,000 distinct subscriber ids, all registered; required without
    /// `event_type`.
    #[schema(min_items = 1, max_items = 10000)]
    pub subscriber_ids: Option<Vec<String>>,
    /// RFC 3339 with an offset; a past instant means now.
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
    /// Milliseconds from now until delivery.
    pub delay_ms: Option<u64>,
    /// RFC 3339 with an offset; must be after `deliver_at`.
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
    /// Milliseconds from `deliver_at` until the deadline.
    #[schema(minimum = 1)]
    pub ttl_ms: Option<u64>,
    /// Most attempts per job (1–10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub max_attempts: Option<u32>,
}

/// The jobs of a fan-out, in the order of `subscriber_ids` (by event type: in
/// subscriber id order).
#[derive(Debug, Serialize, ToSchema)]
pub struct FanOutJobs {
    /// One job per subscriber; empty when no subscriber's event types match.
    pub items: Vec<JobView>,
}

fn check_subscribers(ids: &[String], errors: &mut Vec<FieldError>) {
    if ids.is_empty() {
        errors.push(FieldError::new(
            "subscriber_ids",
            "must name at least one subscriber",
        ));
        return;
    }
    if ids.len() > MAX_FAN_OUT {
        errors.push(FieldError::new(
            "subscriber_ids",
            format!(
                "names {} subscribers; at most {MAX_FAN_OUT} per call (split the fan-out)",
                ids.len()
            ),
        ));
        return;
    }
    errors.extend(validate::subscriber_id_list(ids, "subscriber_ids"));
}

/// Fan an event out: one job per subscriber, all or nothing. Idempotent per
/// (subscriber, event) as `POST /v1/jobs`: subscribers that already have the event with
/// the same payload keep their job; a different payload for any of them is a 409 and
/// nothing is created. With `event_type` and no `subscriber_ids`, the subscribers are
/// those subscribed to the type at that moment (an empty list, 201, when none is). The
/// jobs' `waiting_reason` does not consider subscriber limits here (read a job for
/// that).
#[utoipa::path(
    post,
    path = "/v1/events",
    tag = "jobs",
    request_body = FanOutRequest,
    responses(
        (status = 201, description = "Jobs created (some may have existed), or none matched the event type", body = FanOutJobs),
        (status = 200, description = "Every job already existed", body = FanOutJobs),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "An unknown subscriber; nothing created", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "An existing job with a different payload; nothing created", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Payload or body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field (e.g. more than 10,000 subscribers named or matched)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; nothing stored, retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn fan_out(
    State(state): State<AppState>,
    AppJson(request): AppJson<FanOutRequest>,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    let mut errors = Vec::new();
    match (&request.subscriber_ids, &request.event_type) {
        (Some(ids), _) => check_subscribers(ids, &mut errors),
        (None, None) => errors.push(FieldError::new(
            "subscriber_ids",
            "is required without event_type (name the subscribers, or give the event's \
             type to reach its subscribers)",
        )),
        (None, Some(_)) => {}
    }
    if let Some(Err(message)) = request.event_type.as_deref().map(event_type::event_type) {
        errors.push(FieldError::new("event_type", message));
    }
    let fields = JobFields {
        event_id: &request.event_id,
        payload: request.payload.get(),
        schedule: ScheduleFields {
            deliver_at: request.deliver_at.as_deref(),
            delay_ms: request.delay_ms,
            deadline: request.deadline.as_deref(),
            ttl_ms: request.ttl_ms,
        },
        max_attempts: request.max_attempts,
    };
    let template = JobTemplate::check(fields, now, state.job_limits, &mut errors)?;
    let Some(template) = template.filter(|_| errors.is_empty()) else {
        return Err(AppError::Invalid(errors));
    };
    let job_for = |subscriber_id: String| NewJob {
        event_type: request.event_type.clone(),
        ..job_record(&template, subscriber_id, new_id(now))
    };
    let outcomes = match (
        request.subscriber_ids.clone(),
        request.event_type.as_deref(),
    ) {
        (Some(ids), _) => state
            .store
            .create_jobs(ids.into_iter().map(job_for).collect())
            .await
            .map_err(FanOutError::from),
        (None, Some(name)) => create_for_event_type(&state.store, name, job_for).await,
        (None, None) => Ok(Vec::new()),
    }
    .map_err(|error| match error {
        FanOutError::TooMany(_) => AppError::invalid("event_type", error.to_string()),
        // Matched subscribers deleted before their jobs were written, three times over.
        FanOutError::Store(StoreError::UnknownSubscriber(_))
            if request.subscriber_ids.is_none() =>
        {
            AppError::Unavailable(
                "the subscribers of this event type changed while its jobs were written; \
                 nothing was created, retry"
                    .into(),
            )
        }
        FanOutError::Store(StoreError::UnknownSubscriber(id)) => {
            AppError::UnknownReference(FieldError::new(
                "subscriber_ids",
                format!("subscriber `{id}` does not exist"),
            ))
        }
        FanOutError::Store(other) => AppError::from(other),
    })?;
    let created: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            CreateOutcome::Created(job) => Some(job.deliver_at),
            CreateOutcome::Existing { .. } => None,
        })
        .collect();
    if !created.is_empty() {
        crate::metrics::jobs_accepted(created.len() as u64);
    }
    let status = if !created.is_empty() || outcomes.is_empty() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let items = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            CreateOutcome::Created(job) | CreateOutcome::Existing { job, .. } => {
                JobView::new(job, None, now)
            }
        })
        .collect();
    Ok((status, Json(FanOutJobs { items })).into_response())
}
