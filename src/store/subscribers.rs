//! Subscribers, for both backends: the row they read, and the rotation of a signing
//! secret (read the current secret, write the rotation, in one transaction).

use std::future::Future;

use crate::domain::Timestamp;
use crate::store::decode;
use crate::store::records::{SecretRotated, SecretRotation, Subscriber};
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};

/// A row of `subscribers` (without its secrets).
#[derive(sqlx::FromRow)]
pub struct SubscriberRow {
    id: String,
    url: String,
    max_in_flight: i64,
    rate_limit_per_second: Option<i64>,
    enabled: bool,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<SubscriberRow> for Subscriber {
    type Error = StoreError;

    fn try_from(row: SubscriberRow) -> Result<Self, StoreError> {
        Ok(Subscriber {
            id: row.id,
            url: row.url,
            max_in_flight: decode::num("max_in_flight", row.max_in_flight)?,
            rate_limit_per_second: decode::opt_num(
                "rate_limit_per_second",
                row.rate_limit_per_second,
            )?,
            enabled: row.enabled,
            created_at: Timestamp::from_millis(row.created_at),
            updated_at: Timestamp::from_millis(row.updated_at),
        })
    }
}

/// The statements of a rotation.
pub(crate) trait SubscriberStatements: Transactions {
    /// Subscriber `id`'s current secret as stored, holding the row until `tx` ends
    /// (PostgreSQL: `FOR UPDATE`, so concurrent rotations apply one after the other,
    /// each moving the secret the previous one wrote); `None` when it does not exist.
    fn current_secret(
        tx: &mut Self::Tx,
        id: &str,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Writes the rotation of subscriber `id` (both secrets as stored) at `now`.
    fn rotate(
        tx: &mut Self::Tx,
        id: &str,
        secrets: (String, Option<String>),
        expires_at: Option<Timestamp>,
        now: Timestamp,
    ) -> impl Future<Output = Result<SubscriberRow, StoreError>> + Send;
}

/// Rotates a secret (see [`crate::store::Store::rotate_secret`]) in one write
/// transaction.
pub(crate) async fn rotate_secret<S: SubscriberStatements>(
    db: &S,
    sealer: &Sealer,
    rotation: SecretRotation,
    now: Timestamp,
) -> Result<Option<SecretRotated>, StoreError> {
    let id = &rotation.subscriber_id;
    let mut tx = db.write().await?;
    let Some(current) = S::current_secret(&mut tx, id).await? else {
        return Ok(None);
    };
    let expires_at = (rotation.grace_ms > 0).then(|| now.plus_ms(rotation.grace_ms));
    let previous = expires_at.map(|_| sealer.reseal(id, &current));
    let secrets = (sealer.seal(id, &rotation.secret), previous);
    let row = S::rotate(&mut tx, id, secrets, expires_at, now).await?;
    S::commit(tx).await?;
    Ok(Some(SecretRotated {
        subscriber: row.try_into()?,
        previous_secret_expires_at: expires_at,
    }))
}
