//! Event types, for both backends (docs/DESIGN.md §5.13): the patterns a subscriber
//! subscribes with, written with it, and the subscribers an event type matches, read
//! through `subscriber_event_types`' primary key.

use crate::domain::event_type::candidate_patterns;
use crate::store::StoreError;
use crate::store::dialect::{Query, Statement, Value};
use crate::store::transactions::Transactions;

/// The statements of event types, in the backend's dialect.
pub(crate) trait EventTypeStatements: Transactions {
    /// Deletes subscriber `$1`'s patterns.
    const FORGET: &'static str;
    /// Subscribes subscriber `$1` to pattern `$2`.
    const SUBSCRIBE: &'static str;
    /// Sets subscriber `$1`'s `event_types` column to `$2` (a JSON array).
    const SET_LIST: &'static str;
}

/// Makes `patterns` (checked by `domain::event_type::pattern_list`: valid, no repeats)
/// subscriber `id`'s event types inside `tx`, replacing the ones it had.
pub(crate) async fn replace<S: EventTypeStatements>(
    tx: &mut S::Tx,
    id: &str,
    patterns: &[String],
) -> Result<(), StoreError> {
    S::execute(tx, Query::new(S::FORGET).text(id)).await?;
    for pattern in patterns {
        S::execute(tx, Query::new(S::SUBSCRIBE).text(id).text(pattern.as_str())).await?;
    }
    let list = serde_json::to_string(patterns)
        .map_err(|error| StoreError::Internal(format!("event types: {error}")))?;
    S::execute(tx, Query::new(S::SET_LIST).text(id).text(list)).await?;
    Ok(())
}

/// A subscriber's `event_types` column as read.
pub(crate) fn decode_list(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Internal(format!("event_types `{text}`: {error}")))
}

/// The ids of the subscribers (enabled or paused; not being deleted) with a pattern
/// that matches event type `name`, in id order, at most `limit`.
pub(crate) async fn subscribers_of<S: EventTypeStatements>(
    db: &S,
    name: &str,
    limit: u32,
) -> Result<Vec<String>, StoreError> {
    let mut query = Statement::new(
        S::DIALECT,
        "SELECT DISTINCT t.subscriber_id FROM subscriber_event_types t \
         JOIN subscribers s ON s.id = t.subscriber_id \
         WHERE s.deleted_at IS NULL AND t.pattern IN (",
    );
    for (n, pattern) in candidate_patterns(name).into_iter().enumerate() {
        if n > 0 {
            query.push(", ");
        }
        query.bind(Value::Text(pattern));
    }
    query.push(") ORDER BY t.subscriber_id");
    query.limit(i64::from(limit));
    let rows: Vec<(String,)> = db.read_all(Query::from(query)).await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}
