//! Attempt history in SQLite.

use sqlx::SqlitePool;
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::attempts::AttemptRow;
use crate::store::records::Attempt;

/// Job `?1`'s attempts, oldest first.
const LIST: &str = "SELECT number, started_at, finished_at, outcome, status, error_class, \
    reason, body_excerpt, lease_owner, lease_token, possible_duplicate \
    FROM attempts WHERE job_id = ?1 ORDER BY number";

pub async fn list(readers: &SqlitePool, job_id: Uuid) -> Result<Vec<Attempt>, StoreError> {
    sqlx::query_as::<_, AttemptRow>(LIST)
        .bind(job_id.to_string())
        .fetch_all(readers)
        .await?
        .into_iter()
        .map(Attempt::try_from)
        .collect()
}
