//! The views of jobs as the API and the console show them: each job with, where its
//! state needs it, why it waits (its subscriber's load, read once per subscriber), and
//! a job just written viewed even when that load cannot be read (CASES C-19).

use std::collections::HashMap;

use uuid::Uuid;

use super::AppState;
use super::error::AppError;
use super::views::JobView;
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::{SubscriberLoad, needs_load};
use crate::domain::{JobState, Timestamp};
use crate::store::Job;

/// The views of `jobs` at `now`, reading the load of each subscriber whose due jobs may
/// be held back by its limits (once per subscriber).
pub async fn job_views(
    state: &AppState,
    jobs: Vec<Job>,
    now: Timestamp,
) -> Result<Vec<JobView>, AppError> {
    let loads = loads_of(state, &jobs, now).await?;
    Ok(views_with(jobs, &loads, now))
}

/// The view of `job`, just written (created, or found by its idempotency key): see
/// [`written_job_views`].
pub async fn written_job_view(state: &AppState, job: Job, now: Timestamp) -> JobView {
    written_job_views(state, vec![job], now)
        .await
        .pop()
        .expect("one view per job")
}

/// The views of `jobs`, just written: when the load their views read cannot be read
/// (the store unavailable a moment after the write), the views without it, a warning
/// logged. The write has been committed, so the answer must not be a 503, which says
/// that nothing was (CASES C-19).
pub async fn written_job_views(state: &AppState, jobs: Vec<Job>, now: Timestamp) -> Vec<JobView> {
    let loads = match loads_of(state, &jobs, now).await {
        Ok(loads) => loads,
        Err(error) => {
            tracing::warn!(jobs = jobs.len(), %error,
                "the jobs are stored; their subscribers' load could not be read for their views");
            HashMap::new()
        }
    };
    views_with(jobs, &loads, now)
}

fn views_with(
    jobs: Vec<Job>,
    loads: &HashMap<String, Option<SubscriberLoad>>,
    now: Timestamp,
) -> Vec<JobView> {
    jobs.into_iter()
        .map(|job| {
            let load = loads.get(&job.subscriber_id).and_then(Option::as_ref);
            JobView::new(job, load, now)
        })
        .collect()
}

/// The load of each subscriber of `jobs` whose view needs it, read once each.
async fn loads_of(
    state: &AppState,
    jobs: &[Job],
    now: Timestamp,
) -> Result<HashMap<String, Option<SubscriberLoad>>, AppError> {
    let mut loads: HashMap<String, Option<SubscriberLoad>> = HashMap::new();
    for job in jobs {
        // A retrying job's advice reads its destination's hold even before it is due;
        // one whose last attempt timed out reads whether its subscriber's recent
        // attempts all did (then the advice is `no`, dead or not, §5.9).
        let retrying = job.state == JobState::Retrying && job.subscriber_enabled;
        let timed_out = job.state != JobState::Delivered
            && job
                .last_error
                .as_ref()
                .is_some_and(|e| e.class == ErrorClass::Timeout);
        if (retrying || timed_out || needs_load(job.state, job.due_at, job.subscriber_enabled, now))
            && !loads.contains_key(&job.subscriber_id)
        {
            let load = state.loads.get(&job.subscriber_id, now).await?;
            loads.insert(job.subscriber_id.clone(), load);
        }
    }
    Ok(loads)
}

/// The view of one job at `now`.
pub async fn job_view(state: &AppState, job: Job, now: Timestamp) -> Result<JobView, AppError> {
    let mut views = job_views(state, vec![job], now).await?;
    views
        .pop()
        .ok_or_else(|| AppError::Internal("no view for the job".into()))
}

/// The job id a path names (any form `Uuid::parse_str` takes), else a 422 naming
/// `job_id`.
pub fn job_id(raw: &str) -> Result<Uuid, AppError> {
    Uuid::parse_str(raw).map_err(|_| AppError::invalid("job_id", "must be a UUID"))
}
