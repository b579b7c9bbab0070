//! Replays in the store, shared by both backends: the records, the query that matches
//! dead letters, the row mapping, and the plan of one paced step.
//!
//! A replay snapshots the ids of the dead jobs it matched (`replay_jobs`, in the order
//! they died) when it is created, so `matched` is exact and its progress
//! (`next_position`) is durable: a restart, or another instance, carries on where the
//! last step stopped. Each step takes the replay's row lock, asks [`Pacing`] how many
//! jobs may go now, and requeues that many of the next snapshotted jobs that are still
//! `dead` (a job delivered or requeued meanwhile is skipped, never resent).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::replay::{Allowance, Pacing, ReplayFilter, ReplayState};
use crate::domain::{DeadReason, JobEvent, JobSnapshot, JobState, Timestamp, Transition, job};
use crate::store::StoreError;
use crate::store::records::JobFilter;
use crate::store::rows::{self, Columns};

/// Most jobs one replay may match.
pub const MAX_REPLAY_JOBS: u32 = 100_000;
/// Most running replays one step advances.
pub const REPLAYS_PER_STEP: u32 = 16;
/// Most snapshotted jobs one step of a replay looks at beyond its allowance (skipped
/// ones do not use the allowance).
const SCAN_MARGIN: u32 = 64;

/// A replay to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReplay {
    /// A fresh UUIDv7.
    pub id: Uuid,
    /// Which dead jobs.
    pub filter: ReplayFilter,
    /// Most jobs it takes (the oldest dead first), 1–[`MAX_REPLAY_JOBS`].
    pub max_jobs: u32,
    /// Most jobs requeued per second, across all instances.
    pub rate_per_second: u32,
    /// Each requeued job's new deadline is its requeue time plus this, in ms.
    pub ttl_ms: u64,
    /// Most jobs/s all running replays together may requeue (`--max-replay-rate`): the
    /// creation fails with [`crate::store::StoreError::ReplayRateBudget`] when this
    /// replay would exceed it.
    pub rate_budget: u32,
    /// Now.
    pub created_at: Timestamp,
}

/// A replay and its progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// UUIDv7.
    pub id: Uuid,
    /// Which dead jobs it selected.
    pub filter: ReplayFilter,
    /// Most jobs it could take.
    pub max_jobs: u32,
    /// Most jobs requeued per second.
    pub rate_per_second: u32,
    /// Requeued jobs' time to deadline, in ms.
    pub ttl_ms: u64,
    /// Where it is.
    pub state: ReplayState,
    /// Dead jobs matched when it was created.
    pub matched: u64,
    /// Jobs moved back to `scheduled` so far.
    pub requeued: u64,
    /// Matched jobs that were no longer dead when their turn came (left alone).
    pub skipped: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it ended (done or cancelled).
    pub finished_at: Option<Timestamp>,
}

/// What [`crate::store::Store::advance_replays`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayProgress {
    /// Jobs moved back to `scheduled`.
    pub requeued: u64,
    /// Matched jobs skipped because they were no longer dead.
    pub skipped: u64,
    /// Replays that finished.
    pub finished: u32,
}

/// The columns [`replay`] reads.
pub const REPLAY_COLUMNS: &str = "id, filter, max_jobs, rate_per_second, ttl_ms, state, \
    matched, requeued, skipped, created_at, updated_at, finished_at";

/// A replay row.
pub fn replay(row: &impl Columns) -> Result<Replay, StoreError> {
    let count = |column: &str| -> Result<u64, StoreError> {
        u64::try_from(row.int(column)?)
            .map_err(|_| StoreError::Internal(format!("negative {column}")))
    };
    let small = |column: &str| -> Result<u32, StoreError> {
        u32::try_from(row.int(column)?)
            .map_err(|_| StoreError::Internal(format!("{column} out of range")))
    };
    let state = row.text("state")?;
    Ok(Replay {
        id: rows::uuid(&row.text("id")?)?,
        filter: decode_filter(&row.text("filter")?)?,
        max_jobs: small("max_jobs")?,
        rate_per_second: small("rate_per_second")?,
        ttl_ms: count("ttl_ms")?,
        state: state
            .parse()
            .map_err(|_| StoreError::Internal(format!("unknown replay state `{state}`")))?,
        matched: count("matched")?,
        requeued: count("requeued")?,
        skipped: count("skipped")?,
        created_at: Timestamp::from_millis(row.int("created_at")?),
        updated_at: Timestamp::from_millis(row.int("updated_at")?),
        finished_at: row.opt_int("finished_at")?.map(Timestamp::from_millis),
    })
}

/// The filter as stored (JSON text; instants in epoch ms).
#[derive(Serialize, Deserialize)]
struct StoredFilter {
    subscriber_id: Option<String>,
    event_id: Option<String>,
    dead_reason: Option<String>,
    dead_after: Option<i64>,
    dead_before: Option<i64>,
    all: bool,
}

/// The filter column of a replay.
pub fn encode_filter(filter: &ReplayFilter) -> String {
    let stored = StoredFilter {
        subscriber_id: filter.subscriber_id.clone(),
        event_id: filter.event_id.clone(),
        dead_reason: filter.dead_reason.map(|r| r.as_str().to_owned()),
        dead_after: filter.dead_after.map(Timestamp::as_millis),
        dead_before: filter.dead_before.map(Timestamp::as_millis),
        all: filter.all,
    };
    serde_json::to_string(&stored).unwrap_or_else(|_| "{}".into())
}

