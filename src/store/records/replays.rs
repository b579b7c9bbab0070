//! Replays of dead letters as the store creates and reads them.

use uuid::Uuid;

use crate::domain::Timestamp;
use crate::domain::replay::{ReplayFilter, ReplayState};

/// Most jobs one replay may match.
pub const MAX_REPLAY_JOBS: u32 = 100_000;

/// A replay to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReplay {
    /// A fresh UUIDv7.
    pub id: Uuid,
    /// Which jobs.
    pub filter: ReplayFilter,
    /// Most jobs it takes (the oldest dead first), 1–[`MAX_REPLAY_JOBS`].
    pub max_jobs: u32,
    /// Most jobs requeued per second, across all instances.
    pub rate_per_second: u32,
    /// Each requeued job's new deadline is its requeue time plus this, in ms.
    pub ttl_ms: u64,
    /// Most jobs/s all running replays together may requeue (`--max-replay-rate`): the
    /// creation fails with [`crate::store::StoreError::ReplayRateBudget`] when this
    /// replay would exceed it.
    pub rate_budget: u32,
    /// Now.
    pub created_at: Timestamp,
}

/// A replay and its progress (`requeued` counts every job it released: dead ones
/// requeued, or retrying ones brought forward).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// UUIDv7.
    pub id: Uuid,
    /// Which jobs it selected (and whether dead or retrying ones).
    pub filter: ReplayFilter,
    /// Most jobs it could take.
    pub max_jobs: u32,
    /// Most jobs requeued per second.
    pub rate_per_second: u32,
    /// Requeued jobs' time to deadline, in ms.
    pub ttl_ms: u64,
    /// Where it is.
    pub state: ReplayState,
    /// Jobs matched when it was created.
    pub matched: u64,
    /// Jobs released so far: moved back to `scheduled`, or (retrying) made due.
    pub requeued: u64,
    /// Matched jobs that were no longer in the selected state when their turn came
    /// (left alone).
    pub skipped: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it ended (done or cancelled).
    pub finished_at: Option<Timestamp>,
}

/// What [`crate::store::WorkerStore::advance_replays`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayProgress {
    /// Dead jobs moved back to `scheduled`.
    pub requeued: u64,
    /// Retrying jobs made due by replays that select them (`selects: retrying`).
    pub brought_forward: u64,
    /// Matched jobs skipped because they were no longer in the selected state (or, retrying,
    /// could no longer be brought forward).
    pub skipped: u64,
    /// Replays that finished.
    pub finished: u32,
}
