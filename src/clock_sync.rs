//! Sets this instance's clock by the database's (docs/DESIGN.md §12).
//!
//! Instances sharing a PostgreSQL database judge due times and leases that other
//! instances wrote, so they must agree on `now`: an instance whose machine's clock runs
//! 90 s ahead would otherwise send jobs early and take over other instances' live
//! leases. Each instance therefore works on the database's timeline: the server injects
//! an [`OffsetClock`] over this machine's steady clock, and [`ClockSync`] measures the
//! offset to the database's clock before the server serves and every
//! [`ClockSyncSettings::interval`] after, applies it to every `now` (creations, claims,
//! renewals, lease judgements, the API), publishes it as
//! `deferhook_clock_offset_seconds`, and logs a warning once each time it moves beyond
//! `--clock-offset-warn-ms` (and a note once it is back within).
//!
//! A measurement takes [`ClockSyncSettings::samples`] readings back to back, each
//! bounded by [`ClockSyncSettings::timeout`], and keeps the one with the shortest round
//! trip, whose offset (the database's reading minus the midpoint of the round trip) is
//! off by at most half of it ([`crate::domain::clock_offset`]); one answered reading is
//! enough, so a slow database gives a coarser offset rather than none.
//!
//! The server does not serve nor claim before the first measurement succeeds: until
//! then [`ClockSync::start`] retries every [`ClockSyncSettings::retry`], since an
//! instance on its own clock could send jobs early and take other instances' live
//! leases. Afterwards, when the database cannot be read, the last measured offset stays
//! and the measurement is retried every [`ClockSyncSettings::retry`] until it succeeds.
//! A store without a clock of its own (SQLite, embedded on this machine) needs no sync:
//! the instance keeps the system clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::clock_offset::{ClockSample, best_sample};
use crate::domain::{Clock, OffsetClock, Timestamp};
use crate::metrics;
use crate::store::SharedStore;

/// One reading of the database's clock: `Ok(None)` when it has none (SQLite), `Err`
/// with why it could not be read. A function, so that tests can give a slow or failing
/// database without a whole store.
pub type ReadDatabaseClock = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Option<Timestamp>, String>> + Send>>
        + Send
        + Sync,
>;

/// [`ReadDatabaseClock`] of `store` ([`crate::store::Store::database_clock`]).
fn of_store(store: SharedStore) -> ReadDatabaseClock {
    Arc::new(move || {
        let store = store.clone();
        Box::pin(async move { store.database_clock().await.map_err(|e| e.to_string()) })
    })
}

/// How often, at most, start-up repeats that it is still waiting for the database's
/// clock.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(30);

/// How the offset is measured, and when it is worth a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockSyncSettings {
    /// How often the offset is measured once known.
    pub interval: Duration,
    /// How soon a failed measurement is tried again.
    pub retry: Duration,
    /// Readings of the database's clock per measurement (at least 1); the one with
    /// the shortest round trip counts.
    pub samples: usize,
    /// Longest one reading may take before it counts as failed.
    pub timeout: Duration,
    /// An offset beyond this many milliseconds either way is logged as a warning
    /// (`--clock-offset-warn-ms`).
    pub warn_ms: u64,
}

impl Default for ClockSyncSettings {
    /// Every 30 s, retried after 1 s, 5 readings within 5 s, a warning beyond 1 s.
    fn default() -> Self {
        ClockSyncSettings {
            interval: Duration::from_secs(30),
            retry: Duration::from_secs(1),
            samples: 5,
            timeout: Duration::from_secs(5),
            warn_ms: 1_000,
        }
    }
}

/// Keeps an [`OffsetClock`] set by the store's clock.
pub struct ClockSync {
    clock: Arc<OffsetClock>,
    read: ReadDatabaseClock,
    settings: ClockSyncSettings,
    warning: OffsetWarning,
    /// Whether the last measurement failed (its failure already logged).
    failing: bool,
}

impl ClockSync {
    /// Sets `base` by `store`'s clock: measures until a measurement succeeds (retrying
    /// every [`ClockSyncSettings::retry`], logged), and returns the sync whose
    /// [`ClockSync::clock`] the server injects and whose [`ClockSync::run`] keeps it
    /// set. `None` when the store has no clock of its own (SQLite): there is nothing to
    /// set by. Never returns a clock that was not set: the caller drops this future to
    /// give up (a shutdown signal while starting).
    pub async fn start(
        store: SharedStore,
        base: Arc<dyn Clock>,
        settings: ClockSyncSettings,
    ) -> Option<ClockSync> {
        Self::start_with(of_store(store), base, settings).await
    }

