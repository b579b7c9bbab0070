//! Lease renewal in SQLite.

use sqlx::SqlitePool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::LeaseRef;

/// Extends the lease of job `?1` held under token `?2` to `?3`.
const RENEW: &str = "UPDATE jobs SET lease_expires_at = ?3, due_at = ?3, updated_at = ?4 \
    WHERE id = ?1 AND lease_token = ?2 AND state = 'in_flight'";

/// Renews each lease in one write transaction; per lease, whether it was still held.
pub async fn renew(
    writer: &SqlitePool,
    leases: &[LeaseRef],
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<bool>, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let mut held = Vec::with_capacity(leases.len());
    for lease in leases {
        let updated = sqlx::query(RENEW)
            .bind(lease.job_id.to_string())
            .bind(lease.token)
            .bind(until.as_millis())
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        held.push(updated == 1);
    }
    tx.commit().await?;
    Ok(held)
}
