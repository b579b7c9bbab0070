//! The periods of a recurring schedule: the instants at which its periods start, either
//! the occurrences of a cron pattern in an IANA time zone or the whole multiples of an
//! interval counted from an anchor; and the event id template that gives each period's
//! delivery its own event id. Pure: every question names the instant it is asked at.
//!
//! Cron patterns are evaluated by croner (the Open Cron Pattern Specification, OCPS,
//! with Vixie cron's rules) on jiff's zoned time, with the IANA time zone database
//! embedded in the binary, so that the periods do not depend on the host's
//! `/usr/share/zoneinfo`. A pattern reads the wall clock of its zone, and the periods
//! lie on the real time line; where the zone's clock jumps, they follow Vixie cron, as
//! OCPS and croner's README ("Daylight Saving Time (DST) Handling") tell:
//!
//! - **Spring forward** (a gap: in `America/New_York` on 2026-03-08 the wall clock goes
//!   from 01:59:59 EST to 03:00:00 EDT). A *fixed-time* pattern (a single value in each
//!   of its second, minute and hour fields, such as `30 2 * * *`) whose time falls in
//!   the gap starts its period once, at the first instant after the gap on the same day
//!   (03:00 EDT). An *interval* pattern (a `*`, a step, a range or a list in one of
//!   those fields, such as `*/30 * * * *`) skips the wall times that do not exist:
//!   01:30 EST is followed by 03:00 EDT.
//! - **Fall back** (an overlap: in `America/New_York` on 2026-11-01 the wall clock goes
//!   from 01:59:59 EDT back to 01:00:00 EST, so 01:00–01:59 happens twice). A fixed-time
//!   pattern starts its period once, at the first pass (01:30 EDT, not 01:30 EST); an
//!   interval pattern starts one at each pass (01:00 EDT, 01:30 EDT, 01:00 EST,
//!   01:30 EST, then 02:00 EST).
//!
//! Periods exist only between [`Timestamp::MIN`] and [`Timestamp::MAX`], the instants
//! the API can express; a cron pattern's also end at croner's horizon, early in the
//! year 5000.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::{TimeZone, TimeZoneDatabase};

use super::Timestamp;
use super::field_error::FieldError;
use super::validate;

/// Shortest interval between the periods of an [`Recurrence::Every`]: 1 s.
pub const MIN_EVERY_MS: u64 = 1_000;
/// Longest interval between the periods of an [`Recurrence::Every`]: 366 days
/// (31 622 400 000 ms), a leap year. A longer cycle is better told as a cron pattern.
pub const MAX_EVERY_MS: u64 = 366 * 24 * 3_600_000;
/// Longest cron pattern, in bytes: room for a list of every minute and more, while an
/// error message that quotes the pattern stays short.
pub const MAX_CRON_LEN: usize = 512;
/// The time zone of a cron pattern given without one.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// The placeholder an event id template must contain: [`fill_event_id`] replaces it
/// with [`period_text`] of the period's start.
pub const PERIOD_START: &str = "{period_start}";
/// Longest [`period_text`]: `2026-11-30T00:00:00.250Z`, 24 characters.
pub const MAX_PERIOD_TEXT_LEN: usize = 24;

/// When the periods of a recurring schedule start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    /// The occurrences of a cron pattern in an IANA time zone ([`Recurrence::cron`]).
    Cron(ZonedCron),
    /// Every whole multiple of an interval from an anchor ([`Recurrence::every`]).
    Every(Interval),
}

/// A checked cron pattern (5 fields, or 6 with seconds first) in a checked IANA time
/// zone: the pattern and the zone as given, and croner's and jiff's readings of them.
#[derive(Clone)]
pub struct ZonedCron {
    pattern: String,
    time_zone: String,
    /// Boxed: croner's reading is some 300 bytes, an interval 16.
    cron: Box<Cron>,
    zone: TimeZone,
}

/// A checked interval: the instants `anchor + k × every_ms` for every integer `k`,
/// negative ones included, so the anchor may lie in the future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interval {
    every_ms: u64,
    anchor: Timestamp,
}

impl ZonedCron {
    /// The pattern, as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The IANA name of the time zone the pattern reads the wall clock of (`UTC` when
    /// none was given).
    pub fn time_zone(&self) -> &str {
        &self.time_zone
    }
}

/// The pattern and the zone; croner's and jiff's readings follow from them.
impl std::fmt::Debug for ZonedCron {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZonedCron")
            .field("pattern", &self.pattern)
            .field("time_zone", &self.time_zone)
            .finish_non_exhaustive()
    }
}

