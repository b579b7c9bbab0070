//! The start-up check of stored signing secrets, for both backends: secrets sealed
//! with a key this server cannot open refuse the start; with a key, the plaintext ones
//! are sealed (see [`Sealer::check_stored`]), and what the database's files still hold
//! of them is removed (see [`SecretStatements::scrub`]).

use std::future::Future;

use crate::store::dialect::{Query, Value};
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};

/// A subscriber's stored secrets: (id, secret, previous secret).
pub type StoredSecrets = (String, String, Option<String>);

/// The statements of the check, in the backend's dialect.
pub(crate) trait SecretStatements: Transactions {
    /// Every subscriber's stored secrets ([`StoredSecrets`]).
    const STORED: &'static str;
    /// Writes subscriber `$1`'s secret `$2` and previous secret `$3` (kept when NULL)
    /// if its secret is still `$4`.
    const RESEAL: &'static str;

    /// Removes from the database's files the old copies of the values the sealing
    /// replaced (old row versions, free space, the write-ahead log), once it has
    /// committed. What each backend can reach is in its `secrets.rs`.
    fn scrub(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Finishes a scrub that an earlier start could not finish: where the backend
    /// keeps its own write-ahead log in the database's files (SQLite), moves it into
    /// the file and truncates it, so that old page images holding replaced values go.
    /// Run at every start with a key; cheap when there is nothing to do.
    fn settle_log(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Checks the stored secrets against `sealer` and seals the plaintext ones when it
/// has a key, in one write transaction, then scrubs the old copies (a failure of that
/// is logged, not returned: the secrets are sealed, and the operator is told to rotate
/// them). Fails ([`StoreError::Config`]) when sealed secrets do not open. Returns how
/// many subscribers were sealed.
pub(crate) async fn prepare<S: SecretStatements>(
    db: &S,
    sealer: &Sealer,
) -> Result<usize, StoreError> {
    let rows: Vec<StoredSecrets> = db.read_all(Query::new(S::STORED)).await?;
    let reseal = sealer.check_stored(&rows).map_err(StoreError::Config)?;
    if reseal.is_empty() {
        if sealer.is_sealing()
            && let Err(error) = db.settle_log().await
        {
            tracing::warn!(%error, "cannot truncate the database's write-ahead log");
        }
        return Ok(0);
    }
    let queries: Vec<Query> = reseal
        .iter()
        .map(|row| {
            Query::new(S::RESEAL)
                .text(&row.subscriber_id)
                .text(&row.new_secret)
                .bind(Value::OptText(row.new_previous.clone()))
                .text(&row.old_secret)
        })
        .collect();
    db.transaction(move |tx| {
        Box::pin(async move {
            for query in queries {
                S::execute(tx, query).await?;
            }
            Ok(())
        })
    })
    .await?;
    if let Err(error) = db.scrub().await {
        tracing::warn!(
            %error,
            "the plaintext signing secrets are sealed, but their old copies could not be \
             removed from the database's files: rotate the secrets created before the key"
        );
    }
    Ok(reseal.len())
}
