//! The plan of one paced step of a replay: which of its next snapshotted jobs to
//! release (requeue a dead one, bring a retrying one forward), and where it stops.
//! Pure: the statements are in [`super`].

use uuid::Uuid;

use crate::domain::replay::{Allowance, Pacing, ReplaySelection};
use crate::domain::{JobEvent, JobSnapshot, Timestamp, Transition, job};
use crate::store::records::JobVersion;

/// Most snapshotted jobs one step of a replay looks at beyond its allowance (skipped
/// ones do not use the allowance).
const SCAN_MARGIN: u32 = 64;

/// A running replay whose next burst may be due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueReplay {
    /// Which replay.
    pub id: Uuid,
    /// Whether it requeues dead jobs or brings retrying ones forward.
    pub selects: ReplaySelection,
    /// Its pace.
    pub pacing: Pacing,
    /// Requeued jobs' time to deadline, in ms.
    pub ttl_ms: u64,
    /// The next snapshotted job to look at.
    pub next_position: i64,
    /// Where the last burst began (its jobs are at `burst_position..next_position`).
    pub burst_position: i64,
    /// The token bucket's state.
    pub paced_until: Timestamp,
}

/// A snapshotted job of a replay, as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its place in the replay's order.
    pub position: i64,
    /// The job.
    pub job_id: Uuid,
    /// What the state machine needs of it.
    pub snapshot: JobSnapshot,
    /// When it last changed (a retrying job is brought forward only if it did not
    /// change since this read).
    pub updated_at: Timestamp,
}

impl Candidate {
    /// What a conditional write of it is based on.
    pub fn version(&self) -> JobVersion {
        JobVersion {
            state: self.snapshot.state,
            updated_at: self.updated_at,
        }
    }
}

/// How many snapshotted jobs to read for a step allowed `allowance` jobs.
pub fn scan_size(allowance: &Allowance) -> u32 {
    allowance.jobs.saturating_add(SCAN_MARGIN)
}

/// What one step of a replay does: which jobs to release (in order, with the
/// transition the state machine gives), how many to skip, and where it stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    /// Jobs to release: dead ones moved back to `scheduled`, each only if it is still
    /// `dead`; retrying ones made due, each only if it did not change since read.
    pub requeue: Vec<(Candidate, Transition)>,
    /// Jobs no longer in the state the replay selects (left alone), or retrying ones
    /// that can no longer be brought forward (past their deadline or out of attempts:
    /// the sweep makes them dead).
    pub skipped: u64,
    /// The next position to look at after this step.
    pub next_position: i64,
    /// True when no snapshotted job is left after this step.
    pub exhausted: bool,
}

