//! Subscribers, for both backends: the row they read, and the rotation of a signing
//! secret (read the current secret, write the rotation, in one transaction).

use crate::domain::Timestamp;
use crate::store::decode;
use crate::store::dialect::{Query, Value};
use crate::store::records::{PageRequest, SecretRotated, SecretRotation, Subscriber};
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

/// The statements of reading subscribers and rotating a secret, in the backend's
/// dialect.
pub(crate) trait SubscriberStatements: Transactions {
    /// Subscriber `$1` ([`SubscriberRow`]).
    const GET: &'static str;
    /// Subscribers after id `$1` (all when NULL) in id order, at most `$2`.
    const LIST: &'static str;
    /// Subscriber `$1`'s current secret as stored, holding the row until the
    /// transaction ends (PostgreSQL: `FOR UPDATE`, so concurrent rotations apply one
    /// after the other, each moving the secret the previous one wrote).
    const CURRENT_SECRET: &'static str;
    /// Writes the rotation of subscriber `$1`: secret `$2`, previous secret `$3`
    /// until `$4`, at `$5`; returns the subscriber ([`SubscriberRow`]).
    const ROTATE: &'static str;
}

/// Subscriber `id`, or `None`.
pub(crate) async fn get<S: SubscriberStatements>(
    db: &S,
    id: &str,
) -> Result<Option<Subscriber>, StoreError> {
    let row: Option<SubscriberRow> = db.read_optional(Query::new(S::GET).text(id)).await?;
    row.map(Subscriber::try_from).transpose()
}

/// Subscribers in id order, strictly after `page.after`.
pub(crate) async fn list<S: SubscriberStatements>(
    db: &S,
    page: PageRequest<String>,
) -> Result<Vec<Subscriber>, StoreError> {
    let query = Query::new(S::LIST)
        .bind(Value::OptText(page.after))
        .int(i64::from(page.limit));
    let rows: Vec<SubscriberRow> = db.read_all(query).await?;
    rows.into_iter().map(Subscriber::try_from).collect()
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
    let current: Option<(String,)> =
        S::fetch_optional(&mut tx, Query::new(S::CURRENT_SECRET).text(id)).await?;
    let Some((current,)) = current else {
        return Ok(None);
    };
    let expires_at = (rotation.grace_ms > 0).then(|| now.plus_ms(rotation.grace_ms));
    let previous = expires_at.map(|_| sealer.reseal(id, &current));
    let query = Query::new(S::ROTATE)
        .text(id)
        .text(sealer.seal(id, &rotation.secret))
        .bind(Value::OptText(previous))
        .bind(Value::OptInt(expires_at.map(Timestamp::as_millis)))
        .int(now.as_millis());
    let row: SubscriberRow = S::fetch_one(&mut tx, query).await?;
    S::commit(tx).await?;
    Ok(Some(SecretRotated {
        subscriber: row.try_into()?,
        previous_secret_expires_at: expires_at,
    }))
}
