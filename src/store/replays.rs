//! Replays in the store, shared by both backends: the records, the query that matches
//! dead letters (or retrying jobs), the row mapping, and the plan of one paced step.
//!
//! A replay snapshots the ids of the jobs it matched (`replay_jobs`, dead ones in the
//! order they died, retrying ones in the order they were created) when it is created,
//! so `matched` is exact and its progress (`next_position`) is durable: a restart, or
//! another instance, carries on where the last step stopped. Each step takes the
//! replay's row lock, asks [`Pacing`] how many jobs may go now, and releases that many
//! of the next snapshotted jobs still in the selected state: dead ones requeued,
//! retrying ones brought forward with the write of an operator's retry (a job that
//! changed meanwhile is skipped, never resent).

use std::sync::Arc;

use uuid::Uuid;

use crate::domain::replay::{Pacing, ReplayFilter, ReplaySelection, ReplayState};
use crate::domain::{Timestamp, Transition};
use crate::store::dialect::matching::{count_matching, snapshot_matching};
use crate::store::dialect::{Query, Value};
use crate::store::figures::Exists;
use crate::store::jobs::{self, JobStatements};
use crate::store::records::{NewReplay, PageRequest, Replay, ReplayProgress};
use crate::store::{StoreError, Wake};

mod plan;
mod stored;

pub use crate::store::dialect::matching::matching_index;
pub use plan::{Candidate, DueReplay, StepPlan, plan_step, scan_size};
pub use stored::{CandidateRow, DueReplayRow, ReplayRow, encode_filter};

/// Most running replays one step advances.
pub const REPLAYS_PER_STEP: u32 = 16;

/// The statements of replays, in the backend's dialect (a step brings retrying jobs
/// forward with the statements of [`JobStatements`]).
pub(crate) trait ReplayStatements: JobStatements {
    /// When the next running replay may release jobs (one nullable column).
    const NEXT_AT: &'static str;
    /// Replay `$1` ([`ReplayRow`]).
    const FETCH: &'static str;
    /// Taken before a creation where instances write at once (PostgreSQL locks the
    /// table; SQLite has one writer), so two concurrent replays cannot both fit the
    /// budget's last room.
    const LOCK_CREATIONS: Option<&'static str>;
    /// The summed rate of the running replays, in jobs/s.
    const USED_RATE: &'static str;
    /// Inserts replay `$1` (filter `$2`, `max_jobs` `$3`, rate `$4`, ttl `$5`),
    /// `running`, its token bucket at `$6`, its first burst at `$7`, created at `$8`.
    const INSERT: &'static str;
    /// How many jobs replay `$1` snapshotted.
    const SNAPSHOT_SIZE: &'static str;
    /// Cuts short, to `$2`, the cool-down of the open endpoint circuits of the
    /// subscribers whose jobs replay `$1` snapshotted (held in subscriber order, the
    /// store's lock order): a replay is the operator saying the receiver recovered, and
    /// its first job there is the probe at once (docs/DESIGN.md §15.1).
    const PROBE_NOW: &'static str;
    /// Marks replay `$1` created at `$3` with `$2` matched: ends it at once when
    /// nothing matched.
    const MARK_CREATED: &'static str;
    /// Stops replay `$1` at `$2` if it is running.
    const CANCEL: &'static str;
    /// The running replays whose next burst is due at `$1`, at most `$2`
    /// ([`DueReplayRow`]; PostgreSQL locks them, skipping those another instance is
    /// advancing).
    const DUE: &'static str;
    /// Looks at replay `$1` again at `$2`.
    const WAIT_UNTIL: &'static str;
    /// A row when a job of replay `$1`'s last burst (positions `$2..$3`) still waits
    /// to be claimed or retried.
    const LAST_BURST_WAITING: &'static str;
    /// Replay `$1`'s snapshotted jobs from position `$2` on, at most `$3`, as they are
    /// now ([`CandidateRow`]).
    const CANDIDATES: &'static str;
    /// Moves dead job `$1` back to state `$2`, due at `$3`, deadline `$4`, at `$5`, with
    /// a fresh attempt budget; returns its id when it was still dead.
    const REQUEUE: &'static str;
    /// The replays newest first (descending id, a UUIDv7): in state `$1` (`''`: any),
    /// with an id below `$2` (`''`: from the newest), at most `$3` ([`ReplayRow`]).
    const LIST: &'static str;
    /// Stores a step of replay `$1` (`$2` next position, `$3`
    /// requeued, `$4` skipped, `$5` paced until, `$6` next at, `$7` now, `$8`
    /// exhausted, `$9` burst position); returns its state.
    const RECORD_STEP: &'static str;
}

/// When the next running replay may release jobs.
pub(crate) async fn next_at<S: ReplayStatements>(db: &S) -> Result<Option<Timestamp>, StoreError> {
    let (at,): (Option<i64>,) = db.read_one(Query::new(S::NEXT_AT)).await?;
    Ok(at.map(Timestamp::from_millis))
}

