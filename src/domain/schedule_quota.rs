//! Quotas on recurring schedules (docs/DESIGN.md §5.14, issue #34 item 4.6): how many
//! schedules may exist, how often a schedule's periods may start, and how many jobs one
//! schedule may make a minute. Without them one PUT of a 1 s schedule for an event type
//! of 10,000 subscribers made 140,000 jobs in 10 s, and 1,454 schedules were accepted.
//!
//! A PUT that creates a schedule, or changes its timing or its target, is refused when
//! its shortest period is under the minimum ([`ScheduleQuotas::check_put`]) or when its
//! rate, jobs a period × periods a minute, is over the cap. A schedule accepted before
//! its event type gained subscribers (or before the server's quotas were lowered) is
//! bounded when its periods are made ([`ScheduleQuotas::judge`]): a period starting
//! sooner than the least spacing after the last period made is skipped, so the
//! schedule makes at most the cap's jobs a minute, and every subscriber of a period
//! made gets its job. The last period made is the schedule's last run, kept across
//! PUTs, so re-timing a schedule over and over does not make a period after each PUT. Pure: the periods, the counts and `now` are given.

use super::field_error::FieldError;
use super::recurrence::{MIN_EVERY_MS, Recurrence};
use super::time::Timestamp;

/// Most schedules by default (`--max-schedules`).
pub const DEFAULT_MAX_SCHEDULES: u64 = 1_000;
/// Shortest period by default (`--schedule-min-period-ms`), in milliseconds: the
/// shortest interval and a cron pattern's resolution, 1 s.
pub const DEFAULT_MIN_PERIOD_MS: u64 = MIN_EVERY_MS;
/// Most jobs one schedule makes a minute by default
/// (`--schedule-max-jobs-per-minute`): a period of the largest fan-out (10,000
/// subscribers) once a minute.
pub const DEFAULT_MAX_JOBS_PER_MINUTE: u64 = 10_000;
/// How many of a cron pattern's next periods its shortest period is read from.
pub const PERIODS_SAMPLED: usize = 1_000;
/// How far ahead a cron pattern's periods are sampled, in milliseconds (400 days: every
/// month and weekday of a year). A pattern with no two periods in that time has no
/// rate worth a quota.
pub const SAMPLED_MS: u64 = 400 * 86_400_000;

/// A minute, in milliseconds.
const MINUTE_MS: u64 = 60_000;

/// The server's quotas on schedules (docs/DESIGN.md §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleQuotas {
    /// Most schedules that may exist (enabled or paused); a PUT that would create one
    /// more is refused, a PUT replacing one never is.
    pub max_schedules: u64,
    /// Shortest time between two periods' starts, in milliseconds (at least
    /// [`MIN_EVERY_MS`]).
    pub min_period_ms: u64,
    /// Most jobs one schedule makes a minute (at least 1).
    pub max_jobs_per_minute: u64,
}

impl Default for ScheduleQuotas {
    fn default() -> Self {
        ScheduleQuotas {
            max_schedules: DEFAULT_MAX_SCHEDULES,
            min_period_ms: DEFAULT_MIN_PERIOD_MS,
            max_jobs_per_minute: DEFAULT_MAX_JOBS_PER_MINUTE,
        }
    }
}

/// What becomes of one period under the quotas ([`ScheduleQuotas::judge`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodQuota {
    /// Whether the period's jobs are made; false: it is skipped.
    pub make: bool,
    /// When the schedule runs over its quota at this period (its pace is too fast for
    /// its number of jobs): why, for its `last_error`, whether this period is made or
    /// skipped.
    pub over: Option<String>,
}

/// The jobs a minute of `jobs` jobs a period with periods `gap_ms` apart, rounded up.
pub fn jobs_per_minute(jobs: u64, gap_ms: u64) -> u64 {
    let per_minute = (u128::from(jobs) * u128::from(MINUTE_MS)).div_ceil(u128::from(gap_ms.max(1)));
    u64::try_from(per_minute).unwrap_or(u64::MAX)
}

/// The shortest time between two consecutive periods of `recurrence` after `now`, in
/// milliseconds: an interval's `every_ms`; for a cron pattern, the shortest gap among
/// its next [`PERIODS_SAMPLED`] periods within [`SAMPLED_MS`] (`None` when fewer than
/// two periods start in that time).
pub fn shortest_period_ms(recurrence: &Recurrence, now: Timestamp) -> Option<u64> {
    match recurrence {
        Recurrence::Every(interval) => Some(interval.every_ms()),
        Recurrence::Cron(_) => {
            let starts = recurrence.starts_between(now, now.plus_ms(SAMPLED_MS), PERIODS_SAMPLED);
            starts
                .windows(2)
                .map(|pair| u64::try_from(pair[1].millis_since(pair[0])).unwrap_or(0))
                .min()
        }
    }
}

