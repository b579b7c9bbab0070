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
//! A measurement takes [`ClockSyncSettings::samples`] readings back to back and keeps
//! the one with the shortest round trip, whose offset (the database's reading minus the
//! midpoint of the round trip) is off by at most half of it
//! ([`crate::domain::clock_offset`]).
//!
//! When the database cannot be read, the last measured offset stays (at start: none,
//! so this machine's clock as it is) and the measurement is retried every
//! [`ClockSyncSettings::retry`] until it succeeds. A server that starts has just opened
//! and migrated its database, so that is a short outage, during which its instance can
//! neither claim nor create anyway. A store without a clock of its own (SQLite,
//! embedded on this machine) needs no sync: the instance keeps the system clock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::clock_offset::{ClockSample, best_sample};
use crate::domain::{Clock, OffsetClock};
use crate::metrics;
use crate::store::SharedStore;

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
    /// Longest one measurement may take before it counts as failed.
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
#[derive(Debug)]
pub struct ClockSync {
    clock: Arc<OffsetClock>,
    store: SharedStore,
    settings: ClockSyncSettings,
    warning: OffsetWarning,
    /// Whether the last measurement failed (its failure already logged).
    failing: bool,
}

impl ClockSync {
    /// Sets `base` by `store`'s clock: measures once, and returns the sync whose
    /// [`ClockSync::clock`] the server injects and whose [`ClockSync::run`] keeps it
    /// set. When that first measurement fails (logged), the clock starts with an
    /// offset of 0 and `run` retries soon. `None` when the store has no clock of its
    /// own (SQLite): there is nothing to set by.
    pub async fn start(
        store: SharedStore,
        base: Arc<dyn Clock>,
        settings: ClockSyncSettings,
    ) -> Option<ClockSync> {
        // The recorder first, so that the offset set here is not lost.
        metrics::install();
        let mut sync = ClockSync {
            clock: Arc::new(OffsetClock::new(base)),
            store,
            warning: OffsetWarning::new(settings.warn_ms),
            settings,
            failing: false,
        };
        match sync.measure().await {
            Ok(None) => return None,
            Ok(Some(sample)) => sync.apply(sample),
            Err(error) => {
                tracing::warn!(
                    %error,
                    retry_ms = sync.settings.retry.as_millis() as u64,
                    "cannot read the database's clock; working on this machine's clock \
                     until it can be read"
                );
                sync.failing = true;
            }
        }
        Some(sync)
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

    /// One measurement within [`ClockSyncSettings::timeout`]: the best of
    /// [`ClockSyncSettings::samples`] readings; `None` when the store has no clock.
    async fn measure(&self) -> Result<Option<ClockSample>, String> {
        let readings = async {
            let mut samples = Vec::with_capacity(self.settings.samples);
            for _ in 0..self.settings.samples.max(1) {
                let sent = self.clock.base_now();
                let reading = self.store.database_clock().await;
                let received = self.clock.base_now();
                match reading.map_err(|e| e.to_string())? {
                    None => return Ok(None),
                    Some(reference) => samples.push(ClockSample {
                        sent,
                        reference,
                        received,
                    }),
                }
            }
            best_sample(&samples)
                .map(Some)
                .ok_or_else(|| "this machine's clock was set back during every reading".into())
        };
        tokio::time::timeout(self.settings.timeout, readings)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {} ms",
                    self.settings.timeout.as_millis()
                ))
            })
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
    use super::*;

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
