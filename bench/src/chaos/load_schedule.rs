//! When the producer's operations come: the lone creates at a steady rate, the others
//! at their periods with some jitter, all from the seeded rng.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;
use tokio::time::Instant;

use super::load_ops::FAN_OUT_SIZE;

/// The periodic operations come at their period times a factor in this range.
const JITTER: (f64, f64) = (0.8, 1.2);
/// A driver further behind its schedule than this (a loaded machine) starts afresh
/// from now rather than sending the missed operations at once.
const MOST_BEHIND: Duration = Duration::from_secs(1);

/// The periods of the operations besides the lone creates.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Between fan-outs (`POST /v1/events`).
    pub fan_out: Duration,
    /// Between cancels.
    pub cancel: Duration,
    /// Between reschedules (`PATCH /v1/jobs/{id}`).
    pub reschedule: Duration,
    /// Between replays.
    pub replay: Duration,
    /// Between resumes.
    pub resume: Duration,
}

impl Mix {
    /// The soak's.
    pub const SOAK: Mix = Mix {
        fan_out: Duration::from_secs(5),
        cancel: Duration::from_secs(1),
        reschedule: Duration::from_secs(1),
        replay: Duration::from_secs(15),
        resume: Duration::from_secs(20),
    };

    /// The lone creates' period for `rate` jobs/s overall: what the fan-outs leave,
    /// at least half the rate; `None` at rate 0.
    pub fn create_period(&self, rate: u64, subscribers: usize) -> Option<Duration> {
        let fan_out_size = (FAN_OUT_SIZE.0 + FAN_OUT_SIZE.1.min(subscribers)) as f64 / 2.0;
        let fan_out_rate = fan_out_size / self.fan_out.as_secs_f64();
        let rate = rate as f64;
        let lone = (rate - fan_out_rate).max(rate / 2.0);
        (lone > 0.0).then(|| Duration::from_secs_f64(1.0 / lone))
    }
}

/// The kinds of operation, each on its own schedule (one per [`OpKind`] variant).
///
/// [`OpKind`]: super::history::OpKind
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Create,
    FanOut,
    Cancel,
    Reschedule,
    Replay,
    Resume,
}

/// When each step is next due.
pub struct Schedule {
    /// `(step, period, next time)`; creates are steady, the others jittered.
    steps: Vec<(Step, Duration, Instant)>,
}

impl Schedule {
    /// From now: creates every `create` (none when `None`) from now on, each other
    /// step at its `mix` period, its first time a random point of its first period.
    pub fn new(mix: Mix, create: Option<Duration>, rng: &mut StdRng) -> Schedule {
        let start = Instant::now();
        let mut steps: Vec<(Step, Duration, Instant)> = create
            .map(|period| (Step::Create, period, start))
            .into_iter()
            .collect();
        for (step, period) in [
            (Step::FanOut, mix.fan_out),
            (Step::Cancel, mix.cancel),
            (Step::Reschedule, mix.reschedule),
            (Step::Replay, mix.replay),
            (Step::Resume, mix.resume),
        ] {
            // A first one within its first period, so the kinds do not come in step.
            steps.push((
                step,
                period,
                start + period.mul_f64(rng.random_range(0.1..1.0)),
            ));
        }
        Schedule { steps }
    }

    /// The next step due (its index, for [`Schedule::advance`]) and when.
    pub fn next(&self) -> (usize, Step, Instant) {
        let (i, (step, _, at)) = self
            .steps
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, _, at))| *at)
            .expect("the periodic steps are always there");
        (i, *step, *at)
    }

    /// Step `i` has run: its next time.
    pub fn advance(&mut self, i: usize, rng: &mut StdRng) {
        let (step, period, at) = &mut self.steps[i];
        let gap = if *step == Step::Create {
            *period
        } else {
            period.mul_f64(rng.random_range(JITTER.0..JITTER.1))
        };
        let now = Instant::now();
        *at = (*at + gap).max(now.checked_sub(MOST_BEHIND).unwrap_or(now));
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn lone_creates_take_what_the_fan_outs_leave() {
        let soak = Mix::SOAK;
        // Fan-outs of 8.5 subscribers on average every 5 s: 1.7 jobs/s.
        let period = soak.create_period(20, 14).expect("creates");
        assert!(
            (period.as_secs_f64() - 1.0 / 18.3).abs() < 1e-9,
            "{period:?}"
        );
        let period = soak.create_period(2, 14).expect("creates");
        assert_eq!(period, Duration::from_secs(1), "at least half the rate");
        assert_eq!(soak.create_period(0, 14), None);
    }

    #[tokio::test]
    async fn each_step_comes_at_its_period() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut schedule = Schedule::new(Mix::SOAK, Some(Duration::from_millis(50)), &mut rng);
        let (i, step, first) = schedule.next();
        assert_eq!(step, Step::Create);
        schedule.advance(i, &mut rng);
        let (_, step, second) = schedule.next();
        assert_eq!(
            (step, second - first),
            (Step::Create, Duration::from_millis(50))
        );
        let fan_out = schedule.steps[1].2;
        schedule.advance(1, &mut rng);
        let gap = schedule.steps[1].2 - fan_out;
        assert!(
            gap >= Duration::from_secs(4) && gap <= Duration::from_secs(6),
            "{gap:?}"
        );
    }
}