/// Two patterns are the same when their texts and zones are: croner's and jiff's
/// readings follow from those.
impl PartialEq for ZonedCron {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern && self.time_zone == other.time_zone
    }
}

impl Eq for ZonedCron {}

impl Interval {
    /// Milliseconds between two periods, in [`MIN_EVERY_MS`]`..=`[`MAX_EVERY_MS`].
    pub fn every_ms(&self) -> u64 {
        self.every_ms
    }

    /// One period's start; the others are whole multiples of `every_ms` away.
    pub fn anchor(&self) -> Timestamp {
        self.anchor
    }
}

impl Recurrence {
    /// Reads the cron pattern `pattern` in the IANA time zone `time_zone` (`None`:
    /// [`DEFAULT_TIME_ZONE`], UTC).
    ///
    /// The pattern has 5 fields (minute, hour, day of month, month, day of week) or 6
    /// (second first), in croner's syntax: `*`, lists, ranges, `*/n` and `a-b/n` steps,
    /// `JAN`–`DEC` and `SUN`–`SAT`, `L`, `W`, `#` and `+` (day of month *and* day of
    /// week; by default either suffices, as in Vixie cron); or one of the nicknames
    /// `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily` and `@hourly`. A year
    /// field is not taken. The zone is an IANA name known to the embedded database,
    /// spelled as it spells it (`UTC`, `Europe/Berlin`, `America/New_York`); offsets
    /// (`+01:00`) are not names.
    ///
    /// # Errors
    /// Every invalid field, at most two: one naming `cron` (not a pattern, longer than
    /// [`MAX_CRON_LEN`], or never due, such as `0 0 30 2 *`) and one naming `time_zone`.
    pub fn cron(pattern: &str, time_zone: Option<&str>) -> Result<Recurrence, Vec<FieldError>> {
        let name = time_zone.unwrap_or(DEFAULT_TIME_ZONE);
        let cron = parse_cron(pattern).map_err(|message| FieldError::new("cron", message));
        let zone = find_zone(name).map_err(|message| FieldError::new("time_zone", message));
        let (cron, zone) = match (cron, zone) {
            (Ok(cron), Ok(zone)) => (cron, zone),
            (cron, zone) => return Err([cron.err(), zone.err()].into_iter().flatten().collect()),
        };
        let zoned = ZonedCron {
            pattern: pattern.to_owned(),
            time_zone: name.to_owned(),
            cron: Box::new(cron),
            zone,
        };
        // With no year field a pattern's dates repeat every 400 years, and croner searches
        // some 3000 from this instant: one that finds nothing finds nothing ever.
        if zoned.next_after(Timestamp::from_millis(0)).is_none() {
            return Err(vec![FieldError::new(
                "cron",
                format!(
                    "`{pattern}` is never due: no date matches its day-of-month, month and \
                     day-of-week fields"
                ),
            )]);
        }
        Ok(Recurrence::Cron(zoned))
    }

    /// The instants `anchor + k × every_ms`, for every integer `k`.
    ///
    /// # Errors
    /// A [`FieldError`] naming `every_ms` when it is not in
    /// [`MIN_EVERY_MS`]`..=`[`MAX_EVERY_MS`].
    pub fn every(every_ms: u64, anchor: Timestamp) -> Result<Recurrence, FieldError> {
        if !(MIN_EVERY_MS..=MAX_EVERY_MS).contains(&every_ms) {
            return Err(FieldError::new(
                "every_ms",
                format!("must be {MIN_EVERY_MS} (1 s) to {MAX_EVERY_MS} (366 days) milliseconds"),
            ));
        }
        Ok(Recurrence::Every(Interval { every_ms, anchor }))
    }

