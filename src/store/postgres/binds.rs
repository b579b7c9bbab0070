//! Binding a [`Query`] (a constant or a statement built by [`crate::store::dialect`]) for PostgreSQL.

use std::borrow::Cow;

use sqlx::postgres::PgArguments;
use sqlx::{Arguments, AssertSqlSafe};

use crate::store::StoreError;
use crate::store::dialect::{Query, Value};

/// `values` as arguments (moved, not copied: a payload is bound once).
pub fn arguments(values: Vec<Value>) -> Result<PgArguments, StoreError> {
    let mut arguments = PgArguments::default();
    for value in values {
        match value {
            Value::Text(text) => arguments.add(text),
            Value::Int(n) => arguments.add(n),
            Value::OptInt(n) => arguments.add(n),
            Value::OptText(text) => arguments.add(text),
            Value::Bool(flag) => arguments.add(flag),
        }
        .map_err(|e| StoreError::Internal(format!("cannot bind a value: {e}")))?;
    }
    Ok(arguments)
}

/// The SQL text of `query` and its values as arguments.
pub fn bound(query: Query) -> Result<(AssertSqlSafe<Cow<'static, str>>, PgArguments), StoreError> {
    let (sql, values) = query.into_parts();
    Ok((AssertSqlSafe(sql), arguments(values)?))
}
