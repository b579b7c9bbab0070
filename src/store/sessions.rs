//! Console sessions ended by logout, for both backends (docs/DESIGN.md §5.12): a
//! session cookie is signed and carries its expiry, so any instance checks it alone;
//! only the sessions ended before their expiry are stored, until that expiry.

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::figures::Exists;
use crate::store::transactions::Transactions;

/// The statements of ended sessions, in the backend's dialect.
pub(crate) trait SessionStatements: Transactions {
    /// Records session `$1` as ended; it would have expired at `$2` (a repeat changes
    /// nothing).
    const END: &'static str;
    /// Deletes the entries of sessions expired before `$1`.
    const FORGET: &'static str;
    /// A row when session `$1` has ended.
    const ENDED: &'static str;
}

/// Records session `id` (expiring at `expires_at`) as ended, and forgets the sessions
/// expired by `now`, in one write.
pub(crate) async fn end<S: SessionStatements>(
    db: &S,
    id: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    let end = Query::new(S::END)
        .text(id.to_owned())
        .int(expires_at.as_millis());
    let forget = Query::new(S::FORGET).int(now.as_millis());
    db.transaction(move |tx| {
        Box::pin(async move {
            S::execute(tx, end).await?;
            S::execute(tx, forget).await?;
            Ok(())
        })
    })
    .await
}

/// True when session `id` has been ended.
pub(crate) async fn ended<S: SessionStatements>(db: &S, id: &str) -> Result<bool, StoreError> {
    let row: Option<Exists> = db
        .read_optional(Query::new(S::ENDED).text(id.to_owned()))
        .await?;
    Ok(row.is_some())
}
