//! The audit trail, for both backends (docs/DESIGN.md §5.11): one row per operator
//! action, written before the action runs and settled with its answer, listed newest
//! first, purged by retention.
//!
//! A begun entry's `status` column holds 0 (no HTTP status is 0): the column stays
//! `NOT NULL` and a begun entry reads as status `None`.

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::{Query, Value};
use crate::store::records::{AuditEntry, AuditFilter, AuditSettlement, NewAuditEntry, PageRequest};
use crate::store::transactions::Transactions;
use uuid::Uuid;

/// The statements of the audit trail, in the backend's dialect.
pub(crate) trait AuditStatements: Transactions {
    /// Inserts entry `$1` (id), at `$2`, action `$3`, target `$4`, parameters `$5`,
    /// actor `$6`, status `$7` (0: begun), request id `$8`, server request id `$9`.
    const INSERT: &'static str;
    /// Settles begun entry `$1` (status 0): status `$2`, at `$4`, and target `$3` when
    /// it is not NULL. A settled entry is left as it is.
    const SETTLE: &'static str;
    /// Deletes entry `$1` if it is still begun (status 0).
    const WITHDRAW: &'static str;
    /// Entries ([`AuditRow`]) with an id below `$1` (all when NULL), of action `$2`
    /// and target `$3` (any when NULL), newest first, at most `$4`.
    const LIST: &'static str;
    /// Deletes up to `$2` entries recorded before `$1`, oldest first.
    const PURGE: &'static str;
}

crate::store::lite_rows::row! {
    /// A row of `audit`.
    pub struct AuditRow {
        id: String,
        at: i64,
        action: String,
        target: Option<String>,
        parameters: Option<String>,
        actor: Option<String>,
        status: i64,
        request_id: Option<String>,
        server_request_id: Option<String>,
    }
}

impl TryFrom<AuditRow> for AuditEntry {
    type Error = StoreError;

    fn try_from(row: AuditRow) -> Result<Self, StoreError> {
        Ok(AuditEntry {
            id: decode::uuid(&row.id)?,
            at: Timestamp::from_millis(row.at),
            action: row.action,
            target: row.target,
            parameters: row.parameters,
            actor: row.actor,
            status: match row.status {
                BEGUN => None,
                status => Some(decode::num("status", status)?),
            },
            request_id: row.request_id,
            server_request_id: row
                .server_request_id
                .as_deref()
                .map(decode::uuid)
                .transpose()?,
        })
    }
}

/// The `status` of a begun entry.
const BEGUN: i64 = 0;

/// Records `entry` in its own write.
pub(crate) async fn insert<S: AuditStatements>(
    db: &S,
    entry: NewAuditEntry,
) -> Result<(), StoreError> {
    let query = Query::new(S::INSERT)
        .text(entry.id.to_string())
        .int(entry.at.as_millis())
        .text(entry.action)
        .bind(Value::OptText(entry.target))
        .bind(Value::OptText(entry.parameters))
        .bind(Value::OptText(entry.actor))
        .int(entry.status.map_or(BEGUN, i64::from))
        .bind(Value::OptText(entry.request_id))
        .bind(Value::OptText(
            entry.server_request_id.map(|id| id.to_string()),
        ));
    db.write_alone(query).await?;
    Ok(())
}

/// Settles begun entry `id` as `settlement` says; an entry already settled (or gone)
/// is left alone.
pub(crate) async fn settle<S: AuditStatements>(
    db: &S,
    id: Uuid,
    settlement: AuditSettlement,
) -> Result<(), StoreError> {
    let query = match settlement {
        AuditSettlement::Answered { status, target, at } => Query::new(S::SETTLE)
            .text(id.to_string())
            .int(i64::from(status))
            .bind(Value::OptText(target))
            .int(at.as_millis()),
        AuditSettlement::Withdrawn => Query::new(S::WITHDRAW).text(id.to_string()),
    };
    db.write_alone(query).await?;
    Ok(())
}

/// The entries `filter` matches, newest first, strictly older than `page.after`.
pub(crate) async fn list<S: AuditStatements>(
    db: &S,
    filter: &AuditFilter,
    page: PageRequest<Uuid>,
) -> Result<Vec<AuditEntry>, StoreError> {
    let query = Query::new(S::LIST)
        .bind(Value::OptText(page.after.map(|id| id.to_string())))
        .bind(Value::OptText(filter.action.clone()))
        .bind(Value::OptText(filter.target.clone()))
        .int(i64::from(page.limit));
    let rows: Vec<AuditRow> = db.read_all(query).await?;
    rows.into_iter().map(AuditEntry::try_from).collect()
}

/// Deletes up to `limit` entries recorded before `before`, oldest first; how many.
pub(crate) async fn purge<S: AuditStatements>(
    db: &S,
    before: Timestamp,
    limit: u32,
) -> Result<u64, StoreError> {
    let query = Query::new(S::PURGE)
        .int(before.as_millis())
        .int(i64::from(limit));
    db.write_alone(query).await
}