fn decode_filter(text: &str) -> Result<ReplayFilter, StoreError> {
    let stored: StoredFilter = serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("bad replay filter: {e}")))?;
    let dead_reason = stored
        .dead_reason
        .map(|r| r.parse::<DeadReason>())
        .transpose()
        .map_err(|e| StoreError::Internal(format!("bad replay filter: {e}")))?;
    Ok(ReplayFilter {
        subscriber_id: stored.subscriber_id,
        event_id: stored.event_id,
        dead_reason,
        dead_after: stored.dead_after.map(Timestamp::from_millis),
        dead_before: stored.dead_before.map(Timestamp::from_millis),
        all: stored.all,
    })
}

/// The listing filter that selects the dead jobs `filter` matches.
pub fn job_filter(filter: &ReplayFilter) -> JobFilter {
    JobFilter {
        state: Some(JobState::Dead),
        subscriber_id: filter.subscriber_id.clone(),
        event_id: filter.event_id.clone(),
        dead_reason: filter.dead_reason,
        dead_after: filter.dead_after,
        dead_before: filter.dead_before,
        ..JobFilter::default()
    }
}

/// The index that serves `filter` best: the most selective condition given.
pub fn matching_index(filter: &ReplayFilter) -> &'static str {
    if filter.event_id.is_some() {
        "jobs_event_id"
    } else if filter.subscriber_id.is_some() {
        "jobs_subscriber_state"
    } else if filter.dead_reason.is_some() {
        "jobs_dead_reason"
    } else {
        "jobs_dead_at"
    }
}

/// Pushes ` FROM jobs j WHERE …` selecting the dead jobs `filter` matches, oldest
/// dead first, at most `max_jobs`, onto `query` (which has begun a `SELECT` that may
/// name `j.*`). Index-backed by [`matching_index`]; with `indexed_by` (SQLite, whose
/// planner has no statistics) that index is named in the statement.
pub fn push_matching<DB>(
    query: &mut sqlx::QueryBuilder<DB>,
    filter: &ReplayFilter,
    max_jobs: u32,
    indexed_by: bool,
) where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    // The state is a literal so SQLite may use the partial indexes on dead jobs.
    query.push(" FROM jobs j");
    if indexed_by {
        query.push(format!(" INDEXED BY {}", matching_index(filter)));
    }
    query.push(" WHERE 1 = 1");
    rows::push_job_conditions(query, &job_filter(filter));
    query
        .push(" ORDER BY j.dead_at, j.id LIMIT ")
        .push_bind(i64::from(max_jobs));
}

/// How many dead jobs `filter` matches, at most `max_jobs` (a dry run): one column `n`.
pub fn count_matching<DB>(
    filter: &ReplayFilter,
    max_jobs: u32,
    indexed_by: bool,
) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::QueryBuilder::new("SELECT COUNT(*) AS n FROM (SELECT j.id");
    push_matching(&mut query, filter, max_jobs, indexed_by);
    query.push(") m");
    query
}

/// Snapshots the jobs `replay` matches into `replay_jobs`, positions from 0 in the
/// order they died; rows affected = matched.
pub fn snapshot_matching<DB>(replay: &NewReplay, indexed_by: bool) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut query =
        sqlx::QueryBuilder::new("INSERT INTO replay_jobs (replay_id, position, job_id) SELECT ");
    query
        .push_bind(replay.id.to_string())
        .push(", ROW_NUMBER() OVER (ORDER BY j.dead_at, j.id) - 1, j.id");
    push_matching(&mut query, &replay.filter, replay.max_jobs, indexed_by);
    query
}

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

/// The columns [`due_replay`] reads.
pub const DUE_REPLAY_COLUMNS: &str =
    "id, rate_per_second, ttl_ms, next_position, burst_position, paced_until";

/// A row of running replays.
pub fn due_replay(row: &impl Columns) -> Result<DueReplay, StoreError> {
    Ok(DueReplay {
        id: rows::uuid(&row.text("id")?)?,
        pacing: Pacing::new(u32::try_from(row.int("rate_per_second")?).unwrap_or(u32::MAX)),
        ttl_ms: u64::try_from(row.int("ttl_ms")?).unwrap_or(0),
        next_position: row.int("next_position")?,
        burst_position: row.int("burst_position")?,
        paced_until: Timestamp::from_millis(row.int("paced_until")?),
    })
}

/// The columns [`candidate`] reads, from `replay_jobs rj JOIN jobs j`.
pub const CANDIDATE_COLUMNS: &str = "rj.position, j.id, j.state, j.attempts, j.max_attempts, \
    j.due_at, j.deadline";

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

/// A row of [`CANDIDATE_COLUMNS`].
pub fn candidate(row: &impl Columns) -> Result<Candidate, StoreError> {
    let state = row.text("state")?;
    let small = |value: Option<i64>| value.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    Ok(Candidate {
        position: row.int("position")?,
        job_id: rows::uuid(&row.text("id")?)?,
        snapshot: JobSnapshot {
            state: state
                .parse()
                .map_err(|_| StoreError::Internal(format!("unknown job state `{state}`")))?,
            attempts: small(Some(row.int("attempts")?)).unwrap_or(0),
            max_attempts: small(row.opt_int("max_attempts")?),
            due_at: row.opt_int("due_at")?.map(Timestamp::from_millis),
            deadline: Timestamp::from_millis(row.int("deadline")?),
        },
    })
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

    #[test]
    fn filters_round_trip_through_their_column() {
        let filter = ReplayFilter {
            subscriber_id: Some("s1".into()),
            event_id: None,
            dead_reason: Some(DeadReason::DeadlineExceeded),
            dead_after: Some(Timestamp::from_millis(1)),
            dead_before: Some(Timestamp::from_millis(2)),
            all: false,
        };
        assert_eq!(decode_filter(&encode_filter(&filter)).unwrap(), filter);
    }
}
