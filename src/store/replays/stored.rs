//! How replays are stored: the rows their statements read, and the filter column.

use serde::{Deserialize, Serialize};

use super::plan::{Candidate, DueReplay};
use crate::domain::policy::ErrorClass;
use crate::domain::replay::{Pacing, ReplayFilter, ReplaySelection};
use crate::domain::{DeadReason, JobSnapshot, Timestamp};
use crate::store::records::Replay;
use crate::store::{StoreError, decode};

crate::store::lite_rows::row! {
    /// A row of `replays`.
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

crate::store::lite_rows::row! {
    /// A running replay whose next burst may be due, as stored.
    pub struct DueReplayRow {
        id: String,
        filter: String,
        rate_per_second: i64,
        ttl_ms: i64,
        next_position: i64,
        burst_position: i64,
        paced_until: i64,
    }
}

impl TryFrom<DueReplayRow> for DueReplay {
    type Error = StoreError;

    fn try_from(row: DueReplayRow) -> Result<Self, StoreError> {
        Ok(DueReplay {
            id: decode::uuid(&row.id)?,
            selects: decode_filter(&row.filter)?.selects,
            pacing: Pacing::new(u32::try_from(row.rate_per_second).unwrap_or(u32::MAX)),
            ttl_ms: u64::try_from(row.ttl_ms).unwrap_or(0),
            next_position: row.next_position,
            burst_position: row.burst_position,
            paced_until: Timestamp::from_millis(row.paced_until),
        })
    }
}

crate::store::lite_rows::row! {
    /// A snapshotted job of a replay, as it is now (`replay_jobs rj JOIN jobs j`).
    pub struct CandidateRow {
        position: i64,
        id: String,
        state: String,
        attempts: i64,
        max_attempts: Option<i64>,
        due_at: Option<i64>,
        deadline: i64,
        updated_at: i64,
    }
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
            updated_at: Timestamp::from_millis(row.updated_at),
        })
    }
}

/// The filter as stored (JSON text; instants in epoch ms). Fields added after the first
/// release default when absent, so older replays read as they were: dead jobs, no list,
/// class or status.
#[derive(Serialize, Deserialize)]
struct StoredFilter {
    #[serde(default)]
    selects: Option<String>,
    subscriber_id: Option<String>,
    #[serde(default)]
    subscriber_ids: Vec<String>,
    event_id: Option<String>,
    dead_reason: Option<String>,
    dead_after: Option<i64>,
    dead_before: Option<i64>,
    #[serde(default)]
    error_class: Option<String>,
    #[serde(default)]
    last_status: Option<u16>,
    all: bool,
}

/// The filter column of a replay.
pub fn encode_filter(filter: &ReplayFilter) -> String {
    let stored = StoredFilter {
        selects: Some(filter.selects.as_str().to_owned()),
        subscriber_id: filter.subscriber_id.clone(),
        subscriber_ids: filter.subscriber_ids.clone(),
        event_id: filter.event_id.clone(),
        dead_reason: filter.dead_reason.map(|r| r.as_str().to_owned()),
        dead_after: filter.dead_after.map(Timestamp::as_millis),
        dead_before: filter.dead_before.map(Timestamp::as_millis),
        error_class: filter.error_class.map(|c| c.as_str().to_owned()),
        last_status: filter.last_status,
        all: filter.all,
    };
    serde_json::to_string(&stored).unwrap_or_else(|_| "{}".into())
}

/// `text` parsed as a `T`, if given; an unknown name is a corrupt filter.
fn parse_name<T: std::str::FromStr>(text: Option<String>) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.map(|t| t.parse::<T>())
        .transpose()
        .map_err(|e| StoreError::Internal(format!("bad replay filter: {e}")))
}

fn decode_filter(text: &str) -> Result<ReplayFilter, StoreError> {
    let stored: StoredFilter = serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("bad replay filter: {e}")))?;
    Ok(ReplayFilter {
        selects: parse_name::<ReplaySelection>(stored.selects)?.unwrap_or_default(),
        subscriber_id: stored.subscriber_id,
        subscriber_ids: stored.subscriber_ids,
        event_id: stored.event_id,
        dead_reason: parse_name::<DeadReason>(stored.dead_reason)?,
        dead_after: stored.dead_after.map(Timestamp::from_millis),
        dead_before: stored.dead_before.map(Timestamp::from_millis),
        error_class: parse_name::<ErrorClass>(stored.error_class)?,
        last_status: stored.last_status,
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
            dead_reason: Some(DeadReason::DeadlineExceeded),
            dead_after: Some(Timestamp::from_millis(1)),
            dead_before: Some(Timestamp::from_millis(2)),
            ..ReplayFilter::default()
        };
        assert_eq!(decode_filter(&encode_filter(&filter)).unwrap(), filter);
        let slice = ReplayFilter {
            selects: ReplaySelection::Retrying,
            subscriber_ids: vec!["a".into(), "b".into()],
            error_class: Some(ErrorClass::Http5xx),
            last_status: Some(503),
            ..ReplayFilter::default()
        };
        assert_eq!(decode_filter(&encode_filter(&slice)).unwrap(), slice);
    }

    #[test]
    fn a_filter_stored_before_the_slice_fields_reads_as_dead_jobs() {
        let old = r#"{"subscriber_id":"s1","event_id":null,"dead_reason":null,"dead_after":null,"dead_before":null,"all":false}"#;
        assert_eq!(
            decode_filter(old).unwrap(),
            ReplayFilter {
                subscriber_id: Some("s1".into()),
                ..ReplayFilter::default()
            }
        );
    }
}
