//! Retention: a maintenance task that deletes finished jobs, with their attempts, once
//! they have been finished for longer than the configured age (`--retain-finished-ms`
//! for `delivered` and `cancelled`, `--retain-dead-ms` for `dead`). "Finished for" is
//! now − `updated_at`: a terminal job is not updated again (a replay moves a dead job
//! back to `scheduled`, which the purge never touches).
//! Then it deletes what outlives jobs: audit entries older than the longer of the two
//! ages ([`RetentionSettings::audit_cutoff`]), and the tombstones of deleted
//! subscribers whose jobs are all purged. Each run first finishes the subscriber
//! deletions a crash left half-done ([`super::deletions`]).
//!
//! It runs every [`RetentionSettings::interval`] in small batches, pausing between
//! them so the SQLite writer is never held for long, and stops on the shared
//! cancellation token. Time comes from the injected clock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::deletions;
use crate::domain::{Clock, Timestamp};
use crate::metrics;
use crate::store::{DELETION_MOVE_BATCH, PurgedJobs, SharedStore, StoreError};

/// Jobs one purge statement deletes at most.
pub const PURGE_BATCH: u32 = 500;
/// How often the task looks for jobs to purge.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(60);
/// The pause between two batches of one run, letting other writers in.
pub const PURGE_PAUSE: Duration = Duration::from_millis(50);

/// What retention keeps, and how it paces itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionSettings {
    /// Milliseconds a `delivered` or `cancelled` job is kept after it finished; `None`:
    /// forever.
    pub retain_finished_ms: Option<u64>,
    /// Milliseconds a `dead` job is kept after it died; `None`: forever.
    pub retain_dead_ms: Option<u64>,
    /// Time between two runs.
    pub interval: Duration,
    /// Most jobs per purge statement.
    pub batch: u32,
    /// Pause between two batches of one run.
    pub pause: Duration,
}

impl Default for RetentionSettings {
    /// Keeps everything forever, with the standard pacing.
    fn default() -> Self {
        RetentionSettings {
            retain_finished_ms: None,
            retain_dead_ms: None,
            interval: PURGE_INTERVAL,
            batch: PURGE_BATCH,
            pause: PURGE_PAUSE,
        }
    }
}

impl RetentionSettings {
    /// True when something is ever purged.
    pub fn enabled(&self) -> bool {
        self.retain_finished_ms.is_some() || self.retain_dead_ms.is_some()
    }

    /// The exclusive `updated_at` bounds at `now`: (finished jobs, dead jobs).
    pub fn cutoffs(&self, now: Timestamp) -> (Option<Timestamp>, Option<Timestamp>) {
        let before = |age: Option<u64>| {
            age.map(|ms| {
                let ms = i64::try_from(ms).unwrap_or(i64::MAX);
                Timestamp::from_millis(now.as_millis().saturating_sub(ms))
            })
        };
        (before(self.retain_finished_ms), before(self.retain_dead_ms))
    }

    /// The exclusive bound of audit entries at `now` (docs/DESIGN.md §11): they are
    /// kept as long as the jobs kept longest, so an entry outlives the jobs it names;
    /// `None` (kept forever) when either kind of job is kept forever.
    pub fn audit_cutoff(&self, now: Timestamp) -> Option<Timestamp> {
        let longest = self.retain_finished_ms?.max(self.retain_dead_ms?);
        let ms = i64::try_from(longest).unwrap_or(i64::MAX);
        Some(Timestamp::from_millis(now.as_millis().saturating_sub(ms)))
    }
}

