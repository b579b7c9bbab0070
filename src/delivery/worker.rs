//! A delivery worker and its steps: upkeep (the deadline sweep and the replays'
//! pace), claim (due jobs under leases), execute (send one claimed job and judge the
//! answer) and complete (record the outcome fenced by the lease). The long-running
//! loop ([`Worker::run`], in `run_loop.rs`) is built from these steps; a test drives
//! them one at a time with its own clock ([`Worker::run_pending`]), as zero2prod's
//! `try_execute_task` and crates.io's `run_pending_background_jobs` do (docs/DESIGN.md §3).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::attempt::{self, AttemptContext, Executed};
use super::complete::{self, Completed};
use super::held_leases::HeldLeases;
use super::sender::Sender;
use super::settings::DeliverySettings;
use crate::domain::{Clock, Timestamp};
use crate::metrics;
use crate::store::{
    ClaimRequest, ClaimedJob, ExpiredJobs, ReplayProgress, SharedWorkerStore, StoreError, Wake,
};

/// Most jobs moved to dead by one deadline sweep.
const EXPIRE_BATCH: u32 = 500;

/// A delivery worker.
#[derive(Debug)]
pub struct Worker {
    pub(super) ctx: AttemptContext,
    pub(super) wake: Arc<Wake>,
    passes: ClaimPasses,
}

/// How many claim steps a worker has finished, whatever each took (or failed with),
/// and whether its slots are all in use (then it makes none until one frees): a test
/// of the running loop that must show that nothing more is claimed waits for two more
/// passes, each a full look at the due work, or for a full worker, rather than
/// sleeping for a guessed time. Shared by every clone.
#[derive(Clone, Debug)]
pub struct ClaimPasses {
    passes: Arc<AtomicU64>,
    leases: HeldLeases,
    slots: usize,
}

impl ClaimPasses {
    /// The passes finished so far.
    pub fn count(&self) -> u64 {
        self.passes.load(Ordering::SeqCst)
    }

    /// True when every slot holds an attempt's lease (`--max-in-flight` attempts run).
    pub fn all_slots_in_use(&self) -> bool {
        self.leases.len() >= self.slots
    }
}

/// What one upkeep step did; `None` where the store call failed (logged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Upkeep {
    /// Jobs the deadline sweep moved.
    pub expired: Option<ExpiredJobs>,
    /// Dead jobs the running replays requeued, and replays finished.
    pub replays: Option<ReplayProgress>,
}

/// What one [`Worker::run_pending`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// The upkeep it ran first.
    pub upkeep: Upkeep,
    /// Every attempt it claimed, in claim order, as recorded.
    pub completed: Vec<Completed>,
}

impl Pending {
    /// How many jobs were claimed (and attempted).
    pub fn attempted(&self) -> usize {
        self.completed.len()
    }
}

impl Worker {
    /// A worker over `store`, woken by the store's [`WorkerStore::wake`] when a job it
    /// creates is due before the worker would wake.
    ///
    /// # Errors
    /// Invalid `settings` (see [`DeliverySettings::validate`]), or an HTTP client that
    /// cannot be built.
    ///
    /// [`WorkerStore::wake`]: crate::store::WorkerStore::wake
    pub fn new(
        store: SharedWorkerStore,
        clock: Arc<dyn Clock>,
        settings: DeliverySettings,
    ) -> anyhow::Result<Self> {
        settings.validate().map_err(anyhow::Error::msg)?;
        let wake = store.wake();
        let ctx = AttemptContext {
            store,
            clock,
            sender: Sender::new(settings.target_policy.clone(), settings.resolver.clone())?,
            settings: Arc::new(settings),
            leases: HeldLeases::default(),
        };
        let passes = ClaimPasses {
            passes: Arc::default(),
            leases: ctx.leases.clone(),
            slots: ctx.settings.max_in_flight,
        };
        Ok(Worker { ctx, wake, passes })
    }

    /// The leases its running attempts hold (how many of its slots are in use).
    pub fn held_leases(&self) -> HeldLeases {
        self.ctx.leases.clone()
    }

    /// Its count of finished claim steps.
    pub fn claim_passes(&self) -> ClaimPasses {
        self.passes.clone()
    }

    /// The upkeep step at `now`: moves jobs past their deadline to dead, then requeues
    /// the dead jobs running replays may release now (paced by their token buckets in
    /// the store, shared by every instance).
    pub async fn upkeep(&self, now: Timestamp) -> Upkeep {
        Upkeep {
            expired: self.expire_deadlines(now).await,
            replays: self.advance_replays(now).await,
        }
    }

