//! The dead letters grouped by cause — dead reason, last error class and status —
//! then by subscriber, for both backends: two grouped reads of the partial index
//! `jobs_dead_causes` (migration 0017), one for the causes, one for a page of groups.

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::{DeadLetterCause, DeadLetterGroup, DeadLetters};
use crate::store::transactions::Transactions;

/// The statements of the dead letters, in the backend's dialect.
pub(crate) trait DeadLetterStatements: Transactions {
    /// Every cause ([`CauseRow`]): most jobs first, then by reason, class and status
    /// (an absent class or status first).
    const CAUSES: &'static str;
    /// The groups ([`GroupRow`]) by cause (the cause with most jobs first, then as
    /// [`Self::CAUSES`]), then most jobs first, then by subscriber; at most `$1`,
    /// after skipping `$2`; each row carries the number of groups in all.
    const GROUPS: &'static str;
}

crate::store::lite_rows::row! {
    /// One cause.
    pub struct CauseRow {
        dead_reason: Option<String>,
        error_class: Option<String>,
        status: Option<i64>,
        n: i64,
        subscribers: i64,
    }
}

crate::store::lite_rows::row! {
    /// One group.
    pub struct GroupRow {
        dead_reason: Option<String>,
        error_class: Option<String>,
        status: Option<i64>,
        subscriber_id: String,
        n: i64,
        first_dead_at: Option<i64>,
        last_dead_at: Option<i64>,
        total: i64,
    }
}

/// Every cause, and the page of `limit` groups after the first `offset`.
pub(crate) async fn read<S: DeadLetterStatements>(
    db: &S,
    offset: u32,
    limit: u32,
) -> Result<DeadLetters, StoreError> {
    let causes: Vec<CauseRow> = db.read_all(Query::new(S::CAUSES)).await?;
    let query = Query::new(S::GROUPS)
        .int(i64::from(limit))
        .int(i64::from(offset));
    let rows: Vec<GroupRow> = db.read_all(query).await?;
    let reason = |reason: Option<&str>| {
        let reason =
            reason.ok_or_else(|| StoreError::Internal("a dead job has no reason".into()))?;
        decode::named("dead_reason", reason)
    };
    let mut dead = DeadLetters {
        total_groups: rows.first().map_or(0, |row| decode::count(row.total)),
        ..DeadLetters::default()
    };
    for row in causes {
        dead.causes.push(DeadLetterCause {
            dead_reason: reason(row.dead_reason.as_deref())?,
            error_class: decode::opt_named("error_class", row.error_class.as_deref())?,
            status: decode::opt_num("status", row.status)?,
            jobs: decode::count(row.n),
            subscribers: decode::count(row.subscribers),
        });
    }
    for row in rows {
        dead.groups.push(DeadLetterGroup {
            dead_reason: reason(row.dead_reason.as_deref())?,
            error_class: decode::opt_named("error_class", row.error_class.as_deref())?,
            status: decode::opt_num("status", row.status)?,
            subscriber_id: row.subscriber_id,
            jobs: decode::count(row.n),
            first_dead_at: Timestamp::from_millis(row.first_dead_at.unwrap_or(0)),
            last_dead_at: Timestamp::from_millis(row.last_dead_at.unwrap_or(0)),
        });
    }
    if dead.total_groups == 0 && offset > 0 {
        // A page past the end: count the groups for the page's "of n".
        let all = db
            .read_all::<GroupRow>(Query::new(S::GROUPS).int(1).int(0))
            .await?;
        dead.total_groups = all.first().map_or(0, |row| decode::count(row.total));
    }
    Ok(dead)
}
