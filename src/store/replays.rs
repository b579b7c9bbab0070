//! Replays in the store, shared by both backends: the records, the query that matches
//! dead letters, the row mapping, and the plan of one paced step.
//!
//! A replay snapshots the ids of the dead jobs it matched (`replay_jobs`, in the order
//! they died) when it is created, so `matched` is exact and its progress
//! (`next_position`) is durable: a restart, or another instance, carries on where the
//! last step stopped. Each step takes the replay's row lock, asks [`Pacing`] how many
//! jobs may go now, and requeues that many of the next snapshotted jobs that are still
//! `dead` (a job delivered or requeued meanwhile is skipped, never resent).

use std::future::Future;
use std::sync::Arc;

use uuid::Uuid;

use crate::domain::replay::{Pacing, ReplayFilter, ReplayState};
use crate::domain::{Timestamp, Transition};
use crate::store::records::{NewReplay, Replay, ReplayProgress};
use crate::store::transactions::Transactions;
use crate::store::{StoreError, Wake};

mod plan;
mod stored;

pub use crate::store::dialect::matching::matching_index;
pub use crate::store::sqlite::replays::push_matching;
pub use plan::{Candidate, DueReplay, StepPlan, plan_step, scan_size};
pub use stored::{CandidateRow, DueReplayRow, ReplayRow, encode_filter};

/// Most running replays one step advances.
pub const REPLAYS_PER_STEP: u32 = 16;

/// What a step stores of a replay.
#[derive(Clone, Copy, Debug)]
pub struct StepRecord {
    /// Which replay.
    pub id: Uuid,
    /// The next snapshotted job to look at.
    pub next_position: i64,
    /// Where the last burst began.
    pub burst_position: i64,
    /// Jobs requeued by this step.
    pub requeued: i64,
    /// Jobs skipped by this step.
    pub skipped: i64,
    /// The token bucket's state.
    pub paced_until: Timestamp,
    /// When to look at it again.
    pub next_at: Timestamp,
    /// The step's instant.
    pub now: Timestamp,
    /// True when no snapshotted job is left: the replay is `done`.
    pub exhausted: bool,
}

