//! `/v1/schedules`: recurring schedules (docs/DESIGN.md §5.14). A schedule's periods
//! start by a cron pattern in an IANA time zone, or every `every_ms` from an anchor;
//! each period becomes one ordinary job per target (its subscriber, or every
//! subscriber of its event type) whose event id is the `event_id` template filled with
//! the period's start, created by the scheduler shortly before the period starts.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::{AppJson, AppQuery};
use super::jobs::{job_view, job_views};
use super::pagination::{self, Listing, Page};
use super::problem::{ApiError, FieldError, Problem};
use super::views::JobView;
use crate::domain::job_template::{JobFields, JobTemplate};
use crate::domain::recurrence::{Recurrence, check_event_id_template, fill_event_id, period_text};
use crate::domain::recurring::CatchUp;
use crate::domain::schedule::ScheduleFields;
use crate::domain::{Timestamp, event_type, validate};
use crate::scheduler::period::{PeriodError, create_period, recurrence_of};
use crate::store::{
    CreateOutcome, PageRequest, Schedule, ScheduleDefinition, ScheduleTarget, ScheduleTiming,
};

/// How many upcoming periods a schedule's view lists.
pub const NEXT_PERIODS: usize = 5;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_schedule, get_schedule, delete_schedule))
        .routes(routes!(list_schedules))
        .routes(routes!(run_schedule))
}

/// Creates or replaces a schedule. Give `subscriber_id` or `event_type`, and `cron`
/// or `every_ms`. On update every field is replaced, except `anchor` and `enabled`,
/// which keep their stored value when left out (so a producer that puts its schedules
/// again when it starts never shifts their periods or undoes an operator's pause).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutScheduleRequest {
    /// Deliver each period to this subscriber (it must exist).
    #[schema(min_length = 1, max_length = 128)]
    pub subscriber_id: Option<String>,
    /// Deliver each period to every subscriber (enabled or paused) whose
    /// `event_types` match this type when the period's jobs are created, as
    /// `POST /v1/events` with an `event_type`; sent as `webhook-event-type`.
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_type: Option<String>,
    /// A cron pattern of 5 fields (minute hour day-of-month month day-of-week) or 6
    /// (seconds first), read in `time_zone`; `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly` are taken too.
    #[schema(example = "0 0 * * *", min_length = 1, max_length = 512)]
    pub cron: Option<String>,
    /// Milliseconds between periods (1,000 to 31,622,400,000): the periods start at
    /// whole multiples of it from `anchor`.
    #[schema(minimum = 1000, maximum = 31_622_400_000_u64)]
    pub every_ms: Option<u64>,
    /// With `every_ms`: one period's start (RFC 3339 with an offset); default: when
    /// the schedule was created, to the second. Kept when left out on update.
    #[schema(format = DateTime)]
    pub anchor: Option<String>,
    /// With `cron`: the IANA time zone its wall clock is read in (default `UTC`).
    #[schema(example = "Europe/Berlin", min_length = 1)]
    pub time_zone: Option<String>,
    /// The event id of each period's jobs: must contain `{period_start}`, replaced by
    /// the period's start in UTC (`2026-11-30T00:00:00Z`, with milliseconds only when
    /// it has some); 1–256 visible ASCII characters once filled.
    #[schema(
        example = "cleanup:room-7:{period_start}",
        min_length = 15,
        max_length = 256
    )]
    pub event_id: String,
    /// Any JSON value but `null`; every period's jobs send it byte for byte.
    #[schema(schema_with = super::doc::rules::json_payload)]
    pub payload: Box<RawValue>,
    /// Each job's deadline after its `deliver_at` (the period's start), in
    /// milliseconds; default: the server's TTL.
    #[schema(minimum = 1)]
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts (1–10000); absent: only the deadline bounds them.
    #[schema(minimum = 1, maximum = 10000)]
    pub max_attempts: Option<u32>,
    /// After downtime: `latest` (default) creates the most recent missed period's
    /// jobs, due at once; `none` creates none. A period is missed when its start passed
    /// more than 5 s before a scheduler reached it.
    #[schema(value_type = Option<CatchUp>)]
    pub catch_up: Option<String>,
    /// False: no period's jobs are created (a manual run still creates them); true
    /// again: periods resume from the next one. Default true; kept when left out on
    /// update.
    pub enabled: Option<bool>,
}