    /// The first period start strictly after `t`; `None` when there is none up to
    /// [`Timestamp::MAX`] (for a cron pattern, up to croner's horizon in the year 5000).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Recurrence::Cron(cron) => cron.next_after(t),
            Recurrence::Every(interval) => interval.next_after(t),
        }
    }

    /// The latest period start at or before `t`: the start of the period `t` lies in.
    /// `None` when there is none from [`Timestamp::MIN`] on (an interval always has one
    /// from then on; a cron pattern has none before the first of its dates).
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Recurrence::Cron(cron) => cron.latest_at_or_before(t),
            Recurrence::Every(interval) => interval.latest_at_or_before(t),
        }
    }

    /// The period starts in `(from_exclusive, to_inclusive]`, earliest first, at most
    /// `limit` of them (the earliest ones).
    /// How many periods start after `from_exclusive` and at or before `to_inclusive`:
    /// exactly for an interval, at most [`MAX_CRON_COUNTED`] for a cron pattern.
    pub fn count_between(&self, from_exclusive: Timestamp, to_inclusive: Timestamp) -> u64 {
        match self {
            Recurrence::Cron(cron) => cron.count_between(from_exclusive, to_inclusive),
            Recurrence::Every(interval) => interval.count_between(from_exclusive, to_inclusive),
        }
    }

    pub fn starts_between(
        &self,
        from_exclusive: Timestamp,
        to_inclusive: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        match self {
            Recurrence::Cron(cron) => cron.starts_between(from_exclusive, to_inclusive, limit),
            Recurrence::Every(interval) => {
                interval.starts_between(from_exclusive, to_inclusive, limit)
            }
        }
    }
}

/// Most missed periods of a cron schedule counted in one pass (116 days of a
/// per-second pattern, 19 years of a per-minute one): cron occurrences are counted one
/// by one. An interval's are counted exactly by arithmetic, however many.
pub const MAX_CRON_COUNTED: u64 = 10_000_000;

/// One millisecond before [`Timestamp::MIN`]: a search after it may find `MIN` itself.
const BEFORE_MIN: Timestamp = Timestamp::from_millis(Timestamp::MIN.as_millis() - 1);

impl Interval {
    fn count_between(&self, from: Timestamp, to: Timestamp) -> u64 {
        let every = i128::from(self.every_ms);
        let (from, to) = (from.max(BEFORE_MIN), to.min(Timestamp::MAX));
        let count = self.offset(to).div_euclid(every) - self.offset(from).div_euclid(every);
        u64::try_from(count.max(0)).unwrap_or(u64::MAX)
    }

    fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let t = t.max(BEFORE_MIN);
        let every = i128::from(self.every_ms);
        let k = self.offset(t).div_euclid(every) + 1;
        self.start(k)
    }

    fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let t = t.min(Timestamp::MAX);
        let every = i128::from(self.every_ms);
        let k = self.offset(t).div_euclid(every);
        self.start(k)
    }

    fn starts_between(&self, from: Timestamp, to: Timestamp, limit: usize) -> Vec<Timestamp> {
        let mut starts = Vec::new();
        let mut next = self.next_after(from);
        while let Some(start) = next.filter(|start| *start <= to && starts.len() < limit) {
            starts.push(start);
            next = self.start_after(start);
        }
        starts
    }

    /// The period start after `start`, itself one: `every_ms` later, within
    /// [`Timestamp::MAX`].
    fn start_after(&self, start: Timestamp) -> Option<Timestamp> {
        let next = i128::from(start.as_millis()) + i128::from(self.every_ms);
        (next <= i128::from(Timestamp::MAX.as_millis()))
            .then(|| Timestamp::from_millis(next as i64))
    }

    /// Milliseconds from the anchor to `t`, without overflow.
    fn offset(&self, t: Timestamp) -> i128 {
        i128::from(t.as_millis()) - i128::from(self.anchor.as_millis())
    }

    /// `anchor + k × every_ms`, when it lies between [`Timestamp::MIN`] and
    /// [`Timestamp::MAX`]. (`k` comes from an `i64` offset over at least 1000, so the
    /// product stays far from `i128`'s bounds.)
    fn start(&self, k: i128) -> Option<Timestamp> {
        let start = i128::from(self.anchor.as_millis()) + k * i128::from(self.every_ms);
        let range = i128::from(Timestamp::MIN.as_millis())..=i128::from(Timestamp::MAX.as_millis());
        range
            .contains(&start)
            .then(|| Timestamp::from_millis(start as i64))
    }
}

