//! A worker's store that forwards every call to a real one after asking the test's
//! fault hook whether that call fails: how tests inject store failures into the
//! worker (SQLite cannot be unplugged), e.g. an outage from the first outcome write
//! (C-03). It wraps [`WorkerStore`], the worker's nine calls, and nothing else; the
//! API's failures are injected in the database itself (tests/common/db_faults.rs).

use std::sync::Arc;

use async_trait::async_trait;
use deferhook::domain::Timestamp;
use deferhook::store::{
    ClaimRequest, ClaimedJob, ExpiredJobs, Fenced, LeaseRef, OutcomeRecord, ReplayProgress,
    SharedWorkerStore, StoreError, Wake, WorkerStore,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Called with the name of each store call before it is forwarded; an error is
/// returned instead of forwarding it.
pub type Fault = Arc<dyn Fn(&'static str) -> Result<(), StoreError> + Send + Sync>;

/// Forwards to `inner` unless `fault` fails the call.
pub struct FaultyStore {
    /// The real store.
    pub inner: SharedWorkerStore,
    /// Asked before each call.
    pub fault: Fault,
}

impl FaultyStore {
    /// `inner`, failing the calls `fault` fails.
    pub fn wrap(inner: SharedWorkerStore, fault: Fault) -> SharedWorkerStore {
        Arc::new(FaultyStore { inner, fault })
    }
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore").finish_non_exhaustive()
    }
}

#[async_trait]
impl WorkerStore for FaultyStore {
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<ClaimedJob>, StoreError> {
        (self.fault)("claim")?;
        self.inner.claim(request).await
    }

    async fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        (self.fault)("renew_leases")?;
        self.inner.renew_leases(leases, until, now).await
    }

    async fn record_outcome(
        &self,
        record: OutcomeRecord,
        now: Timestamp,
    ) -> Result<Fenced, StoreError> {
        (self.fault)("record_outcome")?;
        self.inner.record_outcome(record, now).await
    }

    async fn note_long_attempt(&self, lease: LeaseRef, now: Timestamp) -> Result<(), StoreError> {
        (self.fault)("note_long_attempt")?;
        self.inner.note_long_attempt(lease, now).await
    }

    fn wake(&self) -> Arc<Wake> {
        self.inner.wake()
    }

    async fn next_wake_at(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        (self.fault)("next_wake_at")?;
        self.inner.next_wake_at(now).await
    }

    async fn listen_for_jobs(&self, wake: Arc<Notify>, stop: CancellationToken) {
        self.inner.listen_for_jobs(wake, stop).await
    }

    async fn advance_replays(&self, now: Timestamp) -> Result<ReplayProgress, StoreError> {
        (self.fault)("advance_replays")?;
        self.inner.advance_replays(now).await
    }

    async fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ExpiredJobs, StoreError> {
        (self.fault)("expire_deadlines")?;
        self.inner.expire_deadlines(now, limit).await
    }
}