/// The last period whose jobs were created.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastRunView {
    /// The period's start.
    pub period_start: Timestamp,
    /// Its event id.
    pub event_id: String,
    /// How many jobs it has (0 when no subscriber matched the event type).
    pub jobs: u32,
    /// One of its jobs (the first subscriber's), as it stands now: only in the view of
    /// one schedule (`null` in listings, or when it is purged).
    pub job: Option<JobView>,
}

/// A recurring schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    /// The schedule's id.
    pub id: String,
    /// Its subscriber; `null` for a schedule of an event type.
    pub subscriber_id: Option<String>,
    /// Its event type; `null` for a schedule of a subscriber.
    pub event_type: Option<String>,
    /// Its cron pattern; `null` for an interval.
    pub cron: Option<String>,
    /// The time zone of its cron pattern; `null` for an interval.
    pub time_zone: Option<String>,
    /// Milliseconds between periods; `null` for a cron pattern.
    pub every_ms: Option<u64>,
    /// One period's start, for an interval; `null` for a cron pattern.
    pub anchor: Option<Timestamp>,
    /// The event id template.
    pub event_id: String,
    /// The payload, exactly as given.
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    /// Each job's TTL; `null`: the server's.
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts; `null`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// What becomes of missed periods.
    pub catch_up: CatchUp,
    /// False while paused.
    pub enabled: bool,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its definition last changed.
    pub updated_at: Timestamp,
    /// The starts of its next five periods after now (empty while paused).
    pub next_periods: Vec<Timestamp>,
    /// The last period whose jobs were created, if any.
    pub last_run: Option<LastRunView>,
    /// Why the last period reached created no job (its subscriber does not exist, over
    /// 10,000 subscribers match); `null` once a period creates its jobs.
    pub last_error: Option<String>,
}

impl ScheduleView {
    fn new(schedule: Schedule, now: Timestamp) -> Self {
        let Schedule {
            definition: d,
            created_at,
            updated_at,
            last_run,
            last_error,
            ..
        } = schedule;
        let next_periods = match recurrence_of(&d) {
            Ok(recurrence) if d.enabled => {
                recurrence.starts_between(now, Timestamp::MAX, NEXT_PERIODS)
            }
            _ => Vec::new(),
        };
        let (subscriber_id, event_type) = match d.target {
            ScheduleTarget::Subscriber(id) => (Some(id), None),
            ScheduleTarget::EventType(name) => (None, Some(name)),
        };
        let (cron, time_zone, every_ms, anchor) = match d.timing {
            ScheduleTiming::Cron { cron, time_zone } => (Some(cron), Some(time_zone), None, None),
            ScheduleTiming::Every { every_ms, anchor } => {
                (None, None, Some(every_ms), Some(anchor))
            }
        };
        let payload = RawValue::from_string(d.payload)
            .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).expect("JSON"));
        ScheduleView {
            id: d.id,
            subscriber_id,
            event_type,
            cron,
            time_zone,
            every_ms,
            anchor,
            event_id: d.event_id,
            payload,
            ttl_ms: d.ttl_ms,
            max_attempts: d.max_attempts,
            catch_up: d.catch_up,
            enabled: d.enabled,
            created_at,
            updated_at,
            next_periods,
            last_run: last_run.map(|run| LastRunView {
                period_start: run.period,
                event_id: run.event_id,
                jobs: run.jobs,
                job: None,
            }),
            last_error,
        }
    }
}

