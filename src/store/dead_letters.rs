//! The dead letters grouped by dead reason and subscriber, for both backends: one
//! grouped read of the partial index `jobs_dead_groups` (migration 0013).

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::DeadLetterGroup;
use crate::store::transactions::Transactions;

/// The statement of the groups, in the backend's dialect.
pub(crate) trait DeadLetterStatements: Transactions {
    /// The groups ([`GroupRow`]): most jobs first, then by reason and subscriber; at
    /// most `$1`.
    const GROUPS: &'static str;
}

/// One group.
#[derive(sqlx::FromRow)]
pub struct GroupRow {
    dead_reason: Option<String>,
    subscriber_id: String,
    n: i64,
    first_dead_at: Option<i64>,
    last_dead_at: Option<i64>,
}
crate::store::sqlite::direct::rows::lite_row!(GroupRow {
    dead_reason,
    subscriber_id,
    n,
    first_dead_at,
    last_dead_at
});

/// At most `limit` groups, most jobs first.
pub(crate) async fn groups<S: DeadLetterStatements>(
    db: &S,
    limit: u32,
) -> Result<Vec<DeadLetterGroup>, StoreError> {
    let rows: Vec<GroupRow> = db
        .read_all(Query::new(S::GROUPS).int(i64::from(limit)))
        .await?;
    rows.into_iter()
        .map(|row| {
            let reason = row.dead_reason.as_deref().ok_or_else(|| {
                StoreError::Internal(format!("a dead job of {} has no reason", row.subscriber_id))
            })?;
            Ok(DeadLetterGroup {
                dead_reason: decode::named("dead_reason", reason)?,
                subscriber_id: row.subscriber_id,
                jobs: decode::count(row.n),
                first_dead_at: Timestamp::from_millis(row.first_dead_at.unwrap_or(0)),
                last_dead_at: Timestamp::from_millis(row.last_dead_at.unwrap_or(0)),
            })
        })
        .collect()
}
