//! Subscribers in PostgreSQL.

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PutSubscriberOutcome, Subscriber, SubscriberPut,
};
use crate::store::subscribers::{self, SubscriberRow, SubscriberStatements};
use crate::store::{Sealer, StoreError};
use crate::store::{destinations, event_types};

/// Inserts subscriber `$1`, or updates it keeping what is left NULL (a new secret
/// `$10` ends a rotation's grace period); `xmax = 0` tells an inserted row from an
/// updated one. Pausing an enabled one (or creating one paused) records reason
/// `operator` at `$7`; enabling clears the reason. No row when a subscriber of that id
/// is being deleted (docs/DESIGN.md §5.3.1).
const PUT: &str = "INSERT INTO subscribers AS s (id, url, secret, max_in_flight, \
    rate_limit_per_second, enabled, created_at, updated_at, paused_reason, paused_at) \
    VALUES ($1, $2, $3, COALESCE($4, $9), $5, COALESCE($6, TRUE), $7, $7, \
      CASE WHEN COALESCE($6, TRUE) THEN NULL ELSE 'operator' END, \
      CASE WHEN COALESCE($6, TRUE) THEN NULL ELSE $7 END) \
    ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, \
    max_in_flight = COALESCE($4, s.max_in_flight), \
    rate_limit_per_second = CASE WHEN $8 THEN $5 ELSE s.rate_limit_per_second END, \
    enabled = COALESCE($6, s.enabled), updated_at = $7, \
    paused_reason = CASE WHEN $6::boolean IS NULL THEN s.paused_reason WHEN $6 THEN NULL \
      WHEN s.enabled THEN 'operator' ELSE s.paused_reason END, \
    paused_at = CASE WHEN $6::boolean IS NULL THEN s.paused_at WHEN $6 THEN NULL \
      WHEN s.enabled THEN $7 ELSE s.paused_at END, \
    secret = COALESCE($10, s.secret), \
    previous_secret = CASE WHEN $10::text IS NULL THEN s.previous_secret END, \
    previous_secret_expires_at = \
      CASE WHEN $10::text IS NULL THEN s.previous_secret_expires_at END \
    WHERE s.deleted_at IS NULL \
    RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
      updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms, (xmax = 0) AS inserted";

/// A subscriber as [`PUT`] returns it.
#[derive(sqlx::FromRow)]
struct PutRow {
    #[sqlx(flatten)]
    subscriber: SubscriberRow,
    inserted: bool,
}

/// One statement: insert, or update keeping what `put` leaves out; then, in the same
/// transaction, the subscriber's destination.
pub async fn put(
    pool: &PgPool,
    sealer: &Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let secret_if_new = put.secret.clone().unwrap_or(put.generated_secret.clone());
    let mut tx = pool.begin().await?;
    let row: Option<PutRow> = sqlx::query_as(PUT)
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
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else {
        return Err(StoreError::SubscriberBeingDeleted(put.id));
    };
    destinations::assign::<PgPool>(&mut tx, &put.id, &put.url, now).await?;
    let mut subscriber = Subscriber::try_from(row.subscriber)?;
    if let Some(timeout) = put.attempt_timeout_ms {
        subscribers::set_attempt_timeout::<PgPool>(&mut tx, &put.id, timeout).await?;
        subscriber.attempt_timeout_ms = timeout;
    }
    if let Some(types) = put.event_types {
        event_types::replace::<PgPool>(&mut tx, &put.id, &types).await?;
        subscriber.event_types = types;
    }
    tx.commit().await?;
    Ok(PutSubscriberOutcome {
        subscriber,
        created_secret: row.inserted.then_some(secret_if_new),
    })
}

impl SubscriberStatements for PgPool {
    /// Subscriber `$1`.
    const GET: &'static str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms FROM subscribers WHERE id = $1 \
        AND deleted_at IS NULL";
    /// Subscribers after `$1` (all when NULL) in id order, at most `$2`; never a
    /// deleted subscriber's tombstone.
    const LIST: &'static str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms FROM subscribers WHERE ($1::text IS NULL OR id > $1) AND deleted_at IS NULL ORDER BY id LIMIT $2";
    /// Subscriber `$1`'s current secret, the row locked (`FOR UPDATE`), so concurrent
    /// rotations apply one after the other, each moving the secret the previous one wrote.
    const CURRENT_SECRET: &'static str =
        "SELECT secret FROM subscribers WHERE id = $1 AND deleted_at IS NULL FOR UPDATE";
    /// A rotation of subscriber `$1`'s secret.
    const ROTATE: &'static str = "UPDATE subscribers SET secret = $2, previous_secret = $3, \
        previous_secret_expires_at = $4, updated_at = $5 WHERE id = $1 AND deleted_at IS NULL \
        RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms";
    /// Changes the fields given of subscriber `$1` (see [`SubscriberStatements::PATCH`]).
    const PATCH: &'static str = "UPDATE subscribers SET url = COALESCE($2, url), \
        max_in_flight = COALESCE($3, max_in_flight), \
        rate_limit_per_second = CASE WHEN $4 THEN $5 ELSE rate_limit_per_second END, \
        enabled = CASE WHEN $6 THEN $7 ELSE enabled END, \
        paused_reason = CASE WHEN NOT $6 THEN paused_reason WHEN $7 THEN NULL \
          WHEN enabled THEN 'operator' ELSE paused_reason END, \
        paused_at = CASE WHEN NOT $6 THEN paused_at WHEN $7 THEN NULL \
          WHEN enabled THEN $8 ELSE paused_at END, \
        updated_at = $8 WHERE id = $1 AND deleted_at IS NULL \
        RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms";
    /// Enables subscriber `$1` at `$2` if it is paused.
    const RESUME_ONE: &'static str = "UPDATE subscribers SET enabled = TRUE, paused_reason = NULL, \
        paused_at = NULL, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL AND NOT enabled";
    /// Pauses subscriber `$1` at `$2` (reason `operator`) if it is enabled.
    const PAUSE_ONE: &'static str = "UPDATE subscribers SET enabled = FALSE, paused_reason = 'operator', \
        paused_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL AND enabled";
    /// Sets subscriber `$1`'s own attempt timeout.
    const SET_ATTEMPT_TIMEOUT: &'static str =
        "UPDATE subscribers SET attempt_timeout_ms = $2 WHERE id = $1 AND deleted_at IS NULL";
    /// Whether subscriber `$1` exists.
    const EXISTS: &'static str =
        "SELECT 1::BIGINT FROM subscribers WHERE id = $1 AND deleted_at IS NULL";
    /// Enables at `$2` the subscribers paused for reason `$1`, held in id order first (the
    /// store's lock order: an outcome group pausing several holds them so).
    const RESUME_REASON: &'static str = "WITH held AS MATERIALIZED (SELECT id FROM subscribers \
          WHERE NOT enabled AND paused_reason = $1 AND deleted_at IS NULL \
          ORDER BY id FOR NO KEY UPDATE) \
        UPDATE subscribers s SET enabled = TRUE, paused_reason = NULL, \
        paused_at = NULL, updated_at = $2 FROM held WHERE s.id = held.id";
}
