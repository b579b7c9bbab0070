//! Replays (docs/DESIGN.md §5): which dead letters an operator selected, and the token bucket
//! that paces moving them back to `scheduled`, so a receiver that has just recovered
//! is not flooded (CASES C-11). Pure: every rule takes `now`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::names::wire_names;
use super::policy::ErrorClass;
use super::{DeadReason, Timestamp};

/// Where a replay is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplayState {
    /// Still moving matched jobs back to `scheduled`, at its pace.
    Running,
    /// Every matched job was requeued or skipped.
    Done,
    /// An operator stopped it; jobs requeued before stay requeued.
    Cancelled,
}

wire_names!(ReplayState, "Every state." {
    Running => "running",
    Done => "done",
    Cancelled => "cancelled",
});

/// Which jobs a replay takes: dead letters to requeue, or retrying jobs to bring
/// forward (the `selects` field of a replay).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplaySelection {
    /// Dead jobs: each goes back to `scheduled` with a fresh deadline and attempt
    /// budget.
    #[default]
    Dead,
    /// Retrying jobs: each is made due at its release time instead of its
    /// `next_attempt_at` ([`crate::domain::JobEvent::RetryNow`]); its deadline and
    /// attempts are unchanged.
    Retrying,
}

wire_names!(ReplaySelection, "Every selection." {
    Dead => "dead",
    Retrying => "retrying",
});

/// Which jobs a replay selects; all given conditions must hold, and the store matches
/// only jobs in the state [`ReplayFilter::selects`] names. With no condition every such
/// job matches, so the API takes an empty filter only with an explicit `all: true`
/// (nothing replays everything by accident).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayFilter {
    /// Dead jobs (the default) or retrying ones.
    pub selects: ReplaySelection,
    /// Only this subscriber's jobs.
    pub subscriber_id: Option<String>,
    /// Only the jobs of one of these subscribers (empty: no such condition; ids that
    /// name no subscriber match nothing).
    pub subscriber_ids: Vec<String>,
    /// Only this event's jobs.
    pub event_id: Option<String>,
    /// Only jobs dead for this reason (dead jobs only).
    pub dead_reason: Option<DeadReason>,
    /// Only jobs that became dead at or after this instant (dead jobs only).
    pub dead_after: Option<Timestamp>,
    /// Only jobs that became dead before this instant (dead jobs only).
    pub dead_before: Option<Timestamp>,
    /// Only jobs whose last error has this class (`last_error.class`).
    pub error_class: Option<ErrorClass>,
    /// Only jobs whose last error has this HTTP status (`last_error.status`).
    pub last_status: Option<u16>,
    /// The operator asked for every job of the selection (no other condition given).
    pub all: bool,
}

/// The token bucket of one replay, as a generic cell rate: jobs are released in bursts
/// of [`Pacing::burst`] at most every [`Pacing::burst_interval_ms`], each burst spread
/// over its interval ([`Pacing::release_at`]), so any 1 s window sees at most
/// `rate_per_second` of them (+1 at a window's edge), however many instances share the
/// work. Unused time does not accumulate: after a
/// pause the next burst is one burst, never a catch-up flood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    rate_per_second: u32,
}

/// What one step of a replay may release at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// How many jobs may be requeued now (0: wait until `next_at`).
    pub jobs: u32,
    /// The bucket's state after taking them (store it as the replay's `paced_until`).
    pub paced_until: Timestamp,
    /// When the next burst is allowed.
    pub next_at: Timestamp,
}

impl Pacing {
    /// Pacing for `rate_per_second` jobs per second (at least 1).
    pub fn new(rate_per_second: u32) -> Self {
        Pacing {
            rate_per_second: rate_per_second.max(1),
        }
    }

    /// Jobs per burst: a tenth of the rate, at least one, so high rates need few store
    /// writes and low rates stay even.
    pub fn burst(self) -> u32 {
        (self.rate_per_second / 10).max(1)
    }

    /// Milliseconds between bursts, rounded up so the rate is never exceeded.
    pub fn burst_interval_ms(self) -> u64 {
        (u64::from(self.burst()) * 1000).div_ceil(u64::from(self.rate_per_second))
    }

    /// When the `k`-th job of a burst released at `now` becomes due: the burst is spread
    /// evenly over its interval (`k × interval / burst`), so a receiver sees one job
    /// every `1000 / rate` ms rather than a tenth of a second's jobs at once.
    pub fn release_at(self, now: Timestamp, k: u32) -> Timestamp {
        now.plus_ms(u64::from(k) * self.burst_interval_ms() / u64::from(self.burst()))
    }

