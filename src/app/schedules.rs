//! Recurring schedules (docs/DESIGN.md §5.14): the checks and the actions — put,
//! delete, run now — that the API's `/v1/schedules` routes run. A schedule's periods
//! start by a cron pattern in an IANA time zone, or every `every_ms` from an anchor;
//! each period becomes one ordinary job per target, made by the scheduler shortly
//! before it starts.

use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::job_views::written_job_views;
use super::schedule_input::{PutScheduleRequest, definition};
use super::schedule_views::{ScheduleView, full_view, written_view};
use super::views::JobView;
use crate::domain::Timestamp;
use crate::domain::field_error::FieldError;
use crate::domain::recurrence::{Recurrence, period_text};
use crate::domain::schedule_quota::shortest_period_ms;
use crate::domain::validate;
use crate::fan_out::MAX_FAN_OUT;
use crate::scheduler::period::{PeriodError, create_period, recurrence_of};
use crate::store::{Schedule, ScheduleDefinition, SchedulePut, ScheduleTarget, ScheduleTiming};

/// The 404 of a schedule that does not exist.
pub fn not_found(id: &str) -> AppError {
    AppError::NotFound(format!("schedule `{id}` does not exist"))
}

/// Schedule `id` as stored, or its 404.
pub async fn stored(state: &AppState, id: &str) -> Result<Schedule, AppError> {
    state
        .store
        .get_schedule(id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Checks a `schedule_id` path parameter (422 naming it).
pub fn schedule_id(raw: &str) -> Result<(), AppError> {
    validate::schedule_id(raw).map_err(|message| AppError::invalid("schedule_id", message))
}

/// Checks the pace of `definition`, its periods by `recurrence` after `now`, against
/// the server's quotas (docs/DESIGN.md §5.14), with one job a period for a subscriber,
/// or as many as its event type matches subscribers now: a 422 naming the timing
/// (`cron` or `every_ms`) with the figures when its periods come closer than the
/// shortest period or make more jobs a minute than the cap.
async fn check_pace(
    state: &AppState,
    definition: &ScheduleDefinition,
    recurrence: &Recurrence,
    now: Timestamp,
) -> Result<(), AppError> {
    // A cron pattern's periods are searched: off the request threads.
    let periods = recurrence.clone();
    let shortest_ms = tokio::task::spawn_blocking(move || shortest_period_ms(&periods, now))
        .await
        .map_err(|error| AppError::Internal(format!("checking a schedule: {error}")))?;
    let field = match definition.timing {
        ScheduleTiming::Cron { .. } => "cron",
        ScheduleTiming::Every { .. } => "every_ms",
    };
    let (jobs, whom) = match &definition.target {
        ScheduleTarget::Subscriber(id) => (1, format!("subscriber `{id}`")),
        ScheduleTarget::EventType(name) => {
            let limit = u32::try_from(MAX_FAN_OUT + 1).unwrap_or(u32::MAX);
            let matched = state.store.subscribers_of_event_type(name, limit).await?;
            let jobs = u64::try_from(matched.len()).unwrap_or(u64::MAX);
            (jobs, format!("the subscribers of event type `{name}` now"))
        }
    };
    state
        .schedule_quotas
        .check_put(field, shortest_ms, jobs, &whom)
        .map_err(|error| AppError::Invalid(vec![error]))
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

/// What a schedule action answers: the view, and whether it made something new (a
/// schedule created; a period's jobs created, or no subscriber matched), which the API
/// answers 201.
#[derive(Debug)]
pub struct Written<V> {
    /// True when something was created.
    pub created: bool,
    /// What it answers with.
    pub view: V,
}

/// Creates or replaces schedule `id` as `body` says (docs/DESIGN.md §5.14): 422 naming
/// each invalid field, a template another schedule of the same target uses, or a pace
/// over the quotas; 404 naming an unknown `subscriber_id`. A put that changes nothing
/// writes nothing. The cursor is kept unless the timing changes or the schedule is
/// resumed.
pub async fn put(
    state: &AppState,
    id: &str,
    body: PutScheduleRequest,
) -> Result<Written<ScheduleView>, AppError> {
    let now = state.clock.now();
    schedule_id(id)?;
    let existing = state.store.get_schedule(id).await?;
    let stored = existing.as_ref().map(|s| s.definition.clone());
    let enabled_given = body.enabled.is_some();
    let (limits, checked_id) = (state.job_limits, id.to_owned());
    // Reading a cron pattern searches its calendar (a pattern that is never due is
    // searched far): off the request threads.
    let (definition, recurrence) = tokio::task::spawn_blocking(move || {
        definition(limits, &checked_id, body, stored.as_ref(), now)
    })
    .await
    .map_err(|error| AppError::Internal(format!("checking a schedule: {error}")))??;
    if let ScheduleTarget::Subscriber(subscriber) = &definition.target
        && state.store.get_subscriber(subscriber).await?.is_none()
    {
        return Err(AppError::UnknownReference(FieldError::new(
            "subscriber_id",
            format!("subscriber `{subscriber}` does not exist"),
        )));
    }
    if let Some(other) = state.store.schedule_sharing_template(&definition).await? {
        let whom = match &definition.target {
            ScheduleTarget::Subscriber(id) => format!("subscriber `{id}`"),
            ScheduleTarget::EventType(_) => "the subscribers of an event type".to_owned(),
        };
        return Err(AppError::invalid(
            "event_id",
            format!(
                "schedule `{other}` makes event ids from this template for {whom} too, so \
                 their periods would share jobs: give each schedule a template of its own \
                 (e.g. `{}:{{period_start}}`)",
                definition.id
            ),
        ));
    }
    if let Some(existing) = existing.as_ref().filter(|s| s.definition == definition) {
        return Ok(Written {
            created: false,
            view: full_view(state, existing.clone(), now).await?,
        });
    }
    // A producer that puts its schedules again at every start is not refused for a
    // pace its event type's subscribers grew past: the scheduler bounds that one.
    let new_pace = existing.as_ref().is_none_or(|s| {
        s.definition.timing != definition.timing || s.definition.target != definition.target
    });
    if new_pace {
        check_pace(state, &definition, &recurrence, now).await?;
    }
    // The store keeps the cursor unless the timing changes or the schedule is resumed,
    // and then starts the periods again from the first one after now.
    let put = SchedulePut {
        definition,
        next_period: recurrence.next_after(now),
        enabled_given,
        max_schedules: state.schedule_quotas.max_schedules,
    };
    let created = existing.is_none();
    let schedule = state.store.put_schedule(put, now).await?;
    let view = written_view(state, schedule, now).await;
    Ok(Written { created, view })
}

/// Deletes schedule `id` (404 when there is no such schedule); jobs it made stay.
pub async fn delete(state: &AppState, id: &str) -> Result<(), AppError> {
    schedule_id(id)?;
    if state.store.delete_schedule(id).await? {
        Ok(())
    } else {
        Err(not_found(id))
    }
}

/// Creates the current period's jobs of schedule `id` now, unless they exist: the
/// period that started last (at or before now), due at once; works while the schedule
/// is paused (409 when no period has started yet or the period is refused; 404 when
/// there is no such schedule). The jobs are committed before the run is recorded, so
/// a store that fails after them is logged, never answered (CASES C-19).
pub async fn run(state: &AppState, id: &str) -> Result<Written<PeriodJobsView>, AppError> {
    schedule_id(id)?;
    let now = state.clock.now();
    let schedule = stored(state, id).await?;
    let definition = &schedule.definition;
    let recurrence = recurrence_of(definition).map_err(AppError::Conflict)?;
    let Some(start) = recurrence.latest_at_or_before(now) else {
        let first = recurrence
            .next_after(now)
            .map(|t| format!("; the first starts at {}", period_text(t)))
            .unwrap_or_default();
        return Err(AppError::Conflict(format!(
            "schedule `{id}` has no period that has started yet{first}"
        )));
    };
    let made = create_period(&state.store, definition, start, now, state.job_limits)
        .await
        .map_err(|error| match error {
            PeriodError::Refused(reason) => AppError::Conflict(reason),
            PeriodError::Store(error) => AppError::from(error),
        })?;
    let created = made.created > 0;
    // The period's jobs are committed: what follows only describes them, so a store
    // that fails now is logged, not answered as a 503 that would say nothing was made
    // (CASES C-19).
    if let Err(error) = state.store.record_schedule_run(id, made.run.clone()).await {
        tracing::warn!(schedule_id = %id, %error,
            "the period's jobs are made; the schedule's last run could not be recorded");
    }
    let jobs = made.jobs;
    let view = PeriodJobsView {
        period_start: made.run.period,
        event_id: made.run.event_id,
        items: written_job_views(state, jobs, now).await,
    };
    Ok(Written {
        created: created || view.items.is_empty(),
        view,
    })
}
