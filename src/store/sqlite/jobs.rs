//! Reading, listing and changing waiting jobs in SQLite.

use sqlx::SqlitePool;
use uuid::Uuid;

use super::binds;
use crate::domain::{Timestamp, Transition};
use crate::store::StoreError;
use crate::store::dialect::listing::job_listing;
use crate::store::dialect::{Dialect, Query};
use crate::store::jobs::JobRow;
use crate::store::records::{Job, JobFilter, JobVersion, PageRequest};

/// Job `?1`.
const GET: &str = "SELECT j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
    j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
    j.delivered_at, j.dead_at, j.dead_reason, j.last_error_class, j.last_error_status, \
    j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
    j.lease_expires_at, s.enabled AS subscriber_enabled \
    FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id WHERE j.id = ?1";

/// An operator's transition of waiting job `?1`, only if it is still as it was read
/// (state `?2`, `updated_at` `?7`).
const TRANSITION_WAITING: &str = "UPDATE jobs SET state = ?3, due_at = ?4, deadline = ?5, \
    deliver_at = CASE WHEN ?3 = 'scheduled' THEN COALESCE(?4, deliver_at) ELSE deliver_at END, \
    updated_at = ?6 \
    WHERE id = ?1 AND state = ?2 AND updated_at = ?7 \
    AND state IN ('scheduled', 'retrying')";

pub async fn get(readers: &SqlitePool, id: Uuid) -> Result<Option<Job>, StoreError> {
    sqlx::query_as::<_, JobRow>(GET)
        .bind(id.to_string())
        .fetch_optional(readers)
        .await?
        .map(Job::try_from)
        .transpose()
}

pub async fn list(
    readers: &SqlitePool,
    filter: &JobFilter,
    page: PageRequest<Uuid>,
) -> Result<Vec<Job>, StoreError> {
    let (sql, arguments) = binds::bound(Query::from(job_listing(Dialect::Sqlite, filter, &page)))?;
    sqlx::query_as_with::<_, JobRow, _>(sql, arguments)
        .fetch_all(readers)
        .await?
        .into_iter()
        .map(Job::try_from)
        .collect()
}

pub async fn transition_waiting(
    writer: &SqlitePool,
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let updated = sqlx::query(TRANSITION_WAITING)
        .bind(id.to_string())
        .bind(seen.state.as_str())
        .bind(transition.to.as_str())
        .bind(transition.due_at.map(Timestamp::as_millis))
        .bind(transition.deadline.as_millis())
        .bind(now.as_millis())
        .bind(seen.updated_at.as_millis())
        .execute(writer)
        .await?
        .rows_affected();
    Ok(updated == 1)
}
