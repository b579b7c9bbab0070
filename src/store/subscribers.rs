//! Subscribers, for both backends: the row they read, the rotation of a signing
//! secret (read the current secret, write the rotation, in one transaction), a partial
//! update and a resume of paused subscribers. A deleted subscriber's tombstone
//! ([`crate::domain::tombstone`]) is never found by its tombstone id.

use crate::domain::{Timestamp, tombstone};
use crate::store::decode;
use crate::store::destinations::{self, DestinationStatements};
use crate::store::dialect::{Query, Value};
use crate::store::event_types::{self, EventTypeStatements};
use crate::store::records::{
    PageRequest, PauseSelection, PausedReason, ResumeSelection, SecretRotated, SecretRotation,
    Subscriber, SubscriberPatch,
};
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};

crate::store::lite_rows::row! {
    /// A row of `subscribers` (without its secrets).
    pub struct SubscriberRow {
        id: String,
        url: String,
        max_in_flight: i64,
        rate_limit_per_second: Option<i64>,
        enabled: bool,
        created_at: i64,
        updated_at: i64,
        paused_reason: Option<String>,
        paused_at: Option<i64>,
        event_types: String,
        attempt_timeout_ms: Option<i64>,
    }
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
            paused_reason: row
                .paused_reason
                .map(|text| {
                    PausedReason::parse(&text).ok_or_else(|| {
                        StoreError::Internal(format!("unknown paused_reason `{text}`"))
                    })
                })
                .transpose()?,
            paused_at: row.paused_at.map(Timestamp::from_millis),
            event_types: event_types::decode_list(&row.event_types)?,
            attempt_timeout_ms: decode::opt_num("attempt_timeout_ms", row.attempt_timeout_ms)?,
        })
    }
}

/// The statements of reading subscribers and rotating a secret, in the backend's
/// dialect.
pub(crate) trait SubscriberStatements:
    Transactions + DestinationStatements + EventTypeStatements
{
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
    /// Changes subscriber `$1`: url `$2` (kept when NULL), max_in_flight `$3` (kept
    /// when NULL), rate_limit_per_second `$5` when `$4`, enabled `$7` when `$6`, at
    /// `$8`; pausing an enabled one records reason `operator` at `$8`, enabling clears
    /// the reason. Returns the subscriber ([`SubscriberRow`]), none when it does not
    /// exist.
    const PATCH: &'static str;
    /// Enables subscriber `$1` at `$2` if it is paused (clearing its reason).
    const RESUME_ONE: &'static str;
    /// Pauses subscriber `$1` at `$2` (reason `operator`) if it is enabled.
    const PAUSE_ONE: &'static str;
    /// Sets subscriber `$1`'s `attempt_timeout_ms` to `$2` (NULL: the server's).
    const SET_ATTEMPT_TIMEOUT: &'static str;
    /// Whether subscriber `$1` exists (one row).
    const EXISTS: &'static str;
    /// Enables at `$2` every subscriber paused for reason `$1`.
    const RESUME_REASON: &'static str;
}

/// Sets subscriber `id`'s own attempt timeout in `tx` (`None`: the server's).
pub(crate) async fn set_attempt_timeout<S: SubscriberStatements>(
    tx: &mut S::Tx,
    id: &str,
    timeout_ms: Option<u64>,
) -> Result<(), StoreError> {
    let value = timeout_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
    let query = Query::new(S::SET_ATTEMPT_TIMEOUT)
        .text(id)
        .bind(Value::OptInt(value));
    S::execute(tx, query).await?;
    Ok(())
}

/// Applies `patch` to subscriber `id` at `now` in one write transaction (see
/// [`crate::store::Store::patch_subscriber`]).
pub(crate) async fn patch<S: SubscriberStatements>(
    db: &S,
    id: &str,
    patch: SubscriberPatch,
    now: Timestamp,
) -> Result<Option<Subscriber>, StoreError> {
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let id = id.to_owned();
    db.transaction(move |tx| {
        Box::pin(async move {
            let query = Query::new(S::PATCH)
                .text(id.as_str())
                .bind(Value::OptText(patch.url.clone()))
                .bind(Value::OptInt(patch.max_in_flight.map(i64::from)))
                .bind(Value::Bool(patch.rate_limit_per_second.is_some()))
                .bind(Value::OptInt(
                    patch.rate_limit_per_second.flatten().map(i64::from),
                ))
                .bind(Value::Bool(patch.enabled.is_some()))
                .bind(Value::Bool(patch.enabled.unwrap_or(false)))
                .int(now.as_millis());
            if let Some(timeout) = patch.attempt_timeout_ms {
                set_attempt_timeout::<S>(tx, &id, timeout).await?;
            }
            let row: Option<SubscriberRow> = S::fetch_optional(tx, query).await?;
            let Some(row) = row else {
                return Ok(None);
            };
            if let Some(url) = &patch.url {
                destinations::assign::<S>(tx, &id, url, now).await?;
            }
            if patch.enabled == Some(true) {
                S::announce(tx).await?;
            }
            let mut subscriber = Subscriber::try_from(row)?;
            if let Some(types) = patch.event_types {
                event_types::replace::<S>(tx, &id, &types).await?;
                subscriber.event_types = types;
            }
            Ok(Some(subscriber))
        })
    })
    .await
}

