//! A recurring schedule's rules (docs/DESIGN.md §5.14): what happens to periods missed
//! while no scheduler ran, and which periods one pass of the scheduler creates. Pure:
//! the [`Recurrence`], the stored cursor and `now` are given.
//!
//! The scheduler creates a period's jobs [`LEAD_MS`] before the period starts, so they
//! are stored (and claimed by the ordinary due-time path) when it begins. Its cursor,
//! `next_period`, is the start of the earliest period whose jobs it has not created.
//! A period is *missed* when its start passed more than [`LEAD_MS`] before the
//! scheduler reached it (the service was down, or could not reach its store): with
//! [`CatchUp::Latest`] the most recent missed period is created (due at once), with
//! [`CatchUp::None`] none is. A period reached late but within [`LEAD_MS`] of its start
//! is not missed: it is created, due at once.

use serde::Serialize;
use utoipa::ToSchema;

use super::names::wire_names;
use super::recurrence::Recurrence;
use super::time::Timestamp;

/// How long before its start a period's jobs are created, and how late a period may be
/// reached without being missed: 5 s.
pub const LEAD_MS: u64 = 5_000;

/// Most periods one pass creates for one schedule (the rest wait for the next pass):
/// with periods at least 1 s apart, a pass reaches at most 11 within its lead and
/// grace.
pub const MAX_PERIODS_PER_PASS: usize = 32;

/// What becomes of the periods missed while no scheduler ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// The most recent missed period is created, due at once; the older ones are
    /// skipped.
    #[default]
    Latest,
    /// Every missed period is skipped.
    None,
}

wire_names!(CatchUp, "Every catch-up policy." {
    Latest => "latest",
    None => "none",
});

/// What one pass of the scheduler does for one schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassPlan {
    /// The starts of the periods to create now, earliest first.
    pub create: Vec<Timestamp>,
    /// How many missed periods are skipped, counted without listing them (issue #34:
    /// a 30-day downtime of a 1 s schedule skips 2,592,000; see
    /// [`Recurrence::count_between`]).
    pub skipped: u64,
    /// The cursor afterwards: the start of the earliest period not created; `None`
    /// when no period follows.
    pub next_period: Option<Timestamp>,
}