impl ZonedCron {
    fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.first_after(t).map(|(start, _)| start)
    }

    /// The first occurrence after `t`, with croner's zoned instant for it: a search for
    /// the next one must start from that very value, which knows which pass of a
    /// repeated hour it is on.
    fn first_after(&self, t: Timestamp) -> Option<(Timestamp, jiff::Zoned)> {
        let t = t.max(BEFORE_MIN);
        let mut from = self.zoned_second(t)?;
        let mut passed: Option<Timestamp> = None;
        // Searching on from an answer at or before `t` is a guard: croner searches from
        // whole seconds ([`ZonedCron::zoned_second`]) strictly forward.
        loop {
            let found = self.cron.find_next_occurrence(&from, false).ok()?;
            let start = Timestamp::from_millis(found.timestamp().as_millisecond());
            if start > t {
                return (start <= Timestamp::MAX).then_some((start, found));
            }
            if passed.is_some_and(|passed| start <= passed) {
                return None; // croner did not move on: never seen, but no endless loop
            }
            passed = Some(start);
            from = found;
        }
    }

    fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        // Past jiff's last whole second (late on 9999-12-30) croner has long stopped.
        let latest_zoned = Timestamp::from_millis(jiff::Timestamp::MAX.as_second() * 1000);
        let at = self.zoned_second(t.min(Timestamp::MAX).min(latest_zoned))?;
        let found = self.cron.find_previous_occurrence(&at, true).ok()?;
        let start = Timestamp::from_millis(found.timestamp().as_millisecond());
        (Timestamp::MIN..=t).contains(&start).then_some(start)
    }

    fn count_between(&self, from: Timestamp, to: Timestamp) -> u64 {
        let count = self
            .starts_after(from)
            .take_while(|start| *start <= to)
            .take(usize::try_from(MAX_CRON_COUNTED).unwrap_or(usize::MAX))
            .count();
        u64::try_from(count).unwrap_or(u64::MAX)
    }

    fn starts_between(&self, from: Timestamp, to: Timestamp, limit: usize) -> Vec<Timestamp> {
        self.starts_after(from)
            .take_while(|start| *start <= to)
            .take(limit)
            .collect()
    }

    /// The occurrences after `from`, in order, each found lazily from the exact instant
    /// croner returned for the one before, as its README asks.
    fn starts_after(&self, from: Timestamp) -> impl Iterator<Item = Timestamp> + '_ {
        std::iter::successors(self.first_after(from), |(start, at)| {
            let next = self.cron.find_next_occurrence(at, false).ok()?;
            let next_start = Timestamp::from_millis(next.timestamp().as_millisecond());
            // croner did not move on: never seen, but no endless loop
            (next_start > *start).then_some((next_start, next))
        })
        .map(|(start, _)| start)
    }

    /// The whole second `t` lies in, on the zone's wall clock; `None` outside jiff's
    /// range (years -9999 to 9999).
    ///
    /// Occurrences fall on whole seconds, so the first after `t` is the first after its
    /// second, and the latest at or before `t` the latest at or before its second. And
    /// croner must be asked from a whole second: over a repeated hour it tells the two
    /// passes of a wall time apart with a slack of one second, which a start with
    /// milliseconds defeats (croner 4.0.3, asked for the latest `*/30 * * * *` at or
    /// before 01:59:59.999 LHDT, the first pass of Lord Howe Island's repeated half hour,
    /// answers 01:30 LHST, half an hour *after* it).
    fn zoned_second(&self, t: Timestamp) -> Option<jiff::Zoned> {
        let instant = jiff::Timestamp::from_second(t.as_millis().div_euclid(1000)).ok()?;
        Some(instant.to_zoned(self.zone.clone()))
    }
}

/// The fields of a pattern, in order, with the values each takes (for messages).
const FIELDS: [(&str, &str); 6] = [
    ("second", "0-59"),
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, L or nW"),
    ("month", "1-12 or JAN-DEC"),
    (
        "day-of-week",
        "0-7 or SUN-SAT (0 and 7 are Sunday), with # or L",
    ),
];

/// croner's nicknames for common patterns.
const NICKNAMES: [&str; 6] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@hourly",
];

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

/// croner's reading of `pattern`, or why it is not a 5- or 6-field pattern, naming the
/// field at fault where one is.
fn parse_cron(pattern: &str) -> Result<Cron, String> {
    if pattern.len() > MAX_CRON_LEN {
        return Err(format!(
            "must be at most {MAX_CRON_LEN} bytes, not {}",
            pattern.len()
        ));
    }
    let fields: Vec<&str> = pattern.split_whitespace().collect();
    let not_a_pattern = |why: String| format!("`{pattern}` is not a cron pattern: {why}");
    match fields.as_slice() {
        [] => return Err("must be a cron pattern such as `0 * * * *`, not empty".into()),
        [nickname] if NICKNAMES.iter().any(|n| n.eq_ignore_ascii_case(nickname)) => {}
        [other] if other.starts_with('@') => {
            return Err(not_a_pattern(format!(
                "the nicknames are {}",
                NICKNAMES.join(", ")
            )));
        }
        _ if (5..=6).contains(&fields.len()) => {}
        _ => {
            let count = match fields.len() {
                1 => "1 field".to_owned(),
                7 => "7 fields (a year field is not supported)".to_owned(),
                n => format!("{n} fields"),
            };
            return Err(not_a_pattern(format!(
                "it has {count}, not 5 (minute hour day-of-month month day-of-week) or 6 \
                 (second first)"
            )));
        }
    }
    parser()
        .parse(pattern)
        .map_err(|error| not_a_pattern(explain(&fields, &error)))
}

