//! Lease renewal in SQLite.

use super::Pools;
use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::records::LeaseRef;
use crate::store::transactions::Transactions;

/// Extends the lease of job `?1` held under token `?2` to `?3`.
const RENEW: &str = "UPDATE jobs SET lease_expires_at = ?3, due_at = ?3, updated_at = ?4 \
    WHERE id = ?1 AND lease_token = ?2 AND state = 'in_flight'";

/// Renews each lease in one write transaction; per lease, whether it was still held.
pub async fn renew(
    db: &Pools,
    leases: &[LeaseRef],
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<bool>, StoreError> {
    let leases = leases.to_vec();
    db.transaction(move |tx| {
        Box::pin(async move {
            let mut held = Vec::with_capacity(leases.len());
            for lease in leases {
                let query = Query::new(RENEW)
                    .text(lease.job_id.to_string())
                    .int(lease.token)
                    .int(until.as_millis())
                    .int(now.as_millis());
                held.push(Pools::execute(tx, query).await? == 1);
            }
            Ok(held)
        })
    })
    .await
}
