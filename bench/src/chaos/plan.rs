//! The soak's fixed settings and its seeded plan: the subscribers of each receiver kind,
//! the servers' flags (a short lease, so a SIGSTOP outlasts it in seconds) and the
//! fault schedule, all derived from one seed that the run prints.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::history::{FaultKind, ReceiverKind};

/// The servers' lease, in ms (`--lease-ms`): short, so a SIGSTOP outlasts it.
pub const LEASE_MS: u64 = 3_000;
/// The servers' attempt timeout, in ms (`--attempt-timeout-ms`), below the lease.
pub const ATTEMPT_TIMEOUT_MS: u64 = 2_000;
/// The servers' shutdown grace, in ms (`--shutdown-grace-ms`): below the attempt
/// timeout, so a SIGTERM while a `Hanging` receiver holds a request releases its lease.
pub const SHUTDOWN_GRACE_MS: u64 = 1_500;
/// The servers' backoff base and cap, in ms.
pub const BACKOFF_BASE_MS: u64 = 250;
pub const BACKOFF_MAX_MS: u64 = 4_000;
/// The servers' longest circuit cool-down, in ms (`--circuit-max-cooldown-ms`; 300 s
/// by default): a destination whose probes keep failing is tried again within the
/// jobs' deadlines, so the soak drains in about a minute.
pub const CIRCUIT_MAX_COOLDOWN_MS: u64 = 10_000;
/// How long a `Slow` receiver takes to answer, in ms (inside the attempt timeout).
pub const SLOW_MS: u64 = 800;
/// How long a `Hanging` receiver holds a request it does not answer, in ms (beyond
/// the attempt timeout).
pub const HANG_MS: u64 = 10_000;
/// Latest `deliver_at` of a delayed job, from its creation, in ms.
pub const MAX_DELAY_MS: u64 = 10_000;
/// A job's time to its deadline, from `deliver_at`, in ms: the short deadlines and the
/// long ones.
pub const SHORT_TTL_MS: (u64, u64) = (1_500, 5_000);
pub const LONG_TTL_MS: (u64, u64) = (15_000, 45_000);
/// A replay's `ttl_ms`.
pub const REPLAY_TTL_MS: u64 = 20_000;
/// Faults start no earlier than this after the load, and end this long before it stops.
const FAULT_MARGIN: Duration = Duration::from_secs(8);
/// Mean gap between one fault's end and the next one's start.
const MEAN_GAP: Duration = Duration::from_secs(10);

/// The subscribers: `(id, kind)`; the id starts with the kind's name.
pub fn subscribers() -> Vec<(String, ReceiverKind)> {
    let per_kind = |kind: ReceiverKind| match kind {
        ReceiverKind::Fast => 4,
        ReceiverKind::Slow | ReceiverKind::Closing | ReceiverKind::Hanging => 2,
        ReceiverKind::Flaky => 3,
        ReceiverKind::Gone => 1,
    };
    ReceiverKind::ALL
        .iter()
        .flat_map(|&kind| (0..per_kind(kind)).map(move |n| (format!("{}-{n}", kind.name()), kind)))
        .collect()
}

/// One fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFault {
    /// When, after the load began.
    pub at: Duration,
    pub kind: FaultKind,
    /// The instance, for the process faults.
    pub instance: Option<usize>,
    /// How long the fault lasts: the process down or stopped, the cluster or the
    /// receivers down (a SIGTERM lasts until the process has exited).
    pub length: Duration,
}

/// The run's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub instances: usize,
    pub postgres: bool,
    /// The instance started with a skewed clock and the `FAKETIME` offset, in seconds
    /// (PostgreSQL with two or more instances only).
    pub skewed: Option<(usize, i64)>,
    /// The faults, in time order, one at a time.
    pub faults: Vec<PlannedFault>,
}

