//! One period of a schedule made into jobs: a job per target whose event id is the
//! schedule's template filled with the period's start and whose `deliver_at` is that
//! start (a start already past means now, as for any job), so the store's idempotency
//! on (subscriber, event id) makes the period's jobs unique however often it is
//! written. The scheduler writes them in the transaction that moves the schedule's
//! cursor past the period, fenced by its hold ([`write_period`]), so a period another
//! scheduler passed by (skipped) is never made too.

use crate::domain::Timestamp;
use crate::domain::field_error::FieldError;
use crate::domain::ids::new_id;
use crate::domain::job_template::{JobFields, JobLimits, JobTemplate};
use crate::domain::recurrence::{Recurrence, fill_event_id, period_text};
use crate::domain::schedule::ScheduleFields;
use crate::fan_out::{FanOutError, MAX_FAN_OUT};
use crate::store::{
    CreateOutcome, Job, NewJob, PeriodFence, ScheduleDefinition, ScheduleRun, ScheduleTarget,
    ScheduleTiming, SharedStore, StoreError,
};

/// Why a period created no job.
#[derive(Debug, thiserror::Error)]
pub enum PeriodError {
    /// The period cannot be made as the schedule stands (its subscriber does not
    /// exist, too many subscribers match, its job would be invalid under this
    /// server's limits): the period is skipped and the reason kept as the schedule's
    /// `last_error`.
    #[error("{0}")]
    Refused(String),
    /// The store failed: nothing is known to be written; the period is made again
    /// later.
    #[error(transparent)]
    Store(StoreError),
}

/// The jobs of one period: its run, and the jobs themselves.
#[derive(Debug)]
pub struct PeriodJobs {
    /// What the schedule records of it.
    pub run: ScheduleRun,
    /// Each job, created now or already there, in subscriber id order.
    pub jobs: Vec<Job>,
    /// How many of `jobs` were created now.
    pub created: usize,
    /// When some of the period's event ids are taken by other jobs (another schedule's
    /// with the same template, or posted ones), which are not among `jobs`: says so.
    pub taken: Option<String>,
}

