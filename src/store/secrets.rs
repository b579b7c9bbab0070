//! The start-up check of stored signing secrets, for both backends: secrets sealed
//! with a key this server cannot open refuse the start; with a key, the plaintext ones
//! are sealed (see [`Sealer::check_stored`]).

use std::future::Future;

use crate::store::sealing::Reseal;
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};

/// A subscriber's stored secrets: (id, secret, previous secret).
pub type StoredSecrets = (String, String, Option<String>);

/// The statements of the check.
pub(crate) trait SecretStatements: Transactions {
    /// Every subscriber's stored secrets.
    fn stored_secrets(&self)
    -> impl Future<Output = Result<Vec<StoredSecrets>, StoreError>> + Send;

    /// Writes `row` if the subscriber's secret is still `row.old_secret`.
    fn reseal(
        tx: &mut Self::Tx,
        row: &Reseal,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Checks the stored secrets against `sealer` and seals the plaintext ones when it
/// has a key, in one write transaction. Fails ([`StoreError::Config`]) when sealed
/// secrets do not open. Returns how many subscribers were sealed.
pub(crate) async fn prepare<S: SecretStatements>(
    db: &S,
    sealer: &Sealer,
) -> Result<usize, StoreError> {
    let rows = db.stored_secrets().await?;
    let reseal = sealer.check_stored(&rows).map_err(StoreError::Config)?;
    if reseal.is_empty() {
        return Ok(0);
    }
    let mut tx = db.write().await?;
    for row in &reseal {
        S::reseal(&mut tx, row).await?;
    }
    S::commit(tx).await?;
    Ok(reseal.len())
}