impl Plan {
    /// The plan for a run of `load` on `instances` servers; every fault kind that
    /// applies happens at least once when the run is long enough, the first of each in
    /// a seeded order.
    pub fn new(seed: u64, load: Duration, instances: usize, postgres: bool) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed);
        let kinds: Vec<FaultKind> = [
            FaultKind::Kill,
            FaultKind::Stop,
            FaultKind::Term,
            FaultKind::PostgresRestart,
            FaultKind::ReceiverDown,
        ]
        .into_iter()
        .filter(|&kind| postgres || kind != FaultKind::PostgresRestart)
        .collect();
        let skewed = (postgres && instances >= 2).then(|| {
            let seconds = rng.random_range(30..=120);
            let sign = if rng.random_bool(0.5) { 1 } else { -1 };
            (instances - 1, sign * seconds)
        });
        let mut first_of_each = kinds.clone();
        for i in (1..first_of_each.len()).rev() {
            first_of_each.swap(i, rng.random_range(0..=i));
        }
        let mut faults = Vec::new();
        let mut at = FAULT_MARGIN;
        let end = load.saturating_sub(FAULT_MARGIN);
        loop {
            let kind = if faults.len() < first_of_each.len() {
                first_of_each[faults.len()]
            } else {
                kinds[rng.random_range(0..kinds.len())]
            };
            let length_ms = match kind {
                FaultKind::Kill => rng.random_range(500..=4_000),
                FaultKind::Stop => LEASE_MS + rng.random_range(1_000..=3_000),
                FaultKind::Term => 0,
                FaultKind::PostgresRestart | FaultKind::ReceiverDown => {
                    rng.random_range(2_000..=5_000)
                }
                FaultKind::Skewed => 0,
            };
            let length = Duration::from_millis(length_ms);
            // A SIGTERM's window is the grace period and a restart.
            let lasts = length.max(Duration::from_millis(SHUTDOWN_GRACE_MS + 3_000));
            if at + lasts > end {
                break;
            }
            let instance = matches!(kind, FaultKind::Kill | FaultKind::Stop | FaultKind::Term)
                .then(|| rng.random_range(0..instances));
            faults.push(PlannedFault {
                at,
                kind,
                instance,
                length,
            });
            // Exponential gaps (mean MEAN_GAP), at least a second.
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            let gap = MEAN_GAP.as_secs_f64() * -u.ln();
            at += lasts + Duration::from_secs_f64(gap.clamp(1.0, 60.0));
        }
        Plan {
            seed,
            instances,
            postgres,
            skewed,
            faults,
        }
    }

    /// The fault kinds this run can inject (the report counts each).
    pub fn applicable(&self) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|&kind| match kind {
                FaultKind::PostgresRestart => self.postgres,
                FaultKind::Skewed => self.skewed.is_some(),
                _ => true,
            })
            .collect()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "chaos plan: seed {} ({} instance(s), {})",
            self.seed,
            self.instances,
            if self.postgres { "postgres" } else { "sqlite" }
        )?;
        if let Some((instance, seconds)) = self.skewed {
            writeln!(
                f,
                "  instance {instance} runs with its clock skewed {seconds:+} s"
            )?;
        }
        for fault in &self.faults {
            write!(
                f,
                "  at {:>7.1} s  {:<16}",
                fault.at.as_secs_f64(),
                fault.kind.name()
            )?;
            if let Some(instance) = fault.instance {
                write!(f, " instance {instance}")?;
            }
            if !fault.length.is_zero() {
                write!(f, " for {:.1} s", fault.length.as_secs_f64())?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_plan_and_every_kind_appears() {
        let two_minutes = Duration::from_secs(120);
        let plan = Plan::new(7, two_minutes, 3, true);
        let again = Plan::new(7, two_minutes, 3, true);
        assert_eq!(plan.faults, again.faults);
        assert_eq!(plan.skewed, again.skewed);
        for kind in plan.applicable() {
            if kind != FaultKind::Skewed {
                assert!(
                    plan.faults.iter().any(|fault| fault.kind == kind),
                    "{kind:?} missing from {plan}"
                );
            }
        }
        assert!(plan.faults.windows(2).all(|pair| pair[0].at < pair[1].at));
        let last = plan.faults.last().expect("faults");
        assert!(last.at + last.length <= two_minutes - FAULT_MARGIN);
    }

    #[test]
    fn sqlite_has_no_postgres_restart_and_no_skew() {
        let plan = Plan::new(1, Duration::from_secs(600), 1, false);
        assert!(plan.skewed.is_none());
        assert!(
            plan.faults
                .iter()
                .all(|f| f.kind != FaultKind::PostgresRestart)
        );
        assert!(
            plan.faults
                .iter()
                .all(|f| f.instance.is_none_or(|i| i == 0))
        );
        assert!(!plan.applicable().contains(&FaultKind::Skewed));
    }

    #[test]
    fn subscriber_ids_carry_their_kind() {
        let subscribers = subscribers();
        assert_eq!(subscribers.len(), 14);
        for (id, kind) in subscribers {
            assert!(id.starts_with(kind.name()), "{id}");
        }
    }
}
