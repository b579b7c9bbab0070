//! A clock set by a reference clock: the offset between two clocks measured over a
//! round trip, and a clock that applies it (docs/DESIGN.md §12).
//!
//! Instances sharing a PostgreSQL database work on the database's timeline, so that
//! one instance's due times and leases mean the same to every other whatever their
//! machines' clocks say. The measurement is NTP's (RFC 5905 §8) with one timestamp
//! from the server: the reference clock was read somewhere between the question
//! leaving and the answer arriving, so it is taken to have been read at their midpoint,
//! with an error of at most half the round trip; of several readings, the one with the
//! shortest round trip bounds the error best (NTP's clock filter, RFC 5905 §10).
//! Measuring is the caller's (it needs the store); this module is the arithmetic and
//! the clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::time::{Clock, Timestamp};

/// One reading of a reference clock: the local clock when the question was sent, the
/// reference clock's answer, and the local clock when the answer arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    /// The local clock as the question left.
    pub sent: Timestamp,
    /// The reference clock's reading.
    pub reference: Timestamp,
    /// The local clock as the answer arrived.
    pub received: Timestamp,
}

impl ClockSample {
    /// The round trip in milliseconds (`received - sent`); negative when the local clock
    /// was set back while the sample was taken.
    pub fn round_trip_ms(&self) -> i64 {
        self.received.millis_since(self.sent)
    }

    /// The reference clock minus the local one, in milliseconds: `reference - (sent +
    /// received) / 2` (the midpoint rounded down). Positive when the local clock is
    /// behind. Its error is at most half the round trip (plus a millisecond of
    /// rounding).
    pub fn offset_ms(&self) -> i64 {
        let midpoint = self
            .sent
            .as_millis()
            .saturating_add(self.round_trip_ms().div_euclid(2));
        self.reference.as_millis().saturating_sub(midpoint)
    }
}

/// The sample with the shortest round trip, whose offset has the smallest error bound
/// (the first of equals); samples with a negative round trip (the local clock stepped
/// back meanwhile) are ignored. `None` when none is usable.
pub fn best_sample(samples: &[ClockSample]) -> Option<ClockSample> {
    samples
        .iter()
        .filter(|sample| sample.round_trip_ms() >= 0)
        .min_by_key(|sample| sample.round_trip_ms())
        .copied()
}

/// A clock whose `now` is its base clock's plus an offset set from outside (the last
/// measured offset to the reference clock, [`ClockSample::offset_ms`]); the offset
/// starts at 0, i.e. the base clock as it is. Shared by every reader through an
/// `Arc`; setting the offset takes effect at the next `now`.
#[derive(Debug)]
pub struct OffsetClock {
    base: Arc<dyn Clock>,
    offset_ms: AtomicI64,
}

impl OffsetClock {
    /// `base` with an offset of 0 until [`OffsetClock::set_offset_ms`].
    pub fn new(base: Arc<dyn Clock>) -> Self {
        OffsetClock {
            base,
            offset_ms: AtomicI64::new(0),
        }
    }

    /// The base clock's `now`, without the offset (what samples are taken with).
    pub fn base_now(&self) -> Timestamp {
        self.base.now()
    }

    /// The offset applied, in milliseconds (reference minus base).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Applies `offset_ms` (reference minus base) from the next `now` on.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        let base = self.base.now().as_millis();
        Timestamp::from_millis(base.saturating_add(self.offset_ms()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ManualClock;

    fn sample(sent: i64, reference: i64, received: i64) -> ClockSample {
        ClockSample {
            sent: Timestamp::from_millis(sent),
            reference: Timestamp::from_millis(reference),
            received: Timestamp::from_millis(received),
        }
    }

    #[test]
    fn the_offset_is_the_reference_minus_the_midpoint_of_the_round_trip() {
        // Local clock 90 s ahead: asked at 100_000 (local), answered 10_050 (reference),
        // back at 100_100: the reference was read at local 100_050.
        let ahead = sample(100_000, 10_050, 100_100);
        assert_eq!(ahead.round_trip_ms(), 100);
        assert_eq!(ahead.offset_ms(), -90_000);
        // Local clock 90 s behind.
        let behind = sample(10_000, 100_004, 10_008);
        assert_eq!(behind.offset_ms(), 90_000);
        // The same clocks, no delay.
        assert_eq!(sample(5_000, 5_000, 5_000).offset_ms(), 0);
        // An odd round trip: the midpoint rounds down.
        assert_eq!(sample(0, 10, 3).offset_ms(), 9);
    }

    #[test]
    fn the_offset_is_independent_of_where_in_the_round_trip_the_reference_was_read() {
        // The true offset is +500; the answer was read 10 ms or 90 ms into a 100 ms
        // round trip: the error stays within half of it.
        for read_after in [0, 10, 50, 90, 100] {
            let s = sample(1_000, 1_000 + read_after + 500, 1_100);
            assert!(
                (s.offset_ms() - 500).abs() <= s.round_trip_ms() / 2,
                "{read_after}"
            );
        }
    }

    #[test]
    fn the_best_sample_has_the_shortest_round_trip_and_a_stepped_one_is_ignored() {
        let slow = sample(0, 1_000, 40);
        let fast = sample(100, 1_101, 102);
        let stepped_back = sample(300, 1_300, 200);
        assert_eq!(best_sample(&[slow, fast, stepped_back]), Some(fast));
        assert_eq!(best_sample(&[slow]), Some(slow));
        assert_eq!(best_sample(&[stepped_back]), None);
        assert_eq!(best_sample(&[]), None);
    }

    #[test]
    fn extreme_readings_saturate_instead_of_overflowing() {
        let s = sample(i64::MIN, i64::MAX, i64::MAX);
        assert_eq!(s.round_trip_ms(), i64::MAX);
        assert_eq!(s.offset_ms(), i64::MAX);
    }

    #[test]
    fn the_clock_is_its_base_plus_the_offset_it_is_given() {
        let base = ManualClock::new(Timestamp::from_millis(1_000_000));
        let clock = OffsetClock::new(Arc::new(base.clone()));
        assert_eq!(clock.now(), Timestamp::from_millis(1_000_000));
        assert_eq!(clock.offset_ms(), 0);

        clock.set_offset_ms(-90_000);
        assert_eq!(clock.now(), Timestamp::from_millis(910_000));
        assert_eq!(clock.base_now(), Timestamp::from_millis(1_000_000));
        base.advance_ms(250);
        assert_eq!(clock.now(), Timestamp::from_millis(910_250));

        clock.set_offset_ms(90_000);
        assert_eq!(clock.now(), Timestamp::from_millis(1_090_250));
    }

    #[test]
    fn a_measured_offset_puts_a_skewed_clock_on_the_reference_timeline() {
        // The local clock is 90 s ahead of the reference.
        let local = ManualClock::new(Timestamp::from_millis(2_090_000));
        let clock = OffsetClock::new(Arc::new(local.clone()));
        let sent = clock.base_now();
        local.advance_ms(4);
        let reference = Timestamp::from_millis(2_000_004);
        local.advance_ms(2);
        let taken = sample(
            sent.as_millis(),
            reference.as_millis(),
            clock.base_now().as_millis(),
        );
        clock.set_offset_ms(taken.offset_ms());
        // Local 2_090_006 is reference 2_000_006, to within half the 6 ms round trip.
        let error = clock.now().millis_since(Timestamp::from_millis(2_000_006));
        assert!(error.abs() <= 3, "{error}");
    }
}