/// The view of one schedule, with its last run's job as it stands at `now`.
async fn full_view(
    state: &AppState,
    schedule: Schedule,
    now: Timestamp,
) -> Result<ScheduleView, ApiError> {
    let job_id = schedule.last_run.as_ref().and_then(|run| run.job_id);
    let mut view = ScheduleView::new(schedule, now);
    if let (Some(id), Some(run)) = (job_id, view.last_run.as_mut())
        && let Some(job) = state.store.get_job(id, now).await?
    {
        run.job = Some(job_view(state, job, now).await?);
    }
    Ok(view)
}

fn schedule_id(raw: &str) -> Result<(), ApiError> {
    validate::schedule_id(raw).map_err(|message| ApiError::invalid("schedule_id", message))
}

/// The definition `body` asks for as schedule `id` at `now`, its stored version being
/// `existing`, with its periods; or a 422 naming every invalid field (413 for a
/// payload over the limit).
fn definition(
    state: &AppState,
    id: &str,
    body: PutScheduleRequest,
    existing: Option<&ScheduleDefinition>,
    now: Timestamp,
) -> Result<(ScheduleDefinition, Option<Recurrence>), ApiError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::schedule_id(id) {
        errors.push(FieldError::new("schedule_id", message));
    }
    let target = match (body.subscriber_id, body.event_type) {
        (Some(subscriber), None) => {
            if let Err(message) = validate::subscriber_id(&subscriber) {
                errors.push(FieldError::new("subscriber_id", message));
            }
            Some(ScheduleTarget::Subscriber(subscriber))
        }
        (None, Some(name)) => {
            if let Err(message) = event_type::event_type(&name) {
                errors.push(FieldError::new("event_type", message));
            }
            Some(ScheduleTarget::EventType(name))
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "event_type",
                "give subscriber_id or event_type, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                "subscriber_id",
                "is required without event_type (whom each period is delivered to)",
            ));
            None
        }
    };
    let stored_anchor = existing.and_then(|d| match d.timing {
        ScheduleTiming::Every { anchor, .. } => Some(anchor),
        ScheduleTiming::Cron { .. } => None,
    });
    let recurrence = match (body.cron, body.every_ms) {
        (Some(cron), None) => {
            if body.anchor.is_some() {
                errors.push(FieldError::new("anchor", "applies to every_ms only"));
            }
            Recurrence::cron(&cron, body.time_zone.as_deref())
                .map_err(|invalid| errors.extend(invalid))
                .ok()
        }
        (None, Some(every_ms)) => {
            if body.time_zone.is_some() {
                errors.push(FieldError::new(
                    "time_zone",
                    "applies to cron only (an interval's periods do not depend on a zone)",
                ));
            }
            let anchor = match body.anchor.as_deref().map(Timestamp::parse_rfc3339) {
                Some(Ok(anchor)) => Some(anchor),
                Some(Err(e)) => {
                    errors.push(FieldError::new("anchor", e.to_string()));
                    None
                }
                // The schedule's creation, to the second: event ids without milliseconds.
                None => Some(stored_anchor.unwrap_or_else(|| {
                    Timestamp::from_millis(now.as_millis().div_euclid(1_000) * 1_000)
                })),
            };
            anchor.and_then(|anchor| {
                Recurrence::every(every_ms, anchor)
                    .map_err(|invalid| errors.push(invalid))
                    .ok()
            })
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "every_ms",
                "give cron or every_ms, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                "cron",
                "is required without every_ms (when the periods start)",
            ));
            None
        }
    };
    if let Err(error) = check_event_id_template(&body.event_id) {
        errors.push(error);
    }
    let catch_up = match body.catch_up.as_deref().map(str::parse::<CatchUp>) {
        None => CatchUp::default(),
        Some(Ok(catch_up)) => catch_up,
        Some(Err(_)) => {
            errors.push(FieldError::new("catch_up", "must be `latest` or `none`"));
            CatchUp::default()
        }
    };
    // A period's job must be valid as a posted one: the payload, TTL and attempts.
    let sample_id = fill_event_id(&body.event_id, now);
    let fields = JobFields {
        event_id: &sample_id,
        payload: body.payload.get(),
        schedule: ScheduleFields {
            ttl_ms: body.ttl_ms,
            ..ScheduleFields::default()
        },
        max_attempts: body.max_attempts,
    };
    let mut job_errors = Vec::new();
    JobTemplate::check(fields, now, state.job_limits, &mut job_errors)?;
    errors.extend(job_errors.into_iter().filter(|e| e.field != "event_id"));
    let (Some(target), Some(recurrence), true) = (target, recurrence, errors.is_empty()) else {
        return Err(ApiError::Invalid(errors));
    };
    let timing = match &recurrence {
        Recurrence::Cron(cron) => ScheduleTiming::Cron {
            cron: cron.pattern().to_owned(),
            time_zone: cron.time_zone().to_owned(),
        },
        Recurrence::Every(interval) => ScheduleTiming::Every {
            every_ms: interval.every_ms(),
            anchor: interval.anchor(),
        },
    };
    let definition = ScheduleDefinition {
        id: id.to_owned(),
        target,
        timing,
        event_id: body.event_id,
        payload: body.payload.get().to_owned(),
        ttl_ms: body.ttl_ms,
        max_attempts: body.max_attempts,
        catch_up,
        enabled: body.enabled.or(existing.map(|d| d.enabled)).unwrap_or(true),
    };
    Ok((definition, Some(recurrence)))
}

