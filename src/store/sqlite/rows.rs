//! Reading SQLite rows into records. Every instant is an INTEGER of epoch ms.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::{Attempt, Job, LastError, LeaseInfo, Subscriber};

/// The columns [`job`] reads, from `jobs j JOIN subscribers s`.
pub const JOB_COLUMNS: &str = "j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
    j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
    j.delivered_at, j.dead_at, j.dead_reason, j.last_error_class, j.last_error_status, \
    j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
    j.lease_expires_at, s.enabled AS subscriber_enabled";

/// The columns [`subscriber`] reads.
pub const SUBSCRIBER_COLUMNS: &str =
    "id, url, max_in_flight, rate_limit_per_second, enabled, created_at, updated_at";

/// The columns [`attempt`] reads.
pub const ATTEMPT_COLUMNS: &str = "number, started_at, finished_at, outcome, status, \
    error_class, reason, body_excerpt, lease_owner, lease_token, possible_duplicate";

pub fn uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Internal(format!("bad id `{text}`: {e}")))
}

fn ts(row: &SqliteRow, column: &str) -> Result<Timestamp, StoreError> {
    Ok(Timestamp::from_millis(row.try_get::<i64, _>(column)?))
}

fn opt_ts(row: &SqliteRow, column: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(row
        .try_get::<Option<i64>, _>(column)?
        .map(Timestamp::from_millis))
}

fn parsed<T: std::str::FromStr>(row: &SqliteRow, column: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.try_get(column)?;
    text.parse()
        .map_err(|e| StoreError::Internal(format!("column {column}: {e}")))
}

fn opt_parsed<T: std::str::FromStr>(row: &SqliteRow, column: &str) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    row.try_get::<Option<String>, _>(column)?
        .map(|text| {
            text.parse()
                .map_err(|e| StoreError::Internal(format!("column {column}: {e}")))
        })
        .transpose()
}

fn count(row: &SqliteRow, column: &str) -> Result<u32, StoreError> {
    let n: i64 = row.try_get(column)?;
    u32::try_from(n).map_err(|_| StoreError::Internal(format!("column {column}: {n}")))
}

fn opt_count(row: &SqliteRow, column: &str) -> Result<Option<u32>, StoreError> {
    row.try_get::<Option<i64>, _>(column)?
        .map(|n| {
            u32::try_from(n).map_err(|_| StoreError::Internal(format!("column {column}: {n}")))
        })
        .transpose()
}

fn status(row: &SqliteRow, column: &str) -> Result<Option<u16>, StoreError> {
    row.try_get::<Option<i64>, _>(column)?
        .map(|n| {
            u16::try_from(n).map_err(|_| StoreError::Internal(format!("column {column}: {n}")))
        })
        .transpose()
}

/// A job from a row of [`JOB_COLUMNS`].
pub fn job(row: &SqliteRow) -> Result<Job, StoreError> {
    let last_error = match opt_parsed(row, "last_error_class")? {
        Some(class) => Some(LastError {
            class,
            status: status(row, "last_error_status")?,
            reason: row.try_get("last_error_reason")?,
            body_excerpt: row.try_get("last_error_body")?,
        }),
        None => None,
    };
    let lease_owner: Option<String> = row.try_get("lease_owner")?;
    let lease_expires_at = opt_ts(row, "lease_expires_at")?;
    let lease = match (lease_owner, lease_expires_at) {
        (Some(owner), Some(expires_at)) => Some(LeaseInfo {
            owner,
            token: row.try_get("lease_token")?,
            expires_at,
        }),
        _ => None,
    };
    Ok(Job {
        id: uuid(&row.try_get::<String, _>("id")?)?,
        subscriber_id: row.try_get("subscriber_id")?,
        event_id: row.try_get("event_id")?,
        state: parsed(row, "state")?,
        attempts: count(row, "attempts")?,
        max_attempts: opt_count(row, "max_attempts")?,
        deliver_at: ts(row, "deliver_at")?,
        deadline: ts(row, "deadline")?,
        due_at: opt_ts(row, "due_at")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        delivered_at: opt_ts(row, "delivered_at")?,
        dead_at: opt_ts(row, "dead_at")?,
        dead_reason: opt_parsed(row, "dead_reason")?,
        last_error,
        lease,
        subscriber_enabled: row.try_get("subscriber_enabled")?,
    })
}

/// A subscriber from a row of [`SUBSCRIBER_COLUMNS`].
pub fn subscriber(row: &SqliteRow) -> Result<Subscriber, StoreError> {
    Ok(Subscriber {
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        max_in_flight: count(row, "max_in_flight")?,
        rate_limit_per_second: opt_count(row, "rate_limit_per_second")?,
        enabled: row.try_get("enabled")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
    })
}

/// An attempt from a row of [`ATTEMPT_COLUMNS`].
pub fn attempt(row: &SqliteRow) -> Result<Attempt, StoreError> {
    Ok(Attempt {
        number: count(row, "number")?,
        started_at: ts(row, "started_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        outcome: parsed(row, "outcome")?,
        status: status(row, "status")?,
        error_class: opt_parsed(row, "error_class")?,
        reason: row.try_get("reason")?,
        body_excerpt: row.try_get("body_excerpt")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_token: row.try_get("lease_token")?,
        possible_duplicate: row.try_get("possible_duplicate")?,
    })
}