/// The statements of replays. Those taking `&self` read outside a transaction
/// (SQLite: on its readers).
pub(crate) trait ReplayStatements: Transactions {
    /// When the next running replay may release jobs.
    fn next_replay_at(&self) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// How many dead jobs `filter` matches, at most `max_jobs` (see
    /// [`crate::store::dialect::matching::count_matching`]).
    fn count_matches(
        &self,
        filter: &ReplayFilter,
        max_jobs: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Replay `id`, or `None`.
    fn get(&self, id: Uuid) -> impl Future<Output = Result<Option<ReplayRow>, StoreError>> + Send;

    /// Replay `id` in `tx`, or `None`.
    fn fetch(
        tx: &mut Self::Tx,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<ReplayRow>, StoreError>> + Send;

    /// Takes one creation at a time where instances write at once (PostgreSQL locks
    /// the table; SQLite has one writer), so two concurrent replays cannot both fit
    /// the budget's last room.
    fn lock_creations(tx: &mut Self::Tx) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The summed rate of the running replays, in jobs/s.
    fn used_rate(tx: &mut Self::Tx) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Inserts `replay`, `running`, with its token bucket at `paced_until` and its
    /// first burst at `next_at`.
    fn insert(
        tx: &mut Self::Tx,
        replay: &NewReplay,
        paced_until: Timestamp,
        next_at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Snapshots the jobs `replay` matches (see
    /// [`crate::store::dialect::matching::snapshot_matching`]).
    fn snapshot_matches(
        tx: &mut Self::Tx,
        replay: &NewReplay,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// How many jobs replay `id` snapshotted.
    fn snapshot_size(
        tx: &mut Self::Tx,
        id: Uuid,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Marks replay `id` created at `now`: counts the snapshot (`matched`), and ends
    /// it at once when nothing matched.
    fn mark_created(
        tx: &mut Self::Tx,
        id: Uuid,
        matched: i64,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stops replay `id` at `now` if it is running.
    fn cancel(
        tx: &mut Self::Tx,
        id: Uuid,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The running replays whose next burst is due at `now`, at most `limit`
    /// (PostgreSQL locks them, skipping those another instance is advancing).
    fn due(
        tx: &mut Self::Tx,
        now: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<DueReplayRow>, StoreError>> + Send;

    /// Looks at replay `id` again at `at`.
    fn wait_until(
        tx: &mut Self::Tx,
        id: Uuid,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether a job of replay `id`'s last burst (positions `from..to`) still waits
    /// to be claimed or retried.
    fn last_burst_waiting(
        tx: &mut Self::Tx,
        id: Uuid,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Replay `id`'s snapshotted jobs from position `from` on, at most `limit`, as
    /// they are now.
    fn candidates(
        tx: &mut Self::Tx,
        id: Uuid,
        from: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<CandidateRow>, StoreError>> + Send;

    /// Moves dead job `job_id` back as `transition` says at `now`, with a fresh
    /// attempt budget; whether it was still dead.
    fn requeue(
        tx: &mut Self::Tx,
        job_id: Uuid,
        transition: &Transition,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Stores a step; returns the replay's state after it.
    fn record_step(
        tx: &mut Self::Tx,
        step: &StepRecord,
    ) -> impl Future<Output = Result<String, StoreError>> + Send;
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
    let mut tx = db.write().await?;
    S::lock_creations(&mut tx).await?;
    let used = u64::try_from(S::used_rate(&mut tx).await?).unwrap_or(0);
    if used + u64::from(replay.rate_per_second) > u64::from(replay.rate_budget) {
        return Err(StoreError::ReplayRateBudget {
            used,
            budget: replay.rate_budget,
        });
    }
    let (paced_until, next_at) = Pacing::new(replay.rate_per_second).start(now);
    S::insert(&mut tx, &replay, paced_until, next_at).await?;
    S::snapshot_matches(&mut tx, &replay).await?;
    let matched = S::snapshot_size(&mut tx, replay.id).await?;
    S::mark_created(&mut tx, replay.id, matched, now).await?;
    let created = S::fetch(&mut tx, replay.id)
        .await?
        .ok_or_else(|| StoreError::Internal("the new replay vanished".into()))?;
    // Workers of every instance wake for it (sent at commit).
    S::announce(&mut tx).await?;
    S::commit(tx).await?;
    wake.now();
    created.try_into()
}

/// One replay, or `None`.
pub(crate) async fn get<S: ReplayStatements>(
    db: &S,
    id: Uuid,
) -> Result<Option<Replay>, StoreError> {
    db.get(id).await?.map(Replay::try_from).transpose()
}

/// Stops replay `id` if it is running; answers it as it now is.
pub(crate) async fn cancel<S: ReplayStatements>(
    db: &S,
    id: Uuid,
    now: Timestamp,
) -> Result<Option<Replay>, StoreError> {
    let mut tx = db.write().await?;
    S::cancel(&mut tx, id, now).await?;
    let replay = S::fetch(&mut tx, id).await?;
    S::commit(tx).await?;
    replay.map(Replay::try_from).transpose()
}

/// Advances the replays due at `now` (see [`crate::store::Store::advance_replays`]).
pub(crate) async fn advance<S: ReplayStatements>(
    db: &S,
    now: Timestamp,
) -> Result<ReplayProgress, StoreError> {
    // A read first, so an idle store costs no write transaction.
    if db.next_replay_at().await?.is_none_or(|at| at > now) {
        return Ok(ReplayProgress::default());
    }
    let mut tx = db.write().await?;
    let due = S::due(&mut tx, now, REPLAYS_PER_STEP)
        .await?
        .into_iter()
        .map(DueReplay::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    let mut progress = ReplayProgress::default();
    for replay in due {
        step::<S>(&mut tx, &replay, now, &mut progress).await?;
    }
    S::commit(tx).await?;
    Ok(progress)
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
        return S::wait_until(tx, replay.id, allowance.next_at).await;
    }
    // The last burst not taken yet (its subscriber paused or at its limit) or
    // failing: hold, so replayed jobs never pile up nor retry en masse.
    if S::last_burst_waiting(tx, replay.id, replay.burst_position, replay.next_position).await? {
        let recheck = now.plus_ms((replay.pacing.burst_interval_ms() / 4).max(10));
        return S::wait_until(tx, replay.id, recheck).await;
    }
    let candidates = S::candidates(tx, replay.id, replay.next_position, scan_size(&allowance))
        .await?
        .into_iter()
        .map(Candidate::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    let plan = plan_step(replay, &allowance, &candidates, now);
    let mut requeued = 0u64;
    for (job_id, transition) in &plan.requeue {
        requeued += u64::from(S::requeue(tx, *job_id, transition, now).await?);
    }
    let skipped = plan.skipped + (plan.requeue.len() as u64 - requeued);
    // The bucket is spent only by a burst that requeued something.
    let (paced_until, next_at) = if requeued > 0 {
        (allowance.paced_until, allowance.next_at)
    } else {
        (replay.paced_until, now)
    };
    let state = S::record_step(
        tx,
        &StepRecord {
            id: replay.id,
            next_position: plan.next_position,
            burst_position: if requeued > 0 {
                replay.next_position
            } else {
                replay.burst_position
            },
            requeued: i64::try_from(requeued).unwrap_or(i64::MAX),
            skipped: i64::try_from(skipped).unwrap_or(i64::MAX),
            paced_until,
            next_at,
            now,
            exhausted: plan.exhausted,
        },
    )
    .await?;
    progress.requeued += requeued;
    progress.skipped += skipped;
    progress.finished += u32::from(state == ReplayState::Done.as_str());
    Ok(())
}