/// Runs retention every `settings.interval` (the first run at once) until `stop` is
/// cancelled: first finishes the subscriber deletions left in progress
/// ([`deletions::finish_all`], even when nothing is purged), then purges. A failed run
/// is logged and retried at the next interval.
pub async fn run(
    store: SharedStore,
    clock: Arc<dyn Clock>,
    settings: RetentionSettings,
    stop: CancellationToken,
) {
    if settings.enabled() {
        tracing::info!(
            retain_finished_ms = ?settings.retain_finished_ms,
            retain_dead_ms = ?settings.retain_dead_ms,
            "retention started"
        );
    }
    loop {
        // Deletions a crash or a failed batch left unfinished (docs/DESIGN.md §5.3.1),
        // whether or not anything is purged.
        let finishing = deletions::finish_all(&store, DELETION_MOVE_BATCH, settings.pause, &stop);
        if let Err(error) = finishing.await {
            tracing::warn!(%error, "finishing subscriber deletions failed; retrying later");
        }
        if settings.enabled() {
            purge_all(&store, clock.as_ref(), &settings, &stop).await;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

/// One run of the purges: finished jobs, then what outlives them; failures logged.
async fn purge_all(
    store: &SharedStore,
    clock: &dyn Clock,
    settings: &RetentionSettings,
    stop: &CancellationToken,
) {
    match purge_once(store, clock.now(), settings, stop).await {
        Ok(purged) if purged.total() > 0 => tracing::info!(
            delivered = purged.delivered,
            cancelled = purged.cancelled,
            dead = purged.dead,
            "purged finished jobs"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "retention failed; retrying later"),
    }
    match purge_records_once(store, clock.now(), settings, stop).await {
        Ok((audit, tombstones)) if audit + tombstones > 0 => tracing::info!(
            audit_entries = audit,
            deleted_subscribers = tombstones,
            "purged audit entries and deleted subscribers' tombstones"
        ),
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(%error, "retention of the audit trail failed; retrying later")
        }
    }
}

/// One run at `now`: purges in batches of `settings.batch` until a batch comes back
/// short (nothing older is left) or `stop` is cancelled, pausing `settings.pause`
/// between batches. Returns what it purged; every batch is counted in the metrics as
/// it commits.
pub async fn purge_once(
    store: &SharedStore,
    now: Timestamp,
    settings: &RetentionSettings,
    stop: &CancellationToken,
) -> Result<PurgedJobs, StoreError> {
    let (finished_before, dead_before) = settings.cutoffs(now);
    let mut total = PurgedJobs::default();
    if finished_before.is_none() && dead_before.is_none() {
        return Ok(total);
    }
    loop {
        let purged = store
            .purge_finished(finished_before, dead_before, settings.batch)
            .await?;
        metrics::purged(&purged);
        total.delivered += purged.delivered;
        total.cancelled += purged.cancelled;
        total.dead += purged.dead;
        if purged.total() < u64::from(settings.batch) {
            return Ok(total);
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(total),
            () = tokio::time::sleep(settings.pause) => {}
        }
    }
}

/// One run at `now` over what outlives jobs: audit entries before
/// [`RetentionSettings::audit_cutoff`] and the tombstones of deleted subscribers
/// whose jobs are all purged, in batches as [`purge_once`] does. Returns (audit
/// entries, tombstones) deleted.
pub async fn purge_records_once(
    store: &SharedStore,
    now: Timestamp,
    settings: &RetentionSettings,
    stop: &CancellationToken,
) -> Result<(u64, u64), StoreError> {
    let mut audit = 0;
    if let Some(before) = settings.audit_cutoff(now) {
        loop {
            let purged = store.purge_audit(before, settings.batch).await?;
            audit += purged;
            if purged < u64::from(settings.batch) || stop.is_cancelled() {
                break;
            }
            tokio::time::sleep(settings.pause).await;
        }
    }
    let mut tombstones = 0;
    loop {
        let purged = store.purge_tombstones(now, settings.batch).await?;
        tombstones += purged;
        if purged < u64::from(settings.batch) || stop.is_cancelled() {
            return Ok((audit, tombstones));
        }
        tokio::time::sleep(settings.pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_count_back_from_now_and_none_keeps_forever() {
        let now = Timestamp::from_millis(10_000);
        let settings = RetentionSettings {
            retain_finished_ms: Some(1_000),
            retain_dead_ms: None,
            ..RetentionSettings::default()
        };
        assert!(settings.enabled());
        assert_eq!(
            settings.cutoffs(now),
            (Some(Timestamp::from_millis(9_000)), None)
        );
        let forever = RetentionSettings::default();
        assert!(!forever.enabled());
        assert_eq!(forever.cutoffs(now), (None, None));
        let huge = RetentionSettings {
            retain_dead_ms: Some(u64::MAX),
            ..RetentionSettings::default()
        };
        assert_eq!(
            huge.cutoffs(now).1,
            Some(Timestamp::from_millis(10_000 - i64::MAX))
        );
    }

    #[test]
    fn audit_entries_are_kept_as_long_as_the_jobs_kept_longest() {
        let now = Timestamp::from_millis(10_000);
        let both = RetentionSettings {
            retain_finished_ms: Some(1_000),
            retain_dead_ms: Some(3_000),
            ..RetentionSettings::default()
        };
        assert_eq!(both.audit_cutoff(now), Some(Timestamp::from_millis(7_000)));
        let dead_forever = RetentionSettings {
            retain_dead_ms: None,
            ..both
        };
        assert_eq!(dead_forever.audit_cutoff(now), None);
        assert_eq!(RetentionSettings::default().audit_cutoff(now), None);
    }
}
