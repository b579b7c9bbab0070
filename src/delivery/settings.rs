//! How the delivery worker behaves.

use std::sync::Arc;
use std::time::Duration;

use super::resolve::Resolver;
use crate::domain::policy::BackoffPolicy;
use crate::domain::target::TargetPolicy;

/// Settings of one worker (docs/DESIGN.md §6).
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// This worker's identity, stored as the lease owner.
    pub owner: String,
    /// Lease length, in milliseconds; must exceed `attempt_timeout`.
    pub lease_ms: u64,
    /// One attempt's time limit (also capped by the job's deadline).
    pub attempt_timeout: Duration,
    /// Backoff between attempts.
    pub backoff: BackoffPolicy,
    /// Most attempts running at once in this worker (its slots; see
    /// [`WorkerSlots`](super::slots::WorkerSlots) for how `serve` chooses them).
    pub max_in_flight: usize,
    /// Most jobs taken by one claim.
    pub claim_batch: u32,
    /// The longest the worker sleeps without looking for due jobs (the fallback when no
    /// wake-up arrives).
    pub poll_interval: Duration,
    /// On shutdown, how long running attempts may finish before their leases are
    /// released.
    pub shutdown_grace: Duration,
    /// An attempt open this long without an answer marks its endpoint long-running
    /// (`--long-attempt-ms`; docs/DESIGN.md §15.2).
    pub long_attempt: Duration,
    /// Which addresses attempts may connect to (`--allow-private-targets`,
    /// `--allow-target-cidr`).
    pub target_policy: Arc<TargetPolicy>,
    /// Looks subscriber host names up before the policy filters the addresses (the
    /// system's resolver; tests inject their own).
    pub resolver: Resolver,
}

impl DeliverySettings {
    /// Checks the rules between settings: the attempt timeout must be shorter than the
    /// lease, or a second worker could start a concurrent attempt (CASES C-01).
    pub fn validate(&self) -> Result<(), String> {
        if self.attempt_timeout.as_millis() >= u128::from(self.lease_ms) {
            return Err(format!(
                "--attempt-timeout-ms ({}) must be shorter than --lease-ms ({}), or another \
                 worker could start a second attempt while the first is still open",
                self.attempt_timeout.as_millis(),
                self.lease_ms
            ));
        }
        if self.max_in_flight == 0 {
            return Err("--max-in-flight must be at least 1".into());
        }
        if self.backoff.base_ms > self.backoff.max_ms {
            return Err(format!(
                "--backoff-base-ms ({}) must not exceed --backoff-max-ms ({})",
                self.backoff.base_ms, self.backoff.max_ms
            ));
        }
        Ok(())
    }
}
