//! The leases this worker holds, renewed together in one write while their attempts
//! live (docs/DESIGN.md §3: the lease is longer than an attempt and renewed, so no other worker
//! starts a second concurrent attempt — CASES C-01).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::domain::{Clock, Timestamp};
use crate::metrics;
use crate::store::{LeaseRef, SharedWorkerStore};

#[derive(Debug)]
struct Held {
    token: i64,
    expires_at: Timestamp,
    lost: CancellationToken,
    /// The attempt has its answer and is recording it: the lease is still renewed (the
    /// write may wait for the store), but a lease the store no longer knows is just the
    /// recorded outcome having released it.
    recording: bool,
}

/// The leases held by this worker's running attempts.
#[derive(Debug, Clone, Default)]
pub struct HeldLeases {
    held: Arc<Mutex<HashMap<Uuid, Held>>>,
}

impl HeldLeases {
    /// Starts tracking a lease; the token returned is cancelled when the lease is lost
    /// (another worker took the job, or it expired before it could be renewed).
    pub fn hold(&self, lease: LeaseRef, expires_at: Timestamp) -> CancellationToken {
        let lost = CancellationToken::new();
        self.lock().insert(
            lease.job_id,
            Held {
                token: lease.token,
                expires_at,
                lost: lost.clone(),
                recording: false,
            },
        );
        lost
    }

    /// Marks the job's attempt as answered: its outcome is being recorded.
    pub fn recording(&self, job_id: Uuid) {
        if let Some(held) = self.lock().get_mut(&job_id) {
            held.recording = true;
        }
    }

    /// Stops tracking the job's lease.
    pub fn release(&self, job_id: Uuid) {
        self.lock().remove(&job_id);
    }

    /// When the job's lease expires as far as this worker knows.
    pub fn expires_at(&self, job_id: Uuid) -> Option<Timestamp> {
        self.lock().get(&job_id).map(|held| held.expires_at)
    }

    /// How many leases are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no lease is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Held>> {
        // A panic while holding the lock leaves a consistent map; keep using it.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Resolves when the lease on `job_id`, as this worker last extended it, is within
    /// `margin_ms` of expiring (at once if it is not held). Renewals move the expiry, so
    /// it sleeps and looks again; only a lease that stops being renewed (the store
    /// unreachable, a renewal late) gets here. An attempt stops then, before another
    /// worker can claim the job: two attempts of one job are never open at once
    /// (CASES C-01), even while the store cannot be reached.
    pub async fn until_expiry(&self, job_id: Uuid, clock: &dyn Clock, margin_ms: u64) {
        loop {
            let Some(expires_at) = self.expires_at(job_id) else {
                return;
            };
            let left = expires_at.millis_since(clock.now()) - i64::try_from(margin_ms).unwrap_or(0);
            if left <= 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(left.unsigned_abs())).await;
        }
    }

    /// One renewal round at `now`: extends every held lease to `now + lease_ms` in one
    /// write. Leases the store says are gone, and leases that expired locally because
    /// the store could not be reached, are marked lost.
    pub async fn renew_once(&self, store: &SharedWorkerStore, now: Timestamp, lease_ms: u64) {
        let refs: Vec<LeaseRef> = self
            .lock()
            .iter()
            .map(|(job_id, held)| LeaseRef {
                job_id: *job_id,
                token: held.token,
            })
            .collect();
        if refs.is_empty() {
            return;
        }
        let until = now.plus_ms(lease_ms);
        match store.renew_leases(&refs, until, now).await {
            Ok(held_flags) => {
                let mut renewed = 0;
                let mut map = self.lock();
                for (lease, still_held) in refs.iter().zip(held_flags) {
                    let Some(entry) = map.get_mut(&lease.job_id) else {
                        continue;
                    };
                    if entry.token != lease.token {
                        continue;
                    }
                    if still_held {
                        entry.expires_at = until;
                        renewed += 1;
                    } else if entry.recording {
                        // The outcome was recorded meanwhile and released the lease.
                    } else {
                        tracing::warn!(job_id = %lease.job_id, "lease lost; abandoning the attempt");
                        entry.lost.cancel();
                    }
                }
                metrics::leases_extended(renewed);
            }
            Err(error) => {
                tracing::warn!(%error, "cannot renew leases");
                for (job_id, held) in self.lock().iter() {
                    if held.expires_at <= now && !held.lost.is_cancelled() {
                        tracing::warn!(%job_id, "lease expired before it could be renewed");
                        held.lost.cancel();
                    }
                }
            }
        }
    }

    /// Renews every `lease_ms / 3` until `stop` is cancelled.
    pub async fn renew_until(
        self,
        store: SharedWorkerStore,
        clock: Arc<dyn Clock>,
        lease_ms: u64,
        stop: CancellationToken,
    ) {
        let period = Duration::from_millis((lease_ms / 3).max(1));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(period) => {}
            }
            self.renew_once(&store, clock.now(), lease_ms).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::domain::SystemClock;

    fn lease() -> LeaseRef {
        LeaseRef {
            job_id: Uuid::now_v7(),
            token: 1,
        }
    }

    #[tokio::test]
    async fn an_unrenewed_lease_ends_the_wait_before_it_expires() {
        let leases = HeldLeases::default();
        let held = lease();
        let clock = SystemClock;
        leases.hold(held, clock.now().plus_ms(1_000));
        let started = Instant::now();
        leases.until_expiry(held.job_id, &clock, 500).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(450), "{waited:?}");
        assert!(
            waited < Duration::from_millis(1_000),
            "before the lease expires: {waited:?}"
        );
    }

    #[tokio::test]
    async fn a_renewal_moves_the_end_and_a_released_lease_ends_it_at_once() {
        let leases = HeldLeases::default();
        let held = lease();
        let clock = SystemClock;
        leases.hold(held, clock.now().plus_ms(200));
        let renewer = {
            let leases = leases.clone();
            let job_id = held.job_id;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if let Some(entry) = leases.lock().get_mut(&job_id) {
                    entry.expires_at = SystemClock.now().plus_ms(600);
                }
            })
        };
        let started = Instant::now();
        leases.until_expiry(held.job_id, &clock, 50).await;
        renewer.await.unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(400),
            "{:?}",
            started.elapsed()
        );

        leases.release(held.job_id);
        let started = Instant::now();
        leases.until_expiry(held.job_id, &clock, 50).await;
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}