impl ScheduleQuotas {
    /// The least time between the starts of two periods made of a schedule whose
    /// periods make `jobs` jobs each, in milliseconds: the minimum period, or more when
    /// the cap on jobs a minute needs it.
    pub fn least_spacing_ms(&self, jobs: u64) -> u64 {
        let share = (u128::from(jobs) * u128::from(MINUTE_MS))
            .div_ceil(u128::from(self.max_jobs_per_minute.max(1)));
        self.min_period_ms
            .max(u64::try_from(share).unwrap_or(u64::MAX))
    }

    /// Checks a schedule as a PUT defines it: its shortest period `shortest_ms` (see
    /// [`shortest_period_ms`]; `None`: no two periods close enough to count) against the
    /// minimum, and its rate with `jobs` jobs a period (1 for a subscriber, the
    /// subscribers its event type matches now) against the cap. `field` names the
    /// timing (`cron` or `every_ms`), `whom` the targets in the message.
    ///
    /// # Errors
    /// A [`FieldError`] about `field` with the figures: the period and the minimum, or
    /// the jobs a minute, the cap, and the shortest period these targets allow.
    pub fn check_put(
        &self,
        field: &str,
        shortest_ms: Option<u64>,
        jobs: u64,
        whom: &str,
    ) -> Result<(), FieldError> {
        let Some(shortest_ms) = shortest_ms else {
            return Ok(());
        };
        if shortest_ms < self.min_period_ms {
            return Err(FieldError::new(
                field,
                format!(
                    "periods would start {shortest_ms} ms apart; this server's shortest \
                     period is {} ms (--schedule-min-period-ms)",
                    self.min_period_ms
                ),
            ));
        }
        let rate = jobs_per_minute(jobs, shortest_ms);
        if rate > self.max_jobs_per_minute {
            return Err(FieldError::new(
                field,
                format!(
                    "{jobs} jobs a period ({whom}) with periods {shortest_ms} ms apart make \
                     {rate} jobs a minute, over this server's cap of {} a minute per \
                     schedule (--schedule-max-jobs-per-minute): for {jobs} jobs a period, \
                     periods must be at least {} ms apart",
                    self.max_jobs_per_minute,
                    self.least_spacing_ms(jobs)
                ),
            ));
        }
        Ok(())
    }

