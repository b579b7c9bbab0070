//! Instants as Unix epoch milliseconds, and the injected clock.
//!
//! Both stores keep every instant as a 64-bit integer of milliseconds since the Unix
//! epoch (UTC), so that `now` is a plain parameter and SQLite and PostgreSQL compare
//! the same numbers. The API speaks RFC 3339 in UTC.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An instant, in milliseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// Why a text is not an RFC 3339 timestamp with an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be an RFC 3339 timestamp with an offset, e.g. 2026-11-30T12:00:00Z")]
pub struct TimestampParseError;

impl Timestamp {
    /// The earliest instant the API can express (0001-01-01T00:00:00Z).
    pub const MIN: Timestamp = Timestamp(-62_135_596_800_000);
    /// The latest instant the API can express (9999-12-31T23:59:59.999Z).
    pub const MAX: Timestamp = Timestamp(253_402_300_799_999);

    /// From milliseconds since the Unix epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This instant plus `ms` milliseconds, clamped to [`Timestamp::MAX`].
    pub fn plus_ms(self, ms: u64) -> Self {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms).min(Self::MAX.0))
    }

    /// This instant minus `ms` milliseconds (saturating).
    pub fn minus_ms(self, ms: u64) -> Self {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(ms))
    }

    /// Milliseconds from `earlier` to `self`; negative when `earlier` is later.
    pub fn millis_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Parses RFC 3339 (`2026-11-30T12:00:00.250+01:00`). A timestamp without an offset
    /// is refused, since its instant would be a guess.
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimestampParseError> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| TimestampParseError)?;
        let ms = parsed.unix_timestamp_nanos() / 1_000_000;
        let ms = i64::try_from(ms).map_err(|_| TimestampParseError)?;
        if !(Self::MIN.0..=Self::MAX.0).contains(&ms) {
            // e.g. 9999-12-31T23:59:59-01:00, past the last instant the API can show
            return Err(TimestampParseError);
        }
        Ok(Timestamp(ms))
    }

    /// Formats as RFC 3339 in UTC with millisecond precision (`2026-11-30T12:00:00.250Z`).
    pub fn to_rfc3339(self) -> String {
        let clamped = self.0.clamp(Self::MIN.0, Self::MAX.0);
        let nanos = i128::from(clamped) * 1_000_000;
        let at = OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .expect("clamped to the range OffsetDateTime represents");
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second(),
            at.millisecond()
        )
    }

    /// Whole seconds since the Unix epoch (the `webhook-timestamp` unit).
    pub fn as_unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 instant in UTC, millisecond precision"))
            .examples(["2026-11-30T12:00:00.000Z"])
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

/// The source of `now`. Everything time-dependent takes it (or a `now` it produced)
/// instead of reading the system clock, so tests move time rather than sleep.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
        Timestamp((nanos / 1_000_000) as i64)
    }
}

/// The system's wall clock read once, then moved by the monotonic clock
/// (`std::time::Instant`): setting the wall clock (an NTP step, an operator) does not
/// move it, while NTP's rate corrections do. The base of the clock that a database's
/// clock sets (`crate::clock_sync`), whose periodic measurement corrects the drift and
/// catches up with a step.
#[derive(Debug, Clone, Copy)]
pub struct SteadyClock {
    anchor: Timestamp,
    started: std::time::Instant,
}

impl SteadyClock {
    /// A clock standing at the system clock's `now`.
    pub fn new() -> Self {
        SteadyClock {
            anchor: SystemClock.now(),
            started: std::time::Instant::now(),
        }
    }
}

impl Default for SteadyClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SteadyClock {
    fn now(&self) -> Timestamp {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.anchor.plus_ms(elapsed)
    }
}

/// A clock that only moves when told to; cloning shares the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(at.as_millis())))
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        self.0.store(at.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_fractions() {
        let a = Timestamp::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        let b = Timestamp::parse_rfc3339("2026-11-30T13:00:00.000+01:00").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_millis(), 1_796_040_000_000);
        let c = Timestamp::parse_rfc3339("2026-11-30T12:00:00.5Z").unwrap();
        assert_eq!(c.millis_since(a), 500);
    }

    #[test]
    fn refuses_a_timestamp_without_offset() {
        assert!(Timestamp::parse_rfc3339("2026-11-30T12:00:00").is_err());
        assert!(Timestamp::parse_rfc3339("2026-11-30").is_err());
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
        assert!(Timestamp::parse_rfc3339("9999-12-31T23:59:59-01:00").is_err());
        assert!(Timestamp::parse_rfc3339("9999-12-31T23:59:59Z").is_ok());
    }

    #[test]
    fn formats_utc_with_milliseconds() {
        let a = Timestamp::from_millis(1_796_040_000_250);
        assert_eq!(a.to_rfc3339(), "2026-11-30T12:00:00.250Z");
        assert_eq!(Timestamp::parse_rfc3339(&a.to_rfc3339()).unwrap(), a);
    }

    #[test]
    fn plus_saturates() {
        assert_eq!(Timestamp::MAX.plus_ms(u64::MAX), Timestamp::MAX);
        assert_eq!(Timestamp::from_millis(1).plus_ms(2).as_millis(), 3);
    }

    #[test]
    fn steady_clock_starts_at_the_system_clock_and_moves_with_it() {
        let before = SystemClock.now();
        let steady = SteadyClock::new();
        let first = steady.now();
        let after = SystemClock.now();
        assert!(
            before <= first && first <= after,
            "{first:?} not in {before:?}..{after:?}"
        );
        assert!(steady.now() >= first);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let shared = clock.clone();
        shared.advance_ms(250);
        assert_eq!(clock.now(), Timestamp::from_millis(1_250));
    }
}
