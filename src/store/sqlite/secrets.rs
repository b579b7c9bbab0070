//! The start-up check of stored secrets in SQLite.

use super::{Pools, Tx};
use crate::store::StoreError;
use crate::store::sealing::Reseal;
use crate::store::secrets::{SecretStatements, StoredSecrets};

/// Every subscriber's stored secrets.
const STORED: &str = "SELECT id, secret, previous_secret FROM subscribers";

/// Writes subscriber `?1`'s secrets sealed, if its secret is still `?4`.
const RESEAL: &str = "UPDATE subscribers SET secret = ?2, \
    previous_secret = COALESCE(?3, previous_secret) \
    WHERE id = ?1 AND secret = ?4";

impl SecretStatements for Pools {
    async fn stored_secrets(&self) -> Result<Vec<StoredSecrets>, StoreError> {
        Ok(sqlx::query_as(STORED).fetch_all(&self.writer).await?)
    }

    async fn reseal(tx: &mut Tx, row: &Reseal) -> Result<(), StoreError> {
        sqlx::query(RESEAL)
            .bind(&row.subscriber_id)
            .bind(&row.new_secret)
            .bind(row.new_previous.as_deref())
            .bind(&row.old_secret)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}