    /// The bucket of a replay created at `now`: its first burst is allowed at once.
    pub fn start(self, now: Timestamp) -> (Timestamp, Timestamp) {
        let paced_until = now.minus_ms(self.burst_interval_ms());
        (paced_until, now)
    }

    /// What may be released at `now` when the last burst left at `paced_until`.
    pub fn allowance(self, paced_until: Timestamp, now: Timestamp) -> Allowance {
        let interval = self.burst_interval_ms();
        let next_at = paced_until.plus_ms(interval);
        if now < next_at {
            return Allowance {
                jobs: 0,
                paced_until,
                next_at,
            };
        }
        Allowance {
            jobs: self.burst(),
            paced_until: now,
            next_at: now.plus_ms(interval),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn low_rates_release_one_job_per_interval() {
        let pacing = Pacing::new(5);
        assert_eq!(pacing.burst(), 1);
        assert_eq!(pacing.burst_interval_ms(), 200);
        let (paced_until, next_at) = pacing.start(at(10_000));
        assert_eq!(next_at, at(10_000));
        let first = pacing.allowance(paced_until, at(10_000));
        assert_eq!(first.jobs, 1);
        assert_eq!(first.next_at, at(10_200));
        let early = pacing.allowance(first.paced_until, at(10_199));
        assert_eq!(early.jobs, 0);
        assert_eq!(early.next_at, at(10_200));
        assert_eq!(pacing.allowance(first.paced_until, at(10_200)).jobs, 1);
    }

    #[test]
    fn high_rates_release_bursts_of_a_tenth() {
        let pacing = Pacing::new(600);
        assert_eq!(pacing.burst(), 60);
        assert_eq!(pacing.burst_interval_ms(), 100);
        let pacing = Pacing::new(25);
        assert_eq!((pacing.burst(), pacing.burst_interval_ms()), (2, 80));
    }

    #[test]
    fn odd_rates_round_the_interval_up() {
        // 1000 / 3 = 333.3 ms: 334 keeps it at most 3 per second.
        assert_eq!(Pacing::new(3).burst_interval_ms(), 334);
        assert_eq!(Pacing::new(0).burst_interval_ms(), 1000);
    }

    #[test]
    fn no_catch_up_after_a_pause() {
        let pacing = Pacing::new(5);
        let (paced_until, _) = pacing.start(at(0));
        let first = pacing.allowance(paced_until, at(0));
        // A worker that comes back 10 s later gets one burst, not fifty jobs.
        let late = pacing.allowance(first.paced_until, at(10_000));
        assert_eq!(late.jobs, 1);
        assert_eq!(late.next_at, at(10_200));
    }

    #[test]
    fn any_second_holds_at_most_the_rate_plus_one() {
        for rate in [1, 3, 5, 7, 10, 25, 90, 99, 100, 300, 1000] {
            let pacing = Pacing::new(rate);
            let (mut paced_until, _) = pacing.start(at(0));
            let mut released = Vec::new();
            // A worker polling every 7 ms for 5 s; each job is due at its release time.
            for now in (0..5_000).step_by(7) {
                let allowance = pacing.allowance(paced_until, at(now));
                for k in 0..allowance.jobs {
                    released.push(pacing.release_at(at(now), k).as_millis());
                }
                paced_until = allowance.paced_until;
            }
            released.sort_unstable();
            for (i, start) in released.iter().enumerate() {
                let in_window = released[i..]
                    .iter()
                    .take_while(|&&t| t < start + 1000)
                    .count() as u32;
                assert!(
                    in_window <= rate + 1,
                    "rate {rate}: {in_window} from {start}"
                );
            }
            assert!(released.len() as u32 >= rate * 4, "rate {rate} too slow");
        }
    }

    #[test]
    fn a_burst_is_spread_over_its_interval() {
        let pacing = Pacing::new(300);
        assert_eq!((pacing.burst(), pacing.burst_interval_ms()), (30, 100));
        let due: Vec<i64> = (0..30)
            .map(|k| pacing.release_at(at(0), k).as_millis())
            .collect();
        assert_eq!(due[0], 0);
        assert_eq!(due[1], 3);
        assert_eq!(due[29], 96);
        assert_eq!(Pacing::new(5).release_at(at(0), 0), at(0));
    }
}
