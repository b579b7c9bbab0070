//! The long-running worker loop, built from the worker's steps: upkeep at most every
//! 25 ms, claim due jobs in batches, run up to `max_in_flight` attempts at once while
//! their leases are renewed, sleep until the next due time or a wake-up, and shut down
//! without losing a job (docs/DESIGN.md §3). Each running attempt holds a slot,
//! which keeps `deferhook_worker_slots_busy` and `_free` current.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::worker::{Worker, run_attempt};
use crate::domain::Timestamp;
use crate::metrics;

/// Pause after a failed claim before trying again.
const CLAIM_ERROR_PAUSE: Duration = Duration::from_millis(500);
/// Most often the deadline sweep and the replay step run (by the injected clock): each
/// is a store read even when idle, and finished attempts wake the loop many times a
/// second under load.
const UPKEEP_EVERY_MS: i64 = 25;
/// Pause when something is due that this claim could not take (e.g. a sweep still to
/// run), so the loop never spins.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// One of the worker's slots, held by a running attempt: taking it and dropping it
/// (when the attempt ends, or its task is aborted) update the slot gauges.
struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    /// A free slot, or `None` when all are taken.
    fn take(slots: &Arc<Semaphore>) -> Option<Slot> {
        let permit = slots.clone().try_acquire_owned().ok()?;
        metrics::worker_slot_taken();
        Some(Slot { _permit: permit })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        metrics::worker_slot_freed();
    }
}

impl Worker {
    /// Runs until `shutdown` is cancelled; then stops claiming, lets running attempts
    /// finish within the grace period, and releases the leases still held.
    pub async fn run(self, shutdown: CancellationToken) {
        let settings = self.ctx.settings.clone();
        let slots = Arc::new(Semaphore::new(settings.max_in_flight));
        // The recorder first (an instance without the API installs none), so the
        // gauges count every slot from the start.
        metrics::install();
        metrics::worker_slots_added(settings.max_in_flight as f64);
        let hard_stop = CancellationToken::new();
        let renewer_stop = CancellationToken::new();
        let renewer = tokio::spawn(self.ctx.leases.clone().renew_until(
            self.ctx.store.clone(),
            self.ctx.clock.clone(),
            settings.lease_ms,
            renewer_stop.clone(),
        ));
        // Wake-ups when another instance creates a job (PostgreSQL NOTIFY).
        let listener = {
            let store = self.ctx.store.clone();
            let (wake, stop) = (self.wake.notify(), renewer_stop.clone());
            tokio::spawn(async move { store.listen_for_jobs(wake, stop).await })
        };
        let mut attempts = JoinSet::new();
        let mut last_upkeep: Option<Timestamp> = None;
        tracing::info!(owner = %settings.owner, slots = settings.max_in_flight,
            "delivery worker started");
        loop {
            while attempts.try_join_next().is_some() {}
            if shutdown.is_cancelled() {
                break;
            }
            let free = slots.available_permits();
            if free == 0 {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = attempts.join_next() => continue,
                }
            }
            self.wake.busy();
            let now = self.ctx.clock.now();
            if last_upkeep.is_none_or(|at| now.millis_since(at) >= UPKEEP_EVERY_MS || now < at) {
                self.upkeep(now).await;
                last_upkeep = Some(now);
            }
            let limit = u32::try_from(free)
                .unwrap_or(u32::MAX)
                .min(settings.claim_batch);
            let batch = match self.claim(now, limit).await {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "claim failed; retrying shortly");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(CLAIM_ERROR_PAUSE) => continue,
                    }
                }
            };
            let full = batch.len() as u32 == limit;
            for job in batch {
                let Some(slot) = Slot::take(&slots) else {
                    // Cannot happen: the claim took at most the free slots.
                    tracing::error!("no free slot for a claimed job; its lease will expire");
                    continue;
                };
                let ctx = self.ctx.clone();
                let hard_stop = hard_stop.clone();
                attempts.spawn(async move {
                    run_attempt(ctx, job, hard_stop).await;
                    drop(slot);
                });
            }
            if full {
                continue;
            }
            let pause = self.pause_until_next_due().await;
            self.wake
                .sleeping_until(self.ctx.clock.now().plus_ms(pause.as_millis() as u64));
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
                Some(_) = attempts.join_next(), if !attempts.is_empty() => {}
            }
        }
        self.drain(attempts, hard_stop).await;
        metrics::worker_slots_added(-(settings.max_in_flight as f64));
        renewer_stop.cancel();
        let _ = renewer.await;
        let _ = listener.await;
        tracing::info!("delivery worker stopped");
    }

    /// How long to sleep: until the next due job or deadline, at most the poll interval.
    async fn pause_until_next_due(&self) -> Duration {
        let poll = self.ctx.settings.poll_interval;
        match self.ctx.store.next_wake_at(self.ctx.clock.now()).await {
            Ok(Some(at)) => {
                let wait = at.millis_since(self.ctx.clock.now());
                if wait <= 0 {
                    MIN_PAUSE.min(poll)
                } else {
                    Duration::from_millis(wait as u64).min(poll)
                }
            }
            Ok(None) => poll,
            Err(error) => {
                tracing::warn!(%error, "cannot read the next due time");
                CLAIM_ERROR_PAUSE.min(poll)
            }
        }
    }

    /// Lets running attempts finish within the grace period, then stops the rest; each
    /// stopped attempt releases its lease with the outcome unknown.
    async fn drain(&self, mut attempts: JoinSet<()>, hard_stop: CancellationToken) {
        if attempts.is_empty() {
            return;
        }
        let grace = self.ctx.settings.shutdown_grace;
        tracing::info!(
            running = attempts.len(),
            grace_ms = grace.as_millis() as u64,
            "letting running attempts finish"
        );
        let finished = tokio::time::timeout(grace, async {
            while attempts.join_next().await.is_some() {}
        })
        .await;
        if finished.is_err() {
            tracing::warn!(
                running = attempts.len(),
                "grace period over; releasing the remaining leases (outcome unknown)"
            );
            hard_stop.cancel();
            while attempts.join_next().await.is_some() {}
        }
    }
}