    /// [`ClockSync::start`] with the database's clock read by `read`.
    pub async fn start_with(
        read: ReadDatabaseClock,
        base: Arc<dyn Clock>,
        settings: ClockSyncSettings,
    ) -> Option<ClockSync> {
        // The recorder first, so that the offset set here is not lost.
        metrics::install();
        let mut sync = ClockSync {
            clock: Arc::new(OffsetClock::new(base)),
            read,
            warning: OffsetWarning::new(settings.warn_ms),
            settings,
            failing: false,
        };
        let mut logged_at: Option<tokio::time::Instant> = None;
        loop {
            match sync.measure().await {
                Ok(None) => return None,
                Ok(Some(sample)) => {
                    if logged_at.is_some() {
                        tracing::info!("read the database's clock; starting");
                    }
                    sync.apply(sample);
                    return Some(sync);
                }
                Err(error) => {
                    if logged_at.is_none_or(|at| at.elapsed() >= WAITING_LOG_EVERY) {
                        tracing::warn!(
                            %error,
                            retry_ms = sync.settings.retry.as_millis() as u64,
                            "cannot read the database's clock; not serving nor claiming \
                             until it can be read, since on this machine's clock the \
                             instance could send jobs early and take live leases"
                        );
                        logged_at = Some(tokio::time::Instant::now());
                    }
                    tokio::time::sleep(sync.settings.retry).await;
                }
            }
        }
    }

    /// The clock to inject: the base clock plus the last measured offset.
    pub fn clock(&self) -> Arc<OffsetClock> {
        self.clock.clone()
    }

    /// Measures again every [`ClockSyncSettings::interval`] (every
    /// [`ClockSyncSettings::retry`] after a failure) until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        loop {
            let pause = if self.failing {
                self.settings.retry
            } else {
                self.settings.interval
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
            match self.measure().await {
                Ok(Some(sample)) => {
                    if self.failing {
                        tracing::info!("reading the database's clock again");
                    }
                    self.failing = false;
                    self.apply(sample);
                }
                // A store answers the same way every time; nothing to set by.
                Ok(None) => return,
                Err(error) => {
                    if !self.failing {
                        tracing::warn!(
                            %error,
                            offset_ms = self.clock.offset_ms(),
                            "cannot read the database's clock; keeping the last measured \
                             offset until it can be read"
                        );
                    }
                    self.failing = true;
                }
            }
        }
    }

    /// One measurement: the best of [`ClockSyncSettings::samples`] readings, each
    /// within [`ClockSyncSettings::timeout`]; fails only when none was answered.
    /// `None` when the store has no clock.
    async fn measure(&self) -> Result<Option<ClockSample>, String> {
        let mut samples = Vec::with_capacity(self.settings.samples);
        let mut failure = None;
        for _ in 0..self.settings.samples.max(1) {
            let sent = self.clock.base_now();
            let reading = tokio::time::timeout(self.settings.timeout, (self.read)()).await;
            let received = self.clock.base_now();
            match reading {
                Ok(Ok(None)) => return Ok(None),
                Ok(Ok(Some(reference))) => samples.push(ClockSample {
                    sent,
                    reference,
                    received,
                }),
                Ok(Err(error)) => failure = Some(error),
                Err(_) => {
                    failure = Some(format!(
                        "no answer within {} ms",
                        self.settings.timeout.as_millis()
                    ));
                }
            }
        }
        match best_sample(&samples) {
            Some(best) => Ok(Some(best)),
            None => Err(failure.unwrap_or_else(|| {
                "this machine's clock was set back during every reading".into()
            })),
        }
    }

    /// Applies a measured offset, publishes it, and logs a crossing of the threshold.
    fn apply(&mut self, sample: ClockSample) {
        let offset_ms = sample.offset_ms();
        self.clock.set_offset_ms(offset_ms);
        metrics::clock_offset(offset_ms);
        tracing::debug!(
            offset_ms,
            round_trip_ms = sample.round_trip_ms(),
            "measured this machine's clock against the database's"
        );
        match self.warning.observe(offset_ms) {
            Some(Crossing::Beyond) => tracing::warn!(
                offset_ms,
                warn_ms = self.settings.warn_ms,
                "this machine's clock is {} ms {} the database's; deferhook works on the \
                 database's time, but check this machine's time synchronization (NTP)",
                offset_ms.unsigned_abs(),
                if offset_ms < 0 { "ahead of" } else { "behind" },
            ),
            Some(Crossing::Within) => tracing::info!(
                offset_ms,
                warn_ms = self.settings.warn_ms,
                "this machine's clock is back within --clock-offset-warn-ms of the database's"
            ),
            None => {}
        }
    }
}

/// Which way an offset crossed the warning threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crossing {
    /// From within it to beyond it (or beyond it at the first measurement).
    Beyond,
    /// From beyond it back within it.
    Within,
}