/// The periods of `definition`'s timing, or why its stored timing cannot be read (a
/// time zone the embedded database no longer knows).
pub fn recurrence_of(definition: &ScheduleDefinition) -> Result<Recurrence, String> {
    let messages = |errors: Vec<FieldError>| {
        errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match &definition.timing {
        ScheduleTiming::Cron { cron, time_zone } => {
            Recurrence::cron(cron, Some(time_zone)).map_err(messages)
        }
        ScheduleTiming::Every { every_ms, anchor } => {
            Recurrence::every(*every_ms, *anchor).map_err(|e| messages(vec![e]))
        }
    }
}

/// One period of a schedule ready to be written: a job per target, matched when it
/// was planned.
#[derive(Debug)]
pub struct PeriodPlan {
    /// The period's start.
    pub start: Timestamp,
    /// Its event id (the template filled).
    pub event_id: String,
    /// One job per target (none when no subscriber matches the event type), in
    /// subscriber id order.
    pub jobs: Vec<NewJob>,
}

/// The jobs of the period of `definition` that starts at `start`, at `now`, under
/// `limits`: its subscriber's job, or one job per subscriber its event type matches
/// now.
///
/// # Errors
/// [`PeriodError::Refused`] when the period's job is invalid under `limits` or more
/// than [`crate::fan_out::MAX_FAN_OUT`] subscribers match; the store's error.
pub async fn plan_period(
    store: &SharedStore,
    definition: &ScheduleDefinition,
    start: Timestamp,
    now: Timestamp,
    limits: JobLimits,
) -> Result<PeriodPlan, PeriodError> {
    let event_id = fill_event_id(&definition.event_id, start);
    let deliver_at = period_text(start);
    let fields = JobFields {
        event_id: &event_id,
        payload: &definition.payload,
        schedule: ScheduleFields {
            deliver_at: Some(&deliver_at),
            delay_ms: None,
            deadline: None,
            ttl_ms: definition.ttl_ms,
        },
        max_attempts: definition.max_attempts,
    };
    let mut errors = Vec::new();
    let template = JobTemplate::check(fields, now, limits, &mut errors)
        .map_err(|too_large| PeriodError::Refused(too_large.0.message))?;
    let Some(template) = template.filter(|_| errors.is_empty()) else {
        let reasons: Vec<String> = errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        return Err(PeriodError::Refused(reasons.join("; ")));
    };
    let job_for = |subscriber_id: String, event_type: Option<&str>| NewJob {
        id: new_id(now),
        subscriber_id,
        event_id: template.event_id.clone(),
        payload: template.payload.clone(),
        deliver_at: template.deliver_at,
        deadline: template.deadline,
        max_attempts: template.max_attempts,
        created_at: template.created_at,
        event_type: event_type.map(str::to_owned),
        schedule_id: Some(definition.id.clone()),
    };
    let jobs = match &definition.target {
        ScheduleTarget::Subscriber(id) => vec![job_for(id.clone(), None)],
        ScheduleTarget::EventType(name) => {
            let limit = u32::try_from(MAX_FAN_OUT + 1).unwrap_or(u32::MAX);
            let ids = store
                .subscribers_of_event_type(name, limit)
                .await
                .map_err(PeriodError::Store)?;
            if ids.len() > MAX_FAN_OUT {
                let too_many = FanOutError::TooMany(name.clone());
                return Err(PeriodError::Refused(too_many.to_string()));
            }
            ids.into_iter().map(|id| job_for(id, Some(name))).collect()
        }
    };
    Ok(PeriodPlan {
        start,
        event_id,
        jobs,
    })
}

/// What became of a period's write ([`write_period`]).
#[derive(Debug)]
pub enum Written {
    /// Its jobs were written (or found already there), and with a fence the cursor
    /// moved past it.
    Made(PeriodJobs),
    /// It has no job of its own (its subscriber does not exist, or every event id of
    /// the period is another job's): why. With a fence the cursor moved past it.
    Refused(String),
    /// The fence did not hold (another scheduler took the schedule over, or a put
    /// restarted it): nothing was written.
    Fenced,
}

/// Writes the jobs `plan` holds for `definition`, as one request, all or nothing: with
/// `fence`, in the transaction that moves the schedule's cursor past the period, only
/// if the fence holds (see [`crate::store::Store::make_schedule_period`]). A job that
/// exists with another payload (the schedule's payload changed since it was made)
/// counts as the period's job; a matched subscriber deleted since the match gets none.
///
/// # Errors
/// The store's error: nothing was written.
pub async fn write_period(
    store: &SharedStore,
    definition: &ScheduleDefinition,
    plan: PeriodPlan,
    fence: Option<PeriodFence>,
) -> Result<Written, StoreError> {
    let Some(outcomes) = store.make_schedule_period(fence, plan.jobs).await? else {
        return Ok(Written::Fenced);
    };
    if let ScheduleTarget::Subscriber(id) = &definition.target
        && outcomes.is_empty()
    {
        return Ok(Written::Refused(format!(
            "subscriber `{id}` does not exist"
        )));
    }
    Ok(
        match period_jobs(definition, plan.start, plan.event_id, outcomes) {
            Ok(made) => Written::Made(made),
            Err(reason) => Written::Refused(reason),
        },
    )
}

/// Plans the period of `definition` that starts at `start` and writes its jobs, at
/// `now`, under `limits`, without moving the schedule's cursor (a manual run; see
/// [`plan_period`] and [`write_period`]).
pub async fn create_period(
    store: &SharedStore,
    definition: &ScheduleDefinition,
    start: Timestamp,
    now: Timestamp,
    limits: JobLimits,
) -> Result<PeriodJobs, PeriodError> {
    let plan = plan_period(store, definition, start, now, limits).await?;
    match write_period(store, definition, plan, None).await {
        Ok(Written::Made(made)) => Ok(made),
        Ok(Written::Refused(reason)) => Err(PeriodError::Refused(reason)),
        Ok(Written::Fenced) => Err(PeriodError::Store(StoreError::Internal(
            "a period written without a fence was fenced".into(),
        ))),
        Err(error) => Err(PeriodError::Store(error)),
    }
}

/// The period of `definition` starting at `start` with `event_id`, from the outcomes
/// of its jobs: its own jobs, and which of its event ids other jobs hold.
fn period_jobs(
    definition: &ScheduleDefinition,
    start: Timestamp,
    event_id: String,
    outcomes: Vec<CreateOutcome>,
) -> Result<PeriodJobs, String> {
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, CreateOutcome::Created(_)))
        .count();
    crate::metrics::jobs_accepted(created as u64);
    let (jobs, others): (Vec<Job>, Vec<Job>) = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            CreateOutcome::Created(job) | CreateOutcome::Existing { job, .. } => job,
        })
        .partition(|job| job.schedule_id.as_deref() == Some(definition.id.as_str()));
    let taken = others.first().map(|other| {
        let owner = match &other.schedule_id {
            Some(schedule) => format!("schedule `{schedule}`"),
            None => "a posted job".to_owned(),
        };
        format!(
            "{} of the period's event ids belong to other jobs (`{}` of subscriber `{}` is \
             job {} of {owner}): give this schedule an event id template of its own",
            others.len(),
            other.event_id,
            other.subscriber_id,
            other.id
        )
    });
    if jobs.is_empty()
        && let Some(taken) = taken
    {
        return Err(taken);
    }
    Ok(PeriodJobs {
        run: ScheduleRun {
            period: start,
            event_id,
            job_id: jobs.first().map(|job| job.id),
            jobs: u32::try_from(jobs.len()).unwrap_or(u32::MAX),
        },
        jobs,
        created,
        taken,
    })
}
