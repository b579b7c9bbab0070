//! Subscribers in SQLite.

use sqlx::{AssertSqlSafe, Row, SqlitePool};

use crate::domain::Timestamp;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PageRequest, PutSubscriberOutcome, SecretRotated, SecretRotation,
    Subscriber, SubscriberPut,
};
use crate::store::rows::{self, SUBSCRIBER_COLUMNS};
use crate::store::{Sealer, StoreError};

pub async fn put(
    writer: &SqlitePool,
    sealer: &Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let existing = sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE id = ?1"
    )))
    .bind(&put.id)
    .fetch_optional(&mut *tx)
    .await?
    .map(|row| rows::subscriber(&row))
    .transpose()?;
    let created_secret = match &existing {
        Some(current) => {
            sqlx::query(
                "UPDATE subscribers SET url = ?2, max_in_flight = ?3, \
                 rate_limit_per_second = ?4, enabled = ?5, updated_at = ?6, \
                 secret = COALESCE(?7, secret), \
                 previous_secret = CASE WHEN ?7 IS NULL THEN previous_secret END, \
                 previous_secret_expires_at = \
                   CASE WHEN ?7 IS NULL THEN previous_secret_expires_at END \
                 WHERE id = ?1",
            )
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
            sqlx::query(
                "INSERT INTO subscribers (id, url, secret, max_in_flight, \
                 rate_limit_per_second, enabled, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
            )
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
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE id = ?1"
    )))
    .bind(&put.id)
    .fetch_one(&mut *tx)
    .await?;
    let subscriber = rows::subscriber(&row)?;
    tx.commit().await?;
    Ok(PutSubscriberOutcome {
        subscriber,
        created_secret,
    })
}

/// Reads the current secret and writes the rotation in one transaction on the writer.
pub async fn rotate_secret(
    writer: &SqlitePool,
    sealer: &Sealer,
    rotation: SecretRotation,
    now: Timestamp,
) -> Result<Option<SecretRotated>, StoreError> {
    let id = &rotation.subscriber_id;
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let Some(current) = sqlx::query("SELECT secret FROM subscribers WHERE id = ?1")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    let expires_at = (rotation.grace_ms > 0).then(|| now.plus_ms(rotation.grace_ms));
    let current: String = current.try_get("secret")?;
    let previous = expires_at.map(|_| sealer.reseal(id, &current));
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE subscribers SET secret = ?2, previous_secret = ?3, \
         previous_secret_expires_at = ?4, updated_at = ?5 WHERE id = ?1 \
         RETURNING {SUBSCRIBER_COLUMNS}"
    )))
    .bind(id)
    .bind(sealer.seal(id, &rotation.secret))
    .bind(previous)
    .bind(expires_at.map(Timestamp::as_millis))
    .bind(now.as_millis())
    .fetch_one(&mut *tx)
    .await?;
    let subscriber = rows::subscriber(&row)?;
    tx.commit().await?;
    Ok(Some(SecretRotated {
        subscriber,
        previous_secret_expires_at: expires_at,
    }))
}

pub async fn get(readers: &SqlitePool, id: &str) -> Result<Option<Subscriber>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE id = ?1"
    )))
    .bind(id)
    .fetch_optional(readers)
    .await?
    .map(|row| rows::subscriber(&row))
    .transpose()
}

pub async fn list(
    readers: &SqlitePool,
    page: PageRequest<String>,
) -> Result<Vec<Subscriber>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE ?1 IS NULL OR id > ?1 \
         ORDER BY id LIMIT ?2"
    )))
    .bind(page.after)
    .bind(i64::from(page.limit))
    .fetch_all(readers)
    .await?
    .iter()
    .map(rows::subscriber)
    .collect()
}