/// Pauses the subscribers `selection` names at `now` (reason `operator`) in one write
/// transaction, in id order (the store's lock order, docs/DESIGN.md §3.6); returns how
/// many it paused (see [`crate::store::Store::pause_subscribers`]).
pub(crate) async fn pause<S: SubscriberStatements>(
    db: &S,
    selection: PauseSelection,
    now: Timestamp,
) -> Result<u64, StoreError> {
    db.transaction(move |tx| {
        Box::pin(async move {
            let (ids, all_must_exist) = match &selection {
                PauseSelection::Ids(ids) => (ids, true),
                PauseSelection::Matched(ids) => (ids, false),
            };
            let mut in_order: Vec<&String> = ids.iter().collect();
            in_order.sort();
            in_order.dedup();
            let mut unknown = std::collections::HashSet::new();
            let mut paused = 0;
            for id in in_order {
                if tombstone::is_tombstone(id) {
                    unknown.insert(id.as_str());
                    continue;
                }
                let query = Query::new(S::PAUSE_ONE)
                    .text(id.as_str())
                    .int(now.as_millis());
                let changed = S::execute(tx, query).await?;
                if changed == 0 && all_must_exist {
                    let found: Option<(i64,)> =
                        S::fetch_optional(tx, Query::new(S::EXISTS).text(id.as_str())).await?;
                    if found.is_none() {
                        unknown.insert(id.as_str());
                    }
                }
                paused += changed;
            }
            if all_must_exist
                && let Some(first) = ids.iter().find(|id| unknown.contains(id.as_str()))
            {
                // The transaction is dropped unpublished: all or nothing.
                return Err(StoreError::UnknownSubscriber(first.clone()));
            }
            Ok(paused)
        })
    })
    .await
}

/// Resumes the subscribers `selection` names at `now` in one write transaction (see
/// [`crate::store::Store::resume_subscribers`]).
pub(crate) async fn resume<S: SubscriberStatements>(
    db: &S,
    selection: ResumeSelection,
    now: Timestamp,
) -> Result<u64, StoreError> {
    db.transaction(move |tx| {
        Box::pin(async move {
            let resumed = match selection {
                ResumeSelection::Ids(ids) => {
                    // In id order, the store's lock order (docs/DESIGN.md §3); an unknown id is
                    // reported as the caller named them (the first one), nothing written then.
                    let mut in_order: Vec<&String> = ids.iter().collect();
                    in_order.sort();
                    in_order.dedup();
                    let mut unknown = std::collections::HashSet::new();
                    let mut resumed = 0;
                    for id in in_order {
                        if tombstone::is_tombstone(id) {
                            unknown.insert(id.as_str());
                            continue;
                        }
                        let query = Query::new(S::RESUME_ONE)
                            .text(id.as_str())
                            .int(now.as_millis());
                        let changed = S::execute(tx, query).await?;
                        if changed == 0 {
                            let found: Option<(i64,)> =
                                S::fetch_optional(tx, Query::new(S::EXISTS).text(id.as_str()))
                                    .await?;
                            if found.is_none() {
                                unknown.insert(id.as_str());
                            }
                        }
                        resumed += changed;
                    }
                    if let Some(first) = ids.iter().find(|id| unknown.contains(id.as_str())) {
                        // The transaction is dropped unpublished: all or nothing.
                        return Err(StoreError::UnknownSubscriber(first.clone()));
                    }
                    resumed
                }
                ResumeSelection::Reason(reason) => {
                    let query = Query::new(S::RESUME_REASON)
                        .text(reason.as_str())
                        .int(now.as_millis());
                    S::execute(tx, query).await?
                }
            };
            if resumed > 0 {
                S::announce(tx).await?;
            }
            Ok(resumed)
        })
    })
    .await
}

/// Subscriber `id`, or `None`.
pub(crate) async fn get<S: SubscriberStatements>(
    db: &S,
    id: &str,
) -> Result<Option<Subscriber>, StoreError> {
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let row: Option<SubscriberRow> = db
        .read_optional(Query::new(<S as SubscriberStatements>::GET).text(id))
        .await?;
    row.map(Subscriber::try_from).transpose()
}

/// Subscribers in id order, strictly after `page.after`.
pub(crate) async fn list<S: SubscriberStatements>(
    db: &S,
    page: PageRequest<String>,
) -> Result<Vec<Subscriber>, StoreError> {
    let query = Query::new(<S as SubscriberStatements>::LIST)
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
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let sealer = sealer.clone();
    db.transaction(move |tx| {
        Box::pin(async move {
            let id = &rotation.subscriber_id;
            let current: Option<(String,)> =
                S::fetch_optional(tx, Query::new(S::CURRENT_SECRET).text(id)).await?;
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
            let row: SubscriberRow = S::fetch_one(tx, query).await?;
            Ok(Some(SecretRotated {
                subscriber: row.try_into()?,
                previous_secret_expires_at: expires_at,
            }))
        })
    })
    .await
}