/// How many dead jobs `filter` matches, at most `max_jobs` (a dry run; see
/// [`crate::store::dialect::matching::count_matching`]).
pub(crate) async fn count_matches<S: ReplayStatements>(
    db: &S,
    filter: &ReplayFilter,
    max_jobs: u32,
) -> Result<u64, StoreError> {
    let query = Query::from(count_matching(S::DIALECT, filter, max_jobs));
    let (n,): (i64,) = db.read_one(query).await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Replay `id` in `tx`, or `None`.
async fn fetch<S: ReplayStatements>(
    tx: &mut S::Tx,
    id: Uuid,
) -> Result<Option<ReplayRow>, StoreError> {
    S::fetch_optional(tx, Query::new(S::FETCH).text(id.to_string())).await
}

/// Looks at replay `id` again at `at`.
async fn wait_until<S: ReplayStatements>(
    tx: &mut S::Tx,
    id: Uuid,
    at: Timestamp,
) -> Result<(), StoreError> {
    let query = Query::new(S::WAIT_UNTIL)
        .text(id.to_string())
        .int(at.as_millis());
    S::execute(tx, query).await?;
    Ok(())
}

/// Creates a replay in one write transaction (see
/// [`crate::store::Store::create_replay`]); once committed, wakes this instance's
/// worker (`wake`) and announces it to the others.
pub(crate) async fn create<S: ReplayStatements>(
    db: &S,
    wake: &Arc<Wake>,
    replay: NewReplay,
) -> Result<Replay, StoreError> {
    let now = replay.created_at;
    let created: ReplayRow = db
        .transaction(move |tx| {
            Box::pin(async move {
                if let Some(lock) = S::LOCK_CREATIONS {
                    S::execute(tx, Query::new(lock)).await?;
                }
                let (used,): (i64,) = S::fetch_one(tx, Query::new(S::USED_RATE)).await?;
                let used = u64::try_from(used).unwrap_or(0);
                if used + u64::from(replay.rate_per_second) > u64::from(replay.rate_budget) {
                    return Err(StoreError::ReplayRateBudget {
                        used,
                        budget: replay.rate_budget,
                    });
                }
                let (paced_until, next_at) = Pacing::new(replay.rate_per_second).start(now);
                let id = replay.id.to_string();
                let insert = Query::new(S::INSERT)
                    .text(id.clone())
                    .text(encode_filter(&replay.filter))
                    .int(i64::from(replay.max_jobs))
                    .int(i64::from(replay.rate_per_second))
                    .int(i64::try_from(replay.ttl_ms).unwrap_or(i64::MAX))
                    .int(paced_until.as_millis())
                    .int(next_at.as_millis())
                    .int(now.as_millis());
                S::execute(tx, insert).await?;
                let snapshot = Query::from(snapshot_matching(S::DIALECT, &replay));
                S::execute(tx, snapshot).await?;
                let (matched,): (i64,) =
                    S::fetch_one(tx, Query::new(S::SNAPSHOT_SIZE).text(id.clone())).await?;
                let probe_now = Query::new(S::PROBE_NOW)
                    .text(id.clone())
                    .int(now.as_millis());
                S::execute(tx, probe_now).await?;
                let mark = Query::new(S::MARK_CREATED)
                    .text(id)
                    .int(matched)
                    .int(now.as_millis());
                S::execute(tx, mark).await?;
                let created = fetch::<S>(tx, replay.id)
                    .await?
                    .ok_or_else(|| StoreError::Internal("the new replay vanished".into()))?;
                // Workers of every instance wake for it (sent at commit).
                S::announce(tx).await?;
                Ok(created)
            })
        })
        .await?;
    wake.now();
    created.try_into()
}

/// One replay, or `None`.
pub(crate) async fn get<S: ReplayStatements>(
    db: &S,
    id: Uuid,
) -> Result<Option<Replay>, StoreError> {
    let query = Query::new(S::FETCH).text(id.to_string());
    let row: Option<ReplayRow> = db.read_optional(query).await?;
    row.map(Replay::try_from).transpose()
}

/// The replays in `state` (any when `None`), newest first, strictly older than
/// `page.after`, at most `page.limit`.
pub(crate) async fn list<S: ReplayStatements>(
    db: &S,
    state: Option<ReplayState>,
    page: PageRequest<Uuid>,
) -> Result<Vec<Replay>, StoreError> {
    let query = Query::new(S::LIST)
        .text(state.map(ReplayState::as_str).unwrap_or_default())
        .text(page.after.map(|id| id.to_string()).unwrap_or_default())
        .int(i64::from(page.limit));
    let rows: Vec<ReplayRow> = db.read_all(query).await?;
    rows.into_iter().map(Replay::try_from).collect()
}

/// Stops replay `id` if it is running; answers it as it now is.
pub(crate) async fn cancel<S: ReplayStatements>(
    db: &S,
    id: Uuid,
    now: Timestamp,
) -> Result<Option<Replay>, StoreError> {
    db.transaction(move |tx| {
        Box::pin(async move {
            let query = Query::new(S::CANCEL)
                .text(id.to_string())
                .int(now.as_millis());
            S::execute(tx, query).await?;
            let replay = fetch::<S>(tx, id).await?;
            replay.map(Replay::try_from).transpose()
        })
    })
    .await
}

/// Releases one planned job of `replay` in `tx` at `now`: a dead one moved back to
/// `scheduled` if it is still dead; a retrying one made due if it did not change since
/// it was read (the write of `POST /v1/jobs/{id}/retry`). Whether it was.
async fn release<S: ReplayStatements>(
    tx: &mut S::Tx,
    replay: &DueReplay,
    candidate: &Candidate,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    match replay.selects {
        ReplaySelection::Dead => {
            let query = Query::new(S::REQUEUE)
                .text(candidate.job_id.to_string())
                .text(transition.to.as_str())
                .int(transition.due_at.unwrap_or(now).as_millis())
                .int(transition.deadline.as_millis())
                .int(now.as_millis());
            let moved: Option<(String,)> = S::fetch_optional(tx, query).await?;
            Ok(moved.is_some())
        }
        ReplaySelection::Retrying => {
            jobs::apply_waiting::<S>(tx, candidate.job_id, candidate.version(), transition, now)
                .await
        }
    }
}

/// Advances the replays due at `now` (see [`crate::store::WorkerStore::advance_replays`]).
pub(crate) async fn advance<S: ReplayStatements>(
    db: &S,
    now: Timestamp,
) -> Result<ReplayProgress, StoreError> {
    // A read first, so an idle store costs no write transaction.
    if next_at(db).await?.is_none_or(|at| at > now) {
        return Ok(ReplayProgress::default());
    }
    db.transaction(move |tx| {
        Box::pin(async move {
            let query = Query::new(S::DUE)
                .int(now.as_millis())
                .int(i64::from(REPLAYS_PER_STEP));
            let due: Vec<DueReplayRow> = S::fetch_all(tx, query).await?;
            let due = due
                .into_iter()
                .map(DueReplay::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            let mut progress = ReplayProgress::default();
            for replay in due {
                step::<S>(tx, &replay, now, &mut progress).await?;
            }
            Ok(progress)
        })
    })
    .await
}

/// One step of `replay` at `now`: take the token bucket's allowance, requeue that many
/// of the next snapshotted jobs still dead, and store the progress and the bucket.
async fn step<S: ReplayStatements>(
    tx: &mut S::Tx,
    replay: &DueReplay,
    now: Timestamp,
    progress: &mut ReplayProgress,
) -> Result<(), StoreError> {
    let allowance = replay.pacing.allowance(replay.paced_until, now);
    if allowance.jobs == 0 {
        return wait_until::<S>(tx, replay.id, allowance.next_at).await;
    }
    // The last burst not taken yet (its subscriber paused or at its limit) or
    // failing: hold, so replayed jobs never pile up nor retry en masse.
    let waiting = Query::new(S::LAST_BURST_WAITING)
        .text(replay.id.to_string())
        .int(replay.burst_position)
        .int(replay.next_position);
    if S::fetch_optional::<Exists>(tx, waiting).await?.is_some() {
        let recheck = now.plus_ms((replay.pacing.burst_interval_ms() / 4).max(10));
        return wait_until::<S>(tx, replay.id, recheck).await;
    }
    let query = Query::new(S::CANDIDATES)
        .text(replay.id.to_string())
        .int(replay.next_position)
        .int(i64::from(scan_size(&allowance)));
    let candidates: Vec<CandidateRow> = S::fetch_all(tx, query).await?;
    let candidates = candidates
        .into_iter()
        .map(Candidate::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    let plan = plan_step(replay, &allowance, &candidates, now);
    let mut requeued = 0u64;
    for (candidate, transition) in &plan.requeue {
        requeued += u64::from(release::<S>(tx, replay, candidate, *transition, now).await?);
    }
    let skipped = plan.skipped + (plan.requeue.len() as u64 - requeued);
    // The bucket is spent only by a burst that requeued something.
    let (paced_until, next_at) = if requeued > 0 {
        (allowance.paced_until, allowance.next_at)
    } else {
        (replay.paced_until, now)
    };
    let step = Query::new(S::RECORD_STEP)
        .text(replay.id.to_string())
        .int(plan.next_position)
        .int(i64::try_from(requeued).unwrap_or(i64::MAX))
        .int(i64::try_from(skipped).unwrap_or(i64::MAX))
        .int(paced_until.as_millis())
        .int(next_at.as_millis())
        .int(now.as_millis())
        .bind(Value::Bool(plan.exhausted))
        .int(if requeued > 0 {
            replay.next_position
        } else {
            replay.burst_position
        });
    let (state,): (String,) = S::fetch_one(tx, step).await?;
    match replay.selects {
        ReplaySelection::Dead => progress.requeued += requeued,
        ReplaySelection::Retrying => progress.brought_forward += requeued,
    }
    progress.skipped += skipped;
    progress.finished += u32::from(state == ReplayState::Done.as_str());
    Ok(())
}