/// croner's error for a 5- or 6-field pattern, with the field at fault: croner's own
/// message does not say which it is, so each field is tried alone, the others `*`.
fn explain(fields: &[&str], error: &croner::errors::CronError) -> String {
    use croner::errors::CronError;
    let named = FIELDS
        .len()
        .checked_sub(fields.len())
        .map_or(&[][..], |skip| &FIELDS[skip..]);
    for (n, (field, (name, values))) in fields.iter().zip(named).enumerate() {
        let alone: Vec<&str> = (0..fields.len())
            .map(|m| if m == n { *field } else { "*" })
            .collect();
        if let Err(error) = parser().parse(&alone.join(" ")) {
            let why = match error {
                CronError::ComponentError(message) => message,
                CronError::IllegalCharacters(_) => "it has a character not allowed there".into(),
                other => other.to_string(),
            };
            let why = why.trim_end_matches('.');
            let mut chars = why.chars();
            let why: String = chars
                .next()
                .map(|first| first.to_lowercase().chain(chars).collect())
                .unwrap_or_default();
            return format!("its {name} field `{field}` is invalid ({why}); it takes {values}");
        }
    }
    error.to_string()
}

/// The embedded database's zone named `name`, or why there is none.
fn find_zone(name: &str) -> Result<TimeZone, String> {
    const EXAMPLES: &str = "such as `UTC`, `Europe/Berlin` or `America/New_York`";
    if name.is_empty() {
        return Err(format!(
            "must be an IANA time zone name ({EXAMPLES}), not empty"
        ));
    }
    let unknown = || format!("`{name}` is not an IANA time zone name ({EXAMPLES})");
    let zone = TimeZoneDatabase::bundled()
        .get(name)
        .map_err(|_| unknown())?;
    // The database matches names without regard to case, and answers `Etc/Unknown`,
    // which is no IANA name, with a zone that has none.
    match zone.iana_name() {
        Some(spelled) if spelled == name => Ok(zone),
        Some(spelled) => Err(format!(
            "`{name}` is not spelled as the IANA time zone name `{spelled}`"
        )),
        None => Err(unknown()),
    }
}

/// Checks an event id template, the `event_id` of a recurring schedule: it contains
/// [`PERIOD_START`] at least once, so that each period's delivery has its own event id,
/// and filled with the longest [`period_text`] it is a valid event id
/// ([`validate::event_id`]: 1–256 visible ASCII characters).
///
/// # Errors
/// A [`FieldError`] naming `event_id`.
pub fn check_event_id_template(template: &str) -> Result<(), FieldError> {
    let error = |message: String| FieldError::new("event_id", message);
    if !template.contains(PERIOD_START) {
        return Err(error(format!(
            "must contain `{PERIOD_START}`, which each period's start replaces, so that \
             each period's delivery has its own event id (e.g. `report:{PERIOD_START}`)"
        )));
    }
    let longest = template.replace(PERIOD_START, &"0".repeat(MAX_PERIOD_TEXT_LEN));
    if longest.len() > validate::MAX_EVENT_ID_LEN {
        return Err(error(format!(
            "must be at most {} characters long with each `{PERIOD_START}` filled in \
             ({MAX_PERIOD_TEXT_LEN} characters, e.g. `2026-11-30T00:00:00.250Z`); it \
             would be {}",
            validate::MAX_EVENT_ID_LEN,
            longest.len()
        )));
    }
    validate::event_id(&longest).map_err(error)
}

/// `template` with every [`PERIOD_START`] replaced by [`period_text`] of `start`.
pub fn fill_event_id(template: &str, start: Timestamp) -> String {
    template.replace(PERIOD_START, &period_text(start))
}

/// A period's start as its event id shows it: RFC 3339 in UTC, with milliseconds only
/// when it has some (`2026-11-30T00:00:00Z`, `2026-11-30T00:00:00.250Z`), at most
/// [`MAX_PERIOD_TEXT_LEN`] characters.
pub fn period_text(start: Timestamp) -> String {
    let text = start.to_rfc3339();
    match text.strip_suffix(".000Z") {
        Some(whole_seconds) => format!("{whole_seconds}Z"),
        None => text,
    }
}

#[cfg(test)]
#[path = "recurrence_tests.rs"]
mod tests;
