//! Subscribers in SQLite.

use super::{Pools, Tx};
use crate::domain::Timestamp;
use crate::store::dialect::{Query, Value};
use crate::store::records::{
    DEFAULT_MAX_IN_FLIGHT, PutSubscriberOutcome, Subscriber, SubscriberPut,
};
use crate::store::subscribers::{self, SubscriberRow, SubscriberStatements};
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};
use crate::store::{destinations, event_types};

/// Updates subscriber `?1`; a new secret `?7` ends a rotation's grace period; pausing
/// an enabled one records reason `operator` at `?6`, enabling clears the reason.
const UPDATE: &str = "UPDATE subscribers SET url = ?2, max_in_flight = ?3, \
    rate_limit_per_second = ?4, enabled = ?5, updated_at = ?6, \
    paused_reason = CASE WHEN ?5 THEN NULL WHEN enabled THEN 'operator' \
      ELSE paused_reason END, \
    paused_at = CASE WHEN ?5 THEN NULL WHEN enabled THEN ?6 ELSE paused_at END, \
    secret = COALESCE(?7, secret), \
    previous_secret = CASE WHEN ?7 IS NULL THEN previous_secret END, \
    previous_secret_expires_at = \
      CASE WHEN ?7 IS NULL THEN previous_secret_expires_at END \
    WHERE id = ?1";

/// Creates subscriber `?1` (created paused: reason `operator`).
const INSERT: &str = "INSERT INTO subscribers (id, url, secret, max_in_flight, \
    rate_limit_per_second, enabled, created_at, updated_at, paused_reason, paused_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, CASE WHEN ?6 THEN NULL ELSE 'operator' END, \
      CASE WHEN ?6 THEN NULL ELSE ?7 END)";

/// Whether subscriber `?1` is being deleted (docs/DESIGN.md §5.3.1).
const BEING_DELETED: &str = "SELECT 1 FROM subscribers WHERE id = ?1 AND deleted_at IS NOT NULL";

/// Reads the subscriber, then inserts or updates it, in one write transaction; fails
/// with [`StoreError::SubscriberBeingDeleted`] while a deletion of that id moves its
/// history.
pub async fn put(
    db: &Pools,
    sealer: &Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let sealer = sealer.clone();
    db.transaction(move |tx| Box::pin(put_in(tx, sealer, put, now)))
        .await
}

async fn put_in(
    tx: &mut Tx,
    sealer: Sealer,
    put: SubscriberPut,
    now: Timestamp,
) -> Result<PutSubscriberOutcome, StoreError> {
    let get = || Query::new(<Pools as SubscriberStatements>::GET).text(put.id.clone());
    let existing: Option<Subscriber> = Pools::fetch_optional::<SubscriberRow>(tx, get())
        .await?
        .map(Subscriber::try_from)
        .transpose()?;
    if existing.is_none() {
        let query = Query::new(BEING_DELETED).text(put.id.clone());
        let deleting: Option<(i64,)> = Pools::fetch_optional(tx, query).await?;
        if deleting.is_some() {
            return Err(StoreError::SubscriberBeingDeleted(put.id));
        }
    }
    let created_secret = match &existing {
        Some(current) => {
            let query = Query::new(UPDATE)
                .text(put.id.clone())
                .text(put.url.clone())
                .int(i64::from(
                    put.max_in_flight.unwrap_or(current.max_in_flight),
                ))
                .bind(Value::OptInt(
                    put.rate_limit_per_second
                        .unwrap_or(current.rate_limit_per_second)
                        .map(i64::from),
                ))
                .bind(Value::Bool(put.enabled.unwrap_or(current.enabled)))
                .int(now.as_millis())
                .bind(Value::OptText(
                    put.secret.as_ref().map(|s| sealer.seal(&put.id, s)),
                ));
            Pools::execute(tx, query).await?;
            None
        }
        None => {
            let secret = put.secret.clone().unwrap_or(put.generated_secret.clone());
            let query = Query::new(INSERT)
                .text(put.id.clone())
                .text(put.url.clone())
                .text(sealer.seal(&put.id, &secret))
                .int(i64::from(
                    put.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
                ))
                .bind(Value::OptInt(
                    put.rate_limit_per_second.flatten().map(i64::from),
                ))
                .bind(Value::Bool(put.enabled.unwrap_or(true)))
                .int(now.as_millis());
            Pools::execute(tx, query).await?;
            Some(secret)
        }
    };
    destinations::assign::<Pools>(tx, &put.id, &put.url, now).await?;
    if let Some(timeout) = put.attempt_timeout_ms {
        subscribers::set_attempt_timeout::<Pools>(tx, &put.id, timeout).await?;
    }
    if let Some(types) = &put.event_types {
        event_types::replace::<Pools>(tx, &put.id, types).await?;
    }
    let row: SubscriberRow = Pools::fetch_one(tx, get()).await?;
    let subscriber = row.try_into()?;
    Ok(PutSubscriberOutcome {
        subscriber,
        created_secret,
    })
}

