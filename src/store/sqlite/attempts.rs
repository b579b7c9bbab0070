//! Attempt history in SQLite.

use sqlx::{AssertSqlSafe, SqlitePool};
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::records::Attempt;
use crate::store::rows::{self, ATTEMPT_COLUMNS};

pub async fn list(readers: &SqlitePool, job_id: Uuid) -> Result<Vec<Attempt>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE job_id = ?1 ORDER BY number"
    )))
    .bind(job_id.to_string())
    .fetch_all(readers)
    .await?
    .iter()
    .map(rows::attempt)
    .collect()
}
