//! Lease renewal in PostgreSQL.

use std::collections::HashSet;

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::LeaseRef;

/// Extends to `$2` at `$3` each lease of `$1` (a JSON array of `{id, token}`) still
/// held; returns the (id, token) of those renewed. The rows are held in id order
/// first, the store's lock order (see `super::outcomes::APPLY_TRANSITIONS`): an update
/// of several rows in the order it finds them could deadlock with an outcome group
/// holding some of the same jobs. Each lease is one primary-key probe (a lateral
/// subquery with its row lock, `COALESCE` keeping the state indexes out), held and
/// then updated: joined, a generic plan made on an empty table read every job in
/// flight for each renewal, and the update scanned `jobs` unless joined to the
/// batch's rows (`v`, whose estimate makes the probes look cheaper).
pub(super) const RENEW: &str = "WITH v AS MATERIALIZED ( \
      SELECT * FROM json_to_recordset($1::json) AS v(id text, token bigint) \
    ), held AS MATERIALIZED ( \
      SELECT h.id, l.token FROM (SELECT v.id COLLATE \"C\" AS id, v.token FROM v ORDER BY 1) l \
      CROSS JOIN LATERAL (SELECT j.id FROM jobs j WHERE j.id = l.id \
        AND j.lease_token = l.token AND COALESCE(j.state, '') = 'in_flight' \
        FOR NO KEY UPDATE OF j) h \
    ) \
    UPDATE jobs j SET lease_expires_at = $2, due_at = $2, updated_at = $3 \
    FROM held h JOIN v ON v.id = h.id AND v.token = h.token \
    WHERE j.id = h.id AND j.lease_token = v.token AND COALESCE(j.state, '') = 'in_flight' \
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
    let batch: Vec<serde_json::Value> = ids
        .iter()
        .zip(&tokens)
        .map(|(id, token)| serde_json::json!({ "id": id, "token": token }))
        .collect();
    let renewed: Vec<(String, i64)> = sqlx::query_as(RENEW)
        .bind(serde_json::Value::Array(batch).to_string())
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
