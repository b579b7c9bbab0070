//! Subscribers in PostgreSQL.

use sqlx::{AssertSqlSafe, PgPool, Row};

use crate::domain::Timestamp;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PageRequest, PutSubscriberOutcome, SecretRotated, SecretRotation,
    Subscriber, SubscriberPut,
};
use crate::store::rows::Columns;
use crate::store::rows::{self, SUBSCRIBER_COLUMNS};
use crate::store::{Sealer, StoreError};

/// One statement: insert, or update keeping what `put` leaves out (a new secret ends a
/// rotation's grace period); `xmax = 0` tells an inserted row from an updated one.
pub async fn put(
    pool: &PgPool,
    sealer: &Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let secret_if_new = put.secret.clone().unwrap_or(put.generated_secret.clone());
    let row = sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO subscribers AS s (id, url, secret, max_in_flight, rate_limit_per_second, \
         enabled, created_at, updated_at) \
         VALUES ($1, $2, $3, COALESCE($4, $9), $5, COALESCE($6, TRUE), $7, $7) \
         ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, \
         max_in_flight = COALESCE($4, s.max_in_flight), \
         rate_limit_per_second = CASE WHEN $8 THEN $5 ELSE s.rate_limit_per_second END, \
         enabled = COALESCE($6, s.enabled), updated_at = $7, \
         secret = COALESCE($10, s.secret), \
         previous_secret = CASE WHEN $10::text IS NULL THEN s.previous_secret END, \
         previous_secret_expires_at = \
           CASE WHEN $10::text IS NULL THEN s.previous_secret_expires_at END \
         RETURNING {SUBSCRIBER_COLUMNS}, (xmax = 0) AS inserted"
    )))
    .bind(&put.id)
    .bind(&put.url)
    .bind(sealer.seal(&put.id, &secret_if_new))
    .bind(put.max_in_flight.map(i64::from))
    .bind(put.rate_limit_per_second.flatten().map(i64::from))
    .bind(put.enabled)
    .bind(now.as_millis())
    .bind(put.rate_limit_per_second.is_some())
    .bind(i64::from(DEFAULT_MAX_IN_FLIGHT))
    .bind(put.secret.as_ref().map(|s| sealer.seal(&put.id, s)))
    .fetch_one(pool)
    .await?;
    let inserted: bool = row.try_get("inserted")?;
    Ok(PutSubscriberOutcome {
        subscriber: rows::subscriber(&row)?,
        created_secret: inserted.then_some(secret_if_new),
    })
}

/// Locks the row (`FOR UPDATE`), so concurrent rotations apply one after the other,
/// each moving the secret the previous one wrote.
pub async fn rotate_secret(
    pool: &PgPool,
    sealer: &Sealer,
    rotation: SecretRotation,
    now: Timestamp,
) -> Result<Option<SecretRotated>, StoreError> {
    let id = &rotation.subscriber_id;
    let mut tx = pool.begin().await?;
    let Some(current) = sqlx::query("SELECT secret FROM subscribers WHERE id = $1 FOR UPDATE")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    let current = current.text("secret")?;
    let expires_at = (rotation.grace_ms > 0).then(|| now.plus_ms(rotation.grace_ms));
    let previous = expires_at.map(|_| sealer.reseal(id, &current));
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE subscribers SET secret = $2, previous_secret = $3, \
         previous_secret_expires_at = $4, updated_at = $5 WHERE id = $1 \
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

pub async fn get(pool: &PgPool, id: &str) -> Result<Option<Subscriber>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?
    .map(|row| rows::subscriber(&row))
    .transpose()
}

pub async fn list(pool: &PgPool, page: PageRequest<String>) -> Result<Vec<Subscriber>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {SUBSCRIBER_COLUMNS} FROM subscribers WHERE $1::text IS NULL OR id > $1 \
         ORDER BY id LIMIT $2"
    )))
    .bind(page.after)
    .bind(i64::from(page.limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::subscriber)
    .collect()
}
