//! The plan of one paced step of a replay: which of its next snapshotted jobs to
//! requeue, and where it stops. Pure: the statements are in [`super`].

use uuid::Uuid;

use crate::domain::replay::{Allowance, Pacing};
use crate::domain::{JobEvent, JobSnapshot, Timestamp, Transition, job};

/// Most snapshotted jobs one step of a replay looks at beyond its allowance (skipped
/// ones do not use the allowance).
const SCAN_MARGIN: u32 = 64;

/// A running replay whose next burst may be due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueReplay {
    /// Which replay.
    pub id: Uuid,
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
}

/// How many snapshotted jobs to read for a step allowed `allowance` jobs.
pub fn scan_size(allowance: &Allowance) -> u32 {
    allowance.jobs.saturating_add(SCAN_MARGIN)
}

/// What one step of a replay does: which jobs to requeue (in order, with the
/// transition the state machine gives), how many to skip, and where it stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    /// Jobs to move back to `scheduled`, each only if it is still `dead`.
    pub requeue: Vec<(Uuid, Transition)>,
    /// Jobs no longer dead (left alone).
    pub skipped: u64,
    /// The next position to look at after this step.
    pub next_position: i64,
    /// True when no snapshotted job is left after this step.
    pub exhausted: bool,
}

/// Plans a step of `replay` at `now` over `candidates` (the next snapshotted jobs in
/// position order, as many as [`scan_size`] asked for): requeue up to
/// `allowance.jobs` of those still dead, the `k`-th due at [`Pacing::release_at`]
/// (the burst spread over its interval), each with a fresh deadline of now + `ttl_ms`.
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
        match job::transition(&candidate.snapshot, JobEvent::Replay { deadline }, now) {
            Ok(transition) => {
                let due = replay.pacing.release_at(now, plan.requeue.len() as u32);
                let transition = Transition {
                    due_at: Some(due),
                    ..transition
                };
                plan.requeue.push((candidate.job_id, transition));
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
        }
    }

    fn replay(next_position: i64) -> DueReplay {
        DueReplay {
            id: Uuid::now_v7(),
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
        assert_eq!(plan.requeue[0].0, candidates[1].job_id);
        assert_eq!(plan.requeue[1].0, candidates[3].job_id);
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
}
