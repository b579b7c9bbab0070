//! Subscribers in SQLite.

use super::Pools;
use crate::domain::Timestamp;
use crate::store::destinations;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PutSubscriberOutcome, Subscriber, SubscriberPut,
};
use crate::store::subscribers::{SubscriberRow, SubscriberStatements};
use crate::store::{Sealer, StoreError};

/// Subscriber `?1`.
const GET: &str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
    updated_at FROM subscribers WHERE id = ?1";

/// Subscribers after `?1` (all when NULL) in id order, at most `?2`.
const LIST: &str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
    updated_at FROM subscribers WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2";

/// Updates subscriber `?1`; a new secret `?7` ends a rotation's grace period.
const UPDATE: &str = "UPDATE subscribers SET url = ?2, max_in_flight = ?3, \
    rate_limit_per_second = ?4, enabled = ?5, updated_at = ?6, \
    secret = COALESCE(?7, secret), \
    previous_secret = CASE WHEN ?7 IS NULL THEN previous_secret END, \
    previous_secret_expires_at = \
      CASE WHEN ?7 IS NULL THEN previous_secret_expires_at END \
    WHERE id = ?1";

/// Creates subscriber `?1`.
const INSERT: &str = "INSERT INTO subscribers (id, url, secret, max_in_flight, \
    rate_limit_per_second, enabled, created_at, updated_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)";

/// Subscriber `?1`'s current secret.
const CURRENT_SECRET: &str = "SELECT secret FROM subscribers WHERE id = ?1";

/// A rotation of subscriber `?1`'s secret.
const ROTATE: &str = "UPDATE subscribers SET secret = ?2, previous_secret = ?3, \
    previous_secret_expires_at = ?4, updated_at = ?5 WHERE id = ?1 \
    RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, updated_at";

/// Reads the subscriber, then inserts or updates it, in one write transaction.
pub async fn put(
    db: &Pools,
    sealer: &Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let mut tx = db.writer.begin_with("BEGIN IMMEDIATE").await?;
    let existing: Option<Subscriber> = sqlx::query_as::<_, SubscriberRow>(GET)
        .bind(&put.id)
        .fetch_optional(&mut *tx)
        .await?
        .map(Subscriber::try_from)
        .transpose()?;
    let created_secret = match &existing {
        Some(current) => {
            sqlx::query(UPDATE)
                .bind(&put.id)
                .bind(&put.url)
                .bind(i64::from(
                    put.max_in_flight.unwrap_or(current.max_in_flight),
                ))
                .bind(
                    put.rate_limit_per_second
                        .unwrap_or(current.rate_limit_per_second)
                        .map(i64::from),
                )
                .bind(put.enabled.unwrap_or(current.enabled))
                .bind(now.as_millis())
                .bind(put.secret.as_ref().map(|s| sealer.seal(&put.id, s)))
                .execute(&mut *tx)
                .await?;
            None
        }
        None => {
            let secret = put.secret.clone().unwrap_or(put.generated_secret.clone());
            sqlx::query(INSERT)
                .bind(&put.id)
                .bind(&put.url)
                .bind(sealer.seal(&put.id, &secret))
                .bind(i64::from(
                    put.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
                ))
                .bind(put.rate_limit_per_second.flatten().map(i64::from))
                .bind(put.enabled.unwrap_or(true))
                .bind(now.as_millis())
                .execute(&mut *tx)
                .await?;
            Some(secret)
        }
    };
    destinations::assign::<Pools>(&mut tx, &put.id, &put.url, now).await?;
    let row: SubscriberRow = sqlx::query_as(GET)
        .bind(&put.id)
        .fetch_one(&mut *tx)
        .await?;
    let subscriber = row.try_into()?;
    tx.commit().await?;
    Ok(PutSubscriberOutcome {
        subscriber,
        created_secret,
    })
}

impl SubscriberStatements for Pools {
    const GET: &'static str = GET;
    const LIST: &'static str = LIST;
    const CURRENT_SECRET: &'static str = CURRENT_SECRET;
    const ROTATE: &'static str = ROTATE;
}
