//! Subscribers in PostgreSQL.

use sqlx::{AssertSqlSafe, PgPool, Row};

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PageRequest, PutSubscriberOutcome, Subscriber, SubscriberPut,
};
use crate::store::rows::{self, SUBSCRIBER_COLUMNS};

/// One statement: insert, or update keeping what `put` leaves out; `xmax = 0` tells
/// an inserted row from an updated one.
pub async fn put(
    pool: &PgPool,
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
         secret = COALESCE($10, s.secret) \
         RETURNING {SUBSCRIBER_COLUMNS}, (xmax = 0) AS inserted"
    )))
    .bind(&put.id)
    .bind(&put.url)
    .bind(secret_if_new.expose())
    .bind(put.max_in_flight.map(i64::from))
    .bind(put.rate_limit_per_second.flatten().map(i64::from))
    .bind(put.enabled)
    .bind(now.as_millis())
    .bind(put.rate_limit_per_second.is_some())
    .bind(i64::from(DEFAULT_MAX_IN_FLIGHT))
    .bind(put.secret.as_ref().map(|s| s.expose()))
    .fetch_one(pool)
    .await?;
    let inserted: bool = row.try_get("inserted")?;
    Ok(PutSubscriberOutcome {
        subscriber: rows::subscriber(&row)?,
        created_secret: inserted.then_some(secret_if_new),
    })
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
