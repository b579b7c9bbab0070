//! What `/v1/schedules` answers: a schedule's view, with its next periods and its last
//! run (docs/DESIGN.md §5.14).

use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::job_views::job_view;
use super::views::JobView;
use crate::domain::Timestamp;
use crate::domain::recurring::CatchUp;
use crate::scheduler::period::recurrence_of;
use crate::store::{Schedule, ScheduleTarget, ScheduleTiming};

/// How many upcoming periods a schedule's view lists.
pub const NEXT_PERIODS: usize = 5;

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
    /// The view of `schedule` at `now`, its last run without its job.
    pub fn new(schedule: Schedule, now: Timestamp) -> Self {
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

/// The view of `schedule`, just written: when its last run's job cannot be read (the
/// store unavailable a moment after the write), the view without it, a warning logged.
/// The write has been committed, so the answer must not be a 503 (CASES C-19).
pub async fn written_view(state: &AppState, schedule: Schedule, now: Timestamp) -> ScheduleView {
    match full_view(state, schedule.clone(), now).await {
        Ok(view) => view,
        Err(error) => {
            tracing::warn!(schedule_id = %schedule.definition.id, %error,
                "the schedule is stored; its last run's job could not be read for its view");
            ScheduleView::new(schedule, now)
        }
    }
}

/// The view of one schedule, with its last run's job as it stands at `now`.
pub async fn full_view(
    state: &AppState,
    schedule: Schedule,
    now: Timestamp,
) -> Result<ScheduleView, AppError> {
    let job_id = schedule.last_run.as_ref().and_then(|run| run.job_id);
    let mut view = ScheduleView::new(schedule, now);
    if let (Some(id), Some(run)) = (job_id, view.last_run.as_mut())
        && let Some(job) = state.store.get_job(id, now).await?
    {
        run.job = Some(job_view(state, job, now).await?);
    }
    Ok(view)
}
