//! How replays are stored: the rows their statements read, and the filter column.

use serde::{Deserialize, Serialize};

use super::plan::{Candidate, DueReplay};
use crate::domain::replay::{Pacing, ReplayFilter};
use crate::domain::{DeadReason, JobSnapshot, Timestamp};
use crate::store::records::Replay;
use crate::store::{StoreError, decode};

/// A row of `replays`.
#[derive(sqlx::FromRow)]
pub struct ReplayRow {
    id: String,
    filter: String,
    max_jobs: i64,
    rate_per_second: i64,
    ttl_ms: i64,
    state: String,
    matched: i64,
    requeued: i64,
    skipped: i64,
    created_at: i64,
    updated_at: i64,
    finished_at: Option<i64>,
}

impl TryFrom<ReplayRow> for Replay {
    type Error = StoreError;

    fn try_from(row: ReplayRow) -> Result<Self, StoreError> {
        let count = |column: &str, n: i64| -> Result<u64, StoreError> {
            u64::try_from(n).map_err(|_| StoreError::Internal(format!("negative {column}")))
        };
        let small = |column: &str, n: i64| -> Result<u32, StoreError> {
            u32::try_from(n).map_err(|_| StoreError::Internal(format!("{column} out of range")))
        };
        Ok(Replay {
            id: decode::uuid(&row.id)?,
            filter: decode_filter(&row.filter)?,
            max_jobs: small("max_jobs", row.max_jobs)?,
            rate_per_second: small("rate_per_second", row.rate_per_second)?,
            ttl_ms: count("ttl_ms", row.ttl_ms)?,
            state: row.state.parse().map_err(|_| {
                StoreError::Internal(format!("unknown replay state `{}`", row.state))
            })?,
            matched: count("matched", row.matched)?,
            requeued: count("requeued", row.requeued)?,
            skipped: count("skipped", row.skipped)?,
            created_at: Timestamp::from_millis(row.created_at),
            updated_at: Timestamp::from_millis(row.updated_at),
            finished_at: decode::opt_ts(row.finished_at),
        })
    }
}

/// A running replay whose next burst may be due, as stored.
#[derive(sqlx::FromRow)]
pub struct DueReplayRow {
    id: String,
    rate_per_second: i64,
    ttl_ms: i64,
    next_position: i64,
    burst_position: i64,
    paced_until: i64,
}

impl TryFrom<DueReplayRow> for DueReplay {
    type Error = StoreError;

    fn try_from(row: DueReplayRow) -> Result<Self, StoreError> {
        Ok(DueReplay {
            id: decode::uuid(&row.id)?,
            pacing: Pacing::new(u32::try_from(row.rate_per_second).unwrap_or(u32::MAX)),
            ttl_ms: u64::try_from(row.ttl_ms).unwrap_or(0),
            next_position: row.next_position,
            burst_position: row.burst_position,
            paced_until: Timestamp::from_millis(row.paced_until),
        })
    }
}

/// A snapshotted job of a replay, as it is now (`replay_jobs rj JOIN jobs j`).
#[derive(sqlx::FromRow)]
pub struct CandidateRow {
    position: i64,
    id: String,
    state: String,
    attempts: i64,
    max_attempts: Option<i64>,
    due_at: Option<i64>,
    deadline: i64,
}

impl TryFrom<CandidateRow> for Candidate {
    type Error = StoreError;

    fn try_from(row: CandidateRow) -> Result<Self, StoreError> {
        let small = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Candidate {
            position: row.position,
            job_id: decode::uuid(&row.id)?,
            snapshot: JobSnapshot {
                state: row.state.parse().map_err(|_| {
                    StoreError::Internal(format!("unknown job state `{}`", row.state))
                })?,
                attempts: small(row.attempts),
                max_attempts: row.max_attempts.map(small),
                due_at: decode::opt_ts(row.due_at),
                deadline: Timestamp::from_millis(row.deadline),
            },
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
