//! Wake-ups of a sleeping worker when new work appears, without one per created job.
//!
//! The worker publishes when it plans to wake next; a creator wakes it only when its
//! job is due before that (or while the worker is busy, when its plan is unknown). A
//! steady stream of jobs due seconds later then costs no claim per job, and a job due
//! now is still claimed at once.
//!
//! Ordering: the worker marks itself busy when it wakes, reads the store, then
//! publishes its plan and sleeps; a creator commits its job, then reads the plan. If
//! the creator reads the plan, the worker's read came before it: either that read saw
//! the job, or the job is due before the plan and the creator wakes the worker. A
//! wake-up sent while the worker is not waiting is kept ([`Notify::notify_one`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::Notify;

use crate::domain::Timestamp;

/// Shared by the API (creators) and the worker of one instance.
#[derive(Debug)]
pub struct Wake {
    notify: Arc<Notify>,
    /// When the worker plans to wake next (ms since the epoch); `i64::MAX` while it is
    /// busy (any job is "before" it).
    planned_ms: AtomicI64,
}

impl Default for Wake {
    fn default() -> Self {
        Wake {
            notify: Arc::new(Notify::new()),
            planned_ms: AtomicI64::new(i64::MAX),
        }
    }
}

impl Wake {
    /// A new, shareable wake-up.
    pub fn new() -> Arc<Wake> {
        Arc::new(Wake::default())
    }

    /// A job due at `due` was committed: wakes the worker if it would sleep past it.
    pub fn job_due_at(&self, due: Timestamp) {
        if due.as_millis() < self.planned_ms.load(Ordering::SeqCst) {
            self.notify.notify_one();
        }
    }

    /// Something else changed (e.g. a replay started): wakes the worker.
    pub fn now(&self) {
        self.notify.notify_one();
    }

    /// The raw notification, for a store that announces other instances' jobs.
    pub fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// The worker is awake and working: every creator wakes it again.
    pub fn busy(&self) {
        self.planned_ms.store(i64::MAX, Ordering::SeqCst);
    }

    /// The worker will sleep until `at` unless woken.
    pub fn sleeping_until(&self, at: Timestamp) {
        self.planned_ms.store(at.as_millis(), Ordering::SeqCst);
    }

    /// Waits for a wake-up.
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn woken(wake: &Wake) -> bool {
        tokio::time::timeout(Duration::from_millis(20), wake.notified())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn only_a_job_due_before_the_plan_wakes_a_sleeping_worker() {
        let wake = Wake::new();
        wake.sleeping_until(Timestamp::from_millis(5_000));
        wake.job_due_at(Timestamp::from_millis(9_000));
        assert!(
            !woken(&wake).await,
            "due after the plan: the planned wake-up finds it"
        );
        wake.job_due_at(Timestamp::from_millis(4_999));
        assert!(woken(&wake).await, "due before the plan");
    }

    #[tokio::test]
    async fn a_busy_worker_is_always_woken_again() {
        let wake = Wake::new();
        wake.busy();
        wake.job_due_at(Timestamp::from_millis(i64::MAX - 1));
        assert!(woken(&wake).await, "kept for the next wait");
        wake.sleeping_until(Timestamp::from_millis(1));
        wake.now();
        assert!(woken(&wake).await);
    }
}
