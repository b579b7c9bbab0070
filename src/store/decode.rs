//! Columns into domain values, for the row structs both backends decode: every instant
//! is a 64-bit integer of epoch milliseconds, names (states, classes) are text.

use uuid::Uuid;

use crate::domain::Timestamp;
use crate::store::StoreError;

/// A job or replay id stored as text.
pub fn uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Internal(format!("bad id `{text}`: {e}")))
}

/// An instant column that may be NULL.
pub fn opt_ts(ms: Option<i64>) -> Option<Timestamp> {
    ms.map(Timestamp::from_millis)
}

/// An integer column as a narrower type (a count, a status).
pub fn num<T: TryFrom<i64>>(column: &str, n: i64) -> Result<T, StoreError> {
    T::try_from(n).map_err(|_| StoreError::Internal(format!("column {column}: {n}")))
}

/// [`num`] of a column that may be NULL.
pub fn opt_num<T: TryFrom<i64>>(column: &str, n: Option<i64>) -> Result<Option<T>, StoreError> {
    n.map(|n| num(column, n)).transpose()
}

/// A text column holding a name (`in_flight`, `http_5xx`).
pub fn named<T: std::str::FromStr>(column: &str, text: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.parse()
        .map_err(|e| StoreError::Internal(format!("column {column}: {e}")))
}

/// [`named`] of a column that may be NULL.
pub fn opt_named<T: std::str::FromStr>(
    column: &str,
    text: Option<&str>,
) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.map(|text| named(column, text)).transpose()
}

/// A count (`COUNT(*)`), never negative.
pub fn count(n: i64) -> u64 {
    u64::try_from(n.max(0)).unwrap_or(0)
}