/// Whether the last offset was beyond the threshold, so that each crossing is logged
/// once rather than at every measurement.
#[derive(Clone, Copy, Debug)]
struct OffsetWarning {
    threshold_ms: u64,
    beyond: bool,
}

impl OffsetWarning {
    /// Nothing beyond `threshold_ms` seen yet.
    fn new(threshold_ms: u64) -> Self {
        OffsetWarning {
            threshold_ms,
            beyond: false,
        }
    }

    /// Records a measured offset; says whether it crossed the threshold (an offset of
    /// exactly the threshold is within).
    fn observe(&mut self, offset_ms: i64) -> Option<Crossing> {
        let beyond = offset_ms.unsigned_abs() > self.threshold_ms;
        if beyond == self.beyond {
            return None;
        }
        self.beyond = beyond;
        Some(if beyond {
            Crossing::Beyond
        } else {
            Crossing::Within
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::domain::ManualClock;

    const AHEAD_MS: u64 = 90_000;

    fn base() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)))
    }

    /// A database 90 s ahead of `base` that takes `delay` to answer and fails its
    /// first `failures` readings; counts the readings.
    fn database(
        base: Arc<ManualClock>,
        delay: Duration,
        failures: usize,
        calls: Arc<AtomicUsize>,
    ) -> ReadDatabaseClock {
        Arc::new(move || {
            let (base, calls) = (base.clone(), calls.clone());
            Box::pin(async move {
                let call = calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                if call < failures {
                    return Err("connection refused".to_owned());
                }
                Ok(Some(base.now().plus_ms(AHEAD_MS)))
            })
        })
    }

    /// Five readings of 1.1 s each took longer than the whole measurement was allowed,
    /// so a slow database left the instance on its own clock (issue #15 review): each
    /// reading is bounded instead, and one answer is enough.
    #[tokio::test(start_paused = true)]
    async fn a_slow_database_still_sets_the_clock() {
        let base = base();
        let calls = Arc::new(AtomicUsize::new(0));
        let read = database(base.clone(), Duration::from_millis(1_100), 0, calls);
        let sync = ClockSync::start_with(read, base, ClockSyncSettings::default())
            .await
            .expect("PostgreSQL has a clock");
        assert_eq!(sync.clock().offset_ms(), 90_000);
    }

    /// An instance never starts on its own clock: start returns only once a
    /// measurement succeeded, retrying meanwhile.
    #[tokio::test(start_paused = true)]
    async fn start_waits_until_the_database_clock_is_read() {
        let base = base();
        let calls = Arc::new(AtomicUsize::new(0));
        let read = database(base.clone(), Duration::ZERO, 12, calls.clone());
        let begun = tokio::time::Instant::now();
        let sync = ClockSync::start_with(read, base.clone(), ClockSyncSettings::default())
            .await
            .expect("PostgreSQL has a clock");
        assert_eq!(sync.clock().offset_ms(), 90_000);
        assert!(calls.load(Ordering::SeqCst) > 12);
        assert!(begun.elapsed() >= Duration::from_secs(2), "two retries");
        assert_eq!(
            sync.clock().now(),
            base.now().plus_ms(AHEAD_MS),
            "the injected clock is the database's"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_database_that_never_answers_holds_the_start() {
        let base = base();
        let read: ReadDatabaseClock = Arc::new(|| Box::pin(std::future::pending()));
        let start = ClockSync::start_with(read, base, ClockSyncSettings::default());
        let waited = tokio::time::timeout(Duration::from_secs(600), start).await;
        assert!(waited.is_err(), "started without the database's clock");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_without_a_clock_needs_no_sync() {
        let read: ReadDatabaseClock = Arc::new(|| Box::pin(async { Ok(None) }));
        let sync = ClockSync::start_with(read, base(), ClockSyncSettings::default()).await;
        assert!(sync.is_none());
    }

    #[test]
    fn each_crossing_of_the_threshold_is_reported_once() {
        let mut warning = OffsetWarning::new(1_000);
        assert_eq!(warning.observe(0), None);
        assert_eq!(warning.observe(1_000), None);
        assert_eq!(warning.observe(-1_000), None);
        assert_eq!(warning.observe(-90_000), Some(Crossing::Beyond));
        assert_eq!(warning.observe(-90_002), None);
        assert_eq!(warning.observe(1_001), None);
        assert_eq!(warning.observe(12), Some(Crossing::Within));
        assert_eq!(warning.observe(-3), None);
        assert_eq!(warning.observe(90_000), Some(Crossing::Beyond));
    }

    #[test]
    fn an_offset_beyond_the_threshold_at_the_first_measurement_is_reported() {
        let mut warning = OffsetWarning::new(1_000);
        assert_eq!(warning.observe(i64::MIN), Some(Crossing::Beyond));
    }
}
