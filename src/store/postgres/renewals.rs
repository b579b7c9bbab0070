//! Lease renewal in PostgreSQL.

use std::collections::HashSet;

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::LeaseRef;

/// Extends to `$3` each lease (`$1` job ids, `$2` tokens) still held; returns the
/// (id, token) of those renewed. The rows are held in id order first, the store's
/// lock order (see `super::outcomes::APPLY_TRANSITIONS`): an
/// update of several rows in the order it finds them could deadlock with an outcome
/// group holding some of the same jobs.
pub(super) const RENEW: &str = "WITH held AS MATERIALIZED (SELECT j.id FROM jobs j \
      JOIN UNNEST($1::text[], $2::bigint[]) AS l(id, token) \
        ON j.id = l.id AND j.lease_token = l.token \
      WHERE j.state = 'in_flight' ORDER BY j.id FOR NO KEY UPDATE OF j) \
    UPDATE jobs j SET lease_expires_at = $3, due_at = $3, updated_at = $4 \
    FROM held WHERE j.id = held.id \
    RETURNING j.id, j.lease_token";

/// Renews every lease in one statement; per lease, whether it was still held.
pub async fn renew(
    pool: &PgPool,
    leases: &[LeaseRef],
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<bool>, StoreError> {
    let ids: Vec<String> = leases.iter().map(|l| l.job_id.to_string()).collect();
    let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
    let renewed: Vec<(String, i64)> = sqlx::query_as(RENEW)
        .bind(&ids)
        .bind(&tokens)
        .bind(until.as_millis())
        .bind(now.as_millis())
        .fetch_all(pool)
        .await?;
    let renewed: HashSet<(String, i64)> = renewed.into_iter().collect();
    Ok(ids
        .into_iter()
        .zip(tokens)
        .map(|key| renewed.contains(&key))
        .collect())
}