    /// What becomes of the period starting at `start` with event id `event_id` of a
    /// schedule whose periods make `jobs` jobs each now, the period before it (of the
    /// schedule's timing now) starting at `previous`, and `last_made` the last period
    /// the schedule made (its last run, kept across PUTs). A period is made when no
    /// period was made before, when it is that last period again (the same start and
    /// event id: its jobs exist, making it changes nothing), or when it starts
    /// [`Self::least_spacing_ms`] or more after the last period made; the others are
    /// skipped. Measured from the last period made, not from `previous`: a PUT that
    /// changes the timing restarts the periods, and measuring from the new timing's
    /// previous period let a schedule re-timed every 100 ms make a period after each
    /// PUT (issue #34 item 4.6, ≈540 jobs a minute against a cap of 120). `over` says
    /// why while the schedule's pace (`previous` to `start`) is over its quota, or
    /// while a period is skipped for coming too soon after the last one made.
    pub fn judge(
        &self,
        jobs: u64,
        period: (Timestamp, &str),
        previous: Option<Timestamp>,
        last_made: Option<(Timestamp, &str)>,
    ) -> PeriodQuota {
        let (start, event_id) = period;
        let spacing = self.least_spacing_ms(jobs);
        let least = i64::try_from(spacing).unwrap_or(i64::MAX);
        let gap = previous
            .map(|previous| start.millis_since(previous))
            .filter(|&gap| gap < least);
        let too_soon = last_made
            .filter(|&(last, last_id)| last != start || last_id != event_id)
            .map(|(last, _)| (last, start.millis_since(last)))
            .filter(|&(_, since)| since < least);
        let over = match (gap, too_soon) {
            (Some(gap), _) => Some(format!(
                "over this server's quota: {jobs} jobs a period with periods {gap} ms apart \
                 (at most {} jobs a minute per schedule, periods at least {} ms apart): a \
                 period is made only {spacing} ms or more after the last one made, the \
                 others are skipped",
                self.max_jobs_per_minute, self.min_period_ms
            )),
            (None, Some((last, since))) => Some(format!(
                "the period starting at {} comes {} the last period made ({}), which its \
                 timing changed since: with {jobs} jobs a period (at most {} jobs a minute \
                 per schedule, periods at least {} ms apart) a period is made only \
                 {spacing} ms or more after the last one made, the others are skipped",
                start.to_rfc3339(),
                if since < 0 {
                    "before".to_owned()
                } else {
                    format!("{since} ms after")
                },
                last.to_rfc3339(),
                self.max_jobs_per_minute,
                self.min_period_ms
            )),
            (None, None) => None,
        };
        PeriodQuota {
            make: too_soon.is_none(),
            over,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn the_rate_is_jobs_a_period_times_periods_a_minute() {
        assert_eq!(
            jobs_per_minute(10_000, 1_000),
            600_000,
            "issue #34's schedule"
        );
        assert_eq!(jobs_per_minute(1, 1_000), 60);
        assert_eq!(jobs_per_minute(10_000, 60_000), 10_000);
        assert_eq!(jobs_per_minute(7, 3_600_000), 1, "rounded up");
        assert_eq!(jobs_per_minute(0, 1_000), 0);
    }

    #[test]
    fn the_shortest_period_of_an_interval_and_of_a_cron_pattern() {
        let now = at("2026-11-30T10:00:00Z");
        let every = Recurrence::every(90_000, now).unwrap();
        assert_eq!(shortest_period_ms(&every, now), Some(90_000));
        let uneven = Recurrence::cron("0,10 * * * * *", None).unwrap();
        assert_eq!(shortest_period_ms(&uneven, now), Some(10_000));
        let nightly = Recurrence::cron("59 23,0 * * *", None).unwrap();
        assert_eq!(
            shortest_period_ms(&nightly, now),
            Some(3_600_000),
            "across midnight"
        );
        let leap_day = Recurrence::cron("0 0 29 2 *", None).unwrap();
        assert_eq!(shortest_period_ms(&leap_day, now), None, "one in 400 days");
    }

    #[test]
    fn a_put_over_a_quota_is_refused_with_its_figures() {
        let quotas = ScheduleQuotas::default();
        assert!(quotas.check_put("every_ms", Some(1_000), 1, "s").is_ok());
        assert!(quotas.check_put("cron", Some(60_000), 10_000, "t").is_ok());
        assert!(quotas.check_put("cron", None, 10_000, "t").is_ok());
        let error = quotas
            .check_put("every_ms", Some(1_000), 10_000, "event type `t`")
            .unwrap_err();
        assert_eq!(error.field, "every_ms");
        for figure in [
            "600000 jobs a minute",
            "cap of 10000",
            "at least 60000 ms apart",
        ] {
            assert!(error.message.contains(figure), "{}", error.message);
        }
        let slow = ScheduleQuotas {
            min_period_ms: 60_000,
            ..quotas
        };
        let error = slow.check_put("cron", Some(30_000), 1, "s").unwrap_err();
        assert_eq!(error.field, "cron");
        assert!(error.message.contains("60000 ms"), "{}", error.message);
    }

    #[test]
    fn a_schedule_over_its_quota_makes_periods_spaced_by_the_cap() {
        let quotas = ScheduleQuotas::default();
        let t = |s: u64| at("2026-11-30T10:00:00Z").plus_ms(s * 1_000);
        // 1 job a period, every second: within the quota, every period made.
        let within = quotas.judge(1, (t(1), "b"), Some(t(0)), Some((t(0), "a")));
        assert_eq!(
            within,
            PeriodQuota {
                make: true,
                over: None
            }
        );
        // 500 jobs every second: 30,000 a minute, so one period in three (3 s apart).
        assert_eq!(quotas.least_spacing_ms(500), 3_000);
        let made: Vec<bool> = (1..=6)
            .scan(Some(t(0)), |last, s| {
                let judged = quotas.judge(500, (t(s), "e"), Some(t(s - 1)), last.map(|l| (l, "e")));
                assert!(judged.over.is_some());
                if judged.make {
                    *last = Some(t(s));
                }
                Some(judged.make)
            })
            .collect();
        assert_eq!(made, [false, false, true, false, false, true]);
        // The first period, and the same period again, are made.
        assert!(quotas.judge(500, (t(1), "e"), Some(t(0)), None).make);
        assert!(
            quotas
                .judge(500, (t(1), "e"), Some(t(0)), Some((t(1), "e")))
                .make
        );
    }

    #[test]
    fn a_retimed_schedule_is_spaced_from_the_last_period_made() {
        let quotas = ScheduleQuotas {
            max_jobs_per_minute: 120,
            ..ScheduleQuotas::default()
        };
        let t = |ms: u64| at("2026-11-30T10:00:00Z").plus_ms(ms);
        // 6 jobs every 3 s: exactly the cap, so within it period by period.
        assert_eq!(quotas.least_spacing_ms(6), 3_000);
        let last = Some((t(3_000), "e"));
        // Re-timed: the new timing's first period 7 ms after the last one made.
        let soon = quotas.judge(6, (t(3_007), "e"), Some(t(7)), last);
        assert!(!soon.make);
        assert!(soon.over.unwrap().contains("7 ms after"));
        // Before the last one made (made ahead), or the same start with another event
        // id (a new template): new jobs, skipped too.
        assert!(!quotas.judge(6, (t(2_000), "e"), None, last).make);
        assert!(!quotas.judge(6, (t(3_000), "f"), None, last).make);
        // The least spacing after it: made, within the quota.
        let made = quotas.judge(6, (t(6_007), "e"), Some(t(3_007)), last);
        assert_eq!(
            made,
            PeriodQuota {
                make: true,
                over: None
            }
        );
    }
}