/// Create or replace a recurring schedule.
#[utoipa::path(
    put,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "1–128 of A-Z a-z 0-9 . _ : -, but not `.` or `..`")),
    request_body = PutScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 200, description = "Replaced, or unchanged", body = ScheduleView),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The subscriber does not exist; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Payload or body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field: a cron pattern or time zone, an event id template without {period_start}, an interval under 1 s, an event type's characters", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable; retry", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn put_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<PutScheduleRequest>,
) -> Result<Response, ApiError> {
    let now = state.clock.now();
    schedule_id(&id)?;
    let existing = state.store.get_schedule(&id).await?;
    let stored = existing.as_ref().map(|s| &s.definition);
    let (definition, recurrence) = definition(&state, &id, body, stored, now)?;
    if let ScheduleTarget::Subscriber(subscriber) = &definition.target
        && state.store.get_subscriber(subscriber).await?.is_none()
    {
        return Err(ApiError::UnknownReference(FieldError::new(
            "subscriber_id",
            format!("subscriber `{subscriber}` does not exist"),
        )));
    }
    if let Some(existing) = existing.as_ref().filter(|s| s.definition == definition) {
        return Ok((
            StatusCode::OK,
            Json(full_view(&state, existing.clone(), now).await?),
        )
            .into_response());
    }
    // The periods start again from now when the timing changes or the schedule is
    // resumed; otherwise the cursor stays (the periods made stay made).
    let restart = existing.as_ref().is_none_or(|s| {
        s.definition.timing != definition.timing || (!s.definition.enabled && definition.enabled)
    });
    let next_period = match (&existing, restart) {
        (Some(existing), false) => existing.next_period,
        _ => recurrence.and_then(|r| r.next_after(now)),
    };
    let created = existing.is_none();
    let schedule = state
        .store
        .put_schedule(definition, next_period, now)
        .await?;
    let view = full_view(&state, schedule, now).await?;
    if !created {
        return Ok((StatusCode::OK, Json(view)).into_response());
    }
    let mut response = (StatusCode::CREATED, Json(view)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/schedules/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Read a recurring schedule: its definition, its next five periods and its last run.
#[utoipa::path(
    get,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    schedule_id(&id)?;
    let now = state.clock.now();
    let schedule = state
        .store
        .get_schedule(&id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("schedule `{id}` does not exist")))?;
    Ok(Json(full_view(&state, schedule, now).await?))
}