/// Plans a step of `replay` at `now` over `candidates` (the next snapshotted jobs in
/// position order, as many as [`scan_size`] asked for): release up to
/// `allowance.jobs` of those still in the state the replay selects, the `k`-th due at
/// [`Pacing::release_at`] (the burst spread over its interval). A dead job is
/// requeued ([`JobEvent::Replay`], a fresh deadline of now + `ttl_ms`); a retrying one
/// is brought forward ([`JobEvent::RetryNow`]: no attempt spent, its deadline kept),
/// never later than its own `next_attempt_at`.
pub fn plan_step(
    replay: &DueReplay,
    allowance: &Allowance,
    candidates: &[Candidate],
    now: Timestamp,
) -> StepPlan {
    let deadline = now.plus_ms(replay.ttl_ms);
    let mut plan = StepPlan {
        requeue: Vec::new(),
        skipped: 0,
        next_position: replay.next_position,
        exhausted: false,
    };
    let mut looked = 0;
    for candidate in candidates {
        if plan.requeue.len() as u32 >= allowance.jobs {
            break;
        }
        looked += 1;
        plan.next_position = candidate.position + 1;
        let event = match replay.selects {
            ReplaySelection::Dead => JobEvent::Replay { deadline },
            ReplaySelection::Retrying => JobEvent::RetryNow,
        };
        match job::transition(&candidate.snapshot, event, now) {
            Ok(transition) => {
                let release = replay.pacing.release_at(now, plan.requeue.len() as u32);
                let due = match (replay.selects, candidate.snapshot.due_at) {
                    (ReplaySelection::Retrying, Some(own)) => release.min(own),
                    _ => release,
                };
                let transition = Transition {
                    due_at: Some(due),
                    ..transition
                };
                plan.requeue.push((*candidate, transition));
            }
            Err(_) => plan.skipped += 1,
        }
    }
    plan.exhausted = looked == candidates.len() && candidates.len() < scan_size(allowance) as usize;
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::JobState;

    fn dead_or(state: JobState, position: i64) -> Candidate {
        Candidate {
            position,
            job_id: Uuid::now_v7(),
            snapshot: JobSnapshot {
                state,
                attempts: 3,
                max_attempts: Some(3),
                due_at: None,
                deadline: Timestamp::from_millis(1_000),
            },
            updated_at: Timestamp::from_millis(0),
        }
    }

    fn replay(next_position: i64) -> DueReplay {
        DueReplay {
            id: Uuid::now_v7(),
            selects: ReplaySelection::Dead,
            pacing: Pacing::new(2),
            ttl_ms: 60_000,
            next_position,
            burst_position: 0,
            paced_until: Timestamp::from_millis(0),
        }
    }

    fn allowance(jobs: u32) -> Allowance {
        Allowance {
            jobs,
            paced_until: Timestamp::from_millis(5_000),
            next_at: Timestamp::from_millis(5_500),
        }
    }

    #[test]
    fn requeues_up_to_the_allowance_skipping_jobs_no_longer_dead() {
        let now = Timestamp::from_millis(5_000);
        let candidates = [
            dead_or(JobState::Delivered, 4),
            dead_or(JobState::Dead, 5),
            dead_or(JobState::Scheduled, 7),
            dead_or(JobState::Dead, 8),
            dead_or(JobState::Dead, 9),
        ];
        let plan = plan_step(&replay(4), &allowance(2), &candidates, now);
        assert_eq!(plan.requeue.len(), 2);
        assert_eq!(plan.requeue[0].0.job_id, candidates[1].job_id);
        assert_eq!(plan.requeue[1].0.job_id, candidates[3].job_id);
        let transition = plan.requeue[0].1;
        assert_eq!(transition.to, JobState::Scheduled);
        assert_eq!(transition.due_at, Some(now));
        assert_eq!(transition.deadline, Timestamp::from_millis(65_000));
        assert_eq!(plan.skipped, 2);
        assert_eq!(plan.next_position, 9);
        assert!(!plan.exhausted, "position 9 is still to do");
    }

    #[test]
    fn a_short_read_that_is_fully_used_exhausts_the_replay() {
        let now = Timestamp::from_millis(5_000);
        let candidates = [dead_or(JobState::Dead, 0), dead_or(JobState::Delivered, 1)];
        let plan = plan_step(&replay(0), &allowance(2), &candidates, now);
        assert_eq!((plan.requeue.len(), plan.skipped), (1, 1));
        assert_eq!(plan.next_position, 2);
        assert!(plan.exhausted);
        let empty = plan_step(&replay(2), &allowance(2), &[], now);
        assert!(empty.exhausted);
        assert_eq!(empty.next_position, 2);
    }

    #[test]
    fn a_full_read_is_not_exhausted_even_if_all_were_skipped() {
        let now = Timestamp::from_millis(5_000);
        let candidates: Vec<_> = (0..scan_size(&allowance(1)) as i64)
            .map(|p| dead_or(JobState::Delivered, p))
            .collect();
        let plan = plan_step(&replay(0), &allowance(1), &candidates, now);
        assert!(plan.requeue.is_empty());
        assert!(!plan.exhausted);
        assert_eq!(plan.next_position, candidates.len() as i64);
    }

    #[test]
    fn retrying_jobs_are_brought_forward_keeping_deadline_and_attempts() {
        let now = Timestamp::from_millis(5_000);
        let retrying = |due: i64, position: i64| Candidate {
            snapshot: JobSnapshot {
                state: JobState::Retrying,
                attempts: 1,
                max_attempts: Some(5),
                due_at: Some(Timestamp::from_millis(due)),
                deadline: Timestamp::from_millis(900_000),
            },
            ..dead_or(JobState::Retrying, position)
        };
        let spent = Candidate {
            snapshot: JobSnapshot {
                attempts: 5,
                ..retrying(60_000, 2).snapshot
            },
            ..retrying(60_000, 2)
        };
        let candidates = [
            retrying(60_000, 0),
            dead_or(JobState::Dead, 1),
            spent,
            retrying(5_030, 3),
        ];
        let due = DueReplay {
            selects: ReplaySelection::Retrying,
            pacing: Pacing::new(20),
            ..replay(0)
        };
        let allowance = Allowance {
            jobs: 2,
            ..allowance(2)
        };
        let plan = plan_step(&due, &allowance, &candidates, now);
        assert_eq!(plan.skipped, 2, "a dead job and one out of attempts");
        let released: Vec<_> = plan
            .requeue
            .iter()
            .map(|(c, t)| (c.job_id, t.to, t.due_at, t.deadline, t.attempts))
            .collect();
        let deadline = Timestamp::from_millis(900_000);
        assert_eq!(
            released,
            [
                (
                    candidates[0].job_id,
                    JobState::Retrying,
                    Some(now),
                    deadline,
                    1
                ),
                // The second of the burst is released 50 ms later, but its own next
                // attempt is sooner.
                (
                    candidates[3].job_id,
                    JobState::Retrying,
                    Some(Timestamp::from_millis(5_030)),
                    deadline,
                    1
                ),
            ]
        );
    }
}