    /// The claim step at `now`: takes up to `limit` due jobs under leases of
    /// `--lease-ms` owned by this worker. The claim is committed before anything is
    /// sent.
    pub async fn claim(&self, now: Timestamp, limit: u32) -> Result<Vec<ClaimedJob>, StoreError> {
        let settings = &self.ctx.settings;
        let claimed = self
            .ctx
            .store
            .claim(ClaimRequest {
                now,
                limit,
                owner: settings.owner.clone(),
                lease_ms: settings.lease_ms,
            })
            .await;
        self.passes.passes.fetch_add(1, Ordering::SeqCst);
        claimed
    }

    /// The execute step of one claimed job: sends it and judges the answer (see
    /// [`attempt::execute`]); `None` when no transition follows (cannot happen).
    pub async fn execute(
        &self,
        job: ClaimedJob,
        hard_stop: &CancellationToken,
    ) -> Option<Executed> {
        attempt::execute(&self.ctx, job, hard_stop).await
    }

    /// The complete step: records what `execute` judged, fenced by the lease, and
    /// releases the lease (see [`complete::complete`]).
    pub async fn complete(&self, executed: Executed, hard_stop: &CancellationToken) -> Completed {
        complete::complete(&self.ctx, executed, hard_stop).await
    }

    /// One pass as a test drives it, at the clock's `now`: upkeep, then claims (as many
    /// batches as come back full) and runs each claimed attempt to its recorded end,
    /// the attempts of a batch at once. Leases are not renewed meanwhile: under a
    /// test's clock a lease expires only when the test moves the clock past it.
    pub async fn run_pending(&self) -> Pending {
        let now = self.ctx.clock.now();
        let upkeep = self.upkeep(now).await;
        let settings = &self.ctx.settings;
        let limit = u32::try_from(settings.max_in_flight)
            .unwrap_or(u32::MAX)
            .min(settings.claim_batch);
        let mut completed = Vec::new();
        loop {
            let batch = match self.claim(now, limit).await {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "claim failed");
                    break;
                }
            };
            let full = batch.len() as u32 == limit;
            let mut attempts = JoinSet::new();
            for (order, job) in batch.into_iter().enumerate() {
                let ctx = self.ctx.clone();
                attempts.spawn(async move {
                    (order, run_attempt(ctx, job, CancellationToken::new()).await)
                });
            }
            let mut batch: Vec<(usize, Completed)> = attempts
                .join_all()
                .await
                .into_iter()
                .filter_map(|(order, done)| Some((order, done?)))
                .collect();
            batch.sort_by_key(|(order, _)| *order);
            completed.extend(batch.into_iter().map(|(_, done)| done));
            if !full {
                break;
            }
        }
        Pending { upkeep, completed }
    }

    async fn expire_deadlines(&self, now: Timestamp) -> Option<ExpiredJobs> {
        match self.ctx.store.expire_deadlines(now, EXPIRE_BATCH).await {
            Ok(expired) => {
                if expired.dead + expired.max_attempts + expired.released > 0 {
                    tracing::info!(
                        deadline_exceeded = expired.dead,
                        max_attempts = expired.max_attempts,
                        released_for_paused_subscribers = expired.released,
                        "sweep"
                    );
                    metrics::swept(expired.dead, expired.max_attempts);
                    metrics::leases_expired(expired.lease_expired);
                }
                Some(expired)
            }
            Err(error) => {
                tracing::warn!(%error, "deadline sweep failed");
                None
            }
        }
    }

    async fn advance_replays(&self, now: Timestamp) -> Option<ReplayProgress> {
        match self.ctx.store.advance_replays(now).await {
            Ok(progress) => {
                let moved = progress.requeued + progress.brought_forward + progress.skipped;
                if moved > 0 || progress.finished > 0 {
                    tracing::info!(
                        requeued = progress.requeued,
                        brought_forward = progress.brought_forward,
                        skipped = progress.skipped,
                        replays_finished = progress.finished,
                        "replay"
                    );
                    metrics::replayed(progress.requeued);
                }
                Some(progress)
            }
            Err(error) => {
                tracing::warn!(%error, "advancing replays failed");
                None
            }
        }
    }
}

/// One claimed job's attempt, executed then completed: what the loop spawns per job.
/// `None` only when execute found no transition (the lease is left to expire).
pub(super) async fn run_attempt(
    ctx: AttemptContext,
    job: ClaimedJob,
    hard_stop: CancellationToken,
) -> Option<Completed> {
    let executed = attempt::execute(&ctx, job, &hard_stop).await?;
    Some(complete::complete(&ctx, executed, &hard_stop).await)
}
