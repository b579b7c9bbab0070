//! Subscribers in SQLite.

use sqlx::{AssertSqlSafe, SqlitePool};

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PageRequest, PutSubscriberOutcome, Subscriber, SubscriberPut,
};
use crate::store::rows::{self, SUBSCRIBER_COLUMNS};

pub async fn put(
    writer: &SqlitePool,
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
                 secret = COALESCE(?7, secret) WHERE id = ?1",
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
            .bind(put.secret.as_ref().map(|s| s.expose().to_owned()))
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
            .bind(secret.expose().to_owned())
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