/// Delete a recurring schedule: no period starts after this; the jobs it created stay
/// (those of a period starting within the next 5 s may already be stored and are
/// delivered).
#[utoipa::path(
    delete,
    path = "/v1/schedules/{schedule_id}",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    schedule_id(&id)?;
    if state.store.delete_schedule(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "schedule `{id}` does not exist"
        )))
    }
}

/// Query of the schedule listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListSchedulesQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List recurring schedules in id order.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    params(ListSchedulesQuery),
    responses(
        (status = 200, description = "One page of schedules (`last_run.job` is null here: read one schedule for it)", body = Page<ScheduleView>),
        (status = 422, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_schedules(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ListSchedulesQuery>,
) -> Result<Json<Page<ScheduleView>>, ApiError> {
    let limit = pagination::limit(query.limit.as_deref())?;
    let after = pagination::decode_cursor(Listing::Schedules, query.cursor.as_deref(), |key| {
        validate::schedule_id(key).ok().map(|()| key.to_owned())
    })?;
    let fetched = state
        .store
        .list_schedules(PageRequest {
            after,
            limit: limit + 1,
        })
        .await?;
    let now = state.clock.now();
    Ok(Json(pagination::page(
        Listing::Schedules,
        fetched,
        limit,
        |s| s.definition.id.clone(),
        |s| ScheduleView::new(s, now),
    )))
}

/// The jobs of one period of a schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct PeriodJobsView {
    /// The period's start.
    pub period_start: Timestamp,
    /// Its event id.
    pub event_id: String,
    /// Its jobs, created now or already there, in subscriber id order (empty when no
    /// subscriber matches the event type).
    pub items: Vec<JobView>,
}

/// Create the current period's jobs now, unless they exist: the period that started
/// last (at or before now), due at once. Works while the schedule is paused.
#[utoipa::path(
    post,
    path = "/v1/schedules/{schedule_id}/run",
    tag = "schedules",
    params(("schedule_id" = String, Path, description = "The schedule's id")),
    responses(
        (status = 201, description = "The period's jobs were created (some may have existed)", body = PeriodJobsView),
        (status = 200, description = "The period's jobs already existed", body = PeriodJobsView),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No period has started yet, or the schedule cannot make the period's jobs now (its subscriber does not exist, over 10,000 subscribers match); nothing created", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn run_schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    schedule_id(&id)?;
    let now = state.clock.now();
    let schedule = state
        .store
        .get_schedule(&id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("schedule `{id}` does not exist")))?;
    let definition = &schedule.definition;
    let recurrence = recurrence_of(definition).map_err(ApiError::Conflict)?;
    let Some(start) = recurrence.latest_at_or_before(now) else {
        let first = recurrence
            .next_after(now)
            .map(|t| format!("; the first starts at {}", period_text(t)))
            .unwrap_or_default();
        return Err(ApiError::Conflict(format!(
            "schedule `{id}` has no period that has started yet{first}"
        )));
    };
    let made = create_period(&state.store, definition, start, now, state.job_limits)
        .await
        .map_err(|error| match error {
            PeriodError::Refused(reason) => ApiError::Conflict(reason),
            PeriodError::Store(error) => ApiError::from(error),
        })?;
    let created = made
        .outcomes
        .iter()
        .any(|o| matches!(o, CreateOutcome::Created(_)));
    state
        .store
        .record_schedule_run(&id, made.run.clone())
        .await?;
    let jobs = made
        .outcomes
        .into_iter()
        .map(|outcome| match outcome {
            CreateOutcome::Created(job) | CreateOutcome::Existing { job, .. } => job,
        })
        .collect();
    let view = PeriodJobsView {
        period_start: made.run.period,
        event_id: made.run.event_id,
        items: job_views(&state, jobs, now).await?,
    };
    let status = if created || view.items.is_empty() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)).into_response())
}