impl SubscriberStatements for Pools {
    /// Subscriber `?1`.
    const GET: &'static str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms FROM subscribers WHERE id = ?1 \
        AND deleted_at IS NULL";
    /// Subscribers after `?1` (all when NULL) in id order, at most `?2`; never a
    /// deleted subscriber's tombstone.
    const LIST: &'static str = "SELECT id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms FROM subscribers WHERE (?1 IS NULL OR id > ?1) AND deleted_at IS NULL ORDER BY id LIMIT CAST(?2 AS INTEGER)";
    /// Subscriber `?1`'s current secret.
    const CURRENT_SECRET: &'static str =
        "SELECT secret FROM subscribers WHERE id = ?1 AND deleted_at IS NULL";
    /// A rotation of subscriber `?1`'s secret.
    const ROTATE: &'static str = "UPDATE subscribers SET secret = ?2, previous_secret = ?3, \
        previous_secret_expires_at = ?4, updated_at = ?5 WHERE id = ?1 AND deleted_at IS NULL \
        RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms";
    /// Changes the fields given of subscriber `?1` (see [`SubscriberStatements::PATCH`]).
    const PATCH: &'static str = "UPDATE subscribers SET url = COALESCE(?2, url), \
        max_in_flight = COALESCE(?3, max_in_flight), \
        rate_limit_per_second = CASE WHEN ?4 THEN ?5 ELSE rate_limit_per_second END, \
        enabled = CASE WHEN ?6 THEN ?7 ELSE enabled END, \
        paused_reason = CASE WHEN NOT ?6 THEN paused_reason WHEN ?7 THEN NULL \
          WHEN enabled THEN 'operator' ELSE paused_reason END, \
        paused_at = CASE WHEN NOT ?6 THEN paused_at WHEN ?7 THEN NULL \
          WHEN enabled THEN ?8 ELSE paused_at END, \
        updated_at = ?8 WHERE id = ?1 AND deleted_at IS NULL \
        RETURNING id, url, max_in_flight, rate_limit_per_second, enabled, created_at, \
        updated_at, paused_reason, paused_at, event_types, attempt_timeout_ms";
    /// Enables subscriber `?1` at `?2` if it is paused.
    const RESUME_ONE: &'static str = "UPDATE subscribers SET enabled = 1, paused_reason = NULL, \
        paused_at = NULL, updated_at = ?2 WHERE id = ?1 AND deleted_at IS NULL AND enabled = 0";
    /// Pauses subscriber `?1` at `?2` (reason `operator`) if it is enabled.
    const PAUSE_ONE: &'static str = "UPDATE subscribers SET enabled = 0, paused_reason = 'operator', \
        paused_at = ?2, updated_at = ?2 WHERE id = ?1 AND deleted_at IS NULL AND enabled = 1";
    /// Sets subscriber `?1`'s own attempt timeout.
    const SET_ATTEMPT_TIMEOUT: &'static str =
        "UPDATE subscribers SET attempt_timeout_ms = ?2 WHERE id = ?1 AND deleted_at IS NULL";
    /// Whether subscriber `?1` exists.
    const EXISTS: &'static str = "SELECT 1 FROM subscribers WHERE id = ?1 AND deleted_at IS NULL";
    /// Enables at `?2` the subscribers paused for reason `?1`.
    const RESUME_REASON: &'static str = "UPDATE subscribers SET enabled = 1, paused_reason = NULL, \
        paused_at = NULL, updated_at = ?2 WHERE enabled = 0 AND paused_reason = ?1 \
        AND deleted_at IS NULL";
}