/// The pass at `now` of a schedule whose periods follow `recurrence` and whose earliest
/// period not yet created starts at `cursor`: the missed periods (start before `now -
/// LEAD_MS`) by `catch_up`, then every period starting up to `now + LEAD_MS` (at most
/// [`MAX_PERIODS_PER_PASS`] in all). A cursor after `now + LEAD_MS` has nothing to do.
pub fn plan_pass(
    recurrence: &Recurrence,
    cursor: Timestamp,
    now: Timestamp,
    catch_up: CatchUp,
) -> PassPlan {
    let horizon = now.plus_ms(LEAD_MS);
    if cursor > horizon {
        return PassPlan {
            create: Vec::new(),
            skipped: 0,
            next_period: Some(cursor),
        };
    }
    let grace_start = now.minus_ms(LEAD_MS);
    let before_cursor = cursor.minus_ms(1);
    let mut create = Vec::new();
    let mut skipped = 0;
    if cursor < grace_start {
        let last_missed = grace_start.minus_ms(1);
        skipped = recurrence.count_between(before_cursor, last_missed);
        if catch_up == CatchUp::Latest
            && let Some(latest) = recurrence
                .latest_at_or_before(last_missed)
                .filter(|&start| start >= cursor)
        {
            create.push(latest);
            skipped = skipped.saturating_sub(1);
        }
    }
    let from = before_cursor.max(grace_start.minus_ms(1));
    let room = MAX_PERIODS_PER_PASS - create.len();
    let upcoming = recurrence.starts_between(from, horizon, room);
    let full = upcoming.len() == room;
    create.extend(upcoming);
    let next_period = match create.last() {
        Some(&last) if full => recurrence.next_after(last),
        _ => recurrence.next_after(horizon),
    };
    PassPlan {
        create,
        skipped,
        next_period,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn hourly() -> Recurrence {
        Recurrence::cron("0 * * * *", None).unwrap()
    }

    #[test]
    fn a_period_is_created_its_lead_before_it_starts() {
        let cursor = at("2026-11-30T11:00:00Z");
        let early = plan_pass(
            &hourly(),
            cursor,
            at("2026-11-30T10:59:54Z"),
            CatchUp::Latest,
        );
        assert!(early.create.is_empty());
        assert_eq!(early.next_period, Some(cursor));
        let due = plan_pass(&hourly(), cursor, at("2026-11-30T10:59:55Z"), CatchUp::None);
        assert_eq!(due.create, vec![cursor]);
        assert_eq!(due.skipped, 0);
        assert_eq!(due.next_period, Some(at("2026-11-30T12:00:00Z")));
    }

    #[test]
    fn a_period_reached_within_the_grace_is_not_missed() {
        let cursor = at("2026-11-30T11:00:00Z");
        let late = plan_pass(&hourly(), cursor, at("2026-11-30T11:00:05Z"), CatchUp::None);
        assert_eq!(late.create, vec![cursor]);
        let missed = plan_pass(
            &hourly(),
            cursor,
            at("2026-11-30T11:00:05.001Z"),
            CatchUp::None,
        );
        assert!(missed.create.is_empty());
        assert_eq!(missed.skipped, 1);
        assert_eq!(missed.next_period, Some(at("2026-11-30T12:00:00Z")));
    }

    #[test]
    fn after_downtime_latest_creates_the_most_recent_missed_period_only() {
        let cursor = at("2026-11-30T04:00:00Z");
        let now = at("2026-11-30T06:30:00Z");
        let latest = plan_pass(&hourly(), cursor, now, CatchUp::Latest);
        assert_eq!(latest.create, vec![at("2026-11-30T06:00:00Z")]);
        assert_eq!(latest.skipped, 2, "04:00 and 05:00");
        assert_eq!(latest.next_period, Some(at("2026-11-30T07:00:00Z")));
        let none = plan_pass(&hourly(), cursor, now, CatchUp::None);
        assert!(none.create.is_empty());
        assert_eq!(none.skipped, 3);
        assert_eq!(none.next_period, Some(at("2026-11-30T07:00:00Z")));
    }

    #[test]
    fn a_missed_period_and_an_upcoming_one_are_both_created() {
        let every = Recurrence::every(2_000, at("2026-11-30T00:00:00Z")).unwrap();
        let cursor = at("2026-11-30T00:00:00Z");
        let now = at("2026-11-30T00:01:00Z");
        let plan = plan_pass(&every, cursor, now, CatchUp::Latest);
        let expected: Vec<Timestamp> = [
            "00:00:54", "00:00:56", "00:00:58", "00:01:00", "00:01:02", "00:01:04",
        ]
        .iter()
        .map(|t| at(&format!("2026-11-30T{t}Z")))
        .collect();
        assert_eq!(
            plan.create, expected,
            "latest missed 00:00:54, then 55..=65"
        );
        assert_eq!(plan.skipped, 27, "00:00:00 to 00:00:52");
        assert_eq!(plan.next_period, Some(at("2026-11-30T00:01:06Z")));
    }

    /// Issue #34: after 30 days without a scheduler a 1 s schedule has skipped every
    /// one of its 2,592,000 missed periods but the latest, not 9,999 of them; a
    /// per-second cron pattern, counted one by one, after 2 days (172,800).
    #[test]
    fn every_missed_period_of_a_long_downtime_is_counted() {
        let start = at("2026-11-01T00:00:00Z");
        let every = Recurrence::every(1_000, start).unwrap();
        let cron = Recurrence::cron("* * * * * *", None).unwrap();
        for (recurrence, days) in [(every, 30), (cron, 2)] {
            let now = start.plus_ms(days * 86_400_000);
            let latest = plan_pass(&recurrence, start, now, CatchUp::Latest);
            // missed: 00:00:00 up to 5 s before now, the latest of them created
            let missed = days * 86_400 - 5;
            assert_eq!(latest.skipped, missed - 1, "{recurrence:?}");
            assert_eq!(latest.create[0], now.minus_ms(6_000));
            let none = plan_pass(&recurrence, start, now, CatchUp::None);
            assert_eq!(none.skipped, missed, "{recurrence:?}");
        }
    }

    #[test]
    fn a_pass_creates_at_most_its_share() {
        // periods every second: one pass reaches 11 (grace and lead), never more than
        // its cap; the cursor continues after the last one created.
        let every = Recurrence::every(1_000, at("2026-11-30T00:00:00Z")).unwrap();
        let now = at("2026-11-30T00:00:10Z");
        let plan = plan_pass(&every, now.minus_ms(5_000), now, CatchUp::None);
        assert_eq!(plan.create.len(), 11);
        assert!(plan.create.len() <= MAX_PERIODS_PER_PASS);
        assert_eq!(plan.next_period, Some(at("2026-11-30T00:00:16Z")));
    }

    #[test]
    fn the_catch_up_names_are_the_wire_names() {
        assert_eq!(CatchUp::default(), CatchUp::Latest);
        assert_eq!("none".parse::<CatchUp>(), Ok(CatchUp::None));
        assert_eq!(CatchUp::Latest.as_str(), "latest");
    }
}
