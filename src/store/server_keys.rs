//! Keys the server makes for itself, for both backends (issue #34 item 5.4): one per
//! purpose, made by the first instance that asks for it and the same for every
//! instance on the database after that, across restarts. The page cursors' key
//! (docs/DESIGN.md §5.1) is the one there is.

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::transactions::Transactions;

/// The statements of server keys, in the backend's dialect.
pub(crate) trait ServerKeyStatements: Transactions {
    /// Stores key `$2` as `$1`, made at `$3`, unless a key of that name exists.
    const OFFER: &'static str;
    /// The key named `$1`.
    const GET: &'static str;
}

/// The key named `name`: the one stored, or `candidate` (stored at `now`) when none
/// is; of two instances offering theirs at once, the first to commit wins and both get
/// its key.
pub(crate) async fn get_or_make<S: ServerKeyStatements>(
    db: &S,
    name: &str,
    candidate: String,
    now: Timestamp,
) -> Result<String, StoreError> {
    let offer = Query::new(S::OFFER)
        .text(name)
        .text(candidate)
        .int(now.as_millis());
    let get = Query::new(S::GET).text(name);
    db.transaction(move |tx| {
        Box::pin(async move {
            S::execute(tx, offer).await?;
            let (key,): (String,) = S::fetch_one(tx, get).await?;
            Ok(key)
        })
    })
    .await
}
