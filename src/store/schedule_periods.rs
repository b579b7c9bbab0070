//! One period of a schedule written, for both backends (docs/DESIGN.md §5.14): its
//! jobs and the move of the schedule's cursor past it in one transaction, fenced by
//! the scheduler's hold, so that a period is either made or passed by (skipped) by
//! whichever scheduler's write commits first, never both (issue #34 item 5.3: an
//! instance frozen while it wrote a period's 2,500 jobs made them about 10 s late,
//! after another instance had counted the period skipped).

use std::sync::Arc;

use crate::store::creates::{CreateStatements, Created, request_subscribers, write_period_jobs};
use crate::store::records::{CreateOutcome, NewJob, PeriodFence};
use crate::store::schedules::{ScheduleStatements, fence_query};
use crate::store::{StoreError, Wake};

/// Writes `jobs` (one period's, see [`crate::store::Store::make_schedule_period`]) in
/// one transaction that first moves the schedule's cursor as `fence` says, only if the
/// schedule is as its scheduler read it and still its hold; then locks the jobs'
/// subscribers as every create does, and writes the jobs of those that exist, a job
/// whose key exists counting as the period's. `None` when the fence did not hold:
/// nothing is written. Once committed, wakes this instance's worker (`wake`) for the
/// jobs created, and the others' workers through the backend's announcement.
pub(crate) async fn make<S: ScheduleStatements + CreateStatements>(
    db: &S,
    wake: &Arc<Wake>,
    fence: Option<PeriodFence>,
    jobs: Vec<NewJob>,
) -> Result<Option<Created>, StoreError> {
    let fence = fence.as_ref().map(fence_query::<S>);
    let written = db
        .transaction(move |tx| {
            Box::pin(async move {
                if let Some(fence) = fence
                    && S::execute(tx, fence).await? == 0
                {
                    return Ok(None);
                }
                let known = S::known_subscribers(tx, &request_subscribers(&jobs)).await?;
                let outcomes = write_period_jobs::<S>(tx, &jobs, &known).await?;
                if outcomes
                    .iter()
                    .any(|o| matches!(o, CreateOutcome::Created(_)))
                {
                    S::announce(tx).await?;
                }
                Ok(Some(outcomes))
            })
        })
        .await?;
    for outcome in written.iter().flatten() {
        if let CreateOutcome::Created(job) = outcome {
            wake.job_due_at(job.deliver_at);
        }
    }
    Ok(written)
}
